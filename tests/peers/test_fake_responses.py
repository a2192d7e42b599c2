"""The fake Responses API server (``tests/peers/fake_responses.py``) over raw HTTP: the events of a streamed
answer, a slow answer, a tool call and the answer to its output, the recorded history, the other routes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.peers.fake_responses import MODEL, FakeResponses


@pytest.fixture
def llm() -> Iterator[FakeResponses]:
    with FakeResponses(chunk_delay=0.01) as server:
        yield server


def _request(llm: FakeResponses, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        llm.base_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _stream(llm: FakeResponses, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    status, raw = _request(llm, "POST", "/responses", {"model": "m", "stream": True, "input": items})
    assert status == 200, raw
    events = []
    for block in raw.decode().strip().split("\n\n"):
        kind, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert kind == f"event: {event['type']}", block
        events.append(event)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    return events


def _message(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def test_an_answer_echoes_the_last_prompt_and_the_history_is_recorded(llm: FakeResponses) -> None:
    items = [
        _message("developer", "<permissions instructions>read-only</permissions instructions>"),
        _message("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        _message("user", "hello"),
        _message("assistant", "echo: hello"),
        _message("user", "<turn_aborted>\nThe user interrupted the previous turn.\n</turn_aborted>"),
        _message("user", "<b>second</b>"),
    ]
    events = _stream(llm, items)
    assert [event["type"] for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event["delta"] for event in events if event["type"] == "response.output_text.delta"] == [
        "echo: <b>sec",
        "ond</b>",
    ]
    completed = events[-1]["response"]
    assert completed["status"] == "completed" and completed["model"] == "m"
    [item] = completed["output"]
    assert (item["type"], item["role"], item["content"][0]["text"]) == ("message", "assistant", "echo: <b>second</b>")
    assert events[2]["item"]["id"] == item["id"] == events[4]["item_id"]

    # The agent's own context is left out; a prompt that merely starts with '<' is the user's.
    assert llm.history_for("<b>second</b>") == (
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("user", "<b>second</b>"),
    )
    assert llm.prompts == ["<b>second</b>"]
    assert llm.requests[0].body["input"] == items


def test_a_slow_prompt_streams_word_by_word(llm: FakeResponses) -> None:
    events = _stream(llm, [_message("user", "SLOW one two three")])
    deltas = [event["delta"] for event in events if event["type"] == "response.output_text.delta"]
    assert deltas == ["echo: ", "one ", "two ", "three"]


def test_a_tool_prompt_asks_for_the_tool_and_its_output_is_answered(llm: FakeResponses) -> None:
    prompt = 'TOOL read {"path": "/w/note.txt"}'
    events = _stream(llm, [_message("user", prompt)])
    assert [event["type"] for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    [call] = events[-1]["response"]["output"]
    assert (call["type"], call["name"], call["arguments"]) == ("function_call", "read", '{"path": "/w/note.txt"}')

    back = [
        _message("user", prompt),
        {"type": "function_call", "call_id": call["call_id"], "name": "read", "arguments": call["arguments"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "a note"},
    ]
    events = _stream(llm, back)
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "tool said: a note"
    assert llm.requests[-1].history == (("user", prompt), ("tool", "a note"))


def test_models_and_unknown_routes(llm: FakeResponses) -> None:
    status, raw = _request(llm, "GET", "/models")
    assert status == 200 and [model["id"] for model in json.loads(raw)["data"]] == [MODEL]
    assert _request(llm, "GET", "/nowhere")[0] == 404
    assert _request(llm, "POST", "/chat/completions", {"messages": []})[0] == 404
    assert llm.requests == []
