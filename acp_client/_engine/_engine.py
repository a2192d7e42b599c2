"""The machinery behind :class:`~acp_client.AcpClient`: the session table, recoverer, links and
callback delivery wired together, the session calls, what the connection reports, and the steps of
a prompt turn. It reaches its links only through :class:`~acp_client._link._links.Links`, and tells
its subscribers what happens to sessions (:class:`~acp_client._link._events.SessionEvents`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .._codec import decode_update_params, from_wire, to_wire
from .._codec._fast import FAST_UPDATES
from .._link._client_state import StateMachine
from .._link._events import SessionEvents
from .._link._links import LinkKit, Links, SingleLink
from .._link._opening import opener
from .._link._queue import Ticket
from .._link._supervisor import Supervisor
from .._recovery._not_found import says_session_not_found
from .._recovery._recoverer import Recoverer, attach
from .._rpc._connection import Connection
from .._rpc._handshake import initialize
from .._sessions._coherence import Settings, with_config_options, with_config_value, with_mode, with_model
from .._sessions._table import SessionTable, Tracked, Turn
from .._telemetry import instrumentation
from .._util._checks import check_seconds
from .._util._delivery import Dispatcher, call_app
from .._util._logging import get_logger
from .._util._tasks import TaskSet
from .._util._version import __version__
from ..clock import Clock, move_on_after
from ..config import Callbacks, QueueOptions, Timeouts
from ..exceptions import (
    AcpError,
    CapabilityNotSupported,
    ClientClosed,
    ConnectionLost,
    InvalidMessage,
    RequestTimeout,
    RpcError,
    SessionNotFound,
    TurnInProgress,
)
from ..group import LinksPlan
from ..handlers import ClientHandlers, RequestRouter
from ..location import Location
from ..state import (
    ConnectionState,
    Probe,
    PromptResult,
    RecoveryOutcome,
    RecoveryPath,
    SessionPage,
    State,
    TurnInterrupted,
    UpdateEvent,
)
from ..store._bridge import StoreBridge
from ..transcript import SegmentStart, TurnStatus
from ..transports._security import check_session_id
from ..transports.base import Connector, StreamResumed, TransportInfo
from ..types import (
    CancelNotification,
    ClientCapabilities,
    CloseSessionRequest,
    ContentBlock,
    FileSystemCapability,
    ForkSessionRequest,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    McpServer,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    Session,
    SessionConfigOption,
    SessionStatusRequest,
    SessionStatusResponse,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    SetSessionModelRequest,
    SetSessionModeRequest,
    TextContent,
)
from ._acknowledge import acknowledge, retrieve, settle, status_of
from ._lost_again import recover_lost, to_resend
from ._persistence import Persistence

logger = get_logger("acp_client.client")

T = TypeVar("T")

CLIENT_INFO = Implementation(name="acp-reconnect", version=__version__, title="acp_client")

#: How many times one prompt that never reached the agent is sent again (``retry_unsent_prompts``).
MAX_PROMPT_RESENDS = 3

#: The method, request and record change of each choice the app sets on a session.
_CHOICES: dict[str, tuple[str, Callable[..., Any], Callable[[Session, str], Session]]] = {
    "mode_id": ("session/set_mode", SetSessionModeRequest, with_mode),
    "model_id": ("session/set_model", SetSessionModelRequest, with_model),
}


class Engine:
    """One client's table, recoverer, supervisor and dispatcher (internal; options already checked)."""

    def __init__(
        self,
        connector: Connector,
        options: Mapping[str, Any],
        *,
        clock: Clock,
        plan: LinksPlan | None = None,
        store: StoreBridge | None = None,
    ) -> None:
        """``options``: every :class:`~acp_client.config.ClientOptions` key; ``plan``: an endpoint group's links."""
        self.options = options
        #: A ``session/cancel`` after an awaiting task was cancelled.
        self._background = TaskSet("the client", self.crashed)
        self.proposed_version: int = options["protocol_version"]
        self.version: int = self.proposed_version
        self.client_info: Implementation = options["client_info"] or CLIENT_INFO
        self.handlers: ClientHandlers = options["handlers"] or ClientHandlers()
        self.callbacks: Callbacks = options["callbacks"] or Callbacks()
        self.timeouts: Timeouts = options["timeouts"] or Timeouts()
        timeouts, keep_transcripts = self.timeouts, options["keep_transcripts"]
        concurrency = options["recovery_concurrency"]
        self.clock = clock
        self.init: InitializeResponse | None = None
        self.update_listeners: list[Callable[[UpdateEvent], Any]] = []
        if self.callbacks.on_update is not None:
            self.update_listeners.append(self.callbacks.on_update)
        self.state_queues: list[asyncio.Queue[ConnectionState]] = []
        self.closing = False
        #: The instances of an endpoint group, in the order given (empty for a single endpoint).
        self.endpoints = plan.endpoints if plan is not None else ()
        self.client_state = StateMachine(self.emit_state)
        self.dispatcher = Dispatcher()
        self.table = SessionTable(keep_transcripts=keep_transcripts, replays_on_resume=options["replays_on_resume"])
        self.router = RequestRouter(
            self.handlers, session_roots=self.table.roots, protocol_version=lambda: self.version
        )
        self.recoverer = Recoverer(
            self.table,
            callbacks=lambda: self.callbacks,
            timeouts=timeouts,
            concurrency=concurrency,
            clock=clock,
            version=lambda: self.version,
        )
        self.observers: list[SessionEvents] = []
        self.telemetry = instrumentation(
            options["telemetry"],
            clock=clock.monotonic,
            version=lambda: self.version,
            queued=lambda: self.links.queued,
        )
        self.update_counts = self.telemetry.update_counts if self.telemetry is not None else None
        self.persistence = (
            Persistence(store, self.table, version=lambda: self.version, keep_transcripts=keep_transcripts)
            if store is not None
            else None
        )
        if self.persistence is not None:
            self.observers.append(self.persistence)
        kit = LinkKit(
            table=self.table,
            recoverer=self.recoverer,
            clock=clock,
            version=lambda: self.version,
            timeouts=timeouts,
            queue=options["queue"] or QueueOptions(),
            concurrency=concurrency,
            supervisor=self.build_supervisor,
            state=self.client_state,
            subscribe=self.observers.append,
            crashed=self.crashed,
            recovered=self.recovered,
            opener=opener(
                proposed=lambda: self.version,
                client_info=self.client_info,
                capabilities=self.capabilities(),
                clock=clock,
                timeout=timeouts.connect,
                # locate's and the copy-closing links: their requests traced like every other one
                observer=self.telemetry.link().calls if self.telemetry is not None else None,
            ),
        )
        self.links: Links = plan.build(kit) if plan is not None else SingleLink(kit, connector)
        if self.persistence is not None:  # where each session lives is recorded with it
            self.persistence.placement_of = self.links.placement_of
        self.lease_check: Callable[[str], Awaitable[None]] | None = None  # a shared store's Ownership.check

    def build_supervisor(
        self,
        connector: Connector,
        *,
        recover: Callable[[Connection, Any], Any],
        on_drop: Callable[[Any], None],
        on_state: Callable[[ConnectionState], None],
        on_fail: Callable[[BaseException], None],
    ) -> Supervisor:
        """One link's supervisor (the only one, or one per instance of an endpoint group)."""
        observer = self.telemetry.link() if self.telemetry is not None else None
        if observer is not None:
            on_state = observer.watch(on_state)
        refresh = self.callbacks.refresh_credentials
        if refresh is not None:  # through call_app: a refresh that raises is logged
            refresh = functools.partial(call_app, refresh, what="refresh_credentials")
        return Supervisor(
            connector,
            initialize=self.initialize,
            recover=recover,
            policy=self.options["retry"],
            clock=self.clock,
            queue=self.options["queue"] or QueueOptions(),
            on_state=on_state,
            on_drop=on_drop,
            on_fail=on_fail,
            on_request=self.router,
            on_notification=self.on_notification,
            on_protocol_error=self.on_protocol_error,
            refresh_credentials=refresh,
            request_timeout=self.timeouts.request,
            connect_timeout=self.timeouts.connect,
            rng=self.options["rng"],
            max_incoming_requests=self.options["max_incoming_requests"],
            observer=observer,
            on_stream_resumed=self.on_stream_resumed,
        )

    def emit(self, event: Callable[[SessionEvents], None]) -> None:
        """Tell every subscriber ``event`` (``lambda o: o.tracked(tracked)``)."""
        for observer in self.observers:
            event(observer)

    def recovered(self, outcomes: list[RecoveryOutcome], in_episode: bool) -> None:
        """The "recovered" event; telemetry records the outcomes unless a link's episode did already."""
        self.emit(lambda o: o.recovered(outcomes))
        if self.telemetry is not None and not in_episode:
            self.telemetry.recovered(outcomes)

    @property
    def state(self) -> ConnectionState:
        return self.client_state.state

    @property
    def primary(self) -> Supervisor:
        return self.links.primary

    async def start(self) -> None:
        """Restore the stored sessions (recovered on the first connection, before it counts as
        connected), then connect. Raises ``SessionStoreError`` (the client is then failed)."""
        self.emit_state(self.state)
        restored = 0
        if self.persistence is not None:
            try:
                restored = await self.persistence.restore()
            except BaseException as exc:
                self.links.fail(exc)
                raise
        await self.links.start(restored=restored > 0)

    async def call(
        self,
        tracked: Tracked | None,
        method: str,
        params: Callable[[], Any],
        *,
        idempotent: bool = False,
        **options: Any,
    ) -> Any:
        """A request for a session (or none), on the link where it lives. Its params are built once
        the link is ready (a recovery it waited for may have renamed the session); an
        ``idempotent`` one cut off by a drop is sent again, where the session lives then."""
        ticket = Ticket()  # one admission and one max_age, however many queues it waits in
        while True:
            link = await self.links.link_for(tracked, method, ticket)
            await link.ready(method, ticket)
            if tracked is not None and self.lease_check is not None:
                await self.lease_check(tracked.session_id)  # no send without a live lease
            try:
                return await link.call(method, params(), **options)
            except ConnectionLost:
                if not (idempotent and link.retries()):
                    raise
                logger.debug("retrying %s after the connection dropped", method)
                ticket = Ticket()  # a new wait

    async def aclose(self) -> None:
        self.closing = True
        await self.links.aclose()
        self.table.closed()
        await self.dispatcher.aclose()
        if self.persistence is not None:
            await self.persistence.aclose()
        if self.telemetry is not None:
            self.telemetry.close()

    def wire(self, value: Any) -> Any:
        return to_wire(value, protocol_version=self.version)

    def decode(self, cls: type[T], data: Any) -> T:
        return from_wire(cls, data, protocol_version=self.version)

    def require(self, method: str) -> None:
        """Raises ``ClientClosed`` before connecting, ``CapabilityNotSupported`` when ``method`` is not advertised."""
        init = self.init
        if init is None:
            raise ClientClosed("not connected: call connect() first")
        if method == "session/load" and self.version >= 2:
            raise CapabilityNotSupported(method, "protocol version 1 (v2 replays with session/resume)")
        if not init.agent_capabilities.supports(method):
            raise CapabilityNotSupported(method, init.agent_capabilities.capability_path(method, self.version))

    def capabilities(self) -> ClientCapabilities:
        """What this client offers the agent in ``initialize`` (every link, locate's included)."""
        fs = self.handlers.file_system
        return ClientCapabilities(
            fs=FileSystemCapability(read_text_file=bool(fs and fs.read), write_text_file=bool(fs and fs.write)),
            terminal=self.handlers.terminal is not None,
        )

    async def opened(self, tracked: Tracked) -> Tracked:
        """The "tracked" event (new, fork, load, resume); with a shared store, once its record is written."""
        self.emit(lambda o: o.tracked(tracked))
        if self.persistence is not None:
            await self.persistence.stored(tracked)
        return tracked

    def untrack(self, session_id: str) -> None:
        """Stop tracking a session (closed or forgotten by the app): the "forgotten" event."""
        tracked = self.table.get(session_id)
        if tracked is not None:
            self.emit(lambda o: o.forgotten(tracked))
        self.table.untrack(session_id)

    async def new(self, cwd: str, mcp_servers: tuple[McpServer, ...], extra: tuple[str, ...]) -> Tracked:
        """``session/new`` on the link the links place it on."""
        request = NewSessionRequest(cwd=cwd, mcp_servers=mcp_servers, additional_directories=extra)
        supervisor = await self.links.link_for(None, "session/new")
        over: list[TransportInfo] = []
        result = await supervisor.call("session/new", self.wire(request), answered_over=over.append)
        record = Session.from_new(self.decode(NewSessionResponse, result), cwd=cwd)
        tracked = self.table.track(record, cwd=cwd, mcp_servers=mcp_servers, additional_directories=extra)
        tracked.held_by(over[-1])
        self.emit(lambda o: o.settled(tracked, supervisor))
        return await self.opened(tracked)

    async def fork(self, session_id: str, cwd: str, mcp_servers: tuple[McpServer, ...]) -> Tracked:
        """``session/fork`` where the parent lives; the fork lives there too."""
        self.require("session/fork")
        parent = self.table.current_id(session_id)
        request = ForkSessionRequest(session_id=parent, cwd=cwd, mcp_servers=mcp_servers)
        source = self.table.get(parent)
        supervisor = await self.links.link_for(source, "session/fork")
        over: list[TransportInfo] = []
        result = await supervisor.call("session/fork", self.wire(request), answered_over=over.append)
        record = Session.from_fork(self.decode(ForkSessionResponse, result), cwd=cwd, forked_from=parent)
        tracked = self.table.track(record, cwd=cwd, mcp_servers=mcp_servers)
        tracked.held_by(over[-1])
        if source is not None:
            self.emit(lambda o: o.settled(tracked, supervisor))
        return await self.opened(tracked)

    async def list_page(self, cwd: str | Path | None, cursor: str | None) -> SessionPage:
        """One page of ``session/list`` (read-only: retried transparently on a drop)."""
        self.require("session/list")
        request = ListSessionsRequest(cwd=str(cwd) if cwd is not None else None, cursor=cursor)
        result = await self.primary.call("session/list", self.wire(request), idempotent=True)
        response = self.decode(ListSessionsResponse, result)
        return SessionPage(tuple(Session.from_info(info) for info in response.sessions), response.next_cursor)

    async def status(self, session_id: str) -> Session:
        """``session/status``, merged into the tracked record; "not found" (-32002, or any spelling
        of it) is ``Probe.UNKNOWN``."""
        self.require("session/status")
        table = self.table
        current = check_session_id(table.current_id(session_id))

        def params() -> Any:  # at send time: a recovery it waited for may have renamed the session
            nonlocal current
            current = table.current_id(session_id)
            return self.wire(SessionStatusRequest(session_id=current))

        try:
            result = await self.call(table.get(current), "session/status", params, idempotent=True)
        except RpcError as exc:
            if isinstance(exc, SessionNotFound) or says_session_not_found(exc, current):
                return Session(session_id=current, status=Probe.UNKNOWN)
            raise
        record = Session.from_status(current, self.decode(SessionStatusResponse, result))
        tracked = table.get(current)
        if tracked is None:
            return record
        tracked.record = tracked.record.merge(record)
        return tracked.record

    async def close(self, session_id: str) -> None:
        """``session/close`` where the session lives, then stop tracking it (by its id then)."""
        self.require("session/close")
        current = self.table.current_id
        request = lambda: self.wire(CloseSessionRequest(session_id=current(session_id)))  # noqa: E731
        await self.call(self.table.get(session_id), "session/close", request)
        self.untrack(current(session_id))

    async def locate(self, session_id: str, timeout: float | None) -> Location:
        """Every instance's ``session/status`` answer, over the live links where there are some."""
        check_seconds("timeout", timeout, optional=True)
        current = check_session_id(self.table.current_id(session_id))
        return await self.links.locate(current, timeout)

    async def attach(self, request: Any, method: str, *, replay: bool) -> Tracked:
        """An app-initiated load / resume: track the session and attach it (updates before the
        answer are replay or a snapshot); one not tracked before is forgotten if the agent refuses."""
        known = request.session_id in self.table
        tracked = self.table.track(
            Session(session_id=request.session_id, cwd=request.cwd), cwd=request.cwd, mcp_servers=request.mcp_servers
        )
        if not known:
            tracked.transcript.began = SegmentStart.REPLAYED if replay else SegmentStart.RESUMED
        link = await self.links.link_for(tracked, method)
        self.emit(lambda o: o.settled(tracked, link))
        conn = link.connection
        ordered = conn is None or conn.transport.info.ordered

        async def send(answered: Callable[[], None]) -> Any:
            try:
                return await link.call(method, self.wire(request), on_answer=answered, answered_over=tracked.held_by)
            except BaseException:
                if not known:
                    self.table.untrack(request.session_id)
                raise

        await attach(
            self.table,
            tracked,
            method,
            send,
            link.call,
            replay=replay,
            ordered=ordered,
            version=self.version,
            clock=self.clock,
        )
        return tracked

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        await self._set_choice(session_id, "mode_id", mode_id)

    async def set_model(self, session_id: str, model_id: str) -> None:
        await self._set_choice(session_id, "model_id", model_id)

    async def _set_choice(self, session_id: str, field: str, value: str) -> None:
        """Set the session's mode or model (``field``: ``mode_id`` / ``model_id``)."""
        method, request, coherent = _CHOICES[field]

        def remember(settings: Settings) -> None:
            setattr(settings, field, value)

        await self._set_option(session_id, method, lambda sid: request(session_id=sid, **{field: value}), remember)
        tracked = self._tracked(session_id)
        if tracked is not None:  # the agent accepted: every field of the record that names it says so
            tracked.record = coherent(tracked.record, value)
            self.emit(lambda o: o.changed(tracked, **{field: value}))

    async def set_config_option(
        self, session_id: str, config_id: str, value: Any, kind: str | None
    ) -> tuple[SessionConfigOption, ...]:
        def remember(settings: Settings) -> None:
            settings.config[config_id] = (value, kind)

        def build(sid: str) -> SetSessionConfigOptionRequest:
            return SetSessionConfigOptionRequest(session_id=sid, config_id=config_id, value=value, type=kind)

        result = await self._set_option(session_id, "session/set_config_option", build, remember)
        options = self.decode(SetSessionConfigOptionResponse, result).config_options
        tracked = self._tracked(session_id)
        if tracked is not None:
            if options:
                tracked.record = with_config_options(tracked.record, options)
            else:
                tracked.record = with_config_value(tracked.record, config_id, value)
            self.emit(lambda o: o.config_changed(tracked, config_id, value))
        return options

    def _tracked(self, session_id: str) -> Tracked | None:
        return self.table.get(self.table.current_id(session_id))

    async def _set_option(
        self, session_id: str, method: str, build: Callable[[str], Any], remember: Callable[[Settings], None]
    ) -> Any:
        """Send a setting (``build`` makes the params from the session's id at send time); once the
        agent accepts, ``remember`` records it on the tracked session, for a recovery to restore.
        Raises ``CapabilityNotSupported`` when the session's record offers no models or no config
        options to set."""
        self.require(method)
        current = self.table.current_id
        tracked = self.table.get(current(session_id))
        if tracked is not None:
            offered = {"session/set_model": "models", "session/set_config_option": "config_options"}.get(method)
            if offered is not None and getattr(tracked.record, offered) is None:
                raise CapabilityNotSupported(method, f"{offered} in the session's answer (session/new, load, resume)")
        try:
            result = await self.call(tracked, method, lambda: self.wire(build(current(session_id))))
        except RpcError as exc:
            if tracked is not None:
                await recover_lost(self, tracked, method, exc)
            raise
        if tracked is not None:
            remember(tracked.settings)
        return result

    async def run_turn(self, tracked: Tracked, blocks: tuple[ContentBlock, ...], timeout: float | None) -> PromptResult:
        """One prompt turn (see :meth:`AcpClient.prompt <acp_client.AcpClient.prompt>`). Cancel
        means cancel: on timeout or cancellation ``session/cancel`` is sent and the agent gets
        ``Timeouts.cancel_grace`` to end the turn; one it has not ended stays the session's running
        turn, which the next prompt waits for up to the same grace (then ``TurnInProgress``)."""
        await self._previous_turn_ended(tracked)
        future: asyncio.Future[PromptResult] = asyncio.get_running_loop().create_future()
        turn = self.table.begin_turn(tracked, blocks, settle(future))
        self.emit(lambda o: o.touched(tracked))  # the most recently used session from now on
        body = asyncio.ensure_future(self._turn(tracked, turn, future, blocks))
        body.add_done_callback(retrieve)  # a turn nobody awaits any more (cancelled) ends quietly
        tracked.turn_task = body
        try:
            with move_on_after(self.clock, timeout):
                return await acknowledge(body, future, tracked, self.persistence, self.lease_check)
        except asyncio.CancelledError:
            if not body.done():  # the awaiting task was cancelled, not the turn
                self._background.spawn(self._cancel_turn(tracked, body))
            raise
        assert timeout is not None
        await self._cancel_turn(tracked, body)
        raise RequestTimeout("session/prompt", timeout)

    async def _cancel_turn(self, tracked: Tracked, body: asyncio.Future[PromptResult]) -> None:
        """Send ``session/cancel`` for a turn still running, and wait up to the grace for it to end."""
        if body.done():
            return
        if tracked.turn is not None:
            tracked.turn.cancel_sent = True
        try:
            await self.cancel_session(tracked)
        except AcpError as exc:  # the link is down (the drop ends the turn) or closed
            logger.info("session/cancel for %s failed: %s", tracked.session_id, exc)
        with move_on_after(self.clock, self.timeouts.cancel_grace):
            await asyncio.wait({body})
        if not body.done():
            logger.info("session %s: the agent has not ended the cancelled turn yet", tracked.session_id)

    async def cancel_session(self, tracked: Tracked) -> None:
        """``session/cancel`` for ``tracked`` (a notification), on the link where it lives."""
        self.router.cancel_session(tracked.session_id)
        link = await self.links.link_for(tracked, "session/cancel")
        await link.ready("session/cancel")  # the session's id once the link is back
        await link.notify("session/cancel", self.wire(CancelNotification(session_id=tracked.session_id)))

    async def _previous_turn_ended(self, tracked: Tracked) -> None:
        """Wait up to the cancel grace for a cancelled turn the agent has not ended yet."""
        body = tracked.turn_task
        if body is None or body.done() or tracked.turn is None or not tracked.turn.cancel_sent:
            return  # (the table refuses a second prompt beside a running one)
        with move_on_after(self.clock, self.timeouts.cancel_grace):
            await asyncio.wait({body})
        if not body.done():
            raise TurnInProgress(
                f"session {tracked.session_id}: the agent has not ended the cancelled turn yet "
                "(session/cancel was sent); try again later"
            )

    def crashed(self, error: BaseException) -> None:
        """A task of the engine (or of its store's ownership) died of a bug: every link fails with it."""
        for supervisor in self.links.supervisors():
            supervisor.crashed(error)
        self.links.fail(error)

    async def _turn(
        self,
        tracked: Tracked,
        turn: Turn,
        future: asyncio.Future[PromptResult],
        blocks: tuple[ContentBlock, ...],
    ) -> PromptResult:
        def params() -> Any:
            # Built when the prompt is actually sent (after any recovery it waited for): only then
            # is it part of the conversation, and only then does a new turn begin.
            if future.done():  # the recovery it waited for abandoned the session: not sent
                future.result()
            self.table.prompt_sent(tracked, echoes_prompts=self.version >= 2)
            sent = blocks
            if self.options["carry_lost_context"] and tracked.lost_context_pending:
                lost = tracked.transcript.lost_context()
                context = f"[Context: the agent lost the earlier part of this conversation; it was:]\n{lost}\n"
                sent = (TextContent(text=context + "[End of the earlier conversation.]"), *blocks)
                tracked.lost_context_pending = False
            return self.wire(PromptRequest(session_id=tracked.session_id, prompt=sent))

        again: RecoveryOutcome | None = None  # the recovery a "not found" refusal ran (once per prompt)
        try:
            try:
                result = await self._send_prompt(tracked, params, turn.accept)
            except RpcError as exc:
                again = await to_resend(self, tracked, turn, exc)
                if again is None or again.path is RecoveryPath.ABANDON or tracked.abandoned:
                    raise
                logger.info("session/prompt refused as not found: sending it again on %s", tracked.session_id)
                result = await self._send_prompt(tracked, params, turn.accept)  # once, on the new session
            response = self.decode(PromptResponse, result)
            if self.version < 2 or response.stop_reason is not None:
                self.table.turn_status(tracked, turn, status_of(response.stop_reason))
                return PromptResult(response.stop_reason, response.message_id, response.usage)
            turn.message_id = response.message_id
            ended = await future  # v2: the turn ends later, with state_update idle
            return PromptResult(ended.stop_reason, response.message_id, ended.usage)
        except RpcError as exc:
            self.table.turn_status(tracked, turn, TurnStatus.FAILED)  # refused: not an ordinary turn
            turn.done = True
            self.table.end_turn(tracked, turn)
            if again is None:
                await recover_lost(self, tracked, "session/prompt", exc)
            raise
        except ConnectionLost as exc:
            if exc.may_have_executed and not self.closing:  # a drop, not the app closing
                if self.telemetry is not None:  # an event of the outage too, on the single link
                    link = self.links.supervisor.observer if isinstance(self.links, SingleLink) else None
                    self.telemetry.turn_interrupted(tracked.session_id, link)
                interrupted = TurnInterrupted(tracked.session_id, blocks)
                await call_app(self.callbacks.on_turn_interrupted, interrupted, what="on_turn_interrupted")
            raise
        finally:
            turn.done = True
            self.table.turn_status(tracked, turn, TurnStatus.INTERRUPTED)  # unless it ended otherwise
            self.table.end_turn(tracked, turn)
            self.emit(lambda o: o.turn_ended(tracked))

    async def _send_prompt(self, tracked: Tracked, params: Callable[[], Any], on_answer: Callable[[], None]) -> Any:
        """Send ``session/prompt``; with ``retry_unsent_prompts``, one that never reached the agent is
        sent again once the client is connected (at most :data:`MAX_PROMPT_RESENDS` times)."""
        resends = 0
        while True:
            try:
                return await self.call(tracked, "session/prompt", params, timeout=None, on_answer=on_answer)
            except ConnectionLost as exc:
                if exc.may_have_executed or not self.options["retry_unsent_prompts"] or resends >= MAX_PROMPT_RESENDS:
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

    async def initialize(self, conn: Connection, timeout: float | None = None) -> InitializeResponse:
        """``initialize`` on a fresh link, within ``timeout`` (default: the connect timeout)."""
        response = await initialize(
            conn,
            proposed=self.proposed_version,
            client_info=self.client_info,
            capabilities=self.capabilities(),
            timeout=timeout if timeout is not None else self.timeouts.connect,
        )
        self.init = response
        self.version = response.protocol_version
        return response

    def emit_state(self, state: ConnectionState) -> None:
        if state.is_terminal:  # what a cut-off recovery finished is told before the end
            self.recoverer.flush_unreported(self.dispatcher.deliver)
        for queue in self.state_queues:
            queue.put_nowait(state)
        self.dispatcher.deliver(self.callbacks.on_state_change, state, what="on_state_change")

    def on_stream_resumed(self, event: StreamResumed) -> None:
        self.dispatcher.deliver(self.callbacks.on_stream_resumed, event, what="on_stream_resumed")

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
