"""A replay that leaves out part of an interrupted turn keeps it where it was (pydantic-acp stores an
interrupted prompt but not the answer it had streamed: docs/agents-conformance.md)."""

from __future__ import annotations

from acp_client import Transcript
from acp_client._codec import decode_session_update
from acp_client.types import TextContent


def chunk(kind: str, text: str, message_id: str | None = None):  # type: ignore[no-untyped-def]
    data = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        data["messageId"] = message_id
    return decode_session_update(data, protocol_version=1)


def test_a_partial_answer_missing_from_the_replay_stays_after_its_prompt() -> None:
    t = Transcript()
    t.add_user_prompt((TextContent(text="hello"),))
    t.apply(chunk("agent_message_chunk", "echo: hello", "a1"))
    t.end_turn()
    t.add_user_prompt((TextContent(text="slow"),))
    t.apply(chunk("agent_message_chunk", "one ", "a2"))  # the turn a kill interrupted
    t.begin_replay()
    t.apply(chunk("user_message_chunk", "hello", "u1"))
    t.apply(chunk("agent_message_chunk", "echo: hello", "a1"))
    t.apply(chunk("user_message_chunk", "slow", "u2"))
    t.end_replay()
    assert t.text() == "user: hello\nagent: echo: hello\nuser: slow\nagent: one "
