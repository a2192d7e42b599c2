"""The session table, sans I/O: plain calls in, plain values out — no event loop, no sockets,
no clock (the way websockets tests its protocol state machine)."""

from __future__ import annotations

import pytest

from acp_client._sessions._table import SessionTable, Tracked
from acp_client.exceptions import (
    ClientClosed,
    ConnectionLost,
    RecoveryFailed,
    SessionNotFound,
    SessionNotTracked,
    TransportClosed,
    TurnInProgress,
)
from acp_client.state import PromptResult, UpdateEvent
from acp_client.types import AgentMessageChunk, Session, StateUpdate, TextContent

PROMPT = (TextContent(text="hi"),)


def chunk(text: str) -> AgentMessageChunk:
    return AgentMessageChunk(content=TextContent(text=text))


def idle(stop_reason: str = "end_turn") -> StateUpdate:
    return StateUpdate(state="idle", stop_reason=stop_reason)


def tracked(table: SessionTable, session_id: str = "s1") -> Tracked:
    return table.track(Session(session_id=session_id, cwd="/w"), cwd="/w", additional_directories=("/x",))


class Settled:
    """Collects how a turn ended."""

    def __init__(self) -> None:
        self.outcomes: list[PromptResult | BaseException] = []

    def __call__(self, outcome: PromptResult | BaseException) -> None:
        self.outcomes.append(outcome)


class Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


# -- tracking -----------------------------------------------------------------------------------------


def test_a_tracked_session_is_found_by_every_id_it_ever_had() -> None:
    table = SessionTable()
    entry = tracked(table)
    table.renamed(entry, Session(session_id="s2", cwd="/w"))
    assert table.get("s1") is table.get("s2") is entry
    assert table.current_id("s1") == "s2"
    assert list(table) == [entry]  # each session once
    assert table.current_id("unknown") == "unknown"


def test_tracking_an_id_again_merges_the_record() -> None:
    table = SessionTable()
    entry = tracked(table)
    again = table.track(Session(session_id="s1", title="named"), cwd="/other")
    assert again is entry and entry.record.title == "named" and entry.cwd == "/w"


def test_an_untracked_session_is_a_local_error_not_the_agents() -> None:
    table = SessionTable()
    with pytest.raises(SessionNotTracked) as caught:
        table.require("nope")
    assert caught.value.session_id == "nope"
    assert not isinstance(caught.value, SessionNotFound)


def test_untracking_ends_the_turn_and_subscriptions_under_all_ids() -> None:
    table = SessionTable()
    entry = tracked(table)
    table.renamed(entry, Session(session_id="s2"))
    seen: list[UpdateEvent | None] = []
    entry.subscribers.append(seen.append)
    settled = Settled()
    table.begin_turn(entry, PROMPT, settled)
    table.untrack("s1")
    assert "s1" not in table and "s2" not in table
    assert seen == [None]
    assert len(settled.outcomes) == 1 and isinstance(settled.outcomes[0], SessionNotTracked)


def test_roots_are_the_cwd_and_extra_directories() -> None:
    table = SessionTable()
    tracked(table)
    assert [str(p) for p in table.roots("s1")] == ["/w", "/x"]
    assert table.roots("other") == []


# -- turns ----------------------------------------------------------------------------------------------


def test_one_turn_at_a_time() -> None:
    table = SessionTable()
    entry = tracked(table)
    turn = table.begin_turn(entry, PROMPT, Settled())
    with pytest.raises(TurnInProgress):
        table.begin_turn(entry, PROMPT, Settled())
    table.end_turn(entry, turn)
    table.begin_turn(entry, PROMPT, Settled())


def test_no_turn_in_an_abandoned_session() -> None:
    table = SessionTable()
    entry = tracked(table)
    table.abandon(entry, "s1", None)
    with pytest.raises(RecoveryFailed):
        table.begin_turn(entry, PROMPT, Settled())
    assert table.live() == []


def test_idle_ends_an_accepted_turn_once() -> None:
    table = SessionTable()
    entry = tracked(table)
    settled = Settled()
    turn = table.begin_turn(entry, PROMPT, settled)
    table.receive("s1", idle())  # before the agent accepted the prompt: an older turn's idle
    assert settled.outcomes == []
    turn.accept()
    turn.message_id = "m1"
    table.receive("s1", idle("cancelled"))
    table.receive("s1", idle("end_turn"))  # a second idle does not end it again
    assert settled.outcomes == [PromptResult("cancelled", "m1", None)]
    assert turn.done


