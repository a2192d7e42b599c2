"""The synchronous facade (``acp_client.sync``) driven from plain threads.

The reference server and a fault proxy run on an :class:`EventLoopThread` of their own ("the
agent side"); the tests are plain functions, so the test thread plays the editor host: it has no
event loop, and every call crosses into the facade's loop thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import attrs
import pytest

import acp_client.sync
from acp_client import (
    AcpError,
    Callbacks,
    CapabilityNotSupported,
    ClientClosed,
    ClientHandlers,
    ConnectError,
    ConnectionLost,
    RecoveryPath,
    RequestTimeout,
    RetryPolicy,
    SessionNotFound,
    SessionNotTracked,
    SessionStatus,
    State,
    TurnInProgress,
)
from acp_client.sync import (
    EventKind,
    EventLoopThread,
    LoopThreadError,
    PermissionRequest,
    SyncAcpClient,
    SyncEvent,
)
from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer
from acp_client.types import (
    CancelledPermissionOutcome,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
    TextContent,
)

T = TypeVar("T")

#: Upper bound of every wait in these tests (they normally take milliseconds).
DEADLINE = 10.0
FAST_RETRY = RetryPolicy(initial_delay=0.05, max_delay=0.2)


def eventually(check: Callable[[], T | None], *, timeout: float = DEADLINE, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def next_event(events: queue.Queue[SyncEvent], kind: EventKind, *, timeout: float = DEADLINE) -> SyncEvent:
    """The next event of ``kind`` (earlier events of other kinds are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no {kind.value} event within {timeout}s")
        try:
            event = events.get(timeout=remaining)
        except queue.Empty:
            continue
        if event.kind is kind:
            return event


def drain(events: queue.Queue[SyncEvent]) -> list[SyncEvent]:
    out: list[SyncEvent] = []
    while True:
        try:
            out.append(events.get_nowait())
        except queue.Empty:
            return out


def text_of(event: SyncEvent) -> str:
    content = getattr(event.payload.update, "content", None)
    return content.text if isinstance(content, TextContent) else ""


@attrs.define
class AgentSide:
    """The reference server behind a fault proxy, on a loop thread of their own."""

    loop: EventLoopThread
    agent: ReferenceAgent
    server: ReferenceServer
    proxy: FaultProxy

    @property
    def url(self) -> str:
        return self.proxy.url(self.server.ws_url)

    def cut(self) -> None:
        self.loop.run(self.proxy.cut(), timeout=DEADLINE)

    def restart(self) -> None:
        async def restart() -> None:
            await self.proxy.cut()
            self.agent.restart()

        self.loop.run(restart(), timeout=DEADLINE)

    def evict_and_cut(self, session_id: str) -> None:
        async def evict() -> None:
            self.agent.evict(session_id)
            await self.proxy.cut()

        self.loop.run(evict(), timeout=DEADLINE)

    def agent_state(self, session_id: str) -> str | None:
        async def read() -> str | None:
            snapshot = self.agent.sessions.get(session_id)
            return snapshot.state if snapshot is not None else None

        return self.loop.run(read(), timeout=DEADLINE)


@pytest.fixture
def side() -> Iterator[AgentSide]:
    loop = EventLoopThread(name="agent-side")
    loop.start()

    async def start() -> AgentSide:
        agent = ReferenceAgent()
        server = ReferenceServer(agent)
        await server.start()
        proxy = FaultProxy("127.0.0.1", server.port)
        await proxy.start()
        return AgentSide(loop, agent, server, proxy)

    agent_side = loop.run(start(), timeout=DEADLINE)
    try:
        yield agent_side
    finally:

        async def stop() -> None:
            await agent_side.proxy.aclose()
            await agent_side.server.aclose()

        loop.run(stop(), timeout=DEADLINE)
        loop.stop()


@pytest.fixture
def make_client(side: AgentSide) -> Iterator[Callable[..., SyncAcpClient]]:
    """``make_client(**kwargs)``: a connected facade on the proxied WebSocket URL (closed at
    teardown)."""
    clients: list[SyncAcpClient] = []

    def make(connect: bool = True, **kwargs: Any) -> SyncAcpClient:
        kwargs.setdefault("retry", FAST_RETRY)
        kwargs.setdefault("default_timeout", DEADLINE)
        client = SyncAcpClient(side.url, **kwargs)
        clients.append(client)
        if connect:
            client.connect(timeout=DEADLINE)
        return client

    yield make
    for client in clients:
        client.close()


def client_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(("acp-client-loop", "acp-callbacks"))]


# -- the public surface --------------------------------------------------------------------------------


