"""The transcript accumulator: upserts, chunks, and replay without duplicates."""

from __future__ import annotations

from acp_client import Transcript
from acp_client._codec import decode_session_update
from acp_client.types import TextContent


def u(data: dict, version: int = 2):  # type: ignore[no-untyped-def]
    return decode_session_update(data, protocol_version=version)


def chunk(kind: str, text: str, message_id: str | None = None) -> dict:  # type: ignore[type-arg]
    data = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        data["messageId"] = message_id
    return data


def test_v1_chunks_merge_per_role_and_turns_split() -> None:
    t = Transcript()
    t.add_user_prompt([TextContent(text="hi")])
    for piece in ("echo: ", "h", "i"):
        t.apply(u(chunk("agent_message_chunk", piece), 1))
    t.end_turn()
    t.add_user_prompt([TextContent(text="again")])
    t.apply(u(chunk("agent_message_chunk", "echo: again"), 1))
    assert [(m.role, m.text) for m in t.messages] == [
        ("user", "hi"),
        ("agent", "echo: hi"),
        ("user", "again"),
        ("agent", "echo: again"),
    ]


def test_v2_upserts_full_replaces_chunks_append() -> None:
    t = Transcript()
    t.apply(u({"sessionUpdate": "user_message", "messageId": "u1", "content": [{"type": "text", "text": "hi"}]}))
    t.apply(u(chunk("agent_message_chunk", "ec", "a1")))
    t.apply(u(chunk("agent_message_chunk", "ho", "a1")))
    assert [m.text for m in t.messages] == ["hi", "echo"]
    t.apply(u({"sessionUpdate": "agent_message", "messageId": "a1", "content": [{"type": "text", "text": "final"}]}))
    assert [m.text for m in t.messages] == ["hi", "final"]
    t.apply(u({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}))
    assert t.state == "idle" and t.stop_reason == "end_turn"


def test_v2_replay_of_chunks_does_not_duplicate() -> None:
    t = Transcript()
    t.apply(u(chunk("user_message_chunk", "hi", "u1")))
    t.apply(u(chunk("agent_message_chunk", "echo: ", "a1")))
    t.apply(u(chunk("agent_message_chunk", "hi", "a1")))
    before = [(m.role, m.text) for m in t.messages]
    t.begin_replay()
    t.apply(u(chunk("user_message_chunk", "hi", "u1")))
    t.apply(u(chunk("agent_message_chunk", "echo: ", "a1")))
    t.apply(u(chunk("agent_message_chunk", "hi", "a1")))
    t.end_replay()
    assert [(m.role, m.text) for m in t.messages] == before
    t.apply(u(chunk("agent_message_chunk", "!", "a1")))  # live again: appends
    assert t.messages[-1].text == "echo: hi!"


def test_v1_replay_rebuilds_idless_history() -> None:
    t = Transcript()
    t.add_user_prompt([TextContent(text="one")])
    t.apply(u(chunk("agent_message_chunk", "echo: one"), 1))
    t.end_turn()
    t.begin_replay()
    for role, text in [("user", "one"), ("agent", "echo: one"), ("user", "two"), ("agent", "echo: two")]:
        t.apply(u(chunk(f"{role}_message_chunk", text), 1))
    t.end_replay()
    assert [(m.role, m.text) for m in t.messages] == [
        ("user", "one"),
        ("agent", "echo: one"),
        ("user", "two"),
        ("agent", "echo: two"),
    ]


def test_empty_replay_keeps_what_we_had() -> None:
    t = Transcript()
    t.add_user_prompt([TextContent(text="one")])
    t.begin_replay()
    t.end_replay()
    assert [m.text for m in t.messages] == ["one"]


def test_tool_calls_are_upserted_and_plans_replaced() -> None:
    t = Transcript()
    t.apply(u({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read file", "status": "pending"}, 1))
    t.apply(u({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}, 1))
    assert t.tool_calls["t1"].title == "Read file" and t.tool_calls["t1"].status == "completed"
    t.apply(u({"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high", "status": "pending"}]}, 1))
    assert t.plan is not None


def test_unknown_updates_are_ignored() -> None:
    t = Transcript()
    t.apply(u({"sessionUpdate": "from_the_future", "x": 1}))
    assert len(t) == 0
