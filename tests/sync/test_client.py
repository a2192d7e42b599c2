"""The synchronous facade (``acp_client.sync.SyncAcpClient``) driven from plain threads: its surface,
blocking calls, timeouts and lifecycle.

The reference server and a fault proxy run on an :class:`EventLoopThread` of their own ("the
agent side"); the tests are plain functions, so the test thread plays the editor host: it has no
event loop, and every call crosses into the facade's loop thread.
"""

from __future__ import annotations

import concurrent.futures
import queue
import shlex
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import acp_client.sync
from acp_client import (
    AcpError,
    Callbacks,
    CapabilityNotSupported,
    ClientClosed,
    ConnectError,
    RequestTimeout,
    SessionNotFound,
    SessionNotTracked,
    State,
    TurnInProgress,
)
from acp_client.state import Probe
from acp_client.sync import EventKind, LoopThreadError, SyncAcpClient, SyncEvent
from tests._support import eventually_blocking
from tests.sync._support import (
    DEADLINE,
    AgentSide,
    _blackhole,
    client_threads,
    next_event,
    on_a_thread_with_the_ident_of,
)

# -- the public surface --------------------------------------------------------------------------------


def test_exported_names_are_pinned() -> None:
    assert acp_client.sync.__all__ == [
        "EventKind",
        "EventLoopThread",
        "LoopThreadError",
        "NewSessionEvent",
        "NotificationEvent",
        "OwnershipLostEvent",
        "PermissionEvent",
        "PermissionRequest",
        "ProtocolErrorEvent",
        "RecoveryFailedEvent",
        "ReplayEvent",
        "ResumeEvent",
        "SessionUpdateEvent",
        "StateEvent",
        "StoreErrorEvent",
        "StreamResumedEvent",
        "SyncAcpClient",
        "SyncClientOptions",
        "SyncEvent",
        "SyncSessionHandle",
        "TurnInterruptedEvent",
    ]
    for name in set(acp_client.sync.__all__) - {"SyncEvent"}:  # SyncEvent is the union of the *Event classes
        expected = "acp_client.exceptions" if name == "LoopThreadError" else "acp_client.sync."  # one error tree
        assert getattr(acp_client.sync, name).__module__.startswith(expected)
    assert issubclass(LoopThreadError, AcpError)
    assert {kind.value for kind in EventKind} == {
        "state",
        "update",
        "resume",
        "replay",
        "new_session",
        "recovery_failed",
        "turn_interrupted",
        "stream_resumed",
        "permission",
        "protocol_error",
        "notification",
        "ownership_lost",
        "store_error",
    }


# -- blocking calls --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_blocking_calls_from_a_plain_thread(make_client: Callable[..., SyncAcpClient], version: int) -> None:
    client = make_client(protocol_version=version)
    assert client.state.state is State.CONNECTED
    assert client.protocol_version == version
    assert client.thread is not None and client.thread is not threading.current_thread()
    session = client.new_session("/tmp")
    result = client.prompt(session.session_id, "hello there")
    assert result.stop_reason == "end_turn"
    handle = client.session(session.session_id)
    assert handle.session_id == session.session_id
    assert handle.prompt("and again").stop_reason == "end_turn"
    transcript = handle.transcript
    assert "agent: echo: hello there" in transcript.text()
    assert "agent: echo: and again" in transcript.text()
    transcript.messages.clear()  # a snapshot: the client's own is untouched
    assert len(handle.transcript) == 4
    listed = client.list_sessions()
    assert session.session_id in [s.session_id for s in listed.sessions]
    assert client.session_status(session.session_id).status is Probe.ACTIVE
    assert handle.session_status().status is Probe.ACTIVE
    assert not handle.turn_running and not handle.abandoned


def test_streamable_http_and_stdio_endpoints(side: AgentSide, reference_agent_command: list[str]) -> None:
    for endpoint in (side.server.http_url, "stdio:" + shlex.join(reference_agent_command)):
        events: queue.Queue[SyncEvent] = queue.Queue()
        with SyncAcpClient(endpoint, event_queue=events, default_timeout=DEADLINE) as client:
            session = client.new_session("/tmp")
            turn = client.prompt_async(session.session_id, "/permission")
            assert next_event(events, EventKind.PERMISSION).payload.allow()
            assert turn.result(DEADLINE).stop_reason == "end_turn"
            assert "agent: permission: selected allow" in client.session(session.session_id).transcript.text()
        assert client_threads() == []


