"""The transcript accumulator: upserts, chunks, and replay without duplicates."""

from __future__ import annotations

from acp_client import Transcript, TurnStatus
from acp_client._codec import decode_session_update
from acp_client.transcript import SegmentStart
from acp_client.types import AgentMessageChunk, TextContent


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


def test_v1_chunks_merge_only_plain_text_into_plain_text() -> None:
    t = Transcript()
    annotated = {"type": "text", "text": "!", "annotations": {"priority": 1.0}}
    image = {"type": "image", "data": "AA==", "mimeType": "image/png"}
    for content in ({"type": "text", "text": "a"}, {"type": "text", "text": "b"}, annotated, image):
        t.apply(u({"sessionUpdate": "agent_message_chunk", "content": content}, 1))
    for piece in ("c", "d"):
        t.apply(u(chunk("agent_message_chunk", piece), 1))
    t.apply(u(chunk("agent_thought_chunk", "hmm"), 1))
    t.apply(u(chunk("agent_message_chunk", "e"), 1))
    agent, thought, again = t.messages
    assert [(b.text if isinstance(b, TextContent) else b.type) for b in agent.blocks] == ["ab", "!", "image", "cd"]
    assert agent.blocks[1] == u({"sessionUpdate": "agent_message_chunk", "content": annotated}, 1).content
    assert (thought.role, thought.text, again.role, again.text) == ("thought", "hmm", "agent", "e")


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


def _texts(t: Transcript) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in t.messages]


def test_replay_with_ids_covers_prompts_the_client_recorded_without_ids() -> None:
    """pydantic-acp: the client recorded its prompts id-less; the replay sends them back with
    message ids. Each turn ends up once, in order (it printed ``echo: hello echo: hello``)."""
    t = Transcript()
    t.add_user_prompt([TextContent(text="hello")])
    t.apply(u(chunk("agent_message_chunk", "echo: hello", "a1"), 1))
    t.end_turn()
    t.add_user_prompt([TextContent(text="again")])
    t.apply(u(chunk("agent_message_chunk", "echo: again", "a2"), 1))
    before = _texts(t)
    t.begin_replay()
    for kind, text, mid in [
        ("user_message_chunk", "hello", "u1"),
        ("agent_message_chunk", "echo: hello", "a1"),
        ("user_message_chunk", "again", "u2"),
        ("agent_message_chunk", "echo: again", "a2"),
    ]:
        t.apply(u(chunk(kind, text, mid), 1))
    t.end_replay()
    assert _texts(t) == before


def test_replay_without_user_messages_keeps_prompts_in_place() -> None:
    """An agent that replays only its own messages: the prompts the client recorded stay where they were."""
    t = Transcript()
    t.add_user_prompt([TextContent(text="one")])
    t.apply(u(chunk("agent_message_chunk", "r1", "a1")))
    t.add_user_prompt([TextContent(text="two")])
    t.apply(u(chunk("agent_message_chunk", "r2", "a2")))
    before = _texts(t)
    t.begin_replay()
    t.apply(u(chunk("agent_message_chunk", "r1", "a1")))
    t.apply(u(chunk("agent_message_chunk", "r2", "a2")))
    t.end_replay()
    assert _texts(t) == before


def test_replay_cut_off_keeps_the_history_it_had() -> None:
    """A drop during session/load: half a replay arrived. The transcript keeps every finished turn
    (before the fix the id-less history was discarded because part of the replay had come back)."""
    t = Transcript()
    for n in range(3):
        t.add_user_prompt([TextContent(text=f"q{n}")])
        t.apply(u(chunk("agent_message_chunk", f"answer {n}"), 1))
        t.end_turn()
    t.apply(u(chunk("agent_message_chunk", "tail", "a9")))
    before = _texts(t)
    t.begin_replay()
    t.apply(u(chunk("user_message_chunk", "q0"), 1))
    t.apply(u(chunk("agent_message_chunk", "ans"), 1))
    t.apply(u(chunk("agent_message_chunk", "ta", "a9")))
    t.end_replay(complete=False)
    assert _texts(t) == before
    assert not t.replaying
    # A later, complete replay rebuilds it exactly once.
    t.begin_replay()
    for n in range(3):
        t.apply(u(chunk("user_message_chunk", f"q{n}"), 1))
        t.apply(u(chunk("agent_message_chunk", f"answer {n}"), 1))
    t.apply(u(chunk("agent_message_chunk", "tail", "a9")))
    t.end_replay()
    assert _texts(t) == before


