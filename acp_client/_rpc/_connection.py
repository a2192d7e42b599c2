"""One JSON-RPC connection over one :class:`~acp_client.transports.base.Transport`.

The connection owns the pending-request table, dispatches what the agent sends (responses,
notifications, agent→client requests, batches), applies per-request timeouts through the injected
clock, and speaks ``$/cancel_request`` both ways (the only method it knows). When the transport
ends, every pending request fails exactly once with :class:`~acp_client.exceptions.ConnectionLost`
and every agent→client request still being handled is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Final, NamedTuple

from .._codec import _jsonrpc
from .._codec._jsonrpc import ErrorResponse, Notification, Request, RequestId, Response
from .._util._logging import get_logger
from .._util._tasks import TaskSet
from ..clock import Clock, SystemClock, move_on_after
from ..config import USE_CLIENT_DEFAULT, UseClientDefault
from ..exceptions import (
    AcpError,
    ConnectionLost,
    InternalError,
    MalformedFrame,
    MessageTooLarge,
    RequestCancelled,
    RequestTimeout,
    RpcError,
    TransportClosed,
    TransportError,
    UnexpectedResponse,
)
from ..transports.base import Transport, describe
from ._limits import AbandonedIds, IncomingCap
from ._observe import CallObserver

logger = get_logger(__name__)

#: ``(method, params) -> result``; raise :class:`RpcError` to answer with an error.
RequestHandler = Callable[[str, Any], Awaitable[Any]]
#: ``(method, params)``; called synchronously, in arrival order.
NotificationHandler = Callable[[str, Any], None]
#: Called with each protocol error the agent commits (bad frames, unknown response ids, ...).
ProtocolErrorHandler = Callable[[AcpError], None]

CANCEL_REQUEST: Final = "$/cancel_request"
#: Agent→client requests handled at once by default; more are refused with an error answer.
DEFAULT_MAX_INCOMING_REQUESTS: Final = 64
#: Notifications handled before the reader lets other tasks run. A transport hands over what one
#: network read brought (a thousand updates or more) at once: an ``updates()`` consumer would see
#: them all at the end, held long enough to age into the garbage collector's older generations.
_YIELD_EVERY: Final = 128
#: The longest error message sent back to the agent (a handler may echo the agent's input).
_MAX_ERROR_MESSAGE_CHARS: Final = 1024


class _Pending(NamedTuple):
    future: asyncio.Future[Any]
    method: str
    on_answer: Callable[[], None] | None


class Connection:
    """A JSON-RPC 2.0 peer over one transport, which it owns from now on. Without ``on_request`` every
    agent request is answered ``Method not found``; those beyond ``max_incoming_requests`` at once
    are refused. ``observer`` builds the connection's telemetry from its transport."""

    def __init__(
        self,
        transport: Transport,
        *,
        on_request: RequestHandler | None = None,
        on_notification: NotificationHandler | None = None,
        on_protocol_error: ProtocolErrorHandler | None = None,
        clock: Clock | None = None,
        request_timeout: float | None = None,
        max_incoming_requests: int = DEFAULT_MAX_INCOMING_REQUESTS,
        observer: Callable[[Transport], CallObserver] | None = None,
    ) -> None:
        self.transport = transport
        self._observer = observer(transport) if observer is not None else None
        self._on_request = on_request
        self._on_notification = on_notification
        self._on_protocol_error = on_protocol_error
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._request_timeout = request_timeout
        self._next_id = _jsonrpc.IdAllocator()
        self._pending: dict[RequestId, _Pending] = {}
        self._incoming: dict[RequestId, asyncio.Task[None]] = {}
        self._peer_cancelled: set[RequestId] = set()
        self._background = TaskSet("a connection", self._crashed)
        self._reader: asyncio.Task[None] | None = None
        self._closed: asyncio.Event = asyncio.Event()
        #: Why the connection ended (``None`` while open).
        self.close_cause: TransportError | None = None
        self._abandoned = AbandonedIds()
        self._cap = IncomingCap(
            max_incoming_requests, send=self._send_quietly, spawn=self._background.spawn, is_closed=self._closed.is_set
        )

    @property
    def is_closed(self) -> bool:
        return self._closed.is_set()

    def start(self) -> None:
        """Start reading from the transport. Call once, from a running event loop."""
        if self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._read_loop(), name="acp-connection-reader")

    async def wait_closed(self) -> TransportError | None:
        """Wait until the transport has ended; returns the cause."""
        await self._closed.wait()
        return self.close_cause

    async def aclose(self) -> None:
        """Close the transport and fail whatever is still pending. Idempotent."""
        if not self._closed.is_set():
            self._finish(TransportClosed("closed by the client"))
        try:
            await self.transport.aclose()
        except TransportError as exc:  # a dead link may complain while closing; nothing to do
            logger.debug("transport close raised %r", exc)
        reader = self._reader
        if reader is not None and not reader.done() and reader is not asyncio.current_task():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        await self._background.aclose()

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
        on_answer: Callable[[], None] | None = None,
        _on_id: Callable[[RequestId], None] | None = None,
    ) -> Any:
        """Send a request (``params`` omitted from the wire when ``None``) and return the answer's
        ``result``. ``timeout`` defaults to the connection's ``request_timeout`` (``None``: no
        limit); ``on_answer`` is called when the answer is dispatched, before any later message;
        ``_on_id`` is the telemetry observer's (told the id of a request it already observes).

        Raises:
            RpcError: The agent answered with an error (the subclass matching its code).
            RequestTimeout: No answer in time (``$/cancel_request`` is sent to the agent).
            ConnectionLost: The connection ended first, or the transport could not send.
            TransportError: The transport refused this one message (e.g. an HTTP 4xx for the POST).
        """
        if self._observer is not None and _on_id is None:  # off: this one check, no extra frame
            return await self._observer.outgoing(
                method,
                params,
                lambda sent, on_id: self.request(method, sent, timeout=timeout, on_answer=on_answer, _on_id=on_id),
            )
        if timeout is USE_CLIENT_DEFAULT:
            timeout = self._request_timeout
        if self._closed.is_set():
            raise ConnectionLost(method, may_have_executed=False, cause=self.close_cause)
        request_id = self._next_id()
        if _on_id is not None:
            _on_id(request_id)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        pending = _Pending(future, method, on_answer)
        self._pending[request_id] = pending
        message = _jsonrpc.request_message(request_id, method, params)
        with move_on_after(self._clock, timeout) as deadline:  # it covers the send too (a POST can hang)
            try:
                await self.transport.send(message)
            except BaseException as exc:
                self._abandon(request_id, pending)
                if deadline.expired:  # the send hung: the agent may have it all the same
                    self._cancel_remote(request_id)
                if isinstance(exc, TransportClosed):
                    self._finish(exc)  # the link is dead: everything else pending fails too
                    raise ConnectionLost(method, may_have_executed=exc.maybe_delivered, cause=exc) from exc
                raise
            # The answer may be here already: it can overtake its own send (an HTTP initialize
            # is answered in the POST's body).
            try:
                return await future
            except asyncio.CancelledError:
                if self._pending.pop(request_id, None) is not None:
                    self._abandoned.remember(request_id)
                    self._cancel_remote(request_id)
                raise
        assert timeout is not None
        raise RequestTimeout(method, timeout)

    def _abandon(self, request_id: RequestId, pending: _Pending) -> None:
        """Forget a request whose send failed (an answer that already came is not news)."""
        if self._pending.pop(request_id, None) is not None:
            self._abandoned.remember(request_id)
        if pending.future.done() and not pending.future.cancelled():
            pending.future.exception()  # mark it retrieved: the send's own error is raised instead

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (``ConnectionLost`` once the connection ended, else what the transport raised)."""
        if self._closed.is_set():
            raise ConnectionLost(method, may_have_executed=False, cause=self.close_cause)
        try:
            await self.transport.send(_jsonrpc.notification_message(method, params))
        except TransportClosed as exc:
            self._finish(exc)
            raise ConnectionLost(method, may_have_executed=exc.maybe_delivered, cause=exc) from exc

    def _cancel_remote(self, request_id: RequestId) -> None:
        """Tell the agent we no longer wait for ``request_id`` (best effort, in the background)."""
        if not self._closed.is_set():
            self._send_later(_jsonrpc.notification_message(CANCEL_REQUEST, {"requestId": request_id}))

    async def _send_quietly(self, message: _jsonrpc.Message) -> None:
        try:
            await self.transport.send(message)
        except TransportError as exc:
            logger.debug("could not send %s: %r", describe(message), exc)

    def _send_later(self, message: _jsonrpc.Message) -> None:
        self._background.spawn(self._send_quietly(message))

    def _crashed(self, error: BaseException) -> None:
        """A task of the connection died of a bug: the connection ends (its requests fail)."""
        cause = TransportClosed(f"connection task crashed: {error!r}")
        cause.__cause__ = error
        self._finish(cause)

    async def _read_loop(self) -> None:
        cause: TransportError
        receive, cap = self.transport.receive, self._cap
        ready = getattr(self.transport, "receive_ready", None)  # optional: see transports.base
        budget = _YIELD_EVERY
        try:
            while True:
                try:
                    message = ready() if ready is not None else None
                    if message is None:
                        message = await receive()
                except (MalformedFrame, MessageTooLarge) as exc:
                    self._report(exc)
                    continue
                if type(message) is dict:
                    # Notifications (the bulk: session/update) go straight to the handler, after
                    # the checks classify() makes, without _dispatch(), _notify() or a Notification.
                    method = message.get("method")
                    on_notification = self._on_notification
                    if (
                        type(method) is str
                        and method != CANCEL_REQUEST
                        and on_notification is not None
                        and "id" not in message
                        and message.get("jsonrpc") == "2.0"
                    ):
                        params = message.get("params")
                        if params is None or type(params) is dict or type(params) is list:
                            try:
                                on_notification(method, params)
                            except Exception:
                                logger.exception("notification handler raised for %s", method)
                            budget -= 1
                            if not budget:  # let consumers take what was delivered (see _YIELD_EVERY)
                                budget = _YIELD_EVERY
                                await asyncio.sleep(0)
                            continue  # a notification queues no refusal: nothing to drain
                    request_id = message.get("id")
                    if (
                        method is None
                        and (type(request_id) is int or type(request_id) is str)
                        and "result" in message
                        and message.get("error") is None
                        and message.get("jsonrpc") == "2.0"
                    ):
                        # An answer (the bulk of a recovery or a fan-out), as classify() would read it.
                        self._handle_answer(Response(request_id, message["result"]))
                    else:
                        self._dispatch(message)
                elif isinstance(message, dict):
                    self._dispatch(message)
                else:
                    self._dispatch_batch(message)
                if cap.flooded:  # a flood: read on once it is answered
                    await cap.drain()
        except TransportError as exc:
            cause = exc if isinstance(exc, TransportClosed) else TransportClosed(f"transport failed: {exc}")
            if cause is not exc:
                cause.__cause__ = exc
        except asyncio.CancelledError:
            if not self._closed.is_set():
                self._finish(TransportClosed("connection reader cancelled"))
            raise
        except Exception as exc:  # a bug in a transport must not leave requests hanging
            logger.exception("connection reader crashed")
            cause = TransportClosed(f"connection reader crashed: {exc!r}")
            cause.__cause__ = exc
        self._finish(cause)

    def _finish(self, cause: TransportError) -> None:
        if self._closed.is_set():
            return
        self.close_cause = cause
        self._closed.set()
        pending, self._pending = self._pending, {}
        for item in pending.values():
            if not item.future.done():
                item.future.set_exception(ConnectionLost(item.method, may_have_executed=True, cause=cause))
        for task in self._incoming.values():
            task.cancel()
        logger.debug("connection closed: %s", cause)

    def _report(self, error: AcpError) -> None:
        logger.warning("protocol error from agent: %s", error)
        if self._on_protocol_error is not None:
            try:
                self._on_protocol_error(error)
            except Exception:
                logger.exception("on_protocol_error handler raised")

    def _dispatch(self, message: dict[str, Any]) -> None:
        try:
            item = _jsonrpc.classify(message)
        except MalformedFrame as exc:
            self._report(exc)
            if "method" in message:  # a broken request: JSON-RPC wants an Invalid Request answer
                self._send_later(_jsonrpc.error_message(None, -32600, f"Invalid request: {exc}"))
            return
        if isinstance(item, Notification):
            self._notify(item.method, item.params)
        elif isinstance(item, Request):
            refusal = self._cap.refusal(item.id)
            if refusal is not None:
                self._cap.queue(refusal)
                return
            task = self._start_handler(item)
            task.add_done_callback(lambda t: self._reply_from(item.id, t))
        else:
            self._handle_answer(item)

    def _dispatch_batch(self, batch: list[Any]) -> None:
        if not batch:
            self._report(MalformedFrame("empty JSON-RPC batch", excerpt="[]"))
            self._send_later(_jsonrpc.error_message(None, -32600, "Invalid request: empty batch"))
            return
        replies: list[dict[str, Any]] = []
        handlers: list[tuple[RequestId, asyncio.Task[Any]]] = []
        for entry in batch:
            try:
                item = _jsonrpc.classify(entry)
            except MalformedFrame as exc:
                self._report(exc)
                if isinstance(entry, dict) and "method" not in entry and "id" in entry:
                    continue  # a broken response entry: reported, nothing to answer
                replies.append(_jsonrpc.error_message(None, -32600, f"Invalid request: {exc}"))
                continue
            if isinstance(item, Notification):
                self._notify(item.method, item.params)
            elif isinstance(item, Request):
                refusal = self._cap.refusal(item.id)
                if refusal is not None:
                    replies.append(refusal)
                else:
                    handlers.append((item.id, self._start_handler(item)))
            else:
                self._handle_answer(item)
        if handlers or replies:
            self._background.spawn(self._reply_batch(handlers, replies))

    def _handle_answer(self, item: Response | ErrorResponse) -> None:
        if item.id is None:
            assert isinstance(item, ErrorResponse)
            self._report(UnexpectedResponse(f"agent reported an error without an id: {item.message} ({item.code})"))
            return
        pending = self._pending.pop(item.id, None)
        if pending is None:
            if self._abandoned.take(item.id):  # we gave up on it (timeout, cancellation): not the agent's fault
                logger.debug("late answer to abandoned request id %r ignored", item.id)
                return
            self._report(UnexpectedResponse(f"response to unknown request id {item.id!r}"))
            return
        if pending.on_answer is not None:
            try:
                pending.on_answer()
            except Exception:
                logger.exception("on_answer callback raised")
        if pending.future.done():
            return
        if isinstance(item, Response):
            pending.future.set_result(item.result)
        else:
            pending.future.set_exception(RpcError.from_error(item.code, item.message, item.data))

    def _notify(self, method: str, params: Any) -> None:
        if method == CANCEL_REQUEST:
            fields = params if isinstance(params, dict) else {}
            request_id = fields.get("requestId")
            task = self._incoming.get(request_id) if isinstance(request_id, int | str) else None
            if task is not None and not task.done():
                self._peer_cancelled.add(request_id)  # type: ignore[arg-type]
                task.cancel()
            return
        if self._on_notification is None:
            return
        try:
            self._on_notification(method, params)
        except Exception:
            logger.exception("notification handler raised for %s", method)

    def _start_handler(self, item: Request) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(self._run_handler(item))
        self._incoming[item.id] = task
        self._cap.started()
        task.add_done_callback(lambda t: self._handler_done(item.id, t))
        return task

    def _handler_done(self, request_id: RequestId, task: asyncio.Task[Any]) -> None:
        self._cap.finished()
        if self._incoming.get(request_id) is task:  # a reused id may belong to a newer handler
            del self._incoming[request_id]

    async def _run_handler(self, item: Request) -> dict[str, Any]:
        """Run the app's handler; the reply message (it raises only when cancelled by the close)."""
        try:
            if self._on_request is None:
                raise RpcError.method_not_found(item.method)
            if self._observer is None:
                result = await self._on_request(item.method, item.params)
            else:
                result = await self._observer.incoming(item.id, item.method, item.params, self._on_request)
            return _jsonrpc.result_message(item.id, result)
        except RpcError as exc:
            message = exc.message
            if len(message) > _MAX_ERROR_MESSAGE_CHARS:
                message = message[:_MAX_ERROR_MESSAGE_CHARS] + "..."
            return _jsonrpc.error_message(item.id, exc.code, message, exc.data)
        except asyncio.CancelledError:
            if item.id in self._peer_cancelled:
                self._peer_cancelled.discard(item.id)
                cancelled = RequestCancelled()
                return _jsonrpc.error_message(item.id, cancelled.code, cancelled.message)
            raise
        except Exception as exc:
            logger.exception("handler for %s raised", _jsonrpc.excerpt(item.method))
            error = InternalError(f"Internal error: {type(exc).__name__}")
            return _jsonrpc.error_message(item.id, error.code, error.message)

    def _reply_of(self, request_id: RequestId, task: asyncio.Task[Any]) -> dict[str, Any] | None:
        """The reply a finished handler task owes the agent (``None``: none, the link is ending)."""
        by_peer = request_id in self._peer_cancelled
        self._peer_cancelled.discard(request_id)
        if not task.cancelled():
            result: dict[str, Any] = task.result()
            return result
        if by_peer:  # cancelled before it ever ran, so _run_handler could not answer
            cancelled = RequestCancelled()
            return _jsonrpc.error_message(request_id, cancelled.code, cancelled.message)
        return None

    def _reply_from(self, request_id: RequestId, task: asyncio.Task[Any]) -> None:
        reply = self._reply_of(request_id, task)
        if reply is not None and not self._closed.is_set():
            self._send_later(reply)

    async def _reply_batch(
        self, handlers: list[tuple[RequestId, asyncio.Task[Any]]], replies: list[dict[str, Any]]
    ) -> None:
        await asyncio.gather(*(task for _, task in handlers), return_exceptions=True)
        for request_id, task in handlers:
            reply = self._reply_of(request_id, task)
            if reply is not None:
                replies.append(reply)
        if replies and not self._closed.is_set():
            await self._send_quietly(replies)
