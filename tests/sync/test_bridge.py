"""The host bridge (``acp_client.sync._bridge``): callbacks on the host's executor, events on the
queue, permission requests answered from the host thread."""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import acp_client.sync
from acp_client import AcpError, Callbacks, ClientHandlers, State
from acp_client.sync import EventKind, PermissionRequest, SyncAcpClient, SyncEvent
from acp_client.types import RequestPermissionRequest, SelectedPermissionOutcome
from tests._support import eventually_blocking
from tests.sync._support import DEADLINE, client_threads, drain, next_event, text_of

# -- callbacks and events ----------------------------------------------------------------------------------


def test_callbacks_run_on_the_host_executor(make_client: Callable[..., SyncAcpClient]) -> None:
    seen: list[tuple[str, str, Any]] = []
    executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="host-ui")
    client = make_client(
        callback_executor=executor,
        callbacks=Callbacks(
            on_update=lambda event: seen.append(("update", threading.current_thread().name, event)),
            on_state_change=lambda state: seen.append(("state", threading.current_thread().name, state.state)),
        ),
    )
    session = client.new_session("/tmp")
    client.prompt(session.session_id, "hello there")
    client.close()
    executor.shutdown(wait=True)  # the host's executor: the client does not shut it down
    assert {name for _, name, _ in seen} == {name for _, name, _ in seen if name.startswith("host-ui")}
    assert [value for kind, _, value in seen if kind == "state"] == [State.CONNECTING, State.CONNECTED, State.CLOSED]
    updates = [value for kind, _, value in seen if kind == "update"]
    assert "".join(e.update.content.text for e in updates) == "echo: hello there"
    assert all(e.session_id == session.session_id and not e.replay for e in updates)


def test_callbacks_default_to_a_private_thread(make_client: Callable[..., SyncAcpClient]) -> None:
    names: list[str] = []
    states: list[State] = []

    def on_state(state: Any) -> None:
        names.append(threading.current_thread().name)
        states.append(state.state)

    client = make_client(callbacks=Callbacks(on_state_change=on_state))
    loop_thread = client.thread
    client.close()  # waits for the callbacks already submitted
    assert states == [State.CONNECTING, State.CONNECTED, State.CLOSED]
    assert all(name.startswith("acp-callbacks") for name in names)
    assert loop_thread is not None and loop_thread.name not in names
    assert client_threads() == []


def test_a_raising_callback_is_logged(
    make_client: Callable[..., SyncAcpClient], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_event: Any) -> None:
        raise ValueError("broken callback")

    client = make_client(callbacks=Callbacks(on_update=broken))
    session = client.new_session("/tmp")
    assert client.prompt(session.session_id, "still fine").stop_reason == "end_turn"
    with caplog.at_level(logging.ERROR, logger="acp_client.sync"):
        client.close()
    assert any(r.exc_info and "broken callback" in str(r.exc_info[1]) for r in caplog.records)


def test_events_on_the_queue(make_client: Callable[..., SyncAcpClient]) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = make_client(event_queue=events)
    session = client.new_session("/tmp")
    client.prompt(session.session_id, "hello there")
    client.close()
    received = drain(events)
    assert all(isinstance(event, SyncEvent) for event in received)
    assert [e.payload.state for e in received if e.kind is EventKind.STATE] == [
        State.CONNECTING,
        State.CONNECTED,
        State.CLOSED,
    ]
    assert "".join(text_of(e) for e in received if e.kind is EventKind.UPDATE) == "echo: hello there"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        received[0].kind = EventKind.UPDATE  # type: ignore[misc]


def test_a_full_queue_drops_and_logs(
    make_client: Callable[..., SyncAcpClient], caplog: pytest.LogCaptureFixture
) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue(maxsize=1)
    with caplog.at_level(logging.ERROR, logger="acp_client.sync"):
        client = make_client(event_queue=events)
        assert client.new_session("/tmp")
    assert client.dropped_events >= 1
    assert "event queue is full" in caplog.text


# -- permission requests -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_permission_answered_from_the_host_thread(make_client: Callable[..., SyncAcpClient], version: int) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = make_client(event_queue=events, protocol_version=version)
    session = client.new_session("/tmp")
    turn = client.prompt_async(session.session_id, "/permission")
    request = next_event(events, EventKind.PERMISSION).payload
    assert isinstance(request, PermissionRequest)
    assert request.pending and request.outcome is None
    assert request.session_id == session.session_id
    assert request.title == "Reference agent wants to edit a file"
    assert [option.option_id for option in request.options] == ["allow", "reject"]
    with pytest.raises(AcpError):
        request.select("not-offered")
    assert request.select("reject")
    assert not request.allow()  # answered once
    assert request.outcome == SelectedPermissionOutcome(option_id="reject")
    assert turn.result(DEADLINE).stop_reason == "end_turn"
    assert "agent: permission: selected reject" in client.session(session.session_id).transcript.text()


