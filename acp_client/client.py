"""The client facade: :class:`AcpClient` and :class:`SessionHandle`.

::

    async with AcpClient("ws://127.0.0.1:8000/acp", callbacks=Callbacks(on_new_session=warn_user)) as client:
        session = await client.new_session(cwd="/home/me/project")
        result = await session.prompt("Summarize the README")

The client connects, negotiates the protocol version, and from then on keeps the connection alive:
after a drop it reconnects under its :class:`~acp_client.retry.RetryPolicy`, probes
``session/status`` for every session it opened, and recovers each one on the right path (resume,
replay, or a new session), telling the app through callbacks before any request queued during the
outage is sent.

The work is done underneath, one concern per module, wired together by :mod:`._engine`: the session
table (:mod:`._sessions`, no I/O), the recoverer (:mod:`._recoverer`), the supervisor
(:mod:`._supervisor`), version negotiation (:mod:`._handshake`) and callback delivery
(:mod:`._delivery`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._connection import DEFAULT_TIMEOUT, _Default
from ._engine import Engine
from ._handshake import SUPPORTED_PROTOCOL_VERSIONS
from ._sessions import Tracked
from ._version import __version__
from .clock import Clock, SystemClock
from .config import Callbacks, QueueOptions, Timeouts, check_instance
from .exceptions import (
    CapabilityNotSupported,
    ClientClosed,
    ConfigurationError,
    SessionNotFound,
)
from .handlers import ClientHandlers
from .retry import RetryPolicy
from .state import ConnectionState, PromptResult, RecoveryOutcome, SessionPage, UpdateEvent
from .transcript import Transcript
from .transports import CookieStore, TlsConfig
from .transports._security import check_session_id
from .transports.base import Connector, Limits
from .transports.endpoint import connector_for
from .types import (
    AgentCapabilities,
    CancelNotification,
    CloseSessionRequest,
    ContentBlock,
    ForkSessionRequest,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    McpServer,
    NewSessionRequest,
    NewSessionResponse,
    ReplayFromStart,
    ResumeSessionRequest,
    Session,
    SessionStatus,
    SessionStatusRequest,
    SessionStatusResponse,
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

_CLIENT_INFO = Implementation(name="acp-reconnect", version=__version__, title="acp_client")


def _content(prompt: str | ContentBlock | Iterable[ContentBlock]) -> tuple[ContentBlock, ...]:
    if isinstance(prompt, str):
        return (TextContent(text=prompt),)
    if attrs.has(type(prompt)):
        return (prompt,)  # type: ignore[return-value]
    return tuple(prompt)  # type: ignore[arg-type]


def _check_options(protocol_version: object, recovery_concurrency: object, options: Mapping[str, Any]) -> None:
    check_instance("protocol_version", protocol_version, int)
    if protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise ConfigurationError(f"protocol_version must be one of {SUPPORTED_PROTOCOL_VERSIONS}")
    check_instance("recovery_concurrency", recovery_concurrency, int)
    assert isinstance(recovery_concurrency, int)
    if recovery_concurrency < 1:
        raise ConfigurationError("recovery_concurrency must be at least 1")
    kinds: dict[str, type | tuple[type, ...]] = {
        "client_info": Implementation,
        "handlers": ClientHandlers,
        "retry": RetryPolicy,
        "callbacks": Callbacks,
        "timeouts": Timeouts,
        "queue": QueueOptions,
        "headers": Mapping,
        "tls": TlsConfig,
        "cookies": CookieStore,
        "limits": Limits,
        "transport_options": Mapping,
        "clock": Clock,
        "rng": random.Random,
    }
    for name, kind in kinds.items():
        check_instance(name, options[name], kind, optional=True)
    check_instance("keep_transcripts", options["keep_transcripts"], bool)
    secret = options["secret_headers"]
    if isinstance(secret, str) or not all(isinstance(item, str) for item in secret):
        raise ConfigurationError("secret_headers must be a collection of header names")


class AcpClient:
    """An ACP client that keeps its sessions alive through drops and agent restarts.

    Use it as an async context manager; leaving the block closes it. Every option is checked here
    (a bad one raises :class:`~acp_client.exceptions.ConfigurationError` naming it).

    Args:
        endpoint: A URL (``ws://``, ``wss://``, ``http://``, ``https://``), ``stdio:COMMAND...``,
            or a :class:`~acp_client.transports.base.Connector`.
        protocol_version: The ACP version proposed in ``initialize`` (1 = stable, 2 = draft).
            The client speaks whatever supported version the agent answers with.
        client_info: Name and version sent to the agent.
        handlers: Answers to agent→client requests (see :mod:`acp_client.handlers`).
        retry: The reconnect policy; ``None`` disables reconnecting (a drop fails the client).
        callbacks: What the app is told and asked (:class:`~acp_client.config.Callbacks`).
        timeouts: Request, connect and probe timeouts (:class:`~acp_client.config.Timeouts`).
        queue: How requests made during an outage wait (:class:`~acp_client.config.QueueOptions`).
        recovery_concurrency: How many sessions recover at once after a reconnect.
        headers, secret_headers, tls, cookies, limits: Network settings (see the transports).
            ``cookies`` defaults to one store per client, shared by every reconnect and cleared
            by :meth:`aclose` (a store the app passes in is left as it is).
        transport_options: Extra keyword arguments for the connector built from ``endpoint``.
        clock: Time source (a :class:`~acp_client.testing.FakeClock` in tests).
        rng: Random source for retry jitter.
        keep_transcripts: Maintain a :class:`~acp_client.transcript.Transcript` per session.

    Raises:
        ConfigurationError: An invalid option.
    """

    def __init__(
        self,
        endpoint: str | Connector,
        *,
        protocol_version: int = 1,
        client_info: Implementation | None = None,
        handlers: ClientHandlers | None = None,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008 - frozen value
        callbacks: Callbacks | None = None,
        timeouts: Timeouts | None = None,
        queue: QueueOptions | None = None,
        recovery_concurrency: int = 4,
        headers: Mapping[str, str] | None = None,
        secret_headers: Collection[str] = (),
        tls: TlsConfig | None = None,
        cookies: CookieStore | None = None,
        limits: Limits | None = None,
        transport_options: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        keep_transcripts: bool = True,
    ) -> None:
        options = dict(locals())
        _check_options(protocol_version, recovery_concurrency, options)
        check_instance("endpoint", endpoint, (str, Connector))
        self.cookies = cookies if cookies is not None else CookieStore()
        self._owns_cookies = cookies is None  # ours is cleared on aclose(); the app's is its own
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
        self._engine = Engine(
            self._connector,
            protocol_version=protocol_version,
            client_info=client_info or _CLIENT_INFO,
            handlers=handlers or ClientHandlers(),
            retry=retry,
            callbacks=callbacks or Callbacks(),
            timeouts=timeouts or Timeouts(),
            queue=queue or QueueOptions(),
            recovery_concurrency=recovery_concurrency,
            clock=clock or SystemClock(),
            rng=rng,
            keep_transcripts=keep_transcripts,
        )
        self._table = self._engine.table
        self._supervisor = self._engine.supervisor

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
        self._engine.emit_state(self._supervisor.state)
        await self._supervisor.start()

    async def aclose(self) -> None:
        """Close the connection and stop reconnecting. Pending requests fail with
        :class:`~acp_client.exceptions.ConnectionLost`; queued ones with ``ClientClosed``."""
        await self._engine.aclose()
        if self._owns_cookies:
            self.cookies.clear()

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
        return self._engine.version

    @property
    def initialize_result(self) -> InitializeResponse:
        """What the agent answered to ``initialize`` on the current connection.

        Raises:
            ClientClosed: Not connected yet.
        """
        init = self._engine.init
        if init is None:
            raise ClientClosed("not connected")
        return init

    @property
    def agent_capabilities(self) -> AgentCapabilities:
        """The agent's capabilities (normalized across protocol versions)."""
        return self.initialize_result.agent_capabilities

    @property
    def agent_info(self) -> Implementation | None:
        return self.initialize_result.agent_info

    @property
    def connector(self) -> Connector:
        return self._connector

    @property
    def callbacks(self) -> Callbacks:
        """The app's callbacks (as given)."""
        return self._engine.callbacks

    @property
    def timeouts(self) -> Timeouts:
        return self._engine.timeouts

    @property
    def recovery_outcomes(self) -> list[RecoveryOutcome]:
        """The recovery outcomes so far, oldest first (the most recent 1000)."""
        return list(self._engine.recoverer.outcomes)

    async def state_changes(self) -> AsyncIterator[ConnectionState]:
        """Iterate over state changes from now on; ends after ``closed`` or ``failed``."""
        queue: asyncio.Queue[ConnectionState] = asyncio.Queue()
        self._engine.state_queues.append(queue)
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
            self._engine.state_queues.remove(queue)

    def add_update_listener(self, listener: Callable[[UpdateEvent], Any]) -> Callable[[], None]:
        """Register a listener for every update (like ``Callbacks.on_update``); returns a
        function that removes it."""
        listeners = self._engine.update_listeners
        listeners.append(listener)
        return lambda: listeners.remove(listener)

    # -- sessions ---------------------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionHandle:
        """A handle on a session this client opened (by its current or any earlier id).

        Raises:
            SessionNotTracked: The client does not track this session.
        """
        return SessionHandle(self, self._table.require(session_id))

    @property
    def sessions(self) -> list[SessionHandle]:
        """Handles on every session the client tracks (each once)."""
        return [SessionHandle(self, tracked) for tracked in self._table.live()]

    async def new_session(
        self,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        additional_directories: Sequence[str | Path] = (),
    ) -> SessionHandle:
        """``session/new``: start a session. The client tracks it for recovery.

        Returns:
            The live handle (its :attr:`~SessionHandle.record` is the session record).
        """
        cwd_str = str(cwd)
        extra = tuple(str(item) for item in additional_directories)
        request = NewSessionRequest(cwd=cwd_str, mcp_servers=tuple(mcp_servers), additional_directories=extra)
        result = await self._supervisor.call("session/new", lambda: self._engine.wire(request))
        record = Session.from_new(self._engine.decode(NewSessionResponse, result), cwd=cwd_str)
        tracked = self._table.track(record, cwd=cwd_str, mcp_servers=tuple(mcp_servers), additional_directories=extra)
        return SessionHandle(self, tracked)

    async def load_session(
        self, session_id: str, cwd: str | Path, *, mcp_servers: Sequence[McpServer] = ()
    ) -> SessionHandle:
        """``session/load`` (v1): attach a stored session; its history arrives as replayed updates.

        Raises:
            CapabilityNotSupported: The agent does not advertise ``loadSession`` (or speaks v2).
            SessionNotFound: The agent does not know the session.
        """
        self._engine.require("session/load")
        check_session_id(session_id)
        request = LoadSessionRequest(session_id=session_id, cwd=str(cwd), mcp_servers=tuple(mcp_servers))
        return SessionHandle(self, await self._engine.attach(request, "session/load", replay=True))

    async def resume_session(
        self,
        session_id: str,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        replay: bool = False,
    ) -> SessionHandle:
        """``session/resume``: attach a session; with ``replay=True`` (v2) the agent replays it.

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/resume``, or replay
                was asked on v1.
            SessionNotFound: The agent does not know the session.
        """
        self._engine.require("session/resume")
        if replay and self._engine.version < 2:
            raise CapabilityNotSupported("session/resume replayFrom", "protocol version 2")
        check_session_id(session_id)
        request = ResumeSessionRequest(
            session_id=session_id,
            cwd=str(cwd),
            mcp_servers=tuple(mcp_servers),
            replay_from=ReplayFromStart() if replay else None,
        )
        return SessionHandle(self, await self._engine.attach(request, "session/resume", replay=replay))

    async def fork_session(
        self, session_id: str, cwd: str | Path, *, mcp_servers: Sequence[McpServer] = ()
    ) -> SessionHandle:
        """``session/fork``: a new session starting from another's history (tracked too).

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/fork``.
        """
        self._engine.require("session/fork")
        cwd_str = str(cwd)
        parent = self._table.current_id(session_id)
        request = ForkSessionRequest(session_id=parent, cwd=cwd_str, mcp_servers=tuple(mcp_servers))
        result = await self._supervisor.call("session/fork", lambda: self._engine.wire(request))
        record = Session.from_fork(self._engine.decode(ForkSessionResponse, result), cwd=cwd_str, forked_from=parent)
        return SessionHandle(self, self._table.track(record, cwd=cwd_str, mcp_servers=tuple(mcp_servers)))

    async def list_sessions(self, *, cwd: str | Path | None = None, cursor: str | None = None) -> SessionPage:
        """``session/list``: one page of the agent's sessions (retried transparently on a drop).

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/list``.
        """
        self._engine.require("session/list")
        request = ListSessionsRequest(cwd=str(cwd) if cwd is not None else None, cursor=cursor)
        result = await self._supervisor.call("session/list", lambda: self._engine.wire(request), idempotent=True)
        response = self._engine.decode(ListSessionsResponse, result)
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
        self._engine.require("session/status")
        current = check_session_id(self._table.current_id(session_id))

        def params() -> Any:  # at send time: a recovery it waited for may have renamed the session
            nonlocal current
            current = self._table.current_id(session_id)
            return self._engine.wire(SessionStatusRequest(session_id=current))

        try:
            result = await self._supervisor.call("session/status", params, idempotent=True)
        except SessionNotFound:
            return Session(session_id=current, status=SessionStatus.UNKNOWN)
        record = Session.from_status(current, self._engine.decode(SessionStatusResponse, result))
        tracked = self._table.get(current)
        if tracked is not None:
            tracked.record = tracked.record.merge(record)
            return tracked.record
        return record

    async def close_session(self, session_id: str) -> None:
        """``session/close``: end a session and stop tracking it.

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/close``.
        """
        self._engine.require("session/close")
        # The id is resolved when the request is sent: a recovery it waited for may have renamed it.
        current = self._table.current_id
        await self._supervisor.call(
            "session/close", lambda: self._engine.wire(CloseSessionRequest(session_id=current(session_id)))
        )
        self._table.untrack(current(session_id))

    def forget_session(self, session_id: str) -> None:
        """Stop tracking a session (it will not be recovered after a drop); nothing is sent."""
        self._table.untrack(self._table.current_id(session_id))

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        """``session/set_mode``."""
        current = self._table.current_id
        await self._supervisor.call(
            "session/set_mode",
            lambda: self._engine.wire(SetSessionModeRequest(session_id=current(session_id), mode_id=mode_id)),
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
            SessionNotTracked: The client does not track this session.
            TurnInProgress: A turn is already running in this session.
            RecoveryFailed: Recovery abandoned the session, before or while the prompt waited
                for it (the prompt was not sent).
            ConnectionLost: The connection dropped during the turn (``may_have_executed``).
            RequestTimeout: The turn did not end within ``timeout``.
            RpcError: The agent refused the prompt.
        """
        return await self._engine.run_turn(self._table.require(session_id), _content(prompt), timeout)

    async def cancel(self, session_id: str) -> None:
        """``session/cancel``: ask the agent to end the running turn (a notification).

        Pending permission requests of the session are answered ``cancelled``.
        """
        current = self._table.current_id
        self._engine.router.cancel_session(current(session_id))
        await self._supervisor.notify(
            "session/cancel", lambda: self._engine.wire(CancelNotification(session_id=current(session_id)))
        )

    async def request(
        self, method: str, params: Any = None, *, timeout: float | _Default | None = DEFAULT_TIMEOUT
    ) -> Any:
        """Send any request (e.g. an ``_``-prefixed extension method) and return its raw result.

        ``timeout`` defaults to the client's request timeout; ``None`` waits as long as it takes.
        """
        return await self._supervisor.call(method, lambda: params, timeout=timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send any notification."""
        await self._supervisor.notify(method, lambda: params)


class SessionHandle:
    """A live handle on one session the client tracks. It follows the session across
    recoveries: after a new-session recovery, :attr:`session_id` is the new id."""

    def __init__(self, client: AcpClient, tracked: Tracked) -> None:
        self._client = client
        self._tracked = tracked

    def __repr__(self) -> str:
        return f"<SessionHandle {self._tracked.session_id}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionHandle) and other._tracked is self._tracked

    def __hash__(self) -> int:
        return id(self._tracked)

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

    async def set_mode(self, mode_id: str) -> None:
        """``session/set_mode``."""
        await self._client.set_mode(self._tracked.session_id, mode_id)

    async def status(self) -> Session:
        """Probe ``session/status``."""
        return await self._client.session_status(self._tracked.session_id)

    async def close(self) -> None:
        """Close the session on the agent and stop tracking it."""
        await self._client.close_session(self._tracked.session_id)

    async def updates(self) -> AsyncIterator[UpdateEvent]:
        """Iterate over this session's updates from now on (ends when it is closed or abandoned)."""
        queue: asyncio.Queue[UpdateEvent | None] = asyncio.Queue()
        self._tracked.subscribers.append(queue.put_nowait)
        try:
            while True:
                event = await queue.get()
                if event is None:
                    return
                yield event
        finally:
            self._tracked.subscribers.remove(queue.put_nowait)
