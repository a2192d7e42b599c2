"""A prompt the agent echoes back during its turn (``user_message_chunk`` updates, v1) is that prompt: the
transcript keeps it once. Pure: a :class:`~acp_client.Transcript` fed decoded updates."""

from __future__ import annotations

from typing import Any

from acp_client import Transcript
from acp_client._codec import decode_session_update
from acp_client.transcript import TurnStatus
from acp_client.types import ImageContent, TextContent


def u(update: dict[str, Any]) -> Any:
    return decode_session_update(update, protocol_version=1)


def user(*content: dict[str, Any], meta: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {
        "sessionUpdate": "user_message_chunk",
        "content": content[0] if len(content) == 1 else list(content),
    }
    if meta is not None:
        body["_meta"] = meta
    return u(body)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def agent(value: str) -> Any:
    return u({"sessionUpdate": "agent_message_chunk", "content": text(value)})


def roles(t: Transcript) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in t.messages]


def test_an_echo_of_the_prompt_is_that_prompt() -> None:
    t = Transcript("s")
    t.begin_turn([TextContent(text="hello world")], record=True)
    t.apply(user(text("hello world"), meta={"source": "bridge-echo"}))
    t.apply(agent("echo: hello world"))
    t.finish_turn(TurnStatus.COMPLETE)
    assert roles(t) == [("user", "hello world"), ("agent", "echo: hello world")]
    assert t.messages[0].status is TurnStatus.COMPLETE
    assert t.echoes_prompts


def test_an_echo_in_pieces_and_of_every_block() -> None:
    image = ImageContent(data="aGk=", mime_type="image/png")
    t = Transcript("s")
    t.begin_turn([TextContent(text="look at this"), image], record=True)
    t.apply(user(text("look ")))
    t.apply(user(text("at this")))
    t.apply(user({"type": "image", "data": "aGk=", "mimeType": "image/png", "_meta": {"source": "bridge-echo"}}))
    t.apply(agent("nice"))
    assert [(m.role, m.text) for m in t.messages] == [("user", "look at this"), ("agent", "nice")]
    assert len(t.messages[0].blocks) == 2


def test_a_user_message_that_is_not_the_prompt_is_kept() -> None:
    t = Transcript("s")
    t.begin_turn([TextContent(text="hello")], record=True)
    t.apply(user(text("something else")))
    t.apply(user(text("hello")))  # after a message that was not the echo, nothing more is taken for one
    assert roles(t) == [("user", "hello"), ("user", "something elsehello")]
    assert not t.echoes_prompts


def test_an_echo_after_the_turn_ended_is_not_swallowed() -> None:
    t = Transcript("s")
    t.begin_turn([TextContent(text="hello")], record=True)
    t.apply(agent("hi"))
    t.finish_turn(TurnStatus.COMPLETE)
    t.apply(user(text("hello")))
    assert roles(t) == [("user", "hello"), ("agent", "hi"), ("user", "hello")]


def test_a_prompt_echoed_twice_is_kept_once_then_the_repeat_shows() -> None:
    t = Transcript("s")
    t.begin_turn([TextContent(text="hi")], record=True)
    t.apply(user(text("hi")))
    t.apply(user(text("hi")))  # the whole prompt was echoed already: this one is the agent's own
    assert roles(t) == [("user", "hi"), ("user", "hi")]


def test_an_unrecorded_prompt_is_the_echo_itself() -> None:
    t = Transcript("s")
    t.begin_turn([TextContent(text="hello")], record=False)  # v2: the agent's echo is the turn's message
    t.apply(user(text("hello")))
    assert roles(t) == [("user", "hello")]
    assert not t.echoes_prompts


def test_begins_echo_looks_without_taking() -> None:
    t = Transcript("s")
    assert not t.begins_echo(user(text("x")))
    t.begin_turn([TextContent(text="three")], record=True)
    assert not t.begins_echo(user(text("one")))
    assert not t.begins_echo(agent("three"))
    assert t.begins_echo(user(text("thr")))
    t.apply(user(text("three")))
    assert roles(t) == [("user", "three")]