def test_permission_handler_runs_on_the_executor(make_client: Callable[..., SyncAcpClient]) -> None:
    asked: list[tuple[str, RequestPermissionRequest]] = []

    def decide(request: RequestPermissionRequest) -> SelectedPermissionOutcome:
        asked.append((threading.current_thread().name, request))
        return SelectedPermissionOutcome(option_id="allow")

    client = make_client(handlers=ClientHandlers(permission=decide))
    session = client.new_session("/tmp")
    client.prompt(session.session_id, "/permission")
    assert "agent: permission: selected allow" in client.session(session.session_id).transcript.text()
    assert [name.startswith("acp-callbacks") for name, _ in asked] == [True]


def test_unanswered_permission_is_cancelled_after_answer_timeout(make_client: Callable[..., SyncAcpClient]) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = make_client(event_queue=events, answer_timeout=0.2)
    session = client.new_session("/tmp")
    # The host is blocked in prompt() and never polls: the request times out, answered cancelled.
    assert client.prompt(session.session_id, "/permission").stop_reason == "end_turn"
    assert "agent: permission: cancelled" in client.session(session.session_id).transcript.text()
    request = next_event(events, EventKind.PERMISSION).payload
    assert not request.pending and request.outcome is None
    assert not request.allow()


def test_cancelling_the_turn_withdraws_the_permission_request(make_client: Callable[..., SyncAcpClient]) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = make_client(event_queue=events)
    session = client.new_session("/tmp")
    turn = client.prompt_async(session.session_id, "/permission")
    request = next_event(events, EventKind.PERMISSION).payload
    client.cancel(session.session_id)
    eventually_blocking(lambda: not request.pending, what="the request to be withdrawn")
    assert not request.allow()
    assert turn.result(DEADLINE).stop_reason in ("cancelled", "end_turn")


def test_an_answer_given_as_the_wait_times_out_is_the_one_sent(
    monkeypatch: pytest.MonkeyPatch, make_client: Callable[..., SyncAcpClient]
) -> None:
    # The host answers in the instant between the answer wait timing out and the request being
    # withdrawn: allow() returns True ("taken"), so the agent must get that answer, not cancelled.
    import contextlib

    from acp_client.clock import Clock, move_on_after

    events: queue.Queue[SyncEvent] = queue.Queue()
    answer_timeout = 0.0517
    taken: list[bool] = []

    @contextlib.contextmanager
    def answered_at_expiry(clock: Clock, seconds: float | None) -> Any:
        with move_on_after(clock, seconds) as scope:
            yield scope
        if seconds == answer_timeout and scope.expired:
            (request,) = [event.payload for event in drain(events) if event.kind is EventKind.PERMISSION]
            taken.append(request.allow())

    monkeypatch.setattr(acp_client.sync._bridge, "move_on_after", answered_at_expiry)
    client = make_client(event_queue=events, answer_timeout=answer_timeout)
    session = client.new_session("/tmp")
    assert client.prompt(session.session_id, "/permission").stop_reason == "end_turn"
    assert taken == [True]
    assert "agent: permission: selected allow" in client.session(session.session_id).transcript.text()


def test_coroutine_handlers_stay_on_the_loop(make_client: Callable[..., SyncAcpClient]) -> None:
    threads: list[threading.Thread] = []

    async def decide(_request: RequestPermissionRequest) -> SelectedPermissionOutcome:
        threads.append(threading.current_thread())
        return SelectedPermissionOutcome(option_id="allow")

    client = make_client(handlers=ClientHandlers(permission=decide))
    session = client.new_session("/tmp")
    client.prompt(session.session_id, "/permission")
    assert threads == [client.thread]


def test_every_callback_the_async_client_takes_is_relayed() -> None:
    """A ``Callbacks`` field the facade does not relay would be dropped in silence (``decide_adoption`` and
    ``on_ownership_lost`` once were): with every field set, the loop-side callbacks have every field set."""
    from acp_client.sync._bridge import HostBridge

    every = Callbacks(**{field.name: (lambda *args: None) for field in attrs.fields(Callbacks)})
    bridge = HostBridge(every, executor=None, event_queue=None, answer_timeout=None)
    relayed = bridge.loop_callbacks()
    assert [field.name for field in attrs.fields(Callbacks) if getattr(relayed, field.name) is None] == []
