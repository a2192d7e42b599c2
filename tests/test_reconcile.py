"""Replay reconciliation (issue 17 item 4): a replay is matched against the conversation the client
holds. The property: for any recorded conversation and any replay of it — with or without message
ids, chunked arbitrarily, mode/config/commands updates interleaved, partial answers left out, the
agent's own messages added — the conversation after the replay is the one before, plus what the
agent added, in the replay's order."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_client import Transcript
from acp_client._codec import decode_session_update
from acp_client.transcript import TurnStatus
from acp_client.types import TextContent

#: What live and replayed text is made of; the agent's own additions are bracketed ("[...]", never here).
TEXT = st.text(alphabet="ab c", min_size=1, max_size=6)

BOUNDARIES = [
    {"sessionUpdate": "current_mode_update", "currentModeId": "ask"},
    {"sessionUpdate": "config_option_update", "configOptions": []},
    {"sessionUpdate": "available_commands_update", "availableCommands": []},
    {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "read"},
]


def u(data: dict[str, Any]) -> Any:
    return decode_session_update(data, protocol_version=2)


def chunk(role: str, text: str, message_id: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {"sessionUpdate": f"{role}_message_chunk", "content": {"type": "text", "text": text}}
    if message_id is not None:
        data["messageId"] = message_id
    return data


@attrs.define
class LiveTurn:
    prompt: str
    replies: list[str]
    status: TurnStatus


TURN = st.builds(
    LiveTurn,
    prompt=TEXT,
    replies=st.lists(TEXT, max_size=2),
    status=st.sampled_from(list(TurnStatus)[1:]),  # every ended status
)


def record(turns: list[LiveTurn], live_ids: bool) -> Transcript:
    """The conversation as the client saw it live (v1: the client records its own prompts)."""
    t = Transcript("s")
    for n, turn in enumerate(turns):
        t.begin_turn([TextContent(text=turn.prompt)], record=True)
        if turn.status is not TurnStatus.FAILED:
            for k, reply in enumerate(turn.replies):
                if k:
                    t.apply(u(BOUNDARIES[3]))  # two answers of one turn are apart (a tool call between)
                t.apply(u(chunk("agent", reply, f"a{n}.{k}" if live_ids else None)))
        t.finish_turn(turn.status)
    return t


def view(t: Transcript) -> list[tuple[str, str, Any, bool]]:
    return [(m.role, m.text, m.status, m.incomplete) for m in t.messages]


@st.composite
def replay_of(draw: st.DrawFn, turns: list[LiveTurn], live_ids: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """A replay of ``turns``: the updates, and the texts of the messages the agent added."""
    replay_ids = draw(st.booleans())
    updates: list[dict[str, Any]] = []
    added: list[str] = []

    def message(role: str, text: str, message_id: str | None) -> None:
        cuts = sorted(draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=3)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if text[a:b]]
        for piece in pieces:
            updates.append(chunk(role, piece, message_id))
            if draw(st.integers(0, 9)) == 0 and message_id is not None:
                updates.append(draw(st.sampled_from(BOUNDARIES)))  # with ids, a boundary may even fall inside

    def maybe_add() -> None:
        if draw(st.integers(0, 4)) == 0:
            text = "[" + draw(TEXT) + "]"  # never the start or the end of a recorded message
            added.append(text)
            ident = f"x{len(added)}" if replay_ids else None
            if ident is None:
                updates.append(draw(st.sampled_from(BOUNDARIES)))
            message("agent", text, ident)
            if ident is None:
                updates.append(draw(st.sampled_from(BOUNDARIES)))

    maybe_add()
    for n, turn in enumerate(turns):
        if turn.status is TurnStatus.FAILED:
            continue  # the agent never had it
        if draw(st.booleans()):
            updates.append(draw(st.sampled_from(BOUNDARIES)))
        message("user", turn.prompt, f"u{n}" if replay_ids else None)
        partial = turn.status in (TurnStatus.CANCELLED, TurnStatus.INTERRUPTED)
        for k, reply in enumerate(turn.replies):
            if partial and draw(st.booleans()):
                continue  # the agent's replay omits the partial answer the user saw
            if k or draw(st.booleans()):
                updates.append(BOUNDARIES[3] if not replay_ids else draw(st.sampled_from(BOUNDARIES)))
            ident = (f"a{n}.{k}" if live_ids else f"r{n}.{k}") if replay_ids else None
            message("agent", reply, ident)
        maybe_add()
    return updates, added


@settings(max_examples=300, deadline=None)
@given(data=st.data(), turns=st.lists(TURN, max_size=6), live_ids=st.booleans())
def test_a_replay_keeps_the_conversation_and_adds_what_the_agent_added(
    data: st.DataObject, turns: list[LiveTurn], live_ids: bool
) -> None:
    t = record(turns, live_ids)
    before = view(t)
    updates, added = data.draw(replay_of(turns, live_ids))
    t.begin_replay()
    for update in updates:
        t.apply(u(update))
    t.end_replay()
    after = view(t)
    assert [entry for entry in after if not entry[1].startswith("[")] == before
    assert [entry[1] for entry in after if entry[1].startswith("[")] == added
    assert t.last_replay is not None and t.last_replay.added == len(added)


def _prompts(*texts: str) -> Transcript:
    t = Transcript("s")
    for text in texts:
        t.begin_turn([TextContent(text=text)], record=True)
        t.finish_turn(TurnStatus.COMPLETE)
    return t


def test_a_fused_replay_of_two_prompts_is_split_at_the_recorded_boundary() -> None:
    """isaac-acp / fast-agent: two prompts replayed without ids came back as one user message
    (``'/slow gosecond prompt after restart'``), even with mode and config updates around."""
    t = _prompts("/slow go", "second prompt after restart")
    t.begin_replay()
    t.apply(u(BOUNDARIES[0]))
    t.apply(u(chunk("user", "/slow go", None)))
    t.apply(u(chunk("user", "second prompt after restart", None)))
    t.apply(u(BOUNDARIES[1]))
    t.end_replay()
    assert [m.text for m in t.messages] == ["/slow go", "second prompt after restart"]
    assert t.last_replay is not None and t.last_replay.replayed_turns == 2
    assert any("split" in note for note in t.last_replay.notes)


def test_a_fused_replay_is_split_in_the_recorded_order_even_when_it_spells_an_earlier_prompt() -> None:
    """Found by the property above: prompts ``a``, ``ac``, ``a``, ``c``; the agent replays the last
    two without ids and with nothing between them, as ``ac`` -- which is also the second prompt's
    text. Where ``a`` then ``c`` are due, it is those two, split at the recorded boundary."""
    t = _prompts("a", "ac", "a", "c")
    t.begin_replay()
    for text in ("a", "ac", "ac"):
        t.apply(u(chunk("user", text, None)))
        t.apply(u(BOUNDARIES[0]))
    t.end_replay()
    assert [m.text for m in t.messages] == ["a", "ac", "a", "c"]
    assert t.last_replay is not None and t.last_replay.added == 0


def test_user_messages_are_never_fused_across_a_non_message_update() -> None:
    t = _prompts("one", "two")
    t.begin_replay()
    t.apply(u(chunk("user", "one", None)))
    t.apply(u(BOUNDARIES[2]))
    t.apply(u(chunk("user", "two", None)))
    t.end_replay()
    assert [m.text for m in t.messages] == ["one", "two"]


def test_a_replay_that_contradicts_the_stored_history_deletes_nothing() -> None:
    t = Transcript("s")
    t.begin_turn([TextContent(text="hello")], record=True)
    t.apply(u(chunk("agent", "echo: hello", "a1")))
    t.finish_turn(TurnStatus.COMPLETE)
    t.begin_replay()
    t.apply(u(chunk("agent", "something else", "a1")))
    t.end_replay()
    assert [m.text for m in t.messages] == ["hello", "echo: hello"]
    assert t.last_replay is not None
    assert any("contradicted 1 stored message" in note for note in t.last_replay.notes)


def test_a_partial_answer_the_replay_omits_stays_marked_incomplete() -> None:
    """deepagents-acp streams live chunks without ids and replays with ids, leaving out the
    partial answer of a cancelled turn."""
    t = Transcript("s")
    t.begin_turn([TextContent(text="long task")], record=True)
    t.apply(u(chunk("agent", "step one, ", None)))
    t.finish_turn(TurnStatus.CANCELLED)
    t.begin_replay()
    t.apply(u(chunk("user", "long task", "m1")))
    t.end_replay()
    prompt, partial = t.messages
    assert (prompt.text, prompt.status, prompt.message_id) == ("long task", TurnStatus.CANCELLED, "m1")
    assert (partial.text, partial.incomplete) == ("step one, ", True)


def test_a_replay_that_completes_a_partial_answer_takes_the_full_text() -> None:
    t = Transcript("s")
    t.begin_turn([TextContent(text="q")], record=True)
    t.apply(u(chunk("agent", "ans", None)))
    t.finish_turn(TurnStatus.INTERRUPTED)
    t.begin_replay()
    t.apply(u(chunk("user", "q", None)))
    t.apply(u(chunk("agent", "answer in full", None)))
    t.end_replay()
    assert [(m.text, m.incomplete) for m in t.messages] == [("q", False), ("answer in full", False)]
    assert t.messages[0].status is TurnStatus.INTERRUPTED


def test_a_large_ordinary_replay_is_matched_in_one_pass() -> None:
    t = _prompts(*(f"prompt {n}" for n in range(3000)))
    t.begin_replay()
    for n in range(3000):
        t.apply(u(chunk("user", f"prompt {n}", f"id{n}")))
    t.end_replay()
    assert t.last_replay is not None and t.last_replay.matched == 3000 and t.last_replay.added == 0


def test_isaac_acp_replay_of_a_cancelled_turn_keeps_every_prompt_apart() -> None:
    """isaac-acp 0.4.0 (17b's wire capture): no message ids; a turn cancelled before any text comes
    back as its prompt alone, so two user chunks arrive in a row; the killed last turn has no answer.
    The live answer had a trailing newline the replay also has."""
    t = Transcript("s")
    for prompt, answer, status in [
        ("hello", "echo: hello\n", TurnStatus.COMPLETE),
        ("slow: one two three four five six", None, TurnStatus.CANCELLED),
        ("second", "echo: second\n", TurnStatus.COMPLETE),
        ("slow: alpha beta gamma delta epsilon", "echo: alpha ", TurnStatus.INTERRUPTED),
    ]:
        t.begin_turn([TextContent(text=prompt)], record=True)
        if answer is not None:
            t.apply(u(chunk("agent", answer, None)))
        t.finish_turn(status)
    before = view(t)
    t.begin_replay()
    t.apply(u(BOUNDARIES[2]))  # available_commands_update first
    for role, text in [
        ("user", "hello"),
        ("agent", "echo: hello\n"),
        ("user", "slow: one two three four five six"),
        ("user", "second"),
        ("agent", "echo: second\n"),
        ("user", "slow: alpha beta gamma delta epsilon"),
    ]:
        t.apply(u(chunk(role, text, None)))
    t.end_replay()
    assert view(t) == before  # the partial answer of the killed turn stays, marked incomplete
    assert view(t)[-1] == ("agent", "echo: alpha ", None, True)


def test_fast_agent_replays_a_tool_turns_answer_after_the_tool_call_text() -> None:
    """fast-agent 0.10.48: the live answer of a tool turn was the result; the replay renders it as the
    tool call's text, then the result. Still one agent message for that turn."""
    t = Transcript("s")
    t.begin_turn([TextContent(text="note it")], record=True)
    t.apply(u(chunk("agent", '{"result":"saved buy milk"}', None)))
    t.finish_turn(TurnStatus.COMPLETE)
    t.begin_replay()
    t.apply(u(chunk("user", "note it", None)))
    t.apply(u(chunk("agent", '***CALL_TOOL write_note {"text": "buy milk"}', None)))
    t.apply(u(chunk("agent", '{"result":"saved buy milk"}', None)))
    t.end_replay()
    assert [m.role for m in t.messages] == ["user", "agent"]
    assert t.messages[1].text == '{"result":"saved buy milk"}'  # the stored copy (what the user saw) wins