def test_resume_load_and_close_sessions(make_client: Callable[..., SyncAcpClient]) -> None:
    first = make_client()
    session = first.new_session("/tmp")
    first.prompt(session.session_id, "remember me")
    first.close()

    second = make_client()
    resumed = second.resume_session(session.session_id, "/tmp")
    assert resumed.session_id == session.session_id
    assert second.prompt(session.session_id, "still here?").stop_reason == "end_turn"
    second.close_session(session.session_id)
    with pytest.raises(SessionNotTracked):
        second.session(session.session_id)

    third = make_client()
    loaded = third.load_session(session.session_id, "/tmp")
    assert loaded.session_id == session.session_id
    assert "agent: echo: remember me" in third.session(session.session_id).transcript.text()


def test_calls_from_many_threads_at_once(make_client: Callable[..., SyncAcpClient]) -> None:
    client = make_client()

    def chat(index: int) -> list[str]:
        session = client.new_session(f"/tmp/{index}")
        handle = client.session(session.session_id)
        return [handle.prompt(f"thread {index} turn {turn}").stop_reason or "" for turn in range(3)]

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(chat, range(6)))
    assert results == [["end_turn"] * 3] * 6
    assert len(client.list_sessions().sessions) == 6


def test_errors_propagate_unchanged(make_client: Callable[..., SyncAcpClient]) -> None:
    client = make_client(protocol_version=2)
    with pytest.raises(SessionNotTracked) as not_tracked:
        client.prompt("sess_unknown", "hello")
    assert not isinstance(not_tracked.value, SessionNotFound)  # not the agent's -32002: nothing was sent
    with pytest.raises(CapabilityNotSupported) as no_load:
        client.load_session("sess_unknown", "/tmp")
    assert no_load.value.method == "session/load"
    with pytest.raises(SessionNotFound) as from_agent:
        client.resume_session("sess_unknown", "/tmp")
    assert from_agent.value.code == -32002
    session = client.new_session("/tmp")
    slow = client.prompt_async(session.session_id, "/slow")
    eventually_blocking(lambda: client.session(session.session_id).turn_running, what="the turn to start")
    with pytest.raises(TurnInProgress):
        client.prompt(session.session_id, "overlapping")
    client.cancel(session.session_id)
    assert slow.result(DEADLINE).stop_reason == "cancelled"


# -- timeouts ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_prompt_timeout_raises_and_cancels_the_turn(
    side: AgentSide, make_client: Callable[..., SyncAcpClient], version: int
) -> None:
    client = make_client(protocol_version=version)
    session = client.new_session("/tmp")
    handle = client.session(session.session_id)
    started = time.monotonic()
    with pytest.raises(RequestTimeout) as timed_out:
        handle.prompt("/slow", timeout=0.3)
    assert time.monotonic() - started < DEADLINE / 2  # the prompt's own timeout, not the default one
    assert (timed_out.value.method, timed_out.value.timeout) == ("session/prompt", 0.3)
    assert not handle.turn_running  # the prompt coroutine ended
    # session/cancel reached the agent: its turn ends without anybody waiting for it.
    eventually_blocking(lambda: side.agent_state(session.session_id) == "idle", what="the agent to end the turn")
    if version == 2:  # let the old turn's idle arrive first (see test_a_stale_v2_idle_does_not_end_the_next_turn)
        eventually_blocking(lambda: handle.transcript.stop_reason == "cancelled", what="the old turn's idle")
    assert handle.prompt("after the timeout").stop_reason == "end_turn"


