"""One Streamable HTTP link: :class:`HttpTransport` (the wire and its rules are described in
:mod:`acp_client.transports.http`, which is where the connector that makes it lives), and what a
connector carries from one link to the next (:class:`Carried`)."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final

import attrs
import httpx

from .._codec._jsonrpc import Message, encode, excerpt
from .._util._logging import get_logger
from .._util._tasks import TaskSet
from ..exceptions import (
    AcpError,
    AuthenticationFailed,
    ConfigurationError,
    HttpStatusError,
    MalformedFrame,
    MessageTooLarge,
    NotAcceptable,
    ProtocolError,
    ServiceUnavailable,
    TransportClosed,
    TransportError,
    UnknownConnection,
    UnknownSession,
    UnsafeRedirect,
)
from ._errors import describe_error
from ._exchange import (
    CONNECTION_ID_HEADER,
    SESSION_ID_HEADER,
    HttpExchange,
    LinkSettings,
    check_acp_endpoint,
    post_body,
)
from ._inbox import EventReader, Inbox
from ._reattach import MAX_RETRY_DELAY, Cursor, retry_delay
from ._routing import SESSION_SCOPED_METHODS, Route, Router, RunningTurns
from ._security import check_header_value, check_session_id, safe_url
from ._wire import Reply, Wire
from .base import StreamResumed, TransportInfo, describe

logger = get_logger("acp_client.transports.http")

#: Inbound messages waiting for ``receive()``; past this the SSE readers stop reading (small: see _inbox).
_MAX_QUEUED: Final = 128
#: Connection ids of dropped links a connector remembers.
_MAX_STALE: Final = 16
#: Answers to a stream's GET that no retry changes.
_REFUSALS: Final = (NotAcceptable, UnsafeRedirect, ProtocolError, MessageTooLarge)
#: The most a background ``DELETE`` of a dropped link's connection may take.
STALE_DELETE_TIMEOUT: Final = 2.0
#: How long after ``initialize`` that ``DELETE`` waits: the recovery's own requests go first (it would
#: take a pooled connection from them, and server time); not much longer, as a server may keep
#: running the dropped connection's turns until it hears of it.
STALE_DELETE_DELAY: Final = 0.25


@attrs.define
class Carried:
    """What a connector carries from one link to the next (shared by its links): the connection ids
    of links that dropped, for the next link to ``DELETE`` in the background, and the header dialect
    learnt (:attr:`._routing.Router.header_everywhere`), so a reconnect does not pay a refusal per
    session again."""

    stale: collections.deque[str] = attrs.Factory(lambda: collections.deque(maxlen=_MAX_STALE))
    header_everywhere: bool | None = None


@attrs.define(eq=False)
class _SessionStream:
    """The state of one session stream: its reader task and what it waits for."""

    session_id: str
    established: asyncio.Event = attrs.Factory(asyncio.Event)
    closing: bool = False
    task: asyncio.Future[None] | None = None


def header_session_id(session_id: str) -> None:
    """A session id fit for an ``Acp-Session-Id`` header (else ``ConfigurationError``: empty, CR,
    LF, NUL or not ASCII)."""
    check_session_id(session_id)
    if not session_id.isascii():
        raise ConfigurationError(f"session id {session_id!r} cannot travel in an HTTP header (not ASCII)")


class HttpTransport:
    """One Streamable HTTP link (implements :class:`~.base.Transport`). Made by :class:`HttpConnector`."""

    def __init__(
        self,
        settings: LinkSettings,
        *,
        client: Wire,
        stream_client_factory: Callable[[], Wire] | None = None,
        stream_client: Wire | None = None,
        carried: Carried | None = None,
    ) -> None:
        self._settings = settings
        #: Shared with the connector: dropped links to DELETE, the dialect learnt.
        self._carried = carried if carried is not None else Carried()
        self._http = HttpExchange(
            settings,
            client=client,
            stream_client_factory=stream_client_factory,
            stream_client=stream_client,
            on_fatal=self._fail,
            closed_reason=lambda: self._closed.reason if self._closed is not None else "closed by the client",
        )
        self._info = TransportInfo(kind="http", target=safe_url(settings.url), ordered=False)
        self._inbox = Inbox(_MAX_QUEUED)
        self._closed: TransportClosed | None = None
        self._released = False
        self._tasks = TaskSet("an HTTP link", lambda error: self._fail(f"internal error: {type(error).__name__}"))
        self._sessions: dict[str, _SessionStream] = {}
        self._session_errors: dict[str, UnknownSession] = {}
        #: Sessions left without a stream because of ``max_session_streams``.
        self._streamless: set[str] = set()
        #: How many sessions were ever left without a stream on this connection (for the logs).
        self._streamless_total = 0
        self._router = Router(header_everywhere=self._carried.header_everywhere)
        self._on_resumed: Callable[[StreamResumed], None] | None = None
        self._turns = RunningTurns()
        #: The server said it no longer knows the connection (nothing left to ``DELETE``).
        self._forgotten = False

    def watch_resumes(self, listener: Callable[[StreamResumed], None] | None) -> None:
        """Call ``listener`` each time a broken stream is reattached (see :class:`~.base.Reattaching`)."""
        self._on_resumed = listener

    @property
    def info(self) -> TransportInfo:
        """What is known about the link (the connection id and HTTP version once initialized)."""
        return self._info

    @property
    def closed(self) -> bool:
        """Whether the link has ended (dropped or closed)."""
        return self._closed is not None

    async def send(self, message: Message) -> None:
        """POST one message or batch.

        The first message must be the ``initialize`` request; it returns once the answer is
        queued for :meth:`receive` and the connection stream is open.

        Raises:
            ConfigurationError: A session id that cannot travel in a header (CR, LF, NUL, not ASCII).
            TransportClosed: The link is closed, or this POST found it dead (then it is closed).
            ConnectError: The ``initialize`` POST could not connect.
            TlsVerificationError: The server's certificate did not verify.
            UnsafeRedirect: The server redirected the POST (or a GET elsewhere).
            HttpStatusError: An unexpected status; a subclass names those with a meaning:
                ``MissingHeader`` (400), ``AuthenticationFailed`` (401, 403), ``UnknownConnection``
                (404 for the connection; the link is closed), ``UnknownSession`` (404 for the
                session, or a session whose stream the server refuses persistently),
                ``NotAcceptable`` (406), ``UnsupportedMediaType`` (415), ``BatchNotSupported`` (a
                refused batch: 501, or a 400 naming batches), ``ServiceUnavailable`` (429, 503;
                ``retry_after`` set when the server said).
            MessageTooLarge: The ``initialize`` answer exceeds ``max_http_body_bytes``.
            ProtocolError: The ``initialize`` answer is not JSON, not its response, or has no connection id.
        """
        self._check_open()
        if not isinstance(message, dict | list) or (isinstance(message, list) and not message):
            raise TransportError("a message must be a JSON-RPC object or a non-empty batch", maybe_delivered=False)
        if self._http.connection_id is None:
            if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
                await self._initialize(message)
                return
            raise TransportError(
                "the first message on a Streamable HTTP link must be the initialize request", maybe_delivered=False
            )
        route = self._router.route(message)
        sid = route.session_id
        if sid is not None:
            header_session_id(sid)
            members = message if isinstance(message, list) else [message]
            if (sid in self._session_errors or sid in self._streamless) and any(
                isinstance(m, dict) and m.get("method") in SESSION_SCOPED_METHODS for m in members
            ):
                blocked = self._session_errors.get(sid)
                if blocked is not None:
                    raise UnknownSession(str(blocked), status=404, body=blocked.body, maybe_delivered=False)
                most = self._settings.max_session_streams
                raise TransportError(
                    f"session {sid} has no stream: more than {most} session streams on this connection",
                    maybe_delivered=False,
                )
        tracked = self._router.sent(message)
        prompt = self._turns.sent(message, sid)
        try:
            await self._post(message, route)
        except BaseException as exc:
            self._router.forget(tracked)
            if prompt is not None and (isinstance(exc, HttpStatusError) or not getattr(exc, "maybe_delivered", False)):
                self._turns.unsent(prompt)
            raise

    def receive(self) -> Coroutine[Any, Any, Message]:
        """The next inbound message or batch, from any stream, in arrival order.

        Raises:
            MalformedFrame: An event whose data is not a JSON-RPC message, or an event cut off by
                the end of its stream (the transport stays usable).
            MessageTooLarge: An oversized SSE line or event was skipped (the stream goes on).
            TransportClosed: The link has ended; ``reason`` says why.
        """
        return self._inbox.get()

    def receive_ready(self) -> Message | None:
        """:meth:`receive` for a message queued already (no coroutine); ``None`` when none is."""
        return self._inbox.get_ready()

    async def aclose(self) -> None:
        """End the link: stop the streams, ``DELETE`` the connection (best effort), release all.

        Idempotent; never raises for a dead link. A dropped link's ``DELETE`` is left to the
        connector's next link (its server may be unreachable: a reconnect must not wait on it).
        """
        if self._released:
            return
        self._released = True
        was_open = self._closed is None
        self._fail("closed by the client", level=logging.DEBUG)
        self._inbox.clear()
        try:
            tasks = self._tasks.cancel()
            await self._http.close_streams()  # a stream's reader ends with its connection, cancelled or not
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            if self._http.connection_id is not None and was_open:
                try:
                    status = await asyncio.wait_for(
                        self._http.delete(), timeout=min(self._settings.connect_timeout, 5.0)
                    )
                    logger.debug("DELETE %s answered %s", self._info.target, status)
                except (AcpError, httpx.HTTPError, asyncio.TimeoutError, OSError) as exc:
                    logger.debug("DELETE of the connection at %s failed: %s", self._info.target, exc)
        finally:
            await self._http.aclose()

    async def _initialize(self, message: dict[str, Any]) -> None:
        logger.debug("POST %s to %s", describe(message), self._info.target)
        answer = await self._http.post(encode(message).encode(), None, initialize=True)
        reply = check_acp_endpoint(answer, self._info.target)
        if reply is None:
            raise self._http.status_error(answer, what="initialize", session_header=False)
        connection_id = answer.headers.get(CONNECTION_ID_HEADER)
        if not connection_id:
            raise ProtocolError(f"the initialize answer has no {CONNECTION_ID_HEADER} header")
        try:
            check_header_value(CONNECTION_ID_HEADER, connection_id)
        except ConfigurationError as exc:
            raise ProtocolError(f"the server sent an unusable {CONNECTION_ID_HEADER}") from exc
        if not isinstance(reply, dict) or "method" in reply or reply.get("id") != message.get("id"):
            # Anything else would leave initialize waiting for an answer that cannot come.
            raise ProtocolError(f"the initialize answer is not its JSON-RPC response: {excerpt(answer.body)}")
        self._http.connection_id = connection_id
        self._info = attrs.evolve(self._info, connection_id=connection_id, http_version=answer.http_version)
        logger.debug("connection %s open at %s over %s", connection_id, self._info.target, answer.http_version)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stream = self._tasks.spawn(self._run_connection_stream(ready), name="acp-http-connection-stream")
        try:
            await ready
        except asyncio.CancelledError:
            stream.cancel()
            raise
        except AcpError as exc:
            self._fail(f"the connection stream could not be opened: {exc}")
            if type(exc) is TransportError:  # a network failure: the link is dead
                raise TransportClosed(f"the connection stream could not be opened: {exc}") from exc
            raise
        self._inbox.deliver(reply)
        self._forget_stale_connections()

    def _forget_stale_connections(self) -> None:
        """``DELETE`` the connections of earlier links that dropped, in the background."""
        stale = self._carried.stale
        while stale:
            old = stale.popleft()
            if old != self._http.connection_id:
                self._tasks.spawn(self._delete_stale(old), name="acp-http-delete-stale")

    async def _delete_stale(self, connection_id: str) -> None:
        """``DELETE`` a dropped link's connection (best effort; never raises)."""
        target = self._info.target
        try:
            await asyncio.sleep(STALE_DELETE_DELAY)
            status = await asyncio.wait_for(self._http.delete(connection_id), timeout=STALE_DELETE_TIMEOUT)
            logger.debug("DELETE of dropped connection %s at %s answered %s", connection_id, target, status)
        except asyncio.CancelledError:
            self._carried.stale.append(connection_id)  # this link ended first: the next one tries again
            raise
        except Exception as exc:  # best effort: nothing depends on it
            logger.debug("DELETE of dropped connection %s at %s failed: %s", connection_id, target, exc)

    async def _run_connection_stream(self, ready: asyncio.Future[None]) -> None:
        cursor = Cursor()
        try:
            response = await self._http.open_sse(None)
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except AcpError as exc:
            if not ready.done():
                ready.set_exception(exc)
            return
        except Exception as exc:
            if not ready.done():
                ready.set_exception(TransportError(f"the connection stream could not be opened: {exc!r}"))
            raise
        cursor.take(response.headers)
        if not ready.done():
            ready.set_result(None)
        resumed: StreamResumed | None = None
        empty = 0  # reopenings in a row that ended at once, without a byte
        while True:
            try:
                reason, _, _, got = await self._pump(response, cursor, resumed)
            finally:
                await self._http.close_sse(response)
            if self._closed is not None:
                return
            if not cursor.resumable or not self._settings.reattach_timeout:
                self._fail(f"connection stream: {reason}")
                return
            empty = 0 if got else empty + 1
            reopened = await self._reattach_stream(None, cursor, reason, empty)
            if reopened is None:
                return
            response, resumed = reopened

    async def _reattach_stream(
        self, session_id: str | None, cursor: Cursor, reason: str, empty: int
    ) -> tuple[Reply, StreamResumed] | None:
        """Reopen a broken stream from ``cursor`` on the same connection, trying again after network
        failures and 503 answers for up to ``reattach_timeout``. Returns the reopened stream and the
        event to report once it shows it is not a resync; ``None`` once the link is closed (closed
        here when the server refuses, cannot be reached in time or changed its numbering).

        After ``empty`` reopenings in a row that brought nothing, wait a little first; past
        ``session_stream_retries`` of them, close the link."""
        what = "connection stream" if session_id is None else f"stream of session {session_id}"
        if empty > self._settings.session_stream_retries:
            self._fail(f"the {what} {reason} again right after each reattach ({empty} times)")
            return None
        if empty:
            await asyncio.sleep(retry_delay(empty))
            if self._closed is not None:
                return None
        timeout = self._settings.reattach_timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        logger.info(
            "%s of connection %s at %s broke (%s); reattaching from event %s",
            what,
            self._http.connection_id,
            self._info.target,
            reason,
            cursor.last_event_id,
        )
        failures = 0
        while self._closed is None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._fail(f"the {what} could not be reattached within {timeout:g}s ({reason})")
                return None
            delay: float | None = None
            try:
                response = await asyncio.wait_for(self._http.open_sse(session_id, cursor.request_headers()), remaining)
            except asyncio.TimeoutError:
                continue
            except UnknownConnection as exc:
                self._forgotten = True
                self._fail(f"the {what} could not be reattached: {exc}")
                return None
            except (UnknownSession, AuthenticationFailed, *_REFUSALS) as exc:
                # 404 / 403 for the session, credentials refused, or an answer no retry changes.
                self._fail(f"the {what} could not be reattached: {exc}")
                return None
            except ServiceUnavailable as exc:
                delay = exc.retry_after
            except AcpError as exc:
                logger.debug("reattaching the %s failed: %s", what, exc)
            else:
                changed = cursor.take(response.headers)
                if changed is not None:
                    await self._http.close_sse(response)
                    self._fail(f"the {what} cannot be resumed: {changed}; messages may be missing")
                    return None
                return response, StreamResumed(session_id, cursor.last_event_id, self._http.connection_id, reason)
            failures += 1
            pause = retry_delay(failures) if delay is None else delay
            await asyncio.sleep(min(pause, MAX_RETRY_DELAY, max(0.0, deadline - loop.time())))
        return None

    def _resumed(self, event: StreamResumed) -> None:
        scope = "connection stream" if event.session_id is None else f"stream of session {event.session_id}"
        logger.info("%s of connection %s resumed from event %s", scope, event.connection_id, event.from_event_id)
        listener = self._on_resumed
        if listener is not None:
            try:
                listener(event)
            except Exception:  # the listener's bug must not end the stream
                logger.exception("a stream-resumed listener raised; ignored")

    def _ensure_session_stream(self, session_id: str, *, established: bool) -> None:
        if self._closed is not None:
            return
        try:
            header_session_id(session_id)
        except ConfigurationError:
            logger.warning("not opening a stream for a session id that cannot travel in a header")
            return
        if established:
            self._session_errors.pop(session_id, None)
        stream = self._sessions.get(session_id)
        if stream is not None and stream.task is not None and not stream.task.done():
            if established:
                stream.established.set()
            return
        if stream is None and len(self._sessions) >= self._settings.max_session_streams:
            if session_id not in self._streamless:
                self._streamless.add(session_id)
                self._streamless_total += 1
                if self._streamless_total == 1:  # once per connection (a recovery meets it per session)
                    logger.warning(
                        "connection %s at %s: %d session streams open (max_session_streams); session %s and "
                        "any later ones get no stream of their own (their messages come on the connection "
                        "stream; their session-scoped sends fail until a stream closes)",
                        self._http.connection_id,
                        self._info.target,
                        self._settings.max_session_streams,
                        session_id,
                    )
                else:
                    logger.debug("no stream for session %s: max_session_streams reached", session_id)
            return
        self._streamless.discard(session_id)
        stream = self._sessions[session_id] = _SessionStream(session_id)
        if established:
            stream.established.set()
        stream.task = self._tasks.spawn(self._run_session_stream(stream), name="acp-http-session-stream")

    def _drop_session_stream(self, session_id: str) -> None:
        stream = self._sessions.pop(session_id, None)
        if stream is None:
            return
        stream.closing = True
        if stream.task is not None and stream.task is not asyncio.current_task():
            stream.task.cancel()

    async def _run_session_stream(self, stream: _SessionStream) -> None:
        sid = stream.session_id
        failures = 0
        cursor = Cursor()
        reopened: tuple[Reply, StreamResumed] | None = None  # a stream reattached after a break, to read next
        while self._closed is None and not stream.closing:
            resumed: StreamResumed | None = None
            lived = False  # a byte came (or the stream lasted the idle timeout)
            error: AcpError
            delay: float | None = None
            try:
                if reopened is not None:
                    (response, resumed), reopened = reopened, None
                else:
                    resume = cursor.request_headers()
                    response = await self._http.open_sse(sid, resume)
                    changed = cursor.take(response.headers)
                    if changed is not None:
                        await self._http.close_sse(response)
                        self._fail(f"the stream of session {sid} cannot be resumed: {changed}; messages may be missing")
                        return
                    if resume:
                        resumed = StreamResumed(sid, cursor.last_event_id, self._http.connection_id, "ended")
            except (UnknownSession, AuthenticationFailed) as exc:
                if isinstance(exc, AuthenticationFailed) and exc.status != 403:
                    self._fail(f"the stream of session {sid} was refused: {exc}")
                    return
                # 404, or 403 "not this connection's session" (Qwen Code's daemon): the same answer.
                if not stream.established.is_set():
                    logger.debug("session stream %s: unknown before the session is established; waiting", sid)
                    await stream.established.wait()
                    continue
                error = exc if isinstance(exc, UnknownSession) else UnknownSession(str(exc), status=403, body=exc.body)
            except UnknownConnection as exc:
                self._forgotten = True
                self._fail(f"session stream: {exc}")
                return
            except ServiceUnavailable as exc:
                error, delay = exc, exc.retry_after
            except _REFUSALS as exc:
                self._fail(f"the stream of session {sid} was refused: {exc}")
                return
            except AcpError as exc:
                error = exc
            else:
                try:
                    reason, lost, broken, lived = await self._pump(response, cursor, resumed, stream)
                finally:
                    await self._http.close_sse(response)
                if self._closed is not None or stream.closing:
                    return
                if lost:
                    # A skipped event may have been an answer the client waits for: only a
                    # recovery can tell, so this end is a drop, now (not the idle timeout's).
                    self._fail(f"the stream of session {sid} {reason} after skipping an oversized event")
                    return
                if broken:
                    if not cursor.resumable or not self._settings.reattach_timeout:
                        # What the server had written into the broken stream is gone, and without
                        # event ids nobody can say what that was: a drop, so the recovery decides.
                        self._fail(f"the stream of session {sid} {reason} and carried no event ids to resume from")
                        return
                    failures = 0 if lived else failures + 1
                    reopened = await self._reattach_stream(sid, cursor, reason, failures)
                    if reopened is None:
                        return
                    continue
                error = TransportClosed(reason)
                logger.info("session stream %s at %s ended (%s); reopening", sid, self._info.target, reason)
            failures = 1 if lived else failures + 1
            if failures > self._settings.session_stream_retries:
                if isinstance(error, UnknownSession):
                    if cursor.resumable:
                        self._fail(f"the stream of session {sid} could not be resumed: {error}")
                        return
                    logger.warning(
                        "the server does not know session %s on connection %s; its stream stays closed",
                        sid,
                        self._http.connection_id,
                    )
                    self._session_errors[sid] = error
                    if self._sessions.get(sid) is stream:
                        del self._sessions[sid]
                    return
                self._fail(f"the stream of session {sid} could not be reopened: {error}")
                return
            await asyncio.sleep(min(retry_delay(failures) if delay is None else delay, MAX_RETRY_DELAY))

    async def _pump(
        self, response: Reply, cursor: Cursor, resumed: StreamResumed | None, stream: _SessionStream | None = None
    ) -> tuple[str, bool, bool, bool]:
        """Read one SSE stream (``stream``: a session's, else the connection's) into the inbox until it
        ends; ``cursor`` follows its event ids. ``resumed`` (a reattached stream) is reported once its
        first bytes are not a resync signal.

        Returns:
            Why it ended, whether it skipped an oversized event (a lost message), whether it broke
            rather than ended, and whether it lived (a byte came, or it lasted the idle timeout).
        """
        source = stream.session_id if stream is not None else None
        what = "connection stream" if source is None else f"stream of session {source}"
        reader = EventReader(
            self._inbox,
            limits=self._settings.limits,
            content_encoding=response.headers.get("content-encoding", ""),
            target=self._info.target,
            inspect=self._inspect_inbound,
            source=source,
            last_event_id=cursor.last_event_id,
            on_resync=lambda detail: self._fail(f"the {what} cannot be resumed: {detail}; messages may be missing"),
        )

        got = False

        def after_chunk() -> bool:
            nonlocal resumed, got
            got = True
            if resumed is not None:
                if not reader.resync:
                    self._resumed(resumed)
                resumed = None
            return stream is not None and stream.closing

        try:
            if not await reader.read(response.aiter_raw(), after_chunk):
                return "session closed", reader.lost, False, got
        except httpx.ReadTimeout:  # it lived: no hammering
            return f"no data for {self._settings.sse_idle_timeout:g}s (idle timeout)", reader.lost, True, True
        except httpx.HTTPError as exc:
            return f"broken: {describe_error(exc)}", reader.lost, True, got
        except ProtocolError as exc:
            return f"unreadable: {exc}", reader.lost, True, got
        finally:
            cursor.last_event_id = reader.last_event_id
        return "ended by the server", reader.lost, False, got

    def _inspect_inbound(self, message: Message, source: str | None) -> None:
        """Apply what the router decides about session streams for an inbound message."""
        self._turns.inbound(message)
        if type(message) is dict and "id" not in message:
            return  # a state_update notification (the only ones inspected)
        for action, session_id in self._router.inbound(message, source):
            if action == "open":
                self._ensure_session_stream(session_id, established=True)
            elif action == "close":
                self._drop_session_stream(session_id)
            else:  # abandon
                stream = self._sessions.get(session_id)
                if stream is not None and not stream.established.is_set():
                    self._drop_session_stream(session_id)

    async def _post(self, message: Message, route: Route) -> None:
        body = encode(message).encode()
        use_header = route.with_header
        sid = route.session_id
        if logger.isEnabledFor(logging.DEBUG):  # describe() is not free, and this is every POST
            logger.debug("POST %s to %s", describe(message), self._info.target)
        for attempt in (0, 1):
            if use_header and sid is not None and sid not in self._sessions:
                # The answer may come on the session stream: have it open (the server buffers).
                self._ensure_session_stream(sid, established=False)
            answer = await self._http.post(body, sid if use_header else None)
            if answer.status in (200, 202, 204):
                if answer.body_error is not None:
                    self._inbox.deliver(answer.body_error)
                elif answer.status == 200 and answer.body:
                    reply = post_body(answer)  # a 200 with a body where a 202 was expected
                    if not isinstance(reply, MalformedFrame):
                        self._inspect_inbound(reply, None)
                    self._inbox.deliver(reply)
                return
            retry = self._router.retry_header(route, use_header, answer.status, answer.body) if attempt == 0 else None
            if retry is not None:
                self._carried.header_everywhere = retry
                logger.debug("the server %s %s here; retrying", "wants" if retry else "refuses", SESSION_ID_HEADER)
                use_header = retry
                continue
            error = self._http.status_error(
                answer, what="POST", session_header=use_header and sid is not None, batch=isinstance(message, list)
            )
            if isinstance(error, UnknownConnection):
                self._fail(f"the server no longer knows connection {self._http.connection_id}")
            raise error

    def _check_open(self) -> None:
        if self._closed is not None:
            raise TransportClosed(self._closed.reason, maybe_delivered=False)

    def _fail(self, reason: str, *, level: int = logging.INFO) -> None:
        """Close the link (once): wake the reader, stop every stream."""
        if self._closed is not None:
            return
        self._closed = TransportClosed(reason)
        logger.log(level, "HTTP link to %s closed: %s", self._info.target, reason)
        if self._streamless_total > 1:
            logger.info(
                "connection %s had %d sessions without a stream", self._http.connection_id, self._streamless_total
            )
        # Nothing to end when the server no longer knows the connection (forgotten).
        if not self._released and self._http.connection_id is not None and not self._forgotten:
            if self._turns:
                # A turn may still run there: a DELETE would abort it (and a later reattach of its
                # streams). The server's own expiry of dropped connections ends it instead.
                logger.info(
                    "connection %s dropped with a turn running: not sending it a DELETE", self._http.connection_id
                )
            else:
                self._carried.stale.append(self._http.connection_id)  # dropped, not closed: DELETEd from the next link
        self._inbox.close(reason)
        self._tasks.cancel()
