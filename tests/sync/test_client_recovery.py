"""Drops and recoveries seen through the synchronous facade: events, ``decide_recovery`` on the host,
``notify_network_available``."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import pytest

from acp_client import Callbacks, ConnectionLost, RecoveryPath, RetryPolicy, State
from acp_client.sync import EventKind, SyncAcpClient, SyncEvent
from acp_client.types import TextContent
from tests._support import eventually_blocking
from tests.sync._support import DEADLINE, AgentSide, drain, next_event, text_of

# -- drops and recovery --------------------------------------------------------------------------------


def test_a_drop_mid_turn_and_the_recovery_are_seen_as_events(
    side: AgentSide, make_client: Callable[..., SyncAcpClient]
) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    resumed: list[tuple[str, Any]] = []
    client = make_client(
        event_queue=events,
        callbacks=Callbacks(on_resume=lambda outcome: resumed.append((threading.current_thread().name, outcome))),
    )
    session = client.new_session("/tmp")
    turn = client.prompt_async(session.session_id, "/slow")
    tick = next_event(events, EventKind.UPDATE)
    assert text_of(tick).startswith("tick")
    side.cut()
    with pytest.raises(ConnectionLost) as lost:
        turn.result(DEADLINE)
    assert lost.value.may_have_executed
    interrupted = next_event(events, EventKind.TURN_INTERRUPTED).payload
    assert interrupted.session_id == session.session_id
    assert interrupted.prompt == (TextContent(text="/slow"),)
    after: list[SyncEvent] = []

    def connected_after_resume() -> bool:
        after.extend(drain(events))
        kinds = [e.kind for e in after]
        if EventKind.RESUME not in kinds:
            return False
        rest = after[kinds.index(EventKind.RESUME) :]
        return any(e.kind is EventKind.STATE and e.payload.state is State.CONNECTED for e in rest)

    eventually_blocking(connected_after_resume, what="the resume event, then connected")
    kinds = [(e.kind, e.payload.state if e.kind is EventKind.STATE else None) for e in after]
    kinds = [k for k in kinds if k[0] in (EventKind.STATE, EventKind.RESUME)]
    assert kinds == [
        (EventKind.STATE, State.RECONNECTING),
        (EventKind.STATE, State.RECOVERING),
        (EventKind.RESUME, None),
        (EventKind.STATE, State.CONNECTED),
    ]
    outcome = next(e.payload for e in after if e.kind is EventKind.RESUME)
    assert outcome.path is RecoveryPath.RESUME and outcome.previous_session_id == session.session_id
    eventually_blocking(lambda: resumed, what="on_resume on the executor")
    assert resumed[0][0].startswith("acp-callbacks") and resumed[0][1] == outcome
    assert client.prompt(session.session_id, "after the drop").stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("fault", "kind", "path"),
    [
        ("restart", EventKind.REPLAY, RecoveryPath.REPLAY),
        ("evict", EventKind.NEW_SESSION, RecoveryPath.NEW_SESSION),
    ],
)
def test_replay_and_new_session_recoveries_are_events(
    side: AgentSide, make_client: Callable[..., SyncAcpClient], fault: str, kind: EventKind, path: RecoveryPath
) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = make_client(event_queue=events)
    session = client.new_session("/tmp").record  # at creation (the handle follows renames)
    handle = client.session(session.session_id)
    handle.prompt("before")
    if fault == "restart":
        side.restart()
    else:
        side.evict_and_cut(session.session_id)
    outcome = next_event(events, kind).payload
    assert outcome.path is path and outcome.previous_session_id == session.session_id
    assert handle.session_id == outcome.session_id
    assert handle.prompt("after").stop_reason == "end_turn"
    held = handle.transcript.segments[-1].text()  # what the agent holds now
    assert ("agent: echo: before" in held) is (path is RecoveryPath.REPLAY)
    assert "agent: echo: before" in handle.transcript.text()  # the whole conversation, whatever the path


def test_decide_recovery_runs_on_the_host(side: AgentSide, make_client: Callable[..., SyncAcpClient]) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    asked: list[str] = []

    def decide(context: Any) -> RecoveryPath:
        asked.append(threading.current_thread().name)
        return RecoveryPath.NEW_SESSION

    client = make_client(event_queue=events, callbacks=Callbacks(decide_recovery=decide))
    session = client.new_session("/tmp").record  # at creation (the handle follows renames)
    side.cut()
    outcome = next_event(events, EventKind.NEW_SESSION).payload
    assert outcome.planned is RecoveryPath.NEW_SESSION and outcome.session_id != session.session_id
    assert [name.startswith("acp-callbacks") for name in asked] == [True]


def test_a_slow_decide_recovery_keeps_the_proposed_path(
    side: AgentSide, make_client: Callable[..., SyncAcpClient]
) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    release = threading.Event()

    def decide(context: Any) -> RecoveryPath:
        release.wait(DEADLINE)
        return RecoveryPath.NEW_SESSION

    client = make_client(event_queue=events, callbacks=Callbacks(decide_recovery=decide), answer_timeout=0.2)
    client.new_session("/tmp")
    side.cut()
    try:
        assert next_event(events, EventKind.RESUME).payload.path is RecoveryPath.RESUME
    finally:
        release.set()


def test_notify_network_available_skips_the_backoff(side: AgentSide, make_client: Callable[..., SyncAcpClient]) -> None:
    client = make_client(retry=RetryPolicy(first_attempt_delay=30.0, jitter=False))
    client.new_session("/tmp")
    side.cut()
    waiting = client.wait_for_state(State.RECONNECTING)
    assert waiting.retry_in == 30.0
    client.notify_network_available()
    assert client.wait_for_state(State.CONNECTED, timeout=5.0).state is State.CONNECTED