def test_a_stale_v2_idle_does_not_end_the_next_turn(side: AgentSide, make_client: Callable[..., SyncAcpClient]) -> None:
    """A CLIENT BUG (acp_client/client.py, not the facade), reproduced deterministically.

    v2: the client stops waiting for turn 1 (a prompt timeout); the agent's ``state_update``
    ``idle`` for turn 1 reaches the client only after prompt 2 was sent (held here by a
    blackholed link, in real life a slow link or a quick retry after the timeout). The client
    takes that stale idle as the end of turn 2: ``prompt`` returns before turn 2 streamed
    anything. Expected: an idle that arrives before prompt 2's answer belongs to an earlier turn
    and must not complete turn 2.
    """

    async def slow_agent() -> None:
        side.agent.chunks_per_prompt = 4
        side.agent.chunk_delay = 0.3  # turn 1 lasts ~0.9 s, longer than its 0.3 s timeout

    side.loop.run(slow_agent(), timeout=DEADLINE)
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = make_client(protocol_version=2, event_queue=events)
    session = client.new_session("/tmp")
    handle = client.session(session.session_id)
    first = handle.prompt_async("first turn", timeout=0.3)
    next_event(events, EventKind.UPDATE)  # turn 1 was accepted and streams
    side.loop.run(_blackhole(side.proxy, True), timeout=DEADLINE)
    with pytest.raises(RequestTimeout):
        first.result(DEADLINE)
    eventually_blocking(lambda: side.agent_state(session.session_id) == "idle", what="turn 1 to end on the agent")
    second = handle.prompt_async("second turn")  # held by the blackhole, like turn 1's idle
    side.loop.run(_blackhole(side.proxy, False), timeout=DEADLINE)
    assert second.result(DEADLINE).stop_reason == "end_turn"
    assert "agent: echo: second turn" in handle.transcript.text()


def test_request_timeout_cancels_the_request(side: AgentSide, make_client: Callable[..., SyncAcpClient]) -> None:
    client = make_client(default_timeout=0.3)
    session = client.new_session("/tmp", timeout=DEADLINE)
    side.agent.stall()
    with pytest.raises(RequestTimeout) as timed_out:
        client.list_sessions()
    assert timed_out.value.timeout == 0.3
    with pytest.raises(RequestTimeout):
        client.session_status(session.session_id, timeout=0.1)
    side.agent.stall(False)
    assert client.session_status(session.session_id, timeout=DEADLINE).status is Probe.ACTIVE


def test_run_timeout_cancels_the_coroutine(make_client: Callable[..., SyncAcpClient]) -> None:
    client = make_client()
    cancelled = threading.Event()

    async def forever() -> None:
        import asyncio

        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    with pytest.raises(RequestTimeout) as timed_out:
        client.run(forever(), timeout=0.1)
    assert timed_out.value.method == "run"
    assert cancelled.is_set()  # cancelled (and finished) before the call returned

    async def answer() -> int:
        return 42

    assert client.run(answer()) == 42
    assert client.submit(answer()).result(DEADLINE) == 42


# -- lifecycle and threads --------------------------------------------------------------------------------


def test_close_joins_the_thread_and_is_idempotent(make_client: Callable[..., SyncAcpClient]) -> None:
    client = make_client(connect=False)
    assert client.thread is None
    with pytest.raises(ClientClosed):
        client.new_session("/tmp")
    with client:
        client.connect()  # a second connect is a no-op
        thread = client.thread
        assert thread is not None and thread.is_alive() and thread.daemon
        client.new_session("/tmp")
    assert not thread.is_alive()
    assert client.closed and client.state.state is State.CLOSED
    client.close()
    with pytest.raises(ClientClosed):
        client.new_session("/tmp")
    with pytest.raises(ClientClosed):
        client.connect()
    with pytest.raises(ClientClosed):
        client.prompt_async("sess_x", "hello")
    assert client_threads() == []


def test_close_from_many_threads_at_once(make_client: Callable[..., SyncAcpClient]) -> None:
    client = make_client()
    thread = client.thread
    assert thread is not None
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(client.close) for _ in range(4)]:
            assert future.result(DEADLINE) is None
    assert not thread.is_alive()


