"""The blocking facade: :class:`SyncAcpClient` and :class:`SyncSessionHandle` (see :mod:`acp_client.sync`
for their rules)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import enum
import queue
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from .._engine._options import DEFAULTS, check_keywords, next_cursor
from .._util._logging import get_logger
from ..client import AcpClient, SessionHandle
from ..config import USE_CLIENT_DEFAULT, Callbacks, ClientOptions, UseClientDefault, check_instance, check_seconds
from ..exceptions import AcpError, ClientClosed, ConfigurationError, LoopThreadError, RequestTimeout
from ..group import EndpointGroup
from ..handlers import ClientHandlers
from ..location import Endpoint, Location
from ..state import ConnectionState, PromptResult, RecoveryOutcome, SessionPage, State
from ..store import StoredSession
from ..transcript import Transcript
from ..transports.base import Connector, TransportInfo
from ..types import (
    AgentCapabilities,
    ContentBlock,
    Implementation,
    InitializeResponse,
    McpServer,
    Session,
    SessionConfigOption,
)
from ._bridge import HostBridge
from ._events import SyncEvent
from ._loop import EventLoopThread, close_awaitable

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover - the Python 3.10 spelling
    from typing_extensions import Unpack


class SyncClientOptions(ClientOptions, total=False):
    """The options of :class:`SyncAcpClient`: every :class:`~acp_client.config.ClientOptions` key
    (the same meaning and default), and the facade's own:

    * ``callback_executor`` (a private single-thread executor, shut down by ``close()``): where
      callbacks run (``submit`` is called from the loop thread).
    * ``event_queue`` (none): also put every event on this queue as a :class:`SyncEvent`;
      permission requests go there when there is no permission handler.
    * ``default_timeout`` (``None``): seconds a blocking call other than ``prompt()`` waits when it
      is given no ``timeout``. ``None``: no limit of the facade's own, so the waits are the async
      client's (``Timeouts.request`` for requests, ``Timeouts.connect`` for ``connect()``, none for
      prompts): sync and async agree.
    * ``answer_timeout`` (60): seconds the client waits for the host to answer a permission
      request, an elicitation, ``decide_recovery`` or ``refresh_credentials`` (``None``: no limit).

    ``callbacks`` and ``handlers`` run on the callback executor (plain functions; a returned
    awaitable is not awaited), ``Callbacks.decide_adoption`` too.
    """

    callback_executor: concurrent.futures.Executor | None
    event_queue: queue.Queue[SyncEvent] | None
    default_timeout: float | None
    answer_timeout: float | None


#: The facade's own options (the rest go to :class:`~acp_client.AcpClient`).
_OWN = frozenset(SyncClientOptions.__annotations__) - frozenset(ClientOptions.__annotations__)


logger = get_logger("acp_client.sync")

T = TypeVar("T")

Timeout = float | None | UseClientDefault


class _Phase(enum.Enum):
    NEW = "new"
    CONNECTING = "connecting"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"


class SyncAcpClient:
    """A blocking, thread-safe :class:`~acp_client.AcpClient` for hosts that own their thread (see
    :mod:`acp_client.sync` for the threading, timeout and callback rules).

    Args:
        endpoint: As for :class:`~acp_client.AcpClient`.
        **options: The :class:`SyncClientOptions`: the async client's, and the facade's own.

    Raises:
        ConfigurationError: An invalid option, or one neither this class nor
            :class:`~acp_client.AcpClient` takes (the message suggests the closest).
    """

    def __init__(self, endpoint: str | Connector | EndpointGroup, **options: Unpack[SyncClientOptions]) -> None:
        check_keywords("SyncAcpClient", options, {*DEFAULTS, *_OWN})
        default_timeout = options.get("default_timeout")
        answer_timeout = options.get("answer_timeout", 60.0)
        callback_executor = options.get("callback_executor")
        event_queue = options.get("event_queue")
        for name, value in (("default_timeout", default_timeout), ("answer_timeout", answer_timeout)):
            check_seconds(name, value, optional=True)
        callbacks, handlers = options.get("callbacks"), options.get("handlers")
        check_instance("callbacks", callbacks, Callbacks, optional=True)
        check_instance("handlers", handlers, ClientHandlers, optional=True)
        check_instance("callback_executor", callback_executor, concurrent.futures.Executor, optional=True)
        check_instance("event_queue", event_queue, queue.Queue, optional=True)
        self.default_timeout = default_timeout
        self.answer_timeout = answer_timeout
        self._bridge = HostBridge(
            callbacks or Callbacks(),
            executor=callback_executor,
            event_queue=event_queue,
            answer_timeout=answer_timeout,
            clock=options.get("clock"),  # checked by ``AcpClient``: the facade's waits run on it too
        )
        self._loop_thread = EventLoopThread(name="acp-client-loop")
        self._lock = threading.Lock()
        self._phase = _Phase.NEW
        self._connected = threading.Event()
        self._loop_stopped = threading.Event()
        self._closed = threading.Event()
        forwarded = cast(ClientOptions, {name: value for name, value in options.items() if name not in _OWN})
        forwarded["handlers"] = self._bridge.loop_handlers(handlers or ClientHandlers())
        forwarded["callbacks"] = self._bridge.loop_callbacks()
        self._client = AcpClient(endpoint, **forwarded)

    @property
    def dropped_events(self) -> int:
        """Events that did not fit in ``event_queue`` (each was logged)."""
        return self._bridge.dropped_events

    def __repr__(self) -> str:
        return f"<SyncAcpClient {self._phase.value} {self.state}>"

    def __enter__(self) -> SyncAcpClient:
        self.connect()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def connect(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Start the loop thread, connect and initialize. A second call waits for the first.

        Raises:
            ClientClosed: The client was closed.
            RequestTimeout: Not connected within ``timeout`` (the client is then closed).
            LoopThreadError: Called from the loop thread.
            AcpError: What :meth:`AcpClient.connect` raised (the client is then closed).
        """
        self._check_thread("connect")
        with self._lock:
            phase = self._phase
            if phase is _Phase.NEW:
                self._phase = _Phase.CONNECTING
        if phase in (_Phase.CLOSING, _Phase.CLOSED):
            raise ClientClosed("the client is closed")
        if phase is not _Phase.NEW:
            self._connected.wait()
            if self._phase is not _Phase.RUNNING:
                raise ClientClosed("the client is closed (connecting failed)")
            return
        try:
            self._bridge.start()
            self._loop_thread.start()
            self._loop_thread.run(self._client.connect(), timeout=self._timeout(timeout), method="connect")
        except BaseException:
            self._connected.set()
            self.close()
            raise
        with self._lock:
            if self._phase is _Phase.CONNECTING:
                self._phase = _Phase.RUNNING
        self._connected.set()

    def close(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Close the client, stop the loop and join its thread (idempotent, any thread but the
        loop's). Pending calls fail (``ConnectionLost`` / ``ClientClosed``); pending permission
        requests are withdrawn. Callbacks already submitted to the default executor run first.

        Of threads calling at once, the first closes and the others return once it has; a callback
        returns once the loop thread has ended (the closer waits for the callbacks, this one too).

        Raises:
            LoopThreadError: Called from the loop thread.
        """
        self._check_thread("close")
        with self._lock:
            first = self._phase not in (_Phase.CLOSING, _Phase.CLOSED)
            if first:
                self._phase = _Phase.CLOSING
        if not first:
            # On a callback thread, waiting for ``_closed`` would deadlock: the first closer
            # shuts the callback executor down, waiting for this very callback, before setting it.
            (self._loop_stopped if self._bridge.on_callback_thread() else self._closed).wait()
            return
        try:
            if self._loop_thread.running:
                try:
                    self._loop_thread.run(self._client.aclose(), timeout=self._timeout(timeout), method="close")
                except AcpError as exc:
                    logger.warning("closing the client did not finish cleanly: %s", exc)
            self._loop_thread.close()
            self._loop_stopped.set()
            self._bridge.shutdown()
        finally:
            with self._lock:
                self._phase = _Phase.CLOSED
            self._connected.set()
            self._loop_stopped.set()
            self._closed.set()

    @property
    def client(self) -> AcpClient:
        """The :class:`~acp_client.AcpClient` underneath: use it only on the loop thread (in a
        coroutine given to :meth:`submit`)."""
        return self._client

    @property
    def thread(self) -> threading.Thread | None:
        """The loop thread (``None`` before :meth:`connect`)."""
        return self._loop_thread.thread

    @property
    def state(self) -> ConnectionState:
        """The current connection state (readable from any thread, without blocking)."""
        return self._client.state

    @property
    def protocol_version(self) -> int:
        """The negotiated ACP version (the proposed one before connecting)."""
        return self._client.protocol_version

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has finished."""
        return self._closed.is_set()

    @property
    def initialize_result(self) -> InitializeResponse:
        """What the agent answered to ``initialize`` (any thread; see :attr:`AcpClient.initialize_result`).

        Raises:
            ClientClosed: Not connected yet.
        """
        return self._client.initialize_result

    @property
    def agent_info(self) -> Implementation | None:
        """The agent's name and version, as it sent them in ``initialize`` (any thread)."""
        return self._client.agent_info

    @property
    def agent_capabilities(self) -> AgentCapabilities:
        """The agent's capabilities, normalized across protocol versions (any thread)."""
        return self._client.agent_capabilities

    @property
    def transport_info(self) -> TransportInfo | None:
        """The live link's :class:`~acp_client.transports.TransportInfo` (``pid`` of a stdio agent)."""
        return self._client.transport_info

    @property
    def recovery_outcomes(self) -> list[RecoveryOutcome]:
        """The recovery outcomes so far, oldest first."""
        return self._client.recovery_outcomes

    def notify_network_available(self) -> None:
        """Skip the current reconnect backoff (never blocks; callable from any thread)."""
        loop = self._loop_thread.loop
        if loop is None or not self._loop_thread.running:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._client.notify_network_available)

    def submit(self, coro: Awaitable[T], *, timeout: float | None = None) -> concurrent.futures.Future[T]:
        """Run any coroutine on the client's loop (e.g. ``client.submit(client.client.set_mode(...))``);
        cancelling the future cancels the coroutine.

        Raises:
            ClientClosed: The client is not connected, or is closed.
        """
        self._require_running(coro)
        return self._loop_thread.submit(coro, timeout=timeout, method="submit")

    def run(self, coro: Awaitable[T], *, timeout: Timeout = USE_CLIENT_DEFAULT) -> T:
        """Run any coroutine on the client's loop and block until it ends.

        Raises:
            RequestTimeout: It did not end within ``timeout`` (it was cancelled).
            LoopThreadError: Called from the loop thread.
            ClientClosed: The client is not connected, or is closed.
        """
        return self._run("run", coro, timeout)

    def _timeout(self, timeout: Timeout) -> float | None:
        return self.default_timeout if isinstance(timeout, UseClientDefault) else timeout

    def _check_thread(self, method: str) -> None:
        if self._loop_thread.in_loop_thread():
            raise LoopThreadError(
                f"SyncAcpClient.{method}() was called on the client's own event loop thread; it would "
                "deadlock (await SyncAcpClient.client there instead)"
            )

    def _require_running(self, awaitable: Awaitable[Any] | None = None) -> None:
        if self._phase is not _Phase.RUNNING:
            if awaitable is not None:
                close_awaitable(awaitable)
            detail = "call connect() first" if self._phase in (_Phase.NEW, _Phase.CONNECTING) else "it was closed"
            raise ClientClosed(f"the client is not connected: {detail}")

    def _run(self, method: str, awaitable: Awaitable[T], timeout: Timeout, *, bounded: bool = False) -> T:
        """Run on the loop and wait (``bounded``: the awaitable enforces ``timeout``, this is the safety net)."""
        try:
            self._check_thread(method)
            self._require_running()
            limit = self._timeout(timeout)
            check_seconds("timeout", limit, optional=True)
        except BaseException:
            close_awaitable(awaitable)
            raise
        if bounded:
            future = self._loop_thread.submit(awaitable, method=method)
            return self._loop_thread.wait(future, timeout=limit, method=method)
        return self._loop_thread.run(awaitable, timeout=limit, method=method)

    def new_session(
        self,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        additional_directories: Sequence[str | Path] = (),
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SyncSessionHandle:
        """``session/new``; returns the live handle (see :meth:`AcpClient.new_session`)."""
        coro = self._client.new_session(cwd, mcp_servers=mcp_servers, additional_directories=additional_directories)
        return SyncSessionHandle(self, self._run("session/new", coro, timeout))

    def load_session(
        self,
        session_id: str,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SyncSessionHandle:
        """``session/load`` (v1; see :meth:`AcpClient.load_session`)."""
        coro = self._client.load_session(session_id, cwd, mcp_servers=mcp_servers)
        return SyncSessionHandle(self, self._run("session/load", coro, timeout))

    def resume_session(
        self,
        session_id: str,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        replay: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SyncSessionHandle:
        """``session/resume`` (see :meth:`AcpClient.resume_session`)."""
        coro = self._client.resume_session(session_id, cwd, mcp_servers=mcp_servers, replay=replay)
        return SyncSessionHandle(self, self._run("session/resume", coro, timeout))

    def list_sessions(
        self, *, cwd: str | Path | None = None, cursor: str | None = None, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> SessionPage:
        """``session/list``: one page (see :meth:`AcpClient.list_sessions`)."""
        return self._run("session/list", self._client.list_sessions(cwd=cwd, cursor=cursor), timeout)

    def session_status(self, session_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Session:
        """``session/status`` (see :meth:`AcpClient.session_status`)."""
        return self._run("session/status", self._client.session_status(session_id), timeout)

    def close_session(self, session_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/close`` (see :meth:`AcpClient.close_session`)."""
        self._run("session/close", self._client.close_session(session_id), timeout)

    def session(self, session_id: str) -> SyncSessionHandle:
        """A blocking handle on a session this client opened (by its current or an earlier id).

        Raises:
            SessionNotTracked: The client does not track this session.
        """
        handle = self._run("session", self._read(lambda: self._client.session(session_id)), USE_CLIENT_DEFAULT)
        return SyncSessionHandle(self, handle)

    def fork_session(
        self,
        session_id: str,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SyncSessionHandle:
        """``session/fork`` (see :meth:`AcpClient.fork_session`)."""
        coro = self._client.fork_session(session_id, cwd, mcp_servers=mcp_servers)
        return SyncSessionHandle(self, self._run("session/fork", coro, timeout))

    def forget_session(self, session_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Stop tracking a session; nothing is sent (see :meth:`AcpClient.forget_session`)."""
        self._run("forget_session", self._read(lambda: self._client.forget_session(session_id)), timeout)

    def set_mode(self, session_id: str, mode_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/set_mode`` (see :meth:`AcpClient.set_mode`)."""
        self._run("session/set_mode", self._client.set_mode(session_id, mode_id), timeout)

    def set_model(self, session_id: str, model_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/set_model`` (see :meth:`AcpClient.set_model`)."""
        self._run("session/set_model", self._client.set_model(session_id, model_id), timeout)

    def set_config_option(
        self,
        session_id: str,
        config_id: str,
        value: Any,
        *,
        type: str | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> tuple[SessionConfigOption, ...]:
        """``session/set_config_option``; every option with its new value (see :meth:`AcpClient.set_config_option`)."""
        coro = self._client.set_config_option(session_id, config_id, value, type=type)
        return self._run("session/set_config_option", coro, timeout)

    def iter_sessions(
        self, *, cwd: str | Path | None = None, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> Iterator[Session]:
        """Every session ``session/list`` reports, following cursors, one page per blocking call
        (``timeout`` applies to each; see :meth:`AcpClient.iter_sessions`)."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = self._run("session/list", self._client.list_sessions(cwd=cwd, cursor=cursor), timeout)
            yield from page.sessions
            if (cursor := next_cursor(page, seen)) is None:
                return

    @property
    def sessions(self) -> list[SyncSessionHandle]:
        """Handles on every session the client tracks (read on the loop thread)."""
        handles = self._run("sessions", self._read(lambda: self._client.sessions), USE_CLIENT_DEFAULT)
        return [SyncSessionHandle(self, handle) for handle in handles]

    def prompt(
        self,
        session_id: str,
        prompt: str | ContentBlock | Iterable[ContentBlock],
        *,
        timeout: Timeout = None,
    ) -> PromptResult:
        """``session/prompt``: run one turn and block until it ends (by default, however long it
        runs: real turns take minutes; ``default_timeout`` does not apply).

        Raises:
            RequestTimeout: The turn did not end within ``timeout``: ``session/cancel`` was sent
                and the agent given ``Timeouts.cancel_grace`` to end it (see :meth:`AcpClient.prompt`).
            TurnInProgress / ConnectionLost / RpcError: See :meth:`AcpClient.prompt`.
        """
        limit = None if isinstance(timeout, UseClientDefault) else timeout
        # The async prompt does what a timeout means: session/cancel, then a bounded grace for the
        # turn to end (one rule for both facades).
        coro = self._client.prompt(session_id, prompt, timeout=limit)
        return self._run("session/prompt", coro, limit, bounded=True)

    def prompt_async(
        self,
        session_id: str,
        prompt: str | ContentBlock | Iterable[ContentBlock],
        *,
        timeout: Timeout = None,
    ) -> concurrent.futures.Future[PromptResult]:
        """Start a turn without blocking; the future ends with the :class:`PromptResult` or
        the error :meth:`prompt` would raise. ``timeout`` defaults to none here.

        Raises:
            ClientClosed: The client is not connected, or is closed.
        """
        limit = self._timeout(timeout)
        check_seconds("timeout", limit, optional=True)
        coro = self._client.prompt(session_id, prompt, timeout=limit)
        self._require_running(coro)
        return self._loop_thread.submit(coro, method="session/prompt")

    def cancel(self, session_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/cancel``: ask the agent to end the running turn (see :meth:`AcpClient.cancel`)."""
        self._run("session/cancel", self._client.cancel(session_id), timeout)

    @property
    def session_store_key(self) -> str | None:
        """The key this client files its sessions under in its ``session_store`` (any thread)."""
        return self._client.session_store_key

    def stored_sessions(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> list[StoredSession]:
        """This client's records in its store, most recently used first (read on the loop thread)."""
        return self._run("stored_sessions", self._read(self._client.stored_sessions), timeout)

    @property
    def owner(self) -> str | None:
        """The name this client owns its stored sessions under (any thread; ``None``: no shared store)."""
        return self._client.owner

    def owned_sessions(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> list[str]:
        """The stored sessions this client holds the lease of (see :meth:`AcpClient.owned_sessions`)."""
        return self._run("owned_sessions", self._read(self._client.owned_sessions), timeout)

    def adoptable_sessions(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> list[StoredSession]:
        """The stored sessions nobody holds (see :meth:`AcpClient.adoptable_sessions`)."""
        return self._run("adoptable_sessions", self._client.adoptable_sessions(), timeout)

    def adopt(self, session_ids: Sequence[str], *, timeout: Timeout = USE_CLIENT_DEFAULT) -> list[SyncSessionHandle]:
        """Adopt stored sessions nobody holds, and recover them (see :meth:`AcpClient.adopt`)."""
        handles = self._run("adopt", self._client.adopt(list(session_ids)), timeout)
        return [SyncSessionHandle(self, handle) for handle in handles]

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """The instances of an endpoint group, in the order given (empty for one endpoint)."""
        return self._client.endpoints

    def locate(
        self, session_id: str, *, probe_timeout: Timeout = USE_CLIENT_DEFAULT, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> Location:
        """Every instance's ``session/status`` answer for ``session_id`` (see
        :meth:`AcpClient.locate`; ``probe_timeout`` is its per-instance ``timeout``)."""
        return self._run("locate", self._client.locate(session_id, timeout=probe_timeout), timeout)

    @staticmethod
    async def _read(read: Callable[[], T]) -> T:
        return read()

    def request(self, method: str, params: Any = None, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Any:
        """Send any request (e.g. an ``_``-prefixed extension) and return its raw result; the
        client's request timeout applies as well (see :meth:`AcpClient.request`)."""
        return self._run(method, self._client.request(method, params), timeout)

    def notify(self, method: str, params: Any = None, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Send any notification (see :meth:`AcpClient.notify`)."""
        self._run(method, self._client.notify(method, params), timeout)

    def wait_for_state(self, *states: State, timeout: Timeout = USE_CLIENT_DEFAULT) -> ConnectionState:
        """Block until the connection state is one of ``states`` (returns it at once if it is).

        Raises:
            RequestTimeout: Not reached within ``timeout``.
            ClientClosed: The client closed or failed first (unless that was asked for).
        """
        wanted = frozenset(states)
        if not wanted:
            raise ConfigurationError("wait_for_state needs at least one state")
        if self.state.state in wanted:
            return self.state
        return self._run("wait_for_state", self._wait_state(wanted), timeout)

    async def _wait_state(self, wanted: frozenset[State]) -> ConnectionState:
        current = self._client.state
        if current.state in wanted:
            return current
        async for state in self._client.state_changes():
            if state.state in wanted:
                return state
            if state.is_terminal:
                break
        raise ClientClosed(f"the client is {self._client.state} (waited for {', '.join(s.value for s in wanted)})")

    def state_changes(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Iterator[ConnectionState]:
        """Iterate over the state changes from now on, blocking for each; ends after ``closed``
        or ``failed`` (like :meth:`AcpClient.state_changes`). Stop early with ``break``.

        Raises:
            RequestTimeout: No change within ``timeout`` seconds of the previous one.
            LoopThreadError: Called from the loop thread.
        """
        self._check_thread("state_changes")
        states: queue.Queue[ConnectionState] = queue.Queue()
        started = threading.Event()
        pump = self.submit(self._pump_states(states, started))
        started.wait()
        limit = self._timeout(timeout)
        try:
            while True:
                try:
                    state = states.get(timeout=limit)
                except queue.Empty:
                    raise RequestTimeout("state_changes", limit or 0.0) from None
                yield state
                if state.is_terminal:
                    return
        finally:
            pump.cancel()

    async def _pump_states(self, states: queue.Queue[ConnectionState], started: threading.Event) -> None:
        changes = self._client.state_changes()
        started.set()  # registered from here on (the generator's first step runs below, at once)
        async for state in changes:
            states.put(state)


class SyncSessionHandle:
    """A blocking handle on one session (see :class:`~acp_client.client.SessionHandle`). It follows
    the session across recoveries: after a new-session recovery :attr:`session_id` is the new id."""

    def __init__(self, owner: SyncAcpClient, handle: SessionHandle) -> None:
        self._owner = owner
        self._handle = handle

    def __repr__(self) -> str:
        return f"<SyncSessionHandle {self.session_id}>"

    @property
    def session_id(self) -> str:
        """The current session id."""
        return self._handle.session_id

    @property
    def record(self) -> Session:
        """The latest :class:`~acp_client.types.Session` record."""
        return self._handle.record

    @property
    def abandoned(self) -> bool:
        """Whether recovery gave up on this session."""
        return self._handle.abandoned

    @property
    def turn_running(self) -> bool:
        return self._handle.turn_running

    @property
    def cwd(self) -> str:
        """The working directory the session was opened with."""
        return self._handle.cwd

    @property
    def endpoint(self) -> str | None:
        """With several endpoints: the name of the instance the session lives on now."""
        return self._handle.endpoint

    @property
    def transcript(self) -> Transcript:
        """A snapshot (a copy) of the conversation so far, taken on the loop thread.

        Raises:
            LoopThreadError: Read on the loop thread (use :attr:`SessionHandle.transcript` there).
            ClientClosed: The client is not connected, or is closed.
        """
        return self._owner._run("transcript", self._snapshot(), USE_CLIENT_DEFAULT)

    async def _snapshot(self) -> Transcript:
        return copy.deepcopy(self._handle.transcript)

    def prompt(self, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: Timeout = None) -> PromptResult:
        """Run one turn and block until it ends (no time limit by default; see
        :meth:`SyncAcpClient.prompt`)."""
        return self._owner.prompt(self.session_id, prompt, timeout=timeout)

    def prompt_async(
        self, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: Timeout = None
    ) -> concurrent.futures.Future[PromptResult]:
        """Start a turn without blocking (see :meth:`SyncAcpClient.prompt_async`)."""
        return self._owner.prompt_async(self.session_id, prompt, timeout=timeout)

    def cancel(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Ask the agent to end the running turn."""
        self._owner._run("session/cancel", self._handle.cancel(), timeout)

    def session_status(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Session:
        """Probe ``session/status``."""
        return self._owner._run("session/status", self._handle.session_status(), timeout)

    def close_session(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/close``: end the session on the agent and stop tracking it."""
        self._owner._run("session/close", self._handle.close_session(), timeout)

    def forget_session(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Stop tracking the session; nothing is sent."""
        self._owner.forget_session(self._handle.session_id, timeout=timeout)

    def set_mode(self, mode_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/set_mode``."""
        self._owner._run("session/set_mode", self._handle.set_mode(mode_id), timeout)

    def set_model(self, model_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/set_model``."""
        self._owner._run("session/set_model", self._handle.set_model(model_id), timeout)

    def set_config_option(
        self, config_id: str, value: Any, *, type: str | None = None, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> tuple[SessionConfigOption, ...]:
        """``session/set_config_option``; every option with its new value."""
        coro = self._handle.set_config_option(config_id, value, type=type)
        return self._owner._run("session/set_config_option", coro, timeout)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SyncSessionHandle) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash(self._handle)
