"""The client facade: :class:`AcpClient` and :class:`SessionHandle`.

::

    async with AcpClient("ws://127.0.0.1:8000/acp", callbacks=Callbacks(on_new_session=warn_user)) as client:
        session = await client.new_session(cwd="/home/me/project")
        result = await session.prompt("Summarize the README")

After a drop the client reconnects under its :class:`~acp_client.retry.RetryPolicy`, probes
``session/status`` for every session it opened, and recovers each on the right path (resume,
replay, or a new session), telling the app through callbacks before any request queued during the
outage is sent. This module is the facade; :mod:`._engine` does the work. Given a URL or a
connector the client has one link, and no code for several instances is imported.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._engine import _options
from ._engine._ownership import Ownership
from ._rpc._handshake import SUPPORTED_PROTOCOL_VERSIONS
from ._sessions._table import Tracked
from ._util._checks import check_seconds
from ._util._delivery import Feed
from .config import USE_CLIENT_DEFAULT, Callbacks, ClientOptions, Timeouts, UseClientDefault
from .exceptions import CapabilityNotSupported, ClientClosed, ConfigurationError
from .group import EndpointGroup
from .location import Endpoint, Location
from .state import ConnectionState, PromptResult, RecoveryOutcome, SessionPage, UpdateEvent
from .store import StoredSession
from .transcript import Transcript
from .transports import CookieStore
from .transports._security import check_session_id
from .transports.base import Connector, TransportInfo
from .transports.endpoint import connector_for
from .types import (
    AgentCapabilities,
    CancelNotification,
    ContentBlock,
    Implementation,
    InitializeResponse,
    LoadSessionRequest,
    McpServer,
    ReplayFromStart,
    ResumeSessionRequest,
    Session,
    SessionConfigOption,
    TextContent,
)

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover - the Python 3.10 spelling
    from typing_extensions import Unpack

__all__ = [
    "SUPPORTED_PROTOCOL_VERSIONS",
    "AcpClient",
    "PromptResult",
    "SessionHandle",
    "SessionPage",
    "UpdateEvent",
    "connector_for",
]


def _content(prompt: str | ContentBlock | Iterable[ContentBlock]) -> tuple[ContentBlock, ...]:
    if isinstance(prompt, str):
        return (TextContent(text=prompt),)
    if attrs.has(type(prompt)):
        return (prompt,)  # type: ignore[return-value]
    return tuple(prompt)  # type: ignore[arg-type]


class AcpClient:
    """An ACP client that keeps its sessions alive through drops and agent restarts.

    Use it as an async context manager; leaving the block closes it.

    Args:
        endpoint: A URL (``ws://``, ``wss://``, ``http://``, ``https://``), ``stdio:COMMAND...``,
            or a :class:`~acp_client.transports.Connector`; or an
            :class:`~acp_client.group.EndpointGroup`: several instances of one agent used as one
            endpoint, with their placement and failover (``docs/many-instances.md``).
        **options: The :class:`~acp_client.config.ClientOptions` (retry, callbacks, timeouts,
            session store, ...), each described there with its default.

    Raises:
        ConfigurationError: An invalid option (the message names it).
    """

    def __init__(self, endpoint: str | Connector | EndpointGroup, **options: Unpack[ClientOptions]) -> None:
        checked = _options.with_defaults(endpoint, options)
        cookies = checked["cookies"]
        self.cookies = cookies if cookies is not None else CookieStore()
        self._owns_cookies = cookies is None  # ours is cleared on aclose(); the app's is its own
        self._engine, self._connector = _options.assemble(checked, self.cookies)
        self._table = self._engine.table
        self._store = self._engine.persistence

    async def __aenter__(self) -> AcpClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Connect and initialize (``async with`` does this). With a ``session_store``, its sessions
        for this endpoint are recovered (``connecting → recovering → connected``) before it returns.

        Raises:
            ConnectError / TlsVerificationError / HttpStatusError: The agent is unreachable.
            IncompatibleProtocolVersion: The agent speaks no version this client supports.
            RpcError: ``initialize`` was refused.
            ClientClosed: :meth:`aclose` was called while connecting.
            SessionStoreError: The ``session_store`` cannot be read (nothing was sent).
        """
        await self._engine.start()

    async def aclose(self) -> None:
        """Close the connection and stop reconnecting. Pending requests fail with
        :class:`~acp_client.exceptions.ConnectionLost`; queued ones with ``ClientClosed``."""
        await self._engine.aclose()
        if self._owns_cookies:
            self.cookies.clear()

    def notify_network_available(self) -> None:
        """Skip the current reconnect backoff (call when the OS reports the network is back)."""
        for supervisor in self._engine.links.supervisors():
            supervisor.notify_network_available()

    @property
    def state(self) -> ConnectionState:
        """The connection state (of an endpoint group: ``connected`` when every link holding sessions is)."""
        return self._engine.state

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
            raise ClientClosed("not connected: call connect() first")
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
        """The connector (of an endpoint group: the first instance's)."""
        return self._connector

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """The instances of an endpoint group, in the order given (empty for a single endpoint)."""
        return self._engine.endpoints

    async def locate(
        self, session_id: str, *, timeout: float | UseClientDefault | None = USE_CLIENT_DEFAULT
    ) -> Location:
        """Ask every instance ``session/status`` for ``session_id`` at once; nothing is loaded.

        An earlier id of a tracked session finds its current one. The first call opens a link to
        every instance the client has none to, and keeps it (``docs/many-instances.md``). A
        single-endpoint client has one instance, named by its connector's target.

        Args:
            timeout: Seconds each instance gets (default: ``Timeouts.probe``; ``None``: no limit).

        Raises:
            ConfigurationError: ``session_id`` is empty or holds CR, LF or NUL.
        """
        limit = self._engine.timeouts.probe if timeout is USE_CLIENT_DEFAULT else timeout
        return await self._engine.locate(session_id, limit)

    @property
    def transport_info(self) -> TransportInfo | None:
        """The live link's :class:`TransportInfo` (a stdio agent's ``pid`` among it), if any."""
        conn = self._engine.primary.connection
        return conn.transport.info if conn is not None else None

    @property
    def callbacks(self) -> Callbacks:
        """The app's callbacks (as given)."""
        return self._engine.callbacks

    @property
    def timeouts(self) -> Timeouts:
        return self._engine.timeouts

    @property
    def session_store_key(self) -> str | None:
        """The endpoint key this client files its sessions under in its ``session_store``."""
        return self._store.bridge.endpoint if self._store is not None else None

    def stored_sessions(self) -> list[StoredSession]:
        """This client's records in its store, most recently used first (no I/O)."""
        return self._store.records() if self._store is not None else []

    @property
    def owner(self) -> str | None:
        """The name this client owns its stored sessions under (``None``: no shared store)."""
        ownership = self._ownership
        return ownership.owner if ownership is not None else None

    def owned_sessions(self) -> list[str]:
        """The ids of the stored sessions this client holds the lease of now (no I/O)."""
        ownership = self._ownership
        return ownership.owned() if ownership is not None else []

    async def adoptable_sessions(self) -> list[StoredSession]:
        """The stored sessions of this endpoint nobody holds (unowned, or their owner's lease
        expired), most recently used first; ``lease`` says who held each.

        Raises:
            ConfigurationError: The client has no shared session store.
            SessionStoreError: The store cannot be read.
        """
        ownership = self._require_ownership()
        return await ownership.bridge.run(ownership.fenced.adoptable)

    async def adopt(self, session_ids: Iterable[str]) -> list[SessionHandle]:
        """Claim stored sessions nobody holds (see :meth:`adoptable_sessions`) and recover each
        as after a drop, with its stored conversation; return handles on them. One another client
        holds, or not stored, is left out.

        Raises:
            ConfigurationError: The client has no shared session store.
            SessionStoreError: The store cannot be read or written.
        """
        ownership = self._require_ownership()
        wanted = set(session_ids)
        candidates = await ownership.bridge.run(ownership.fenced.adoptable)
        adopted = await ownership.adopt([record for record in candidates if record.session_id in wanted])
        return [SessionHandle(self, self._table.require(session_id)) for session_id in adopted]

    @property
    def _ownership(self) -> Ownership | None:
        ownership = self._store.ownership if self._store is not None else None
        return ownership if isinstance(ownership, Ownership) else None

    def _require_ownership(self) -> Ownership:
        ownership = self._ownership
        if ownership is None:
            raise ConfigurationError("this client has no shared session store (a SharedSessionStore)")
        return ownership

    @property
    def recovery_outcomes(self) -> list[RecoveryOutcome]:
        """The recovery outcomes so far, oldest first (the most recent 1000)."""
        return list(self._engine.recoverer.outcomes)

    async def state_changes(self) -> AsyncIterator[ConnectionState]:
        """Iterate over state changes from now on; ends after ``closed`` or ``failed``."""
        queue: asyncio.Queue[ConnectionState] = asyncio.Queue()
        self._engine.state_queues.append(queue)
        try:
            state = self.state
            if state.is_terminal:
                yield state
            while not state.is_terminal:
                state = await queue.get()
                yield state
        finally:
            self._engine.state_queues.remove(queue)

    def add_update_listener(self, listener: Callable[[UpdateEvent], Any]) -> Callable[[], None]:
        """Call ``listener`` with every update (like ``Callbacks.on_update``); returns its remover."""
        listeners = self._engine.update_listeners
        listeners.append(listener)
        return lambda: listeners.remove(listener)

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
        """``session/new``: start a session, tracked for recovery."""
        extra = tuple(str(item) for item in additional_directories)
        return SessionHandle(self, await self._engine.new(str(cwd), tuple(mcp_servers), extra))

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
        tracked = await self._engine.attach(request, "session/load", replay=True)
        return SessionHandle(self, await self._engine.opened(tracked))

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
        tracked = await self._engine.attach(request, "session/resume", replay=replay)
        return SessionHandle(self, await self._engine.opened(tracked))

    async def fork_session(
        self, session_id: str, cwd: str | Path, *, mcp_servers: Sequence[McpServer] = ()
    ) -> SessionHandle:
        """``session/fork``: a new session starting from another's history (tracked too).

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/fork``.
        """
        return SessionHandle(self, await self._engine.fork(session_id, str(cwd), tuple(mcp_servers)))

    async def list_sessions(self, *, cwd: str | Path | None = None, cursor: str | None = None) -> SessionPage:
        """``session/list``: one page of the agent's sessions (retried transparently on a drop).

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/list``.
        """
        return await self._engine.list_page(cwd, cursor)

    async def iter_sessions(self, *, cwd: str | Path | None = None) -> AsyncIterator[Session]:
        """Every session ``session/list`` reports, following cursors."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = await self.list_sessions(cwd=cwd, cursor=cursor)
            for session in page.sessions:
                yield session
            if (cursor := _options.next_cursor(page, seen)) is None:
                return

    async def session_status(self, session_id: str) -> Session:
        """``session/status``: is the session in the agent's memory, stored, or unknown?

        An unknown session (-32002, or another agent's "not found") comes back with ``status``
        ``Probe.UNKNOWN``. Retried transparently on a drop (it has no side effects).

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/status``.
        """
        return await self._engine.status(session_id)

    async def close_session(self, session_id: str) -> None:
        """``session/close``: end a session and stop tracking it.

        Raises:
            CapabilityNotSupported: The agent does not advertise ``session/close``.
        """
        await self._engine.close(session_id)

    def forget_session(self, session_id: str) -> None:
        """Stop tracking a session (not recovered, deleted from the session store); nothing is sent."""
        self._engine.untrack(self._table.current_id(session_id))

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        """``session/set_mode`` (restored after a recovery that rebuilds the session)."""
        await self._engine.set_mode(session_id, mode_id)

    async def set_model(self, session_id: str, model_id: str) -> None:
        """``session/set_model`` (restored after a recovery that rebuilds the session).

        Raises:
            CapabilityNotSupported: The agent offers no models for this session.
        """
        await self._engine.set_model(session_id, model_id)

    async def set_config_option(
        self, session_id: str, config_id: str, value: Any, *, type: str | None = None
    ) -> tuple[SessionConfigOption, ...]:
        """``session/set_config_option`` (restored like :meth:`set_mode`); returns every option.

        Raises:
            CapabilityNotSupported: The agent offers no config options for this session.
        """
        return await self._engine.set_config_option(session_id, config_id, value, type)

    async def prompt(
        self,
        session_id: str,
        prompt: str | ContentBlock | Iterable[ContentBlock],
        *,
        timeout: float | None = None,
    ) -> PromptResult:
        """``session/prompt``: run one turn and wait for it to end.

        A turn cut off by a drop is reported (``on_turn_interrupted``) and raises; it is never
        re-sent.

        Raises:
            SessionNotTracked: The client does not track this session.
            TurnInProgress: A turn is already running in this session.
            RecoveryFailed: Recovery abandoned the session (the prompt was not sent).
            ConnectionLost: The connection dropped during the turn (``may_have_executed``).
            RequestTimeout: The turn did not end within ``timeout``.
            RpcError: The agent refused the prompt.
        """
        check_seconds("timeout", timeout, optional=True)
        return await self._engine.run_turn(self._table.require(session_id), _content(prompt), timeout)

    async def cancel(self, session_id: str) -> None:
        """``session/cancel``: ask the agent to end the running turn; the session's pending
        permission requests are answered ``cancelled``."""
        tracked = self._table.get(session_id)
        if tracked is not None:
            await self._engine.cancel_session(tracked)
            return
        self._engine.router.cancel_session(session_id)
        supervisor = await self._engine.links.link_for(None, "session/cancel")
        await supervisor.notify("session/cancel", self._engine.wire(CancelNotification(session_id=session_id)))

    async def request(
        self, method: str, params: Any = None, *, timeout: float | UseClientDefault | None = USE_CLIENT_DEFAULT
    ) -> Any:
        """Send any request (e.g. an ``_``-prefixed extension method) and return its raw result
        (``timeout``: default ``Timeouts.request``; ``None``: no limit)."""
        if timeout is not USE_CLIENT_DEFAULT:
            check_seconds("timeout", timeout, optional=True)
        return await self._engine.primary.call(method, params, timeout=timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send any notification."""
        await self._engine.primary.notify(method, params)


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
        """The conversation so far, kept across replays, recoveries and restarts (docs/conversation.md)."""
        return self._tracked.transcript

    @property
    def turn_running(self) -> bool:
        return self._tracked.turn is not None

    @property
    def endpoint(self) -> str | None:
        """Of an endpoint group: the instance the session lives on (``None``: not found yet)."""
        return self._client._engine.links.endpoint_of(self._tracked)

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
        """``session/set_mode`` (see :meth:`AcpClient.set_mode`)."""
        await self._client.set_mode(self._tracked.session_id, mode_id)

    async def set_model(self, model_id: str) -> None:
        """``session/set_model`` (see :meth:`AcpClient.set_model`)."""
        await self._client.set_model(self._tracked.session_id, model_id)

    async def set_config_option(
        self, config_id: str, value: Any, *, type: str | None = None
    ) -> tuple[SessionConfigOption, ...]:
        """``session/set_config_option`` (see :meth:`AcpClient.set_config_option`)."""
        return await self._client.set_config_option(self._tracked.session_id, config_id, value, type=type)

    async def session_status(self) -> Session:
        """Probe ``session/status`` (see :meth:`AcpClient.session_status`)."""
        return await self._client.session_status(self._tracked.session_id)

    async def close_session(self) -> None:
        """``session/close`` (see :meth:`AcpClient.close_session`)."""
        await self._client.close_session(self._tracked.session_id)

    def forget_session(self) -> None:
        """Stop tracking the session (see :meth:`AcpClient.forget_session`)."""
        self._client.forget_session(self._tracked.session_id)

    async def updates(self) -> AsyncIterator[UpdateEvent]:
        """Iterate over this session's updates from now on (ends when it is closed or abandoned)."""
        feed: Feed[UpdateEvent | None] = Feed()
        push, items = feed.push, feed.items
        self._tracked.subscribers.append(push)
        try:
            while True:
                if not items:
                    await feed.wait()
                event = items.popleft()
                if event is None:
                    return
                yield event
        finally:
            self._tracked.subscribers.remove(push)
