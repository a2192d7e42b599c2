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
from typing import Any, TypeVar

from ._codec import decode_session_notification, from_wire, to_wire
from ._connection import Connection
from ._delivery import Dispatcher, call_app
from ._handshake import initialize
from ._recoverer import Recoverer, open_attach_window, record_after_attach
from ._sessions import SessionTable, Tracked
from ._supervisor import Supervisor
from .clock import Clock
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
from .state import ConnectionState, PromptResult, TurnInterrupted, UpdateEvent
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
    SessionNotification,
)

__all__ = ["Engine"]

logger = logging.getLogger("acp_client.client")

T = TypeVar("T")


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
    ) -> None:
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
        self.table = SessionTable(keep_transcripts=keep_transcripts)
        self.router = RequestRouter(handlers, session_roots=self.table.roots, protocol_version=lambda: self.version)
        self.recoverer = Recoverer(
            self.table,
            callbacks=lambda: self.callbacks,
            timeouts=timeouts,
            concurrency=recovery_concurrency,
            clock=clock,
            version=lambda: self.version,
        )
        self.supervisor = Supervisor(
            connector,
            initialize=self.initialize,
            recover=self.recoverer.recover,
            policy=retry,
            clock=clock,
            queue=queue,
            on_state=self.emit_state,
            on_drop=self.table.dropped,
            on_fail=self.table.closed,
            on_request=self.router,
            on_notification=self.on_notification,
            on_protocol_error=self.on_protocol_error,
            refresh_credentials=self.refresh if callbacks.refresh_credentials is not None else None,
            request_timeout=timeouts.request,
            rng=rng,
        )

    async def aclose(self) -> None:
        await self.supervisor.aclose()
        self.table.closed()
        await self.dispatcher.aclose()

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

    async def attach(self, request: Any, method: str, *, replay: bool) -> Tracked:
        """An app-initiated load / resume: track the session, attach it (updates before the answer
        are replay or a snapshot), and forget it again if the agent refused (a session this client
        did not track before)."""
        known = request.session_id in self.table
        tracked = self.table.track(
            Session(session_id=request.session_id, cwd=request.cwd), cwd=request.cwd, mcp_servers=request.mcp_servers
        )
        conn = self.supervisor.connection
        ordered = conn is None or conn.transport.info.ordered
        answered = open_attach_window(self.table, tracked, replay=replay, ordered=ordered, clock=self.clock)
        try:
            result = await self.supervisor.call(method, lambda: self.wire(request), on_answer=answered)
        except BaseException:
            answered()
            if not known:
                self.table.untrack(request.session_id)
            raise
        answered()
        tracked.record = record_after_attach(tracked, method, result, self.version)
        return tracked

    async def run_turn(self, tracked: Tracked, blocks: tuple[ContentBlock, ...], timeout: float | None) -> PromptResult:
        """One prompt turn (see :meth:`AcpClient.prompt <acp_client.AcpClient.prompt>`)."""
        future: asyncio.Future[PromptResult] = asyncio.get_running_loop().create_future()
        turn = self.table.begin_turn(tracked, blocks, _settle(future))

        def params() -> Any:
            # Built when the prompt is actually sent (after any recovery it waited for): only then
            # is it part of the conversation, and only then does a new turn begin.
            if future.done():  # the recovery it waited for abandoned the session: not sent
                future.result()
            self.table.prompt_sent(tracked, echoes_prompts=self.version >= 2)
            return self.wire(PromptRequest(session_id=tracked.session_id, prompt=blocks))

        timer = None
        try:
            result = await self.supervisor.call("session/prompt", params, timeout=timeout, on_answer=turn.accept)
            response = self.decode(PromptResponse, result)
            if self.version < 2 or response.stop_reason is not None:
                tracked.transcript.end_turn()
                return PromptResult(response.stop_reason, response.message_id, response.usage)
            turn.message_id = response.message_id
            if timeout is not None:
                expired = RequestTimeout("session/prompt", timeout)

                def expire() -> None:
                    turn.finish(expired)

                timer = self.clock.call_later(timeout, expire)
            ended = await future
            return PromptResult(ended.stop_reason, response.message_id, ended.usage)
        except ConnectionLost as exc:
            if exc.may_have_executed and not self.supervisor.closing:  # a drop, not the app closing
                interrupted = TurnInterrupted(tracked.session_id, blocks)
                await call_app(self.callbacks.on_turn_interrupted, interrupted, what="on_turn_interrupted")
            raise
        finally:
            if timer is not None:
                timer.cancel()
            turn.done = True
            self.table.end_turn(tracked, turn)

    # -- what the connection reports ------------------------------------------------------------------

    async def initialize(self, conn: Connection) -> InitializeResponse:
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
            timeout=self.timeouts.connect,
        )
        self.init = response
        self.version = response.protocol_version
        return response

    async def refresh(self) -> None:
        await call_app(self.callbacks.refresh_credentials, what="refresh_credentials")

    def emit_state(self, state: ConnectionState) -> None:
        for queue in self.state_queues:
            queue.put_nowait(state)
        self.dispatcher.deliver(self.callbacks.on_state_change, state, what="on_state_change")

    def on_protocol_error(self, error: AcpError) -> None:
        self.dispatcher.deliver(self.callbacks.on_protocol_error, error, what="on_protocol_error")

    def on_notification(self, method: str, params: Any) -> None:
        if method != "session/update":
            self.dispatcher.deliver(self.callbacks.on_notification, method, params, what="on_notification")
            return
        try:
            note: SessionNotification = decode_session_notification(params, protocol_version=self.version)
        except InvalidMessage as exc:
            logger.warning("undecodable session/update: %s", exc)
            self.on_protocol_error(exc)
            return
        event = self.table.receive(note.session_id, note.update)
        for listener in list(self.update_listeners):
            self.dispatcher.deliver(listener, event, what="on_update")