def test_idle_inside_a_replay_or_snapshot_window_is_history() -> None:
    for replay in (True, False):
        table = SessionTable()
        entry = tracked(table)
        settled = Settled()
        table.begin_turn(entry, PROMPT, settled).accept()
        table.open_window(entry, replay=replay)
        table.receive("s1", idle())
        assert settled.outcomes == []
        table.close_window(entry)
        table.receive("s1", idle())
        assert settled.outcomes == [PromptResult("end_turn", None, None)]


def test_a_drop_fails_running_turns_and_closes_windows() -> None:
    table = SessionTable()
    entry = tracked(table)
    settled = Settled()
    table.begin_turn(entry, PROMPT, settled)
    table.prompt_sent(entry, echoes_prompts=False)
    timer = Timer()
    table.open_window(entry, replay=True)
    entry.window_timer = timer
    cause = TransportClosed("gone")
    table.dropped(cause)
    (error,) = settled.outcomes
    assert isinstance(error, ConnectionLost) and error.may_have_executed and error.cause is cause
    assert not entry.window_open and timer.cancelled


def test_a_drop_leaves_a_turn_whose_prompt_has_not_gone_out() -> None:
    """Its prompt waits for the link (the outage queue): it never reached the agent, so the drop
    neither ends the turn nor says it may have executed; it is sent once the client is back."""
    table = SessionTable()
    entry = tracked(table)
    settled = Settled()
    turn = table.begin_turn(entry, PROMPT, settled)
    table.dropped(TransportClosed("gone"))
    assert settled.outcomes == [] and not turn.done and entry.turn is turn
    table.prompt_sent(entry, echoes_prompts=False)  # sent on the next link, then that one drops
    table.dropped(TransportClosed("gone again"))
    (error,) = settled.outcomes
    assert isinstance(error, ConnectionLost) and error.may_have_executed


def test_abandoning_fails_the_turn_and_ends_subscriptions() -> None:
    table = SessionTable()
    entry = tracked(table)
    settled = Settled()
    seen: list[UpdateEvent | None] = []
    entry.subscribers.append(seen.append)
    table.begin_turn(entry, PROMPT, settled)
    table.abandon(entry, "s1", SessionNotFound("gone"))
    assert entry.abandoned and seen == [None]
    assert isinstance(settled.outcomes[0], RecoveryFailed)


def test_closing_fails_turns_with_the_given_error() -> None:
    table = SessionTable()
    entry = tracked(table)
    settled = Settled()
    table.begin_turn(entry, PROMPT, settled)
    table.closed()
    assert isinstance(settled.outcomes[0], ClientClosed)


# -- updates and windows ------------------------------------------------------------------------------


def test_updates_in_a_replay_window_are_marked_counted_and_rebuild_the_transcript() -> None:
    table = SessionTable()
    entry = tracked(table)
    table.receive("s1", chunk("hello"))
    table.open_window(entry, replay=True)
    event = table.receive("s1", chunk("hello"))
    assert event == UpdateEvent("s1", chunk("hello"), True)
    assert entry.replayed == 1
    table.close_window(entry)
    assert table.receive("s1", chunk("!")).replay is False
    assert entry.transcript.text().count("hello") == 1  # the replay rebuilt it, no duplicate


def test_a_snapshot_window_is_not_replay() -> None:
    table = SessionTable()
    entry = tracked(table)
    table.open_window(entry, replay=False)
    assert table.receive("s1", chunk("x")).replay is False
    assert entry.replayed == 0


def test_sending_a_prompt_closes_a_lingering_window_and_records_v1_prompts() -> None:
    table = SessionTable()
    entry = tracked(table)
    table.open_window(entry, replay=True)
    timer = Timer()
    entry.window_timer = timer  # the answer came; the grace period runs
    table.begin_turn(entry, PROMPT, Settled())
    table.prompt_sent(entry, echoes_prompts=False)
    assert not entry.window_open and timer.cancelled
    assert entry.transcript.text() == "user: hi"


def test_subscribers_get_each_event_and_untracked_updates_pass_through() -> None:
    table = SessionTable(keep_transcripts=False)
    entry = tracked(table)
    seen: list[UpdateEvent | None] = []
    entry.subscribers.append(seen.append)
    event = table.receive("s1", chunk("a"))
    assert seen == [event]
    assert entry.transcript.text() == ""  # transcripts off
    assert table.receive("other", chunk("b")) == UpdateEvent("other", chunk("b"), False)
