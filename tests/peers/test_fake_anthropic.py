"""The fake Anthropic Messages server (``tests/peers/fake_anthropic.py``) with raw HTTP requests: the
stream's events in order, a tool call and its result, the recorded history, the 404s."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.peers.fake_anthropic import FakeAnthropic


@pytest.fixture
def llm() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(chunk_delay=0.01) as server:
        yield server


def _post(llm: FakeAnthropic, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        llm.base_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for block in raw.decode().strip().split("\n\n"):
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: "), block
        found.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return found


def _user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text} for text in texts]}


def test_a_stream_echoes_the_last_prompt_and_records_the_history(llm: FakeAnthropic) -> None:
    messages = [
        _user("<system-reminder>\ncontext\n</system-reminder>", "<command-name>/model</command-name>", "hello"),
        {"role": "assistant", "content": [{"type": "text", "text": "echo: hello"}]},
        _user("SLOW one two"),
    ]
    status, raw = _post(llm, "/v1/messages?beta=true", {"model": "m", "stream": True, "messages": messages})
    assert status == 200
    events = _events(raw)
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 4,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(body["type"] == name for name, body in events)
    deltas = [body["delta"]["text"] for name, body in events if name == "content_block_delta"]
    assert deltas == ["echo: ", "SLOW ", "one ", "two"]
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert llm.prompts == ["SLOW one two"]
    assert llm.history_for("SLOW one two") == (
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("user", "SLOW one two"),
    )


def test_a_tool_call_and_its_result(llm: FakeAnthropic) -> None:
    ask = [_user('TOOL Bash {"command": "echo hi"}')]
    status, raw = _post(llm, "/v1/messages", {"model": "m", "messages": ask})
    assert status == 200
    message = json.loads(raw)
    assert message["stop_reason"] == "tool_use"
    (call,) = message["content"]
    assert (call["type"], call["name"], call["input"]) == ("tool_use", "Bash", {"command": "echo hi"})

    streamed = _events(_post(llm, "/v1/messages", {"model": "m", "stream": True, "messages": ask})[1])
    assert streamed[1][1]["content_block"]["type"] == "tool_use"
    assert json.loads(streamed[2][1]["delta"]["partial_json"]) == {"command": "echo hi"}
    assert streamed[-2][1]["delta"]["stop_reason"] == "tool_use"

    result = {"type": "tool_result", "tool_use_id": call["id"], "content": [{"type": "text", "text": "hi"}]}
    back = [*ask, {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    answer = json.loads(_post(llm, "/v1/messages", {"model": "m", "messages": back})[1])
    assert answer["content"] == [{"type": "text", "text": "tool said: hi"}]


def test_token_counts_answer_and_anything_else_is_logged_and_404(llm: FakeAnthropic) -> None:
    status, raw = _post(llm, "/v1/messages/count_tokens", {"model": "m", "messages": [_user("hello")]})
    assert status == 200 and json.loads(raw)["input_tokens"] >= 1
    status, _ = _post(llm, "/v1/other", {"x": 1})
    assert status == 404
    assert llm.unknown == ["POST /v1/other b'{\"x\": 1}'"]
    assert llm.requests == []