def test_a_close_from_a_thread_given_the_ended_loop_threads_ident_waits_for_the_first(
    make_client: Callable[..., SyncAcpClient],
) -> None:
    # The interleaving behind the intermittent failure of the test above: one close() has joined
    # the loop thread and still shuts the callback executor down when a thread started since
    # calls close(), and the OS gave that thread the loop thread's ident. It used to be taken for
    # the loop thread (LoopThreadError); it must wait for the first close() and return. The first
    # close() is held where it waits for the callbacks: one blocks on the "closed" state.
    let_the_first_finish = threading.Event()
    held = threading.Event()

    def on_state_change(state: Any) -> None:
        if state.state is State.CLOSED:
            held.set()
            let_the_first_finish.wait(DEADLINE)

    client = make_client(callbacks=Callbacks(on_state_change=on_state_change))
    loop_thread = client.thread
    assert loop_thread is not None
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(client.close)
            assert held.wait(DEADLINE)
            loop_thread.join(DEADLINE)
            assert not loop_thread.is_alive()
            late = pool.submit(on_a_thread_with_the_ident_of, loop_thread, client.close)
            # Held, the first close() cannot end: a late close() that is done by now raised.
            concurrent.futures.wait([late], timeout=0.5)
            assert not late.done(), f"the late close() did not wait for the first: {late.exception()!r}"
            let_the_first_finish.set()
            assert first.result(DEADLINE) is None
            assert late.result(DEADLINE) is None
    finally:
        let_the_first_finish.set()
    assert client.closed


def test_close_from_a_callback_while_another_thread_closes(make_client: Callable[..., SyncAcpClient]) -> None:
    # The host thread's close() waits for the callback executor; a callback that calls close()
    # meanwhile used to wait for that close() to finish: a deadlock. It returns once the loop
    # thread has ended, then the host's close() returns.
    holder: list[SyncAcpClient] = []
    in_callback: list[Any] = []

    def on_state_change(state: Any) -> None:
        if state.state is State.CLOSED and not in_callback:  # only the host's close() gets here
            client = holder[0]
            client.close()
            thread = client.thread
            in_callback.append(thread is not None and thread.is_alive())

    client = make_client(callbacks=Callbacks(on_state_change=on_state_change))
    holder.append(client)
    host = threading.Thread(target=client.close, name="host-close", daemon=True)
    host.start()
    host.join(DEADLINE)
    if host.is_alive():
        pytest.fail("close() from a callback deadlocked with the host thread's close()")
    assert in_callback == [False]  # the callback's close() returned, after the loop thread ended
    assert client.closed
    assert client_threads() == []


def test_close_ends_pending_work(make_client: Callable[..., SyncAcpClient]) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = make_client(event_queue=events)
    session = client.new_session("/tmp")
    asking = client.prompt_async(session.session_id, "/permission")
    request = next_event(events, EventKind.PERMISSION).payload
    other = client.new_session("/tmp")
    slow = client.prompt_async(other.session_id, "/slow")
    eventually_blocking(lambda: client.session(other.session_id).turn_running)
    client.close()
    for turn in (asking, slow):
        assert turn.done()
        assert turn.cancelled() or isinstance(turn.exception(), AcpError)
    assert not request.pending and not request.allow()


def test_close_from_a_callback(make_client: Callable[..., SyncAcpClient]) -> None:
    closed = threading.Event()
    holder: list[SyncAcpClient] = []

    def on_update(_event: Any) -> None:
        if not closed.is_set():
            closed.set()
            holder[0].close()

    client = make_client(callbacks=Callbacks(on_update=on_update))
    holder.append(client)
    session = client.new_session("/tmp")
    with pytest.raises(AcpError):
        client.prompt(session.session_id, "/slow")
    eventually_blocking(lambda: client.closed, what="the close to finish")
    thread = client.thread
    assert thread is not None and not thread.is_alive()


def test_blocking_calls_on_the_loop_thread_raise(make_client: Callable[..., SyncAcpClient]) -> None:
    client = make_client()
    session = client.new_session("/tmp")

    async def status_on_the_loop() -> Any:
        return client.session_status(session.session_id)

    async def close_on_the_loop() -> None:
        client.close()

    async def transcript_on_the_loop() -> Any:
        return client.session(session.session_id).transcript

    for coro in (status_on_the_loop(), close_on_the_loop(), transcript_on_the_loop()):
        with pytest.raises(LoopThreadError, match="deadlock"):
            client.submit(coro).result(DEADLINE)
    assert client.state.state is State.CONNECTED  # nothing happened
    assert client.session_status(session.session_id).status is Probe.ACTIVE


def test_connect_failure_stops_the_thread() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = SyncAcpClient(f"ws://127.0.0.1:{port}/acp", retry=None, default_timeout=DEADLINE)
    with pytest.raises(ConnectError):
        client.connect()
    assert client.closed
    thread = client.thread
    assert thread is not None and not thread.is_alive()
    assert client_threads() == []
