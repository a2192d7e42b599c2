"""The machinery behind :class:`~acp_client.AcpClient`: it wires the session table, the recoverer,
the supervisor and callback delivery together, and handles what the connection reports
(notifications, protocol errors, state changes) and the steps of a prompt turn.

:class:`~acp_client.AcpClient` keeps only the public methods; each is a few lines over this.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ._codec import decode_update_params, from_wire, to_wire
from ._codec._fast import FAST_UPDATES
from ._connection import DEFAULT_MAX_INCOMING_REQUESTS, Connection
from ._delivery import Dispatcher, call_app
from ._handshake import initialize
from ._persistence import Persistence
from ._pool_links import PoolLinks
from ._pooled import PoolRecoverer, PoolRecovery, PoolSpec
from ._recoverer import Recoverer, attach_failed, open_attach_window, record_after_attach
from ._restore import Settings
from ._sessions import SessionTable, Tracked
from ._supervisor import Supervisor
from ._telemetry import instrumentation
from .clock import Clock, move_on_after
from .config import Callbacks, QueueOptions, Timeouts
from .exceptions import (
    AcpError,
    CapabilityNotSupported,
    ClientClosed,
    ConnectionLost,
    InvalidMessage,
    RequestTimeout,
)
from .handlers import ClientHandlers, RequestRouter
from .retry import RetryPolicy
from .state import ConnectionState, PromptResult, RecoveryOutcome, State, TurnInterrupted, UpdateEvent
from .store._bridge import StoreBridge
from .telemetry import Telemetry
from .transports.base import Connector
from .types import (
    ClientCapabilities,
    ContentBlock,
    FileSystemCapability,
    Implementation,
    InitializeResponse,
    PromptRequest,
    PromptResponse,
    Session,
    SessionConfigOption,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    SetSessionModelRequest,
    SetSessionModeRequest,
)

if TYPE_CHECKING:
    from ._telemetry._links import LinkTelemetry

__all__ = ["Engine"]

logger = logging.getLogger("acp_client.client")

T = TypeVar("T")

#: How many times one prompt that never reached the agent is sent again (``retry_unsent_prompts``).
MAX_PROMPT_RESENDS = 3


def _settle(future: asyncio.Future[PromptResult]) -> Callable[[PromptResult | BaseException], None]:
    def settle(outcome: PromptResult | BaseException) -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
            future.exception()  # the prompt() caller may be gone (or a v1 turn never awaits it)
        else:
            future.set_result(outcome)

    return settle


class Engine:
    """One client's table, recoverer, supervisor and dispatcher (internal; options already checked)."""

    def __init__(
        self,
        connector: Connector,
        *,
        protocol_version: int,
        client_info: Implementation,
        handlers: ClientHandlers,
        retry: RetryPolicy | None,
        callbacks: Callbacks,
        timeouts: Timeouts,
        queue: QueueOptions,
        recovery_concurrency: int,
        clock: Clock,
        rng: random.Random | None,
        keep_transcripts: bool,
        pool: PoolSpec | None = None,
        replays_on_resume: bool | None = None,
        max_incoming_requests: int = DEFAULT_MAX_INCOMING_REQUESTS,
        retry_unsent_prompts: bool = False,
        store: StoreBridge | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.retry_unsent_prompts = retry_unsent_prompts
        self.max_incoming_requests = max_incoming_requests
        self.proposed_version = self.version = protocol_version
        self.client_info = client_info
        self.handlers = handlers
        self.callbacks = callbacks
        self.timeouts = timeouts
        self.clock = clock
        self.init: InitializeResponse | None = None
        self.update_listeners: list[Callable[[UpdateEvent], Any]] = []
        if callbacks.on_update is not None:
            self.update_listeners.append(callbacks.on_update)
        self.state_queues: list[asyncio.Queue[ConnectionState]] = []
        self.dispatcher = Dispatcher()
        self.table = SessionTable(keep_transcripts=keep_transcripts, replays_on_resume=replays_on_resume)
        self.router = RequestRouter(handlers, session_roots=self.table.roots, protocol_version=lambda: self.version)
        recoverer_class = PoolRecoverer if pool is not None else Recoverer
        self.recoverer = recoverer_class(
            self.table,
            callbacks=lambda: self.callbacks,
            timeouts=timeouts,
            concurrency=recovery_concurrency,
            clock=clock,
            version=lambda: self.version,
        )
        self._retry, self._queue, self._rng, self.connector = retry, queue, rng, connector
        # None unless the otel extra is installed and telemetry is not disabled (see _telemetry).
        self.telemetry = instrumentation(
            telemetry,
            clock=clock.monotonic,
            version=lambda: self.version,
            queued=lambda: sum(supervisor.queued for supervisor in self.supervisors()),
        )
        self.update_counts = self.telemetry.update_counts if self.telemetry is not None else None
        self.link_telemetry: LinkTelemetry | None = None  # the single link's observer (its recovery rounds)
        self.persistence = (
            Persistence(store, self.table, version=lambda: self.version, keep_transcripts=keep_transcripts)
            if store is not None
            else None
        )
        self.pool: PoolLinks | None = None
        self.pool_recovery: PoolRecovery | None = None
        if pool is None:
            self.supervisor = self.build_supervisor(
                connector, self.recover, self.table.dropped, self.emit_state, on_fail=self.table.closed
            )
            return
        assert isinstance(self.recoverer, PoolRecoverer)
        self.pool = PoolLinks(
            pool.endpoints,
            pool.connectors,
            placement=pool.placement,
            table=self.table,
            make_supervisor=self.build_supervisor,
            emit_state=self.emit_state,
            queue=queue,
            clock=clock,
            version=lambda: self.version,
            probe_timeout=timeouts.probe,
        )
        self.pool_recovery = PoolRecovery(
            self.pool,
            table=self.table,
            recoverer=self.recoverer,
            placement=pool.placement,
            failover_delay=pool.failover_delay,
            concurrency=recovery_concurrency,
            clock=clock,
            version=lambda: self.version,
            probe_timeout=timeouts.probe,
            on_outcomes=self._on_pool_outcomes if self.persistence or self.telemetry else None,
        )

    def build_supervisor(
        self,
        connector: Connector,
        recover: Callable[[Connection, Any], Any],
        on_drop: Callable[[Any], None],
        on_state: Callable[[ConnectionState], None],
        *,
        on_fail: Callable[[BaseException], None] | None = None,
    ) -> Supervisor:
        """One link's supervisor (the only one, or one per instance of a pool)."""
        observer = self.telemetry.link() if self.telemetry is not None else None
        if observer is not None:
            on_state = observer.watch(on_state)
            if recover == self.recover:  # the single link: its recovery rounds are its episodes
                self.link_telemetry = observer
        return Supervisor(
            connector,
            initialize=self.initialize,
            recover=recover,
            policy=self._retry,
            clock=self.clock,
            queue=self._queue,
            on_state=on_state,
            on_drop=on_drop,
            on_fail=on_fail,
            on_request=self.router,
            on_notification=self.on_notification,
            on_protocol_error=self.on_protocol_error,
            refresh_credentials=self.refresh if self.callbacks.refresh_credentials is not None else None,
            request_timeout=self.timeouts.request,
            connect_timeout=self.timeouts.connect,
            rng=self._rng,
            max_incoming_requests=self.max_incoming_requests,
            observer=observer,
        )

    def _on_pool_outcomes(self, outcomes: list[RecoveryOutcome]) -> None:
        if self.persistence is not None:
            self.persistence.recovered(outcomes)
        if self.telemetry is not None:
            self.telemetry.recovered(outcomes)

    # -- links ----------------------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self.pool.state if self.pool is not None else self.supervisor.state

    @property
    def closing(self) -> bool:
        return self.pool.closing if self.pool is not None else self.supervisor.closing

    @property
    def primary(self) -> Supervisor:
        """Where calls that concern no session go."""
        return self.pool.primary if self.pool is not None else self.supervisor

    async def start(self) -> None:
        """Restore the stored sessions (if a store is set), then connect; restored sessions are
        recovered on the first connection, before it counts as connected.

        Raises:
            SessionStoreError: The store cannot be read (the client is then failed).
        """
        self.emit_state(self.state)
        restored = 0
        if self.persistence is not None:
            try:
                restored = await self.persistence.restore()
            except BaseException as exc:
                (self.supervisor if self.pool is None else self.pool).fail(exc)
                raise
        if self.pool is None:
            return await self.supervisor.start(recover=restored > 0)
        await self.pool.start()
        if restored:  # where each one is now: one fan-out, then a recovery where the route says
            assert self.pool_recovery is not None
            await self.pool_recovery.adopt()

    async def recover(self, conn: Connection, init: InitializeResponse) -> None:
        """One recovery round (the supervisor's routine), then the store brought in step."""
        observer = self.link_telemetry
        if observer is None:
            await self._recover(conn, init)
            return
        with observer.recovering():
            observer.recovered(await self._recover(conn, init))

    async def _recover(self, conn: Connection, init: InitializeResponse) -> list[RecoveryOutcome]:
        if self.persistence is None:
            return await self.recoverer.recover(conn, init)
        reported: list[RecoveryOutcome] = []  # none when a drop cut the round off: reported by the next
        try:
            reported = await self.recoverer.recover(conn, init)
        finally:
            self.persistence.recovered(reported)
        return reported

    def supervisors(self) -> list[Supervisor]:
        """Every link started so far."""
        if self.pool is None:
            return [self.supervisor]
        return [link.supervisor for link in self.pool.links if link.supervisor is not None]

    async def link_for(self, tracked: Tracked | None, method: str) -> Supervisor:
        """Where a session's calls go: its home instance's link (waiting while it moves)."""
        if self.pool is None:
            return self.supervisor
        if tracked is None:
            return self.pool.primary
        return await self.pool.session_link(tracked, method)

    async def call(self, tracked: Tracked | None, method: str, params: Callable[[], Any], **options: Any) -> Any:
        """A request for a session (or none), on the link where it lives."""
        return await (await self.link_for(tracked, method)).call(method, params, **options)

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
        else:
            await self.supervisor.aclose()
        self.table.closed()
        await self.dispatcher.aclose()
        if self.persistence is not None:
            await self.persistence.bridge.aclose()
        if self.telemetry is not None:
            self.telemetry.close()

    # -- codec and capabilities -------------------------------------------------------------------

    def wire(self, value: Any) -> Any:
        return to_wire(value, protocol_version=self.version)

    def decode(self, cls: type[T], data: Any) -> T:
        return from_wire(cls, data, protocol_version=self.version)

    def require(self, method: str) -> None:
        """Raises ``ClientClosed`` before connecting, ``CapabilityNotSupported`` when the agent did
        not advertise ``method``."""
        init = self.init
        if init is None:
            raise ClientClosed("not connected")
        if method == "session/load" and self.version >= 2:
            raise CapabilityNotSupported(method, "protocol version 1 (v2 replays with session/resume)")
        if not init.agent_capabilities.supports(method):
            raise CapabilityNotSupported(method, init.agent_capabilities.capability_path(method, self.version))

    # -- sessions -----------------------------------------------------------------------------------

    def stored(self, tracked: Tracked) -> Tracked:
        """The app opened ``tracked`` (new, fork, load, resume): save it in the store, if any."""
        if self.persistence is not None:
            self.persistence.tracked(tracked)
        return tracked

    def untrack(self, session_id: str) -> None:
        """Stop tracking a session (closed or forgotten by the app) and delete it from the store."""
        tracked = self.table.get(session_id)
        if tracked is not None and self.persistence is not None:
            self.persistence.forget(tracked)
        self.table.untrack(session_id)

    def store_changed(self, session_id: str, **fields: Any) -> None:
        """The app set ``mode_id`` / ``model_id`` on a session: keep it in the store, if any."""
        tracked = self.table.get(session_id)
        if tracked is not None and self.persistence is not None:
            self.persistence.changed(tracked, **fields)

    def store_config_changed(self, session_id: str, option_id: str, value: Any) -> None:
        """The app set one config option of a session: keep it in the store, if any."""
        tracked = self.table.get(session_id)
        if tracked is not None and self.persistence is not None:
            self.persistence.config_changed(tracked, option_id, value)

    async def attach(self, request: Any, method: str, *, replay: bool) -> Tracked:
        """An app-initiated load / resume: track the session, attach it (updates before the answer
        are replay or a snapshot), and forget it again if the agent refused (a session this client
        did not track before)."""
        known = request.session_id in self.table
        tracked = self.table.track(
            Session(session_id=request.session_id, cwd=request.cwd), cwd=request.cwd, mcp_servers=request.mcp_servers
        )
        link = self.supervisor if self.pool is None else await self.pool.attach_link(tracked, known=known)
        conn = link.connection
        ordered = conn is None or conn.transport.info.ordered
        answered = open_attach_window(self.table, tracked, replay=replay, ordered=ordered, clock=self.clock)
        try:
            result = await link.call(method, lambda: self.wire(request), on_answer=answered)
        except BaseException as exc:
            attach_failed(self.table, tracked, exc)
            if not known:
                self.table.untrack(request.session_id)
            raise
        answered()
        tracked.record = record_after_attach(tracked, method, result, self.version)
        return tracked

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        def remember(settings: Settings) -> None:
            settings.mode_id = mode_id

        build = lambda sid: SetSessionModeRequest(session_id=sid, mode_id=mode_id)  # noqa: E731
        await self._set_option(session_id, "session/set_mode", build, remember)
        self.store_changed(self.table.current_id(session_id), mode_id=mode_id)

    async def set_model(self, session_id: str, model_id: str) -> None:
        def remember(settings: Settings) -> None:
            settings.model_id = model_id

        build = lambda sid: SetSessionModelRequest(session_id=sid, model_id=model_id)  # noqa: E731
        await self._set_option(session_id, "session/set_model", build, remember)
        self.store_changed(self.table.current_id(session_id), model_id=model_id)

    async def set_config_option(
        self, session_id: str, config_id: str, value: Any, kind: str | None
    ) -> tuple[SessionConfigOption, ...]:
        def remember(settings: Settings) -> None:
            settings.config[config_id] = (value, kind)

        def build(sid: str) -> SetSessionConfigOptionRequest:
            return SetSessionConfigOptionRequest(session_id=sid, config_id=config_id, value=value, type=kind)

        result = await self._set_option(session_id, "session/set_config_option", build, remember)
        self.store_config_changed(self.table.current_id(session_id), config_id, value)
        return self.decode(SetSessionConfigOptionResponse, result).config_options

    async def _set_option(
        self, session_id: str, method: str, build: Callable[[str], Any], remember: Callable[[Settings], None]
    ) -> Any:
        """Send a setting (``build`` makes the params from the session's id at send time). Once the
        agent accepts, ``remember`` records the choice on the tracked session, so a recovery that
        rebuilds the session restores it.

        Raises:
            CapabilityNotSupported: The session's record (the agent's answer to ``session/new``,
                load or resume) offers no models (``set_model``) or no config options
                (``set_config_option``).
        """
        self.require(method)
        current = self.table.current_id
        tracked = self.table.get(current(session_id))
        if tracked is not None:
            offered = {"session/set_model": "models", "session/set_config_option": "config_options"}.get(method)
            if offered is not None and getattr(tracked.record, offered) is None:
                raise CapabilityNotSupported(method, f"{offered} in the session's answer (session/new, load, resume)")
        result = await self.call(tracked, method, lambda: self.wire(build(current(session_id))))
        if tracked is not None:
            remember(tracked.settings)
        return result

    async def run_turn(self, tracked: Tracked, blocks: tuple[ContentBlock, ...], timeout: float | None) -> PromptResult:
        """One prompt turn (see :meth:`AcpClient.prompt <acp_client.AcpClient.prompt>`)."""
        future: asyncio.Future[PromptResult] = asyncio.get_running_loop().create_future()
        turn = self.table.begin_turn(tracked, blocks, _settle(future))
        if self.persistence is not None:
            self.persistence.touched(tracked)  # the most recently used session from now on

        def params() -> Any:
            # Built when the prompt is actually sent (after any recovery it waited for): only then
            # is it part of the conversation, and only then does a new turn begin.
            if future.done():  # the recovery it waited for abandoned the session: not sent
                future.result()
            self.table.prompt_sent(tracked, echoes_prompts=self.version >= 2)
            return self.wire(PromptRequest(session_id=tracked.session_id, prompt=blocks))

        try:
            result = await self._send_prompt(tracked, params, timeout, turn.accept)
            response = self.decode(PromptResponse, result)
            if self.version < 2 or response.stop_reason is not None:
                tracked.transcript.end_turn()
                return PromptResult(response.stop_reason, response.message_id, response.usage)
            turn.message_id = response.message_id
            with move_on_after(self.clock, timeout):  # v2: the turn ends later, with state_update idle
                ended = await future
                return PromptResult(ended.stop_reason, response.message_id, ended.usage)
            assert timeout is not None
            raise RequestTimeout("session/prompt", timeout)
        except ConnectionLost as exc:
            if exc.may_have_executed and not self.closing:  # a drop, not the app closing
                if self.telemetry is not None:
                    self.telemetry.turn_interrupted(tracked.session_id, self.link_telemetry)
                interrupted = TurnInterrupted(tracked.session_id, blocks)
                await call_app(self.callbacks.on_turn_interrupted, interrupted, what="on_turn_interrupted")
            raise
        finally:
            turn.done = True
            self.table.end_turn(tracked, turn)
            if self.persistence is not None:
                self.persistence.turn_ended(tracked)

    async def _send_prompt(
        self, tracked: Tracked, params: Callable[[], Any], timeout: float | None, on_answer: Callable[[], None]
    ) -> Any:
        """Send ``session/prompt``; with ``retry_unsent_prompts``, one that never reached the agent
        (``ConnectionLost`` with ``may_have_executed=False``) is sent again once the client is
        connected (at most :data:`MAX_PROMPT_RESENDS` times). One the agent may have acted on
        never is."""
        resends = 0
        while True:
            try:
                return await self.call(tracked, "session/prompt", params, timeout=timeout, on_answer=on_answer)
            except ConnectionLost as exc:
                if exc.may_have_executed or not self.retry_unsent_prompts or resends >= MAX_PROMPT_RESENDS:
                    raise
                if self.closing or self.state.is_terminal:
                    raise
                resends += 1
                logger.info("session/prompt never reached the agent (%s): sending it again after recovery", exc)
                await self._until_connected()

    async def _until_connected(self) -> None:
        """Wait until the client is connected again (returns at once if it is)."""
        queue: asyncio.Queue[ConnectionState] = asyncio.Queue()
        self.state_queues.append(queue)
        try:
            state = self.state
            while state.state is not State.CONNECTED:
                if state.is_terminal:
                    return  # the next send raises the client's own error
                state = await queue.get()
        finally:
            self.state_queues.remove(queue)

    # -- what the connection reports ------------------------------------------------------------------

    async def initialize(self, conn: Connection, timeout: float | None = None) -> InitializeResponse:
        """``initialize`` on a fresh link, within ``timeout`` (default: the connect timeout)."""
        fs = self.handlers.file_system
        capabilities = ClientCapabilities(
            fs=FileSystemCapability(read_text_file=bool(fs and fs.read), write_text_file=bool(fs and fs.write)),
            terminal=self.handlers.terminal is not None,
        )
        response = await initialize(
            conn,
            proposed=self.proposed_version,
            client_info=self.client_info,
            capabilities=capabilities,
            timeout=timeout if timeout is not None else self.timeouts.connect,
        )
        self.init = response
        self.version = response.protocol_version
        return response

    async def refresh(self) -> None:
        await call_app(self.callbacks.refresh_credentials, what="refresh_credentials")

    def emit_state(self, state: ConnectionState) -> None:
        if state.is_terminal:  # what a cut-off recovery finished is told before the end
            self.recoverer.flush_unreported(self.dispatcher.deliver)
        for queue in self.state_queues:
            queue.put_nowait(state)
        self.dispatcher.deliver(self.callbacks.on_state_change, state, what="on_state_change")

    def on_protocol_error(self, error: AcpError) -> None:
        self.dispatcher.deliver(self.callbacks.on_protocol_error, error, what="on_protocol_error")

    def on_notification(self, method: str, params: Any) -> None:
        if method != "session/update":
            self.dispatcher.deliver(self.callbacks.on_notification, method, params, what="on_notification")
            return
        # decode_update_params()'s hot path inlined (text chunks, simple tool call or state updates)
        session_id: Any = params.get("sessionId") if type(params) is dict else None
        raw: Any = params.get("update") if type(session_id) is str else None
        fast = FAST_UPDATES.get(raw.get("sessionUpdate")) if type(raw) is dict else None
        update = fast(raw) if fast is not None else None
        if update is None:  # anything else, or a malformed one: the full decoder decides
            try:
                session_id, update = decode_update_params(params, protocol_version=self.version)
            except InvalidMessage as exc:
                logger.warning("undecodable session/update: %s", exc)
                self.on_protocol_error(exc)
                return
        event = self.table.receive(session_id, update)
        counts = self.update_counts
        if counts is not None:
            variant = type(update)
            counts[variant] = counts.get(variant, 0) + 1
        listeners = self.update_listeners
        if len(listeners) == 1:  # the common case, without the copy that guards a listener removing itself
            self.dispatcher.deliver_one(listeners[0], event, "on_update")
            return
        for listener in list(listeners):
            self.dispatcher.deliver(listener, event, what="on_update")