def test_exported_names_are_pinned() -> None:
    assert acp_client.sync.__all__ == [
        "EventKind",
        "EventLoopThread",
        "LoopThreadError",
        "PermissionRequest",
        "SyncAcpClient",
        "SyncEvent",
        "SyncSessionHandle",
    ]
    for name in acp_client.sync.__all__:
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
        "permission",
        "protocol_error",
        "notification",
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
    assert client.session_status(session.session_id).status is SessionStatus.ACTIVE
    assert handle.status().status is SessionStatus.ACTIVE
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
    eventually(lambda: client.session(session.session_id).turn_running, what="the turn to start")
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
    eventually(lambda: side.agent_state(session.session_id) == "idle", what="the agent to end the turn")
    if version == 2:  # let the old turn's idle arrive first (see test_a_stale_v2_idle_does_not_end_the_next_turn)
        eventually(lambda: handle.transcript.stop_reason == "cancelled", what="the old turn's idle")
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
    eventually(lambda: side.agent_state(session.session_id) == "idle", what="turn 1 to end on the agent")
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
    assert client.session_status(session.session_id, timeout=DEADLINE).status is SessionStatus.ACTIVE


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
    eventually(lambda: not request.pending, what="the request to be withdrawn")
    assert not request.allow()
    assert turn.result(DEADLINE).stop_reason in ("cancelled", "end_turn")


def test_an_answer_given_as_the_wait_times_out_is_the_one_sent(
    monkeypatch: pytest.MonkeyPatch, make_client: Callable[..., SyncAcpClient]
) -> None:
    # The host answers in the instant between the answer wait timing out and the request being
    # withdrawn: allow() returns True ("taken"), so the agent must get that answer, not cancelled.
    import asyncio
    import types

    events: queue.Queue[SyncEvent] = queue.Queue()
    answer_timeout = 0.0517
    taken: list[bool] = []

    async def wait(fs: Any, *, timeout: float | None = None, **kwargs: Any) -> Any:
        done, pending = await asyncio.wait(fs, timeout=timeout, **kwargs)
        if timeout == answer_timeout and not done:
            (request,) = [event.payload for event in drain(events) if event.kind is EventKind.PERMISSION]
            taken.append(request.allow())
        return done, pending

    monkeypatch.setattr(acp_client.sync._bridge, "asyncio", types.SimpleNamespace(**{**vars(asyncio), "wait": wait}))
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

    eventually(connected_after_resume, what="the resume event, then connected")
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
    eventually(lambda: resumed, what="on_resume on the executor")
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
    text = handle.transcript.text()
    assert ("agent: echo: before" in text) is (path is RecoveryPath.REPLAY)


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


def test_close_ends_pending_work(make_client: Callable[..., SyncAcpClient]) -> None:
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = make_client(event_queue=events)
    session = client.new_session("/tmp")
    asking = client.prompt_async(session.session_id, "/permission")
    request = next_event(events, EventKind.PERMISSION).payload
    other = client.new_session("/tmp")
    slow = client.prompt_async(other.session_id, "/slow")
    eventually(lambda: client.session(other.session_id).turn_running)
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
    eventually(lambda: client.closed, what="the close to finish")
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
    assert client.session_status(session.session_id).status is SessionStatus.ACTIVE


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


def test_event_loop_thread_on_its_own() -> None:
    loop = EventLoopThread(name="standalone")
    with pytest.raises(ClientClosed):
        loop.submit(_never())  # not started
    with loop:
        assert loop.running and loop.thread is not None and loop.thread.name == "standalone"

        async def add(a: int, b: int) -> int:
            return a + b

        assert loop.run(add(1, 2)) == 3
        with pytest.raises(RequestTimeout):
            loop.run(_never(), timeout=0.05)
        pending = loop.submit(_never())

        async def nested() -> int:
            return loop.run(add(1, 1))

        with pytest.raises(LoopThreadError):
            loop.run(nested())
    assert not loop.running and pending.cancelled()
    with pytest.raises(ClientClosed):
        loop.wait(pending)
    with pytest.raises(ClientClosed):
        loop.start()
    with pytest.raises(ClientClosed):
        loop.submit(_never())


async def _blackhole(proxy: FaultProxy, on: bool) -> None:
    proxy.blackhole(on)


async def _never() -> None:
    import asyncio

    await asyncio.Event().wait()