def test_repeats_recognizes_a_replay_from_the_start_of_the_history() -> None:
    t = Transcript()
    assert not t.repeats(u(chunk("user_message_chunk", "hello"), 1))  # nothing known yet
    t.add_user_prompt([TextContent(text="hello world")])
    t.apply(u(chunk("agent_message_chunk", "echo", "a1")))
    assert t.repeats(u(chunk("user_message_chunk", "hello"), 1))  # same role, prefix of the first message
    assert t.repeats(u(chunk("user_message_chunk", "hello", "u-other"), 1))  # ids differ, text decides
    assert not t.repeats(u(chunk("user_message_chunk", "bye"), 1))
    assert not t.repeats(u(chunk("agent_message_chunk", "echo", "a1")))  # not the first message
    assert not t.repeats(u(chunk("agent_message_chunk", "hello")))  # other role
    assert not t.repeats(u({"sessionUpdate": "state_update", "state": "idle"}))
    t2 = Transcript()
    t2.apply(u(chunk("user_message_chunk", "x", "u1")))
    assert t2.repeats(u({"sessionUpdate": "user_message", "messageId": "u1", "content": []}))


def test_a_refused_prompt_is_not_an_ordinary_turn() -> None:
    from acp_client.transcript import TurnStatus

    t = Transcript()
    t.begin_turn([TextContent(text="do it")], record=True)
    t.finish_turn(TurnStatus.FAILED)
    t.begin_turn([TextContent(text="v2: never echoed")], record=False)
    t.finish_turn(TurnStatus.FAILED)  # a v2 agent that refused never echoed it: recorded as failed
    assert t.text() == "user [failed]: do it\nuser [failed]: v2: never echoed"
    assert t.turns == 0


# -- text(): the whole conversation ------------------------------------------------------------------------


def _turn(t: Transcript, prompt: str, answer: str, status: TurnStatus) -> None:
    t.begin_turn([TextContent(text=prompt)], record=True)
    t.apply(AgentMessageChunk(content=TextContent(text=answer)))
    t.finish_turn(status)


def test_text_is_the_whole_conversation_with_earlier_segments_under_a_divider() -> None:
    t = Transcript("sess_1")
    _turn(t, "hello", "echo: hello", TurnStatus.COMPLETE)
    _turn(t, "long job", "working on", TurnStatus.INTERRUPTED)
    t.start_segment("sess_2", SegmentStart.NEW_AFTER_LOSS, lost=True)
    _turn(t, "again", "echo: again", TurnStatus.COMPLETE)
    _turn(t, "stop", "half an ans", TurnStatus.CANCELLED)
    assert t.text() == (
        "user: hello\n"
        "agent: echo: hello\n"
        "user [interrupted]: long job\n"
        "agent [incomplete]: working on\n"
        "--- the agent lost the conversation above; it goes on in a new session (sess_2) ---\n"
        "user: again\n"
        "agent: echo: again\n"
        "user [cancelled]: stop\n"
        "agent [incomplete]: half an ans"
    )
    # The per-segment view: each part alone, the last one what the agent holds now.
    earlier, current = t.segments
    assert earlier.lost and earlier.text().startswith("user: hello\n")
    assert current.text() == "user: again\nagent: echo: again\nuser [cancelled]: stop\nagent [incomplete]: half an ans"


def test_text_names_a_segment_that_goes_on_without_a_loss_and_counts_what_the_store_dropped() -> None:
    t = Transcript("sess_1")
    _turn(t, "one", "echo: one", TurnStatus.COMPLETE)
    t.start_segment("sess_9", SegmentStart.RESUMED)
    _turn(t, "two", "echo: two", TurnStatus.FAILED)
    t.dropped = 4
    assert t.text().splitlines() == [
        "… 4 earlier message(s) not kept",
        "user: one",
        "agent: echo: one",
        "--- the conversation goes on in session sess_9 (resumed) ---",
        "user [failed]: two",
        "agent: echo: two",
    ]
