"""The client facade: :class:`AcpClient` and :class:`SessionHandle`.

::

    async with AcpClient("ws://127.0.0.1:8000/acp", on_new_session=warn_user) as client:
        session = await client.new_session(cwd="/home/me/project")
        handle = client.session(session.session_id)
        result = await handle.prompt("Summarize the README")

The client connects, negotiates the protocol version, and from then on keeps the connection alive:
after a drop it reconnects under its :class:`~acp_client.retry.RetryPolicy`, probes
``session/status`` for every session it opened, and recovers each one on the right path (resume,
replay, or a new session), telling the app through callbacks before any request queued during the
outage is sent.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import random
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from . import _recovery
from ._clock import Clock, SystemClock, TimerHandle
from ._codec import decode_session_notification, from_wire, to_wire
from ._connection import DEFAULT_TIMEOUT, Connection, _Default
from ._recovery import Probe, RecoveryPath, Step, StepFailure
from ._supervisor import QueueOptions, Supervisor
from .exceptions import (
    AcpError,
    CapabilityNotSupported,
    ClientClosed,
    ConfigurationError,
    ConnectionLost,
    IncompatibleProtocolVersion,
    InvalidMessage,
    RecoveryFailed,
    RequestTimeout,
    RpcError,
    SessionNotFound,
    TransportError,
    TurnInProgress,
    UnsupportedProtocolVersion,
)
from .handlers import ClientHandlers, RequestRouter
from .retry import RetryPolicy
from .state import ConnectionState, RecoveryContext, RecoveryOutcome, TurnInterrupted
from .transcript import Transcript
from .transports._cookies import CookieStore
from .transports._security import TlsConfig, check_session_id
from .transports.base import Connector, Limits
from .types import (
    CancelNotification,
    ClientCapabilities,
    CloseSessionRequest,
    ContentBlock,
    FileSystemCapability,
    ForkSessionRequest,
    ForkSessionResponse,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    McpServer,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ReplayFromStart,
    ResumeSessionRequest,
    ResumeSessionResponse,
    Session,
    SessionNotification,
    SessionStatus,
    SessionStatusRequest,
    SessionStatusResponse,
    SessionUpdate,
    SetSessionModeRequest,
    TextContent,
)

__all__ = [
    "SUPPORTED_PROTOCOL_VERSIONS",
    "AcpClient",
    "PromptResult",
    "SessionHandle",
    "SessionPage",
    "UpdateEvent",
    "connector_for",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The ACP versions this client speaks.
SUPPORTED_PROTOCOL_VERSIONS: tuple[int, ...] = (1, 2)

#: How long a replay window stays open after the answer on unordered transports (HTTP).
_REPLAY_GRACE = 0.5

#: How many recovery outcomes the client keeps (the most recent ones).
_MAX_OUTCOMES = 1000

_CLIENT_INFO = Implementation(name="acp-reconnect", version="0.1.0", title="acp_client")


@attrs.frozen
class UpdateEvent:
    """One ``session/update`` delivered to the app.

    Attributes:
        session_id: The session it belongs to (as the agent named it).
        update: The decoded update (an ``Unknown...`` value keeps unrecognized variants).
        replay: ``True`` when it is history replayed by ``session/load`` (v1) or
            ``session/resume`` with ``replayFrom`` (v2), not new activity.
    """

    session_id: str
    update: SessionUpdate
    replay: bool = False


@attrs.frozen
class PromptResult:
    """How a prompt turn ended.

    Attributes:
        stop_reason: Why the turn ended (``end_turn``, ``cancelled``, ...; an open set).
        message_id: The id of the inserted user message (v2), when the agent supplied one.
        usage: Token usage, when the agent reported it.
    """

    stop_reason: str | None
    message_id: str | None = None
    usage: Any = None


@attrs.frozen
class SessionPage:
    """One page of ``session/list``."""

    sessions: tuple[Session, ...]
    next_cursor: str | None = None


class _Turn:
    __slots__ = ("accepted", "future", "message_id", "prompt")

    def __init__(self, prompt: tuple[ContentBlock, ...], future: asyncio.Future[PromptResult]) -> None:
        self.prompt = prompt
        self.future = future
        self.message_id: str | None = None
        self.accepted = False

    def accept(self) -> None:
        self.accepted = True


class _Tracked:
    """What the client remembers of a session it opened, to recover it."""

    def __init__(
        self,
        record: Session,
        *,
        cwd: str,
        mcp_servers: tuple[McpServer, ...],
        additional_directories: tuple[str, ...],
    ) -> None:
        self.record = record
        self.session_id = record.session_id
        self.cwd = cwd
        self.mcp_servers = mcp_servers
        self.additional_directories = additional_directories
        self.transcript = Transcript()
        self.replaying = False
        self.replayed = 0
        self.snapshot_window = False
        self.window_timer: TimerHandle | None = None
        self.turn: _Turn | None = None
        self.subscribers: list[asyncio.Queue[UpdateEvent | None]] = []
        self.abandoned = False


def _content(prompt: str | ContentBlock | Iterable[ContentBlock]) -> tuple[ContentBlock, ...]:
    if isinstance(prompt, str):
        return (TextContent(text=prompt),)
    if attrs.has(type(prompt)):
        return (prompt,)  # type: ignore[return-value]
    return tuple(prompt)  # type: ignore[arg-type]


async def _call_app(callback: Callable[..., Any] | None, *args: Any) -> Any:
    if callback is None:
        return None
    try:
        result = callback(*args)
        if inspect.isawaitable(result):
            result = await result
        return result
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("app callback %r raised", callback)
        return None


def connector_for(
    endpoint: str,
    *,
    headers: Mapping[str, str] | None = None,
    secret_headers: Collection[str] = (),
    tls: TlsConfig | None = None,
    cookies: CookieStore | None = None,
    limits: Limits | None = None,
    **options: Any,
) -> Connector:
    """Build the connector for an endpoint string.

    ``ws://``/``wss://`` → WebSocket, ``http://``/``https://`` → Streamable HTTP, and
    ``stdio:COMMAND ARGS...`` → spawn the agent (split like a shell would, but run without one).
    Extra ``options`` go to that connector's constructor (e.g. ``http2=True``,
    ``ping_interval=5``, ``env={...}``).

    Raises:
        ConfigurationError: An unknown scheme or an unsafe header.
    """
    limits = limits or Limits()
    if endpoint.startswith(("ws://", "wss://")):
        from .transports.websocket import WebSocketConnector

        return WebSocketConnector(
            endpoint,
            headers=headers,
            secret_headers=secret_headers,
            tls=tls or TlsConfig(),
            cookies=cookies,
            limits=limits,
            **options,
        )
    if endpoint.startswith(("http://", "https://")):
        from .transports.http import HttpConnector

        return HttpConnector(
            endpoint,
            headers=headers,
            secret_headers=secret_headers,
            tls=tls or TlsConfig(),
            cookies=cookies,
            limits=limits,
            **options,
        )
    if endpoint.startswith("stdio:"):
        from .transports.stdio import StdioConnector

        command = shlex.split(endpoint[len("stdio:") :])
        if not command:
            raise ConfigurationError("stdio: endpoint needs a command")
        return StdioConnector(command, limits=limits, **options)
    raise ConfigurationError(f"unsupported endpoint {endpoint.split(':', 1)[0]!r}: use ws(s)://, http(s):// or stdio:")


class AcpClient:
    """An ACP client that keeps its sessions alive through drops and agent restarts.

    Use it as an async context manager; leaving the block closes it.

    Args:
        endpoint: A URL (``ws://``, ``wss://``, ``http://``, ``https://``), ``stdio:COMMAND...``,
            or a :class:`~acp_client.transports.base.Connector`.
        protocol_version: The ACP version proposed in ``initialize`` (1 = stable, 2 = draft).
            The client speaks whatever supported version the agent answers with.
        client_info: Name and version sent to the agent.
        handlers: Answers to agent→client requests (permission, fs, terminal, elicitation);
            unset parts keep their safe defaults (see :mod:`acp_client.handlers`).
        retry: The reconnect policy; ``None`` disables reconnecting (a drop fails the client).
        request_timeout: Default timeout of requests other than prompts, in seconds.
        connect_timeout: Timeout of ``initialize`` on each (re)connection.
        probe_timeout: Timeout of each ``session/status`` probe during recovery.
        queue_while_reconnecting: Hold requests made during an outage (``True``) or fail them
            at once with :class:`~acp_client.exceptions.ConnectionLost`.
        max_queued_requests: The most requests held during an outage.
        max_queue_age: How long a held request waits before failing, in seconds.
        recovery_concurrency: How many sessions recover at once after a reconnect.
        headers, secret_headers, tls, cookies, limits: Network settings (see the transports).
            ``cookies`` defaults to one store per client, shared by every reconnect.
        transport_options: Extra keyword arguments for the connector built from ``endpoint``.
        clock: Time source (a :class:`~acp_client.testing.FakeClock` in tests).
        rng: Random source for retry jitter.
        on_resume, on_replay, on_new_session: Called with a
            :class:`~acp_client.state.RecoveryOutcome` when a session recovered on that path.
        on_recovery_failed: Called with the outcome when a session was abandoned.
        decide_recovery: Sees a :class:`~acp_client.state.RecoveryContext` and returns a
            :class:`~acp_client.state.RecoveryPath` (or ``None`` to keep the proposed one).
        on_state_change: Called with every new :class:`~acp_client.state.ConnectionState`.
        on_update: Called with every :class:`UpdateEvent` (sync callbacks inline; async ones in
            order on a dispatcher task).
        on_turn_interrupted: Called with a :class:`~acp_client.state.TurnInterrupted` when a
            drop cuts a prompt turn off.
        on_protocol_error: Called with each protocol error the agent commits.
        on_notification: Called with ``(method, params)`` for notifications other than
            ``session/update``.
        refresh_credentials: Called once when the agent refuses the credentials (401/403)
            during a (re)connect; it should update the connector's headers. A second refusal
            fails the client.
        keep_transcripts: Maintain a :class:`~acp_client.transcript.Transcript` per session.
    """

    def __init__(
        self,
        endpoint: str | Connector,
        *,
        protocol_version: int = 1,
        client_info: Implementation | None = None,
        handlers: ClientHandlers | None = None,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008 - frozen value
        request_timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        probe_timeout: float = 10.0,
        queue_while_reconnecting: bool = True,
        max_queued_requests: int = 100,
        max_queue_age: float = 60.0,
        recovery_concurrency: int = 4,
        headers: Mapping[str, str] | None = None,
        secret_headers: Collection[str] = (),
        tls: TlsConfig | None = None,
        cookies: CookieStore | None = None,
        limits: Limits | None = None,
        transport_options: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        on_resume: Callable[[RecoveryOutcome], Any] | None = None,
        on_replay: Callable[[RecoveryOutcome], Any] | None = None,
        on_new_session: Callable[[RecoveryOutcome], Any] | None = None,
        on_recovery_failed: Callable[[RecoveryOutcome], Any] | None = None,
        decide_recovery: Callable[[RecoveryContext], Any] | None = None,
        on_state_change: Callable[[ConnectionState], Any] | None = None,
        on_update: Callable[[UpdateEvent], Any] | None = None,
        on_turn_interrupted: Callable[[TurnInterrupted], Any] | None = None,
        on_protocol_error: Callable[[AcpError], Any] | None = None,
        on_notification: Callable[[str, Any], Any] | None = None,
        refresh_credentials: Callable[[], Any] | None = None,
        keep_transcripts: bool = True,
    ) -> None:
        if protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
            raise ConfigurationError(f"protocol_version must be one of {SUPPORTED_PROTOCOL_VERSIONS}")
        if recovery_concurrency < 1:
            raise ConfigurationError("recovery_concurrency must be at least 1")
        self.cookies = cookies if cookies is not None else CookieStore()
        if isinstance(endpoint, str):
            self._connector: Connector = connector_for(
                endpoint,
                headers=headers,
                secret_headers=secret_headers,
                tls=tls,
                cookies=self.cookies,
                limits=limits,
                **dict(transport_options or {}),
            )
        else:
            self._connector = endpoint
        self._proposed_version = protocol_version
        self._client_info = client_info or _CLIENT_INFO
        self._handlers = handlers or ClientHandlers()
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._probe_timeout = probe_timeout
        self._recovery_concurrency = recovery_concurrency
        self._clock: Clock = clock or SystemClock()
        self._callbacks: dict[str, Callable[..., Any] | None] = {
            "resume": on_resume,
            "replay": on_replay,
            "new_session": on_new_session,
            "recovery_failed": on_recovery_failed,
            "decide": decide_recovery,
            "state": on_state_change,
            "turn_interrupted": on_turn_interrupted,
            "protocol_error": on_protocol_error,
            "notification": on_notification,
        }
        self._update_listeners: list[Callable[[UpdateEvent], Any]] = []
        self._async_update_listeners: list[Callable[[UpdateEvent], Awaitable[Any]]] = []
        if on_update is not None:
            self.add_update_listener(on_update)
        self._keep_transcripts = keep_transcripts
        self._init: InitializeResponse | None = None
        self._version = protocol_version
        self._sessions: dict[str, _Tracked] = {}
        self._state_queues: list[asyncio.Queue[ConnectionState]] = []
        self._outcomes: collections.deque[RecoveryOutcome] = collections.deque(maxlen=_MAX_OUTCOMES)
        self._background: set[asyncio.Task[Any]] = set()
        self._dispatch_queue: asyncio.Queue[UpdateEvent] | None = None
        self._router = RequestRouter(
            self._handlers, session_roots=self._session_roots, protocol_version=lambda: self._version
        )
        self._supervisor = Supervisor(
            self._connector,
            initialize=self._initialize,
            recover=self._recover_all,
            policy=retry,
            clock=self._clock,
            queue=QueueOptions(enabled=queue_while_reconnecting, max_size=max_queued_requests, max_age=max_queue_age),
            on_state=self._on_state,
            on_drop=self._on_drop,
            on_request=self._router,
            on_notification=self._on_notification,
            on_protocol_error=self._on_protocol_error,
            refresh_credentials=refresh_credentials,
            request_timeout=request_timeout,
            rng=rng,
        )

    # -- lifecycle ----------------------------------------------------------------------------------

    async def __aenter__(self) -> AcpClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Connect and initialize (``async with`` does this).

        Raises:
            ConnectError / TlsVerificationError / HttpStatusError: The agent is unreachable.
            IncompatibleProtocolVersion: The agent speaks no version this client supports.
            RpcError: ``initialize`` was refused.
            ClientClosed: :meth:`aclose` was called while connecting.
        """
        self._emit_state(self._supervisor.state)
        await self._supervisor.start()

    async def aclose(self) -> None:
        """Close the connection and stop reconnecting. Pending requests fail with
        :class:`~acp_client.exceptions.ConnectionLost`; queued ones with ``ClientClosed``."""
        await self._supervisor.aclose()
        for tracked in self._sessions.values():
            if tracked.turn is not None and not tracked.turn.future.done():
                tracked.turn.future.set_exception(ClientClosed("the client was closed"))
            for queue in tracked.subscribers:
                queue.put_nowait(None)
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def notify_network_available(self) -> None:
        """Skip the current reconnect backoff (call when the OS reports the network is back)."""
        self._supervisor.notify_network_available()

    # -- properties -----------------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The current connection state."""
        return self._supervisor.state

    @property
    def protocol_version(self) -> int:
        """The negotiated ACP version."""
        return self._version

    @property
    def initialize_result(self) -> InitializeResponse:
        """What the agent answered to ``initialize`` on the current connection.

        Raises:
            ClientClosed: Not connected yet.
        """
        if self._init is None:
            raise ClientClosed("not connected")
        return self._init

    @property
    def agent_capabilities(self) -> Any:
        """The agent's capabilities (normalized across protocol versions)."""
        return self.initialize_result.agent_capabilities

    @property
    def agent_info(self) -> Implementation | None:
        return self.initialize_result.agent_info

    @property
    def connector(self) -> Connector:
        return self._connector

    @property
    def recovery_outcomes(self) -> list[RecoveryOutcome]:
        """The recovery outcomes so far, oldest first (the most recent 1000)."""
        return list(self._outcomes)

    async def state_changes(self) -> AsyncIterator[ConnectionState]:
        """Iterate over state changes from now on; ends after ``closed`` or ``failed``."""
        queue: asyncio.Queue[ConnectionState] = asyncio.Queue()
        self._state_queues.append(queue)
        try:
            if self.state.is_terminal:
                yield self.state
                return
            while True:
                state = await queue.get()
                yield state
                if state.is_terminal:
                    return
        finally:
            self._state_queues.remove(queue)

    def add_update_listener(self, listener: Callable[[UpdateEvent], Any]) -> Callable[[], None]:
        """Register a listener for every update; returns a function that removes it."""
        if inspect.iscoroutinefunction(listener):
            self._async_update_listeners.append(listener)
            return lambda: self._async_update_listeners.remove(listener)
        self._update_listeners.append(listener)
        return lambda: self._update_listeners.remove(listener)

    # -- sessions ---------------------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionHandle:
        """A handle on a session this client opened (by its current or any earlier id).

        Raises:
            SessionNotFound: The client does not track this session.
        """
        tracked = self._sessions.get(session_id)
        if tracked is None:
            raise SessionNotFound(f"this client does not track session {session_id!r}", {"sessionId": session_id})
        return SessionHandle(self, tracked)

    @property
    def sessions(self) -> list[SessionHandle]:
        """Handles on every session the client tracks (each once)."""
        return [SessionHandle(self, tracked) for tracked in self._tracked_sessions() if not tracked.abandoned]

    async def new_session(
        self,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        additional_directories: Sequence[str | Path] = (),
    ) -> Session:
        """``session/new``: start a session. The client tracks it for recovery."""
        cwd_str = str(cwd)
        extra = tuple(str(item) for item in additional_directories)
        request = NewSessionRequest(cwd=cwd_str, mcp_servers=tuple(mcp_servers), additional_directories=extra)
        result = await self._supervisor.call("session/new", lambda: self._wire(request))
        response = self._decode(NewSessionResponse, result)
        record = Session.from_new(response, cwd=cwd_str)
        self._track(record, cwd=cwd_str, mcp_servers=tuple(mcp_servers), additional_directories=extra)
        return record

    async def load_session(self, session_id: str, cwd: str | Path, *, mcp_servers: Sequence[McpServer] = ()) -> Session:
        """``session/load`` (v1): attach a stored session; its history arrives as replayed updates.

        Raises:
            CapabilityNotSupported: The agent does not advertise ``loadSession`` (or speaks v2).
            SessionNotFound: The agent does not know the session.
        """
        self._require("session/load")
        check_session_id(session_id)
        request = LoadSessionRequest(session_id=session_id, cwd=str(cwd), mcp_servers=tuple(mcp_servers))
        return await self._attach_session(request, "session/load", replay=True)

    async def resume_session(
        self,
        session_id: str,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        replay: bool = False,
    ) -> Session:
        """``session/resume``: attach a session; with ``replay=True`` (v2) the agent replays it.

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/resume``, or replay
                was asked on v1.
            SessionNotFound: The agent does not know the session.
        """
        self._require("session/resume")
        if replay and self._version < 2:
            raise CapabilityNotSupported("session/resume replayFrom", "protocol version 2")
        check_session_id(session_id)
        request = ResumeSessionRequest(
            session_id=session_id,
            cwd=str(cwd),
            mcp_servers=tuple(mcp_servers),
            replay_from=ReplayFromStart() if replay else None,
        )
        return await self._attach_session(request, "session/resume", replay=replay)

    async def fork_session(self, session_id: str, cwd: str | Path, *, mcp_servers: Sequence[McpServer] = ()) -> Session:
        """``session/fork``: a new session starting from another's history (tracked too).

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/fork``.
        """
        self._require("session/fork")
        cwd_str = str(cwd)
        parent = self._current_id(session_id)
        request = ForkSessionRequest(session_id=parent, cwd=cwd_str, mcp_servers=tuple(mcp_servers))
        result = await self._supervisor.call("session/fork", lambda: self._wire(request))
        record = Session.from_fork(self._decode(ForkSessionResponse, result), cwd=cwd_str, forked_from=parent)
        self._track(record, cwd=cwd_str, mcp_servers=tuple(mcp_servers), additional_directories=())
        return record

    async def list_sessions(self, *, cwd: str | Path | None = None, cursor: str | None = None) -> SessionPage:
        """``session/list``: one page of the agent's sessions (retried transparently on a drop).

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/list``.
        """
        self._require("session/list")
        request = ListSessionsRequest(cwd=str(cwd) if cwd is not None else None, cursor=cursor)
        result = await self._supervisor.call("session/list", lambda: self._wire(request), idempotent=True)
        response = self._decode(ListSessionsResponse, result)
        return SessionPage(tuple(Session.from_info(info) for info in response.sessions), response.next_cursor)

    async def iter_sessions(self, *, cwd: str | Path | None = None) -> AsyncIterator[Session]:
        """Every session ``session/list`` reports, following cursors."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = await self.list_sessions(cwd=cwd, cursor=cursor)
            for session in page.sessions:
                yield session
            if page.next_cursor is None or page.next_cursor in seen:
                return
            seen.add(page.next_cursor)
            cursor = page.next_cursor

    async def session_status(self, session_id: str) -> Session:
        """``session/status``: is the session in the agent's memory, stored, or unknown?

        An unknown session (-32002) comes back as a :class:`Session` whose ``status`` is
        ``SessionStatus.UNKNOWN``. Retried transparently on a drop (it has no side effects).

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/status``.
        """
        self._require("session/status")
        current = check_session_id(self._current_id(session_id))

        def params() -> Any:  # at send time: a recovery it waited for may have renamed the session
            nonlocal current
            current = self._current_id(session_id)
            return self._wire(SessionStatusRequest(session_id=current))

        try:
            result = await self._supervisor.call("session/status", params, idempotent=True)
        except SessionNotFound:
            return Session(session_id=current, status=SessionStatus.UNKNOWN)
        response = self._decode(SessionStatusResponse, result)
        record = Session.from_status(current, response)
        tracked = self._sessions.get(current)
        if tracked is not None:
            tracked.record = tracked.record.merge(record)
            return tracked.record
        return record

    async def close_session(self, session_id: str) -> None:
        """``session/close``: end a session and stop tracking it.

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/close``.
        """
        self._require("session/close")
        # The id is resolved when the request is sent: a recovery it waited for may have renamed it.
        await self._supervisor.call(
            "session/close", lambda: self._wire(CloseSessionRequest(session_id=self._current_id(session_id)))
        )
        self._untrack(self._current_id(session_id))

    def forget_session(self, session_id: str) -> None:
        """Stop tracking a session (it will not be recovered after a drop); nothing is sent."""
        self._untrack(self._current_id(session_id))

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        """``session/set_mode``."""
        tracked = self._sessions.get(session_id)
        request_id = self._current_id(session_id)
        await self._supervisor.call(
            "session/set_mode",
            lambda: self._wire(
                SetSessionModeRequest(session_id=tracked.session_id if tracked else request_id, mode_id=mode_id)
            ),
        )

    async def prompt(
        self,
        session_id: str,
        prompt: str | ContentBlock | Iterable[ContentBlock],
        *,
        timeout: float | None = None,
    ) -> PromptResult:
        """``session/prompt``: run one turn and wait for it to end.

        v1 ends with the response's ``stopReason``; v2 with the ``state_update`` ``idle`` that
        follows the acceptance. A turn cut off by a drop is reported (``on_turn_interrupted``)
        and raises; it is never re-sent.

        Raises:
            TurnInProgress: A turn is already running in this session.
            RecoveryFailed: Recovery abandoned the session, before or while the prompt waited
                for it (the prompt was not sent).
            ConnectionLost: The connection dropped during the turn (``may_have_executed``).
            RequestTimeout: The turn did not end within ``timeout``.
            RpcError: The agent refused the prompt.
        """
        tracked = self._sessions.get(session_id)
        if tracked is None:
            raise SessionNotFound(f"this client does not track session {session_id!r}", {"sessionId": session_id})
        if tracked.turn is not None:
            raise TurnInProgress(f"a turn is already running in session {tracked.session_id}")
        if tracked.abandoned:  # not attached to the connection: the agent must not get the prompt
            raise RecoveryFailed(tracked.session_id, "abandoned by recovery; not attached to the connection")
        blocks = _content(prompt)
        loop = asyncio.get_running_loop()
        turn = _Turn(blocks, loop.create_future())
        tracked.turn = turn

        def params() -> Any:
            # Built when the prompt is actually sent (after any recovery it waited for): only then
            # is it part of the conversation, and only then does a new turn begin.
            if turn.future.done():  # the recovery it waited for abandoned the session: not sent
                turn.future.result()
            if tracked.window_timer is not None:  # whatever arrives from now on is live
                self._close_window(tracked)
            if self._version < 2 and self._keep_transcripts:  # v1 agents do not echo prompts
                tracked.transcript.add_user_prompt(blocks)
            return self._wire(PromptRequest(session_id=tracked.session_id, prompt=blocks))

        try:
            result = await self._supervisor.call("session/prompt", params, timeout=timeout, on_answer=turn.accept)
            response = self._decode(PromptResponse, result)
            if self._version < 2 or response.stop_reason is not None:
                tracked.transcript.end_turn()
                return PromptResult(response.stop_reason, response.message_id, response.usage)
            turn.message_id = response.message_id
            if timeout is None:
                ended = await turn.future
            else:
                ended = await _wait_with_clock(turn.future, timeout, self._clock, "session/prompt")
            return PromptResult(ended.stop_reason, response.message_id, ended.usage)
        except ConnectionLost as exc:
            if exc.may_have_executed and not self._supervisor.closing:  # a drop, not the app closing
                await _call_app(self._callbacks["turn_interrupted"], TurnInterrupted(tracked.session_id, blocks))
            raise
        finally:
            if tracked.turn is turn:
                tracked.turn = None

    async def cancel(self, session_id: str) -> None:
        """``session/cancel``: ask the agent to end the running turn (a notification).

        Pending permission requests of the session are answered ``cancelled``.
        """
        self._router.cancel_session(self._current_id(session_id))
        await self._supervisor.notify(
            "session/cancel", lambda: self._wire(CancelNotification(session_id=self._current_id(session_id)))
        )

    async def request(
        self, method: str, params: Any = None, *, timeout: float | _Default | None = DEFAULT_TIMEOUT
    ) -> Any:
        """Send any request (e.g. an ``_``-prefixed extension method) and return its raw result.

        ``timeout`` defaults to the client's ``request_timeout``; ``None`` waits as long as it takes.
        """
        return await self._supervisor.call(method, lambda: params, timeout=timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send any notification."""
        await self._supervisor.notify(method, lambda: params)

    # -- internals: plumbing --------------------------------------------------------------------------

    def _wire(self, value: Any) -> Any:
        return to_wire(value, protocol_version=self._version)

    def _decode(self, cls: type[T], data: Any) -> T:
        return from_wire(cls, data, protocol_version=self._version)

    def _require(self, method: str) -> None:
        init = self._init
        if init is None:
            raise ClientClosed("not connected")
        if method == "session/load" and self._version >= 2:
            raise CapabilityNotSupported(method, "protocol version 1 (v2 replays with session/resume)")
        if not init.agent_capabilities.supports(method):
            raise CapabilityNotSupported(method, init.agent_capabilities.capability_path(method, self._version))

    def _current_id(self, session_id: str) -> str:
        tracked = self._sessions.get(session_id)
        return tracked.session_id if tracked is not None else session_id

    def _track(
        self, record: Session, *, cwd: str, mcp_servers: tuple[McpServer, ...], additional_directories: tuple[str, ...]
    ) -> _Tracked:
        existing = self._sessions.get(record.session_id)
        if existing is not None and not existing.abandoned:
            existing.record = existing.record.merge(record)
            return existing
        tracked = _Tracked(record, cwd=cwd, mcp_servers=mcp_servers, additional_directories=additional_directories)
        self._sessions[record.session_id] = tracked
        return tracked

    def _tracked_sessions(self) -> list[_Tracked]:
        """Each tracked session once (a recreated one is also keyed by its earlier ids)."""
        return list({id(tracked): tracked for tracked in self._sessions.values()}.values())

    def _untrack(self, session_id: str) -> None:
        tracked = self._sessions.get(session_id)
        if tracked is None:
            return
        for key in [key for key, value in self._sessions.items() if value is tracked]:
            del self._sessions[key]
        turn = tracked.turn
        if turn is not None and not turn.future.done():
            # Untracked, its v2 idle update can no longer end the turn: do not wait for it.
            error = SessionNotFound(f"session {session_id} is no longer tracked", {"sessionId": session_id})
            turn.future.set_exception(error)
            turn.future.exception()  # a v1 prompt() never awaits it; mark it retrieved
        for queue in tracked.subscribers:
            queue.put_nowait(None)

    def _session_roots(self, session_id: str) -> list[Path]:
        tracked = self._sessions.get(session_id)
        if tracked is None:
            return []
        return [Path(tracked.cwd), *(Path(item) for item in tracked.additional_directories)]

    def _open_window(self, tracked: _Tracked, *, replay: bool, conn: Connection | None) -> Callable[[], None]:
        """Open the window in which updates for ``tracked`` are replay (``replay``) or a resume
        snapshot; returns the function that closes it when the answer arrives.

        On a transport whose messages do not share one ordered stream (``TransportInfo.ordered``
        is false: Streamable HTTP's several SSE streams) the answer can overtake the last replayed
        updates; there the window stays open for ``_REPLAY_GRACE`` seconds after the answer (or
        until the next prompt).
        """
        self._close_window(tracked)
        if replay:
            tracked.replaying = True
            tracked.replayed = 0
            if self._keep_transcripts:
                tracked.transcript.begin_replay()
        else:
            tracked.snapshot_window = True
        unordered = conn is not None and not conn.transport.info.ordered

        def answered() -> None:
            if tracked.window_timer is not None or not (tracked.replaying or tracked.snapshot_window):
                return
            if unordered:
                tracked.window_timer = self._clock.call_later(_REPLAY_GRACE, lambda: self._close_window(tracked))
            else:
                self._close_window(tracked)

        return answered

    def _close_window(self, tracked: _Tracked) -> None:
        if tracked.window_timer is not None:
            tracked.window_timer.cancel()
            tracked.window_timer = None
        if tracked.replaying:
            tracked.transcript.end_replay()
        tracked.replaying = False
        tracked.snapshot_window = False

    async def _attach_session(self, request: Any, method: str, *, replay: bool) -> Session:
        """An app-initiated load / resume: track the session, attach it, and forget it again if
        the agent refused (a session this client did not track before)."""
        known = request.session_id in self._sessions
        tracked = self._track(
            Session(session_id=request.session_id, cwd=request.cwd),
            cwd=request.cwd,
            mcp_servers=tuple(request.mcp_servers),
            additional_directories=(),
        )
        try:
            result = await self._attach_call(tracked, method, lambda: self._wire(request), replay=replay)
        except BaseException:
            if not known:
                self._untrack(request.session_id)
            raise
        tracked.record = self._record_after_attach(tracked, method, result)
        return tracked.record

    def _record_after_attach(self, tracked: _Tracked, method: str, result: Any) -> Session:
        """The session record after a successful ``session/load`` or ``session/resume``."""
        sid, cwd = tracked.session_id, tracked.cwd
        if method == "session/load":
            fresh = Session.from_load(sid, self._decode(LoadSessionResponse, result), cwd=cwd)
        else:
            fresh = Session.from_resume(sid, self._decode(ResumeSessionResponse, result), cwd=cwd)
        return tracked.record.merge(fresh)

    async def _attach_call(self, tracked: _Tracked, method: str, params: Callable[[], Any], *, replay: bool) -> Any:
        """An app-initiated load / resume: updates before the answer are replay (or a snapshot)."""
        answered = self._open_window(tracked, replay=replay, conn=self._supervisor.connection)
        try:
            return await self._supervisor.call(method, params, on_answer=answered)
        finally:
            answered()

    # -- internals: connection events -----------------------------------------------------------------

    async def _initialize(self, conn: Connection) -> InitializeResponse:
        proposed = self._proposed_version
        for _ in range(2):
            request = InitializeRequest(
                protocol_version=proposed, client_info=self._client_info, client_capabilities=self._capabilities()
            )
            try:
                result = await conn.request(
                    "initialize", to_wire(request, protocol_version=proposed), timeout=self._connect_timeout
                )
            except UnsupportedProtocolVersion as exc:
                supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
                common = [v for v in (supported or []) if v in SUPPORTED_PROTOCOL_VERSIONS and v != proposed]
                if not common:
                    raise
                proposed = max(common)
                continue
            answered = result.get("protocolVersion") if isinstance(result, dict) else None
            if answered not in SUPPORTED_PROTOCOL_VERSIONS:
                raise IncompatibleProtocolVersion(
                    f"the agent answered protocol version {answered!r}; this client speaks "
                    f"{', '.join(map(str, SUPPORTED_PROTOCOL_VERSIONS))}",
                    requested=proposed,
                    answered=answered,
                )
            response = from_wire(InitializeResponse, result, protocol_version=answered)
            self._init = response
            self._version = response.protocol_version
            return response
        raise IncompatibleProtocolVersion("no common protocol version", requested=proposed, answered=None)

    def _capabilities(self) -> ClientCapabilities:
        fs = self._handlers.file_system
        return ClientCapabilities(
            fs=FileSystemCapability(read_text_file=bool(fs and fs.read), write_text_file=bool(fs and fs.write)),
            terminal=self._handlers.terminal is not None,
        )

    def _on_state(self, state: ConnectionState) -> None:
        self._emit_state(state)

    def _emit_state(self, state: ConnectionState) -> None:
        for queue in self._state_queues:
            queue.put_nowait(state)
        callback = self._callbacks["state"]
        if callback is not None:
            try:
                result = callback(state)
                if inspect.isawaitable(result):
                    self._spawn(result)
            except Exception:
                logger.exception("on_state_change raised")

    def _spawn(self, awaitable: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(awaitable)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _on_drop(self, cause: TransportError) -> None:
        for tracked in self._tracked_sessions():
            turn = tracked.turn
            if turn is not None and not turn.future.done():
                turn.future.set_exception(ConnectionLost("session/prompt", may_have_executed=True, cause=cause))
                turn.future.exception()  # the prompt() caller may already be gone; mark it retrieved
            self._close_window(tracked)

    def _on_protocol_error(self, error: AcpError) -> None:
        callback = self._callbacks["protocol_error"]
        if callback is not None:
            result = callback(error)
            if inspect.isawaitable(result):
                self._spawn(result)

    def _on_notification(self, method: str, params: Any) -> None:
        if method != "session/update":
            callback = self._callbacks["notification"]
            if callback is not None:
                result = callback(method, params)
                if inspect.isawaitable(result):
                    self._spawn(result)
            return
        try:
            note: SessionNotification = decode_session_notification(params, protocol_version=self._version)
        except InvalidMessage as exc:
            self._on_protocol_error(exc)
            logger.warning("undecodable session/update: %s", exc)
            return
        tracked = self._sessions.get(note.session_id)
        replay = False
        if tracked is not None:
            replay = tracked.replaying
            if replay:
                tracked.replayed += 1
            if self._keep_transcripts:
                tracked.transcript.apply(note.update)
            update = note.update
            if (
                update.kind == "state_update"
                and getattr(update, "state", None) == "idle"
                and tracked.turn is not None
                and tracked.turn.accepted
                and not replay
                and not tracked.snapshot_window
                and not tracked.turn.future.done()
            ):
                tracked.turn.future.set_result(
                    PromptResult(
                        getattr(update, "stop_reason", None), tracked.turn.message_id, getattr(update, "usage", None)
                    )
                )
        event = UpdateEvent(note.session_id, note.update, replay)
        if tracked is not None:
            for queue in tracked.subscribers:
                queue.put_nowait(event)
        for listener in self._update_listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("update listener raised")
        if self._async_update_listeners:
            if self._dispatch_queue is None:
                self._dispatch_queue = asyncio.Queue()
                self._spawn(self._dispatch_updates(self._dispatch_queue))
            self._dispatch_queue.put_nowait(event)

    async def _dispatch_updates(self, queue: asyncio.Queue[UpdateEvent]) -> None:
        while True:
            event = await queue.get()
            for listener in list(self._async_update_listeners):
                try:
                    await listener(event)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("async update listener raised")

    # -- internals: recovery ----------------------------------------------------------------------------

    async def _recover_all(self, conn: Connection, init: InitializeResponse) -> None:
        sessions = [tracked for tracked in self._tracked_sessions() if not tracked.abandoned]
        if not sessions:
            return
        semaphore = asyncio.Semaphore(self._recovery_concurrency)

        async def one(tracked: _Tracked) -> RecoveryOutcome:
            async with semaphore:
                return await self._recover_session(conn, tracked)

        results = await asyncio.gather(*(one(tracked) for tracked in sessions), return_exceptions=True)
        for result in results:
            if isinstance(result, ConnectionLost | TransportError | asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                logger.error("recovering a session raised", exc_info=result)
        for result in results:
            if isinstance(result, RecoveryOutcome):
                await self._report_outcome(result)

    async def _report_outcome(self, outcome: RecoveryOutcome) -> None:
        self._outcomes.append(outcome)
        logger.info(
            "session %s recovered by %s%s in %.3fs",
            outcome.previous_session_id,
            outcome.path.value,
            f" as {outcome.session_id}" if outcome.session_id != outcome.previous_session_id else "",
            outcome.duration,
        )
        key = {
            RecoveryPath.RESUME: "resume",
            RecoveryPath.REPLAY: "replay",
            RecoveryPath.NEW_SESSION: "new_session",
            RecoveryPath.ABANDON: "recovery_failed",
        }[outcome.path]
        await _call_app(self._callbacks[key], outcome)

    async def _recover_session(self, conn: Connection, tracked: _Tracked) -> RecoveryOutcome:
        start = self._clock.monotonic()
        previous = tracked.session_id
        caps = self._recovery_caps()
        probe = Probe.NOT_PROBED
        raw_status: str | None = None
        state: Any = None
        if _recovery.should_probe(caps):
            try:
                result = await conn.request(
                    "session/status", self._wire(SessionStatusRequest(session_id=previous)), timeout=self._probe_timeout
                )
                status = self._decode(SessionStatusResponse, result)
                raw_status, state = status.raw_status, status.state
                probe = Probe.ACTIVE if status.status is SessionStatus.ACTIVE else Probe.INACTIVE
                tracked.record = tracked.record.merge(Session.from_status(previous, status))
            except SessionNotFound:
                probe = Probe.NOT_FOUND
            except (RpcError, RequestTimeout, InvalidMessage) as exc:
                logger.info("status probe for %s failed (%s): falling back", previous, exc)
                probe = Probe.FAILED
        decision = _recovery.decide(probe, caps, self._version)
        planned = decision.path
        steps, notes = decision.steps, decision.notes
        decide = self._callbacks["decide"]
        if decide is not None:
            context = RecoveryContext(
                session_id=previous,
                probe=probe,
                raw_status=raw_status,
                state=state,
                proposed=planned,
                protocol_version=self._version,
                capabilities={"status": caps.status, "resume": caps.resume, "load": caps.load},
            )
            chosen = await _call_app(decide, context)
            if chosen is not None and RecoveryPath(chosen) is not planned:
                planned = RecoveryPath(chosen)
                steps, extra = _recovery.steps_for(planned, caps, self._version)
                notes = (*notes, f"app chose {planned.value}", *extra)
        history: list[tuple[str, str]] = []
        error: BaseException | None = None
        index: int | None = 0 if steps else None
        while index is not None:
            step = steps[index]
            try:
                await self._run_step(conn, tracked, step)
            except SessionNotFound as exc:
                history.append((step.value, "not_found"))
                error = exc
                index = _recovery.next_step(steps, index, StepFailure.NOT_FOUND)
                continue
            except (RpcError, RequestTimeout, InvalidMessage) as exc:
                history.append((step.value, f"error: {exc}"))
                error = exc
                index = _recovery.next_step(steps, index, StepFailure.REFUSED)
                continue
            history.append((step.value, "ok"))
            path = _recovery.path_of(step, self._version)
            return RecoveryOutcome(
                path=path,
                planned=planned,
                previous_session_id=previous,
                session_id=tracked.session_id,
                continuity=path is not RecoveryPath.NEW_SESSION,
                probe=probe,
                raw_status=raw_status,
                state=state,
                steps=tuple(history),
                notes=notes,
                replayed_updates=tracked.replayed if step in (Step.LOAD, Step.RESUME_REPLAY) else 0,
                duration=self._clock.monotonic() - start,
            )
        tracked.abandoned = True
        turn = tracked.turn
        if turn is not None and not turn.future.done():
            turn.future.set_exception(RecoveryFailed(previous, "abandoned", cause=error))
        for queue in tracked.subscribers:
            queue.put_nowait(None)
        return RecoveryOutcome(
            path=RecoveryPath.ABANDON,
            planned=planned,
            previous_session_id=previous,
            session_id=None,
            continuity=False,
            probe=probe,
            raw_status=raw_status,
            state=state,
            steps=tuple(history),
            notes=notes,
            duration=self._clock.monotonic() - start,
            error=error,
        )

    def _recovery_caps(self) -> _recovery.Capabilities:
        assert self._init is not None
        caps = self._init.agent_capabilities
        return _recovery.Capabilities(
            status=caps.supports("session/status"),
            resume=caps.supports("session/resume"),
            load=self._version < 2 and caps.supports("session/load"),
        )

    async def _run_step(self, conn: Connection, tracked: _Tracked, step: Step) -> None:
        sid, cwd, servers = tracked.session_id, tracked.cwd, tracked.mcp_servers
        if step is Step.NEW:
            request = NewSessionRequest(
                cwd=cwd, mcp_servers=servers, additional_directories=tracked.additional_directories
            )
            result = await conn.request("session/new", self._wire(request), timeout=self._request_timeout)
            response = self._decode(NewSessionResponse, result)
            tracked.session_id = response.session_id
            tracked.record = Session.from_new(response, cwd=cwd)
            tracked.transcript = Transcript()
            self._sessions[response.session_id] = tracked
            return
        replay = step in (Step.LOAD, Step.RESUME_REPLAY)
        if step is Step.LOAD:
            method, params = (
                "session/load",
                self._wire(LoadSessionRequest(session_id=sid, cwd=cwd, mcp_servers=servers)),
            )
        else:
            resume = ResumeSessionRequest(
                session_id=sid,
                cwd=cwd,
                mcp_servers=servers,
                replay_from=ReplayFromStart() if step is Step.RESUME_REPLAY else None,
            )
            method, params = "session/resume", self._wire(resume)
        answered = self._open_window(tracked, replay=replay, conn=conn)
        try:
            result = await conn.request(method, params, timeout=self._request_timeout, on_answer=answered)
        finally:
            answered()
        tracked.record = self._record_after_attach(tracked, method, result)


async def _wait_with_clock(future: asyncio.Future[T], timeout: float, clock: Clock, method: str) -> T:
    def expire() -> None:
        if not future.done():
            future.set_exception(RequestTimeout(method, timeout))

    timer = clock.call_later(timeout, expire)
    try:
        return await future
    finally:
        timer.cancel()


class SessionHandle:
    """A live handle on one session the client tracks. It follows the session across
    recoveries: after a new-session recovery, :attr:`session_id` is the new id."""

    def __init__(self, client: AcpClient, tracked: _Tracked) -> None:
        self._client = client
        self._tracked = tracked

    def __repr__(self) -> str:
        return f"<SessionHandle {self._tracked.session_id}>"

    @property
    def session_id(self) -> str:
        """The current session id."""
        return self._tracked.session_id

    @property
    def record(self) -> Session:
        """The latest :class:`~acp_client.types.Session` record."""
        return self._tracked.record

    @property
    def cwd(self) -> str:
        return self._tracked.cwd

    @property
    def transcript(self) -> Transcript:
        """The conversation so far (rebuilt without duplicates after a replay)."""
        return self._tracked.transcript

    @property
    def turn_running(self) -> bool:
        return self._tracked.turn is not None

    @property
    def abandoned(self) -> bool:
        """Whether recovery gave up on this session."""
        return self._tracked.abandoned

    async def prompt(
        self, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: float | None = None
    ) -> PromptResult:
        """Run one turn (see :meth:`AcpClient.prompt`)."""
        return await self._client.prompt(self._tracked.session_id, prompt, timeout=timeout)

    async def cancel(self) -> None:
        """Cancel the running turn."""
        await self._client.cancel(self._tracked.session_id)

    async def status(self) -> Session:
        """Probe ``session/status``."""
        return await self._client.session_status(self._tracked.session_id)

    async def close(self) -> None:
        """Close the session on the agent and stop tracking it."""
        await self._client.close_session(self._tracked.session_id)

    async def updates(self) -> AsyncIterator[UpdateEvent]:
        """Iterate over this session's updates from now on (ends when it is closed or abandoned)."""
        queue: asyncio.Queue[UpdateEvent | None] = asyncio.Queue()
        self._tracked.subscribers.append(queue)
        try:
            while True:
                event = await queue.get()
                if event is None:
                    return
                yield event
        finally:
            self._tracked.subscribers.remove(queue)