def test_a_concurrent_start_returns_only_once_the_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # start() is idempotent and safe from any thread: a second caller racing the first must not
    # get back before the loop exists (its next run() would raise ClientClosed).
    import asyncio
    import types

    loop_thread = EventLoopThread(name="racing-start")
    second_caller_inside = threading.Event()
    real_new_event_loop = asyncio.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        second_caller_inside.wait(DEADLINE)  # hold the first start until the second one ran
        return real_new_event_loop()

    class SignallingLock:
        def __init__(self) -> None:
            self._inner = threading.Lock()

        def __enter__(self) -> None:
            self._inner.acquire()

        def __exit__(self, *exc: object) -> None:
            self._inner.release()
            if threading.current_thread() is threading.main_thread():
                second_caller_inside.set()

    monkeypatch.setattr(
        acp_client.sync._loop, "asyncio", types.SimpleNamespace(**{**vars(asyncio), "new_event_loop": new_event_loop})
    )
    monkeypatch.setattr(loop_thread, "_lock", SignallingLock())
    first = threading.Thread(target=loop_thread.start)
    first.start()
    eventually(lambda: loop_thread.thread is not None, what="the first start() to create the thread")
    try:
        loop_thread.start()  # the second caller (this thread)
        assert loop_thread.running and loop_thread.loop is not None

        async def answer() -> int:
            return 42

        assert loop_thread.run(answer(), timeout=DEADLINE) == 42
    finally:
        second_caller_inside.set()
        first.join(DEADLINE)
        loop_thread.stop()


def test_stop_during_start_ends_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # stop() racing a start() whose thread exists but whose loop is not set up yet must still end
    # that thread (it used to return at once, and the loop then ran forever: a leaked thread).
    import asyncio
    import types

    loop_thread = EventLoopThread(name="stopped-while-starting")
    stop_called = threading.Event()
    real_new_event_loop = asyncio.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        stop_called.wait(DEADLINE)  # hold the loop's creation until stop() has looked
        return real_new_event_loop()

    class SignallingLock:
        def __init__(self) -> None:
            self._inner = threading.Lock()

        def __enter__(self) -> None:
            self._inner.acquire()

        def __exit__(self, *exc: object) -> None:
            self._inner.release()
            if threading.current_thread() is threading.main_thread():
                stop_called.set()

    monkeypatch.setattr(
        acp_client.sync._loop, "asyncio", types.SimpleNamespace(**{**vars(asyncio), "new_event_loop": new_event_loop})
    )
    monkeypatch.setattr(loop_thread, "_lock", SignallingLock())
    starter = threading.Thread(target=loop_thread.start)
    starter.start()
    eventually(lambda: loop_thread.thread is not None, what="start() to create the thread")
    thread = loop_thread.thread
    assert thread is not None
    try:
        loop_thread.stop(join_timeout=DEADLINE)
        thread.join(2.0)
        assert not thread.is_alive(), "the loop thread outlived stop()"
        assert not loop_thread.running
    finally:
        stop_called.set()
        starter.join(DEADLINE)
        loop = loop_thread.loop
        if thread.is_alive() and loop is not None:  # do not leak it into the next tests
            loop.call_soon_threadsafe(loop.stop)
            thread.join(DEADLINE)


# -- PermissionRequest answers ------------------------------------------------------------------------


def _permission(*kinds: str) -> tuple[PermissionRequest, concurrent.futures.Future[Any]]:
    from acp_client.types import PermissionOption

    options = tuple(PermissionOption(option_id=f"opt-{kind}", name=kind, kind=kind) for kind in kinds)
    answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
    return PermissionRequest(RequestPermissionRequest(session_id="s", options=options), answer), answer


def test_allow_picks_allow_once_even_when_allow_always_is_listed_first() -> None:
    request, answer = _permission("allow_always", "reject_once", "allow_once")
    assert request.allow()
    assert answer.result() == SelectedPermissionOutcome(option_id="opt-allow_once")


def test_allow_never_escalates_to_allow_always() -> None:
    request, answer = _permission("allow_always", "reject_once")
    assert request.allow()
    assert answer.result() == CancelledPermissionOutcome()


def test_allow_always_is_a_separate_choice() -> None:
    request, answer = _permission("allow_once", "allow_always")
    assert request.allow_always()
    assert answer.result() == SelectedPermissionOutcome(option_id="opt-allow_always")
    assert not request.allow()  # answered once only
    missing, cancelled = _permission("allow_once")
    assert missing.allow_always() and cancelled.result() == CancelledPermissionOutcome()


def test_reject_prefers_reject_once() -> None:
    request, answer = _permission("reject_always", "reject_once", "allow_once")
    assert request.reject()
    assert answer.result() == SelectedPermissionOutcome(option_id="opt-reject_once")
