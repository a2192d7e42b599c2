"""The Streamable HTTP transport: one ACP connection over one HTTP endpoint, with SSE streams.

The wire (one endpoint URL, ``/acp`` by convention):

* The first message is the ``initialize`` request: a ``POST`` without ``Acp-Connection-Id``,
  answered ``200`` with the JSON-RPC response as a JSON body and the connection's id in an
  ``Acp-Connection-Id`` header. That response is delivered through :meth:`HttpTransport.receive`
  like any other message.
* Right after it, the transport opens the **connection stream**: a ``GET`` with
  ``Accept: text/event-stream`` and ``Acp-Connection-Id``. ``send(initialize)`` returns once that
  stream is open, so its failures (401, 406, a refused redirect...) are raised from that ``send``.
* Every later message is a ``POST`` carrying ``Acp-Connection-Id``, answered ``202`` (the
  JSON-RPC answer comes later on an SSE stream). Session-scoped methods (``session/prompt``,
  ``session/cancel``, ``session/set_mode``, ``session/set_config_option``, ``session/close``) and
  the client's replies to agent requests that came on a session stream also carry
  ``Acp-Session-Id``.
* Once a session is established on the connection (a successful answer to ``session/new``,
  ``session/load``, ``session/resume`` or ``session/fork``), the transport opens that
  **session stream**: a ``GET`` with ``Acp-Session-Id`` too.
* :meth:`HttpTransport.aclose` sends ``DELETE`` to end the connection on the server. A link that
  dropped cannot (its server may be unreachable); its connection id is kept by the connector, and
  the next link of that connector, once initialized, sends the ``DELETE`` for it in the background
  (see :mod:`._carried`: after a short delay, bounded in time, failures logged at DEBUG, tried
  again from the link after if this one ends first): a server that never expires
  connections (the official Python SDK 0.12.1) does not keep one per reconnect.

Messages are accepted from any stream and delivered in arrival order; correlation is the
connection layer's job.

**Two server dialects** disagree on when ``Acp-Session-Id`` goes on a POST; the transport learns
which one it talks to from the refusals (see :mod:`._routing`, where every routing decision
lives); the dialect one link learnt is where the connector's next link starts (a wrong guess
after a change of server costs the same one retry). A session stream ``GET`` answered ``404``
before the session is established waits for the establishing answer and is then reopened; a
``404`` that persists after it becomes :class:`~acp_client.exceptions.UnknownSession`, raised by
the next ``send()`` of a session-scoped method for that session (never a hang).

**Failures.** A refusal of one POST (4xx/5xx) raises a typed
:class:`~acp_client.exceptions.HttpStatusError` from ``send()`` and the transport stays usable.
A connection-level failure closes the transport and ``receive()`` then raises
:class:`~acp_client.exceptions.TransportClosed`: a network failure of a POST, a ``404`` for the
connection id, the connection stream ending or breaking, no byte on an SSE stream for
``sse_idle_timeout`` seconds (servers send keepalive comments every 15 s; over HTTP/2 the
silence is measured per HTTP connection), or a session stream that cannot be reopened
(``session_stream_retries`` quick attempts in a row).

**Safety.** TLS is verified by default with a fresh :class:`ssl.SSLContext` per connector.
JSON-RPC POSTs never follow redirects (a 3xx is :class:`~acp_client.exceptions.UnsafeRedirect`);
``GET``/``DELETE`` follow same-origin redirects only, so credentials never leave the origin.
Cookies come from (and go back to) a :class:`~acp_client.transports.CookieStore`, on
every request and answer; ``httpx``'s own cookie jar is disabled. Header values are checked for
CR/LF/NUL before anything is sent. Bodies are decompressed in bounded steps (:mod:`._body`) and
capped at :attr:`Limits.max_http_body_bytes`; SSE lines and events at :attr:`Limits.max_sse_line_bytes` and
:attr:`Limits.max_message_bytes` (an oversized event is skipped and reported as
:class:`~acp_client.exceptions.MessageTooLarge` from ``receive()``; the stream goes on).
Inbound messages wait in a bounded queue: when it is full, the SSE readers stop reading, which
pushes back on the server through TCP / HTTP/2 flow control. Proxy settings and ``.netrc`` from
the environment are not used.

No ``httpx`` type crosses this module's boundary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Coroutine, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import attrs
import httpx

from .._checks import check_count, check_seconds
from .._jsonrpc import Message, decode_frame, encode, excerpt
from .._logging import get_logger
from .._tasks import TaskSet
from ..exceptions import (
    AcpError,
    AuthenticationFailed,
    ConfigurationError,
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
from ._carried import Carried, delete_stale
from ._cookies import CookieStore
from ._errors import MAX_REDIRECTS, describe_error
from ._exchange import CONNECTION_ID_HEADER, SESSION_ID_HEADER, HttpExchange, check_acp_endpoint, post_body
from ._inbox import EventReader, Inbox
from ._log_redaction import install_log_redaction
from ._routing import ESTABLISHING_METHODS, SESSION_SCOPED_METHODS, Abandon, Close, Open, Route, Router
from ._security import (
    DEFAULT_SECRET_HEADERS,
    TlsConfig,
    check_header_value,
    check_headers,
    check_session_id,
    origin_of,
    safe_url,
)
from ._wire import CoreWire, Reply, Wire, new_pool
from .base import Limits, TransportInfo, describe

__all__ = [
    "CONNECTION_ID_HEADER",
    "ESTABLISHING_METHODS",
    "MAX_REDIRECTS",
    "SESSION_ID_HEADER",
    "SESSION_SCOPED_METHODS",
    "HttpConnector",
    "HttpTransport",
]

logger = get_logger(__name__)

_RESERVED_HEADERS: Final = frozenset(
    {
        "acp-connection-id",
        "acp-session-id",
        "accept",
        "accept-encoding",
        "content-type",
        "content-length",
        "transfer-encoding",
        "host",
        "connection",
        "upgrade",
        "te",
    }
)
#: Inbound messages waiting for ``receive()``; past this the SSE readers stop reading (small: see _inbox).
_MAX_QUEUED: Final = 128
#: Pauses before reopening a lost session stream (the n-th quick attempt in a row).
_SESSION_RETRY_DELAYS: Final = (0.05, 0.25, 1.0)
#: TCP connections a link keeps for its POSTs (and DELETEs), beside those its SSE streams hold over
#: HTTP/1.1: what concurrent requests (a recovery's, bounded by ``recovery_concurrency``) share.
_POST_CONNECTIONS: Final = 8
_MAX_RETRY_DELAY: Final = 5.0


class _SessionStream:
    """The state of one session stream: its reader task and what it waits for."""

    __slots__ = ("closing", "established", "got_data", "session_id", "task")

    def __init__(self, session_id: str, established: bool) -> None:
        self.session_id = session_id
        self.established = asyncio.Event()
        if established:
            self.established.set()
        self.closing = False
        self.got_data = False
        self.task: asyncio.Future[None] | None = None


def _header_session_id(session_id: str) -> str:
    """A session id fit for an ``Acp-Session-Id`` header.

    Raises:
        ConfigurationError: CR, LF or NUL (see :func:`check_session_id`), or a non-ASCII
            character (httpx sends header values as ASCII).
    """
    check_session_id(session_id)
    if not session_id.isascii():
        raise ConfigurationError(f"session id {session_id!r} cannot travel in an HTTP header (not ASCII)")
    return session_id


class HttpConnector:
    """Opens Streamable HTTP links to one ACP endpoint (implements :class:`~.base.Connector`).

    ``connect()`` only prepares an HTTP client: the first network contact is the ``initialize``
    POST made by ``send()``.

    Args:
        url: The endpoint, ``http://`` or ``https://`` (no user info: put credentials in
            ``headers``).
        headers: Extra headers sent on every request (e.g. ``Authorization``). They never go to
            another origin.
        secret_headers: More header names whose values are secrets (``Authorization``,
            ``Proxy-Authorization`` and ``Cookie`` always are): never logged, never sent to
            another origin.
        http2: ``None``: HTTP/2 via ALPN on ``https``, HTTP/1.1 on ``http``. ``True``: HTTP/2 only
            (prior knowledge, i.e. h2c, on ``http``). ``False``: HTTP/1.1 only.
        limits: Caps on inbound data.
        cookies: The cookie store shared with the app's other connectors; a private one is made
            when ``None`` (kept across this connector's reconnects).
        tls: TLS settings; certificate verification is on by default.
        connect_timeout: Seconds to establish a TCP/TLS connection (and to wait for a pooled one).
        sse_idle_timeout: Seconds without a byte on an SSE stream (or without an answer to a
            POST) before the link is considered dead. Keep it above the server's keepalive
            interval (15 s for the official servers).
        session_stream_retries: Quick attempts in a row to reopen a lost session stream before
            giving up on it.
        max_session_streams: The most session streams open at once on one connection (each holds
            an HTTP connection). A session past the cap gets no stream: its session-scoped sends
            raise :class:`~acp_client.exceptions.TransportError` until a stream closes.

    Raises:
        ConfigurationError: An unsupported URL, an unsafe or reserved header, or a bad number.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        secret_headers: Collection[str] = (),
        http2: bool | None = None,
        limits: Limits = Limits(),  # noqa: B008  # frozen value
        cookies: CookieStore | None = None,
        tls: TlsConfig = TlsConfig(),  # noqa: B008  # frozen value
        connect_timeout: float = 10.0,
        sse_idle_timeout: float = 45.0,
        session_stream_retries: int = 3,
        max_session_streams: int = 64,
    ) -> None:
        origin = origin_of(url)
        if origin.scheme not in ("http", "https") or urlsplit(url).scheme.lower() not in ("http", "https"):
            raise ConfigurationError(f"the HTTP transport needs an http:// or https:// URL, got {safe_url(url)!r}")
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            raise ConfigurationError("put credentials in headers, not in the URL")
        if any(ch in url for ch in ("\r", "\n", "\x00", " ")):
            raise ConfigurationError("the URL contains whitespace or control characters")
        pairs = check_headers(headers)
        for name, value in pairs:
            if name.lower() in _RESERVED_HEADERS:
                raise ConfigurationError(f"header {name!r} is set by the transport")
            if not value.isascii():  # httpx would raise UnicodeEncodeError on every request
                # Never echo the value: it may be a credential.
                raise ConfigurationError(f"header {name!r} has a non-ASCII character")
        check_seconds("connect_timeout", connect_timeout)
        check_seconds("sse_idle_timeout", sse_idle_timeout)
        check_count("session_stream_retries", session_stream_retries, minimum=0)
        check_count("max_session_streams", max_session_streams)
        self._max_streams = max_session_streams
        self._url = url
        self._secure = origin.secure
        self._headers = pairs
        self._secret = frozenset(name.lower() for name in secret_headers) | DEFAULT_SECRET_HEADERS
        install_log_redaction(self._secret)  # keep these out of httpx/httpcore/hpack/h2/websockets logs
        if http2 is None:
            self._http1, self._http2 = True, origin.secure
        elif http2:
            self._http1, self._http2 = False, True
        else:
            self._http1, self._http2 = True, False
        self._limits = limits
        self._cookies = cookies if cookies is not None else CookieStore()
        # One fresh context per connector: settings of another client never leak into this one.
        self._ssl = tls.build_context() if origin.secure else None
        self._connect_timeout = connect_timeout
        self._idle = sse_idle_timeout
        self._retries = session_stream_retries
        self._carried = Carried()

    @property
    def target(self) -> str:
        """The endpoint without user info or query string (safe to log)."""
        return safe_url(self._url)

    @property
    def cookies(self) -> CookieStore:
        """The cookie store this connector reads and fills."""
        return self._cookies

    def _new_client(self, connections: int = 1) -> Wire:
        timeout, versions = self._connect_timeout, {"http1": self._http1, "http2": self._http2}
        return CoreWire(new_pool(**versions, tls=self._ssl, connections=connections), timeout)

    async def connect(self) -> HttpTransport:
        """Prepare a new link; ``send(initialize)`` makes the first request.

        Returns:
            A transport whose first ``send()`` must be the ``initialize`` request.
        """
        return HttpTransport(
            url=self._url,
            client=self._new_client(_POST_CONNECTIONS),
            # httpcore (1.0.x) starves HTTP/2 streams that share a connection with other idle
            # long-lived readers: an SSE event can wait for unrelated bytes (the next keepalive)
            # before it is read. So under HTTP/2 every SSE stream gets a connection of its own,
            # as it would under HTTP/1.1; POSTs share the main client.
            stream_client_factory=self._new_client if self._http2 else None,
            # Over HTTP/1.1 each open SSE stream holds a connection (the connection stream, up to
            # max_session_streams session streams): they share a pool of their own, so the POSTs'
            # pool stays small (httpcore walks every connection of a pool on every request).
            stream_client=None if self._http2 else self._new_client(1 + self._max_streams),
            headers=self._headers,
            secret_headers=self._secret,
            cookies=self._cookies,
            limits=self._limits,
            connect_timeout=self._connect_timeout,
            sse_idle_timeout=self._idle,
            session_stream_retries=self._retries,
            max_session_streams=self._max_streams,
            carried=self._carried,
        )


class HttpTransport:
    """One Streamable HTTP link (implements :class:`~.base.Transport`). Made by :class:`HttpConnector`."""

    def __init__(
        self,
        *,
        url: str,
        client: Wire,
        headers: list[tuple[str, str]],
        secret_headers: frozenset[str],
        cookies: CookieStore,
        limits: Limits,
        connect_timeout: float,
        sse_idle_timeout: float,
        session_stream_retries: int,
        stream_client_factory: Callable[[], Wire] | None = None,
        stream_client: Wire | None = None,
        max_session_streams: int = 64,
        carried: Carried | None = None,
    ) -> None:
        #: Shared with the connector: dropped links to DELETE, the dialect learnt.
        self._carried = carried if carried is not None else Carried()
        self._limits = limits
        self._max_streams = max_session_streams
        self._connect_timeout = connect_timeout
        self._idle = sse_idle_timeout
        self._retries = session_stream_retries
        self._http = HttpExchange(
            url=url,
            client=client,
            stream_client_factory=stream_client_factory,
            stream_client=stream_client,
            headers=headers,
            secret_headers=secret_headers,
            cookies=cookies,
            limits=limits,
            connect_timeout=connect_timeout,
            idle=sse_idle_timeout,
            on_fatal=self._fail,
            closed_reason=lambda: self._closed.reason if self._closed is not None else "closed by the client",
        )
        self._info = TransportInfo(kind="http", target=safe_url(url), ordered=False)
        self._inbox = Inbox(_MAX_QUEUED)
        self._closed: TransportClosed | None = None
        self._released = False
        self._tasks = TaskSet("an HTTP link", lambda error: self._fail(f"internal error: {type(error).__name__}"))
        self._connection_task: asyncio.Future[None] | None = None
        self._sessions: dict[str, _SessionStream] = {}
        self._session_errors: dict[str, UnknownSession] = {}
        #: Sessions left without a stream because of ``max_session_streams``.
        self._streamless: set[str] = set()
        #: How many sessions were ever left without a stream on this connection (for the logs).
        self._streamless_total = 0
        self._router = Router(header_everywhere=self._carried.header_everywhere)

    # -- the Transport protocol --------------------------------------------------------------

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
            ConfigurationError: A session id that cannot travel in a header (CR, LF, NUL, not
                ASCII).
            TransportClosed: The link is closed, or this POST found it dead (then it is closed).
            ConnectError: The ``initialize`` POST could not connect.
            TlsVerificationError: The server's certificate did not verify.
            UnsafeRedirect: The server redirected the POST (or a GET elsewhere).
            MissingHeader: HTTP 400.
            AuthenticationFailed: HTTP 401 or 403.
            UnknownConnection: HTTP 404 for the connection id (the link is closed).
            UnknownSession: HTTP 404 for the session id, or a session whose stream the server
                refuses persistently.
            NotAcceptable: HTTP 406.
            UnsupportedMediaType: HTTP 415.
            BatchNotSupported: The server refused a batch (501, or a 400 with a JSON-RPC error).
            ServiceUnavailable: HTTP 429 or 503 (``retry_after`` set when the server said).
            HttpStatusError: Any other unexpected status.
            MessageTooLarge: The ``initialize`` answer exceeds ``max_http_body_bytes``.
            ProtocolError: The ``initialize`` answer is not JSON, not its response, or has no
                connection id.
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
            _header_session_id(sid)
            members = message if isinstance(message, list) else [message]
            if (sid in self._session_errors or sid in self._streamless) and any(
                isinstance(m, dict) and m.get("method") in SESSION_SCOPED_METHODS for m in members
            ):
                blocked = self._session_errors.get(sid)
                if blocked is not None:
                    raise UnknownSession(str(blocked), status=404, body=blocked.body, maybe_delivered=False)
                raise TransportError(
                    f"session {sid} has no stream: more than {self._max_streams} session streams on this connection",
                    maybe_delivered=False,
                )
        tracked = self._router.sent(message)
        try:
            await self._post(message, route)
        except BaseException:
            self._router.forget(tracked)
            raise

    def receive(self) -> Coroutine[Any, Any, Message]:
        """The next inbound message or batch, from any stream, in arrival order (awaitable: the
        inbox's own coroutine, no wrapper per message).

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

        Idempotent; never raises for a dead link. A link that already failed (a drop) is not sent
        a ``DELETE`` here: its server may be unreachable, and a reconnect must not wait on it. The
        connector's next link sends it in the background once it is initialized.
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
                    status = await asyncio.wait_for(self._http.delete(), timeout=min(self._connect_timeout, 5.0))
                    logger.debug("DELETE %s answered %s", self._info.target, status)
                except (AcpError, httpx.HTTPError, asyncio.TimeoutError, OSError) as exc:
                    logger.debug("DELETE of the connection at %s failed: %s", self._info.target, exc)
        finally:
            await self._http.aclose()

    # -- initialize and the connection stream ------------------------------------------------

    async def _initialize(self, message: dict[str, Any]) -> None:
        logger.debug("POST %s to %s", describe(message), self._info.target)
        answer = await self._http.post(encode(message).encode(), None, initialize=True)
        check_acp_endpoint(answer, self._info.target)
        if answer.status != 200:
            raise self._http.status_error(answer, what="initialize", session_header=False)
        connection_id = answer.headers.get(CONNECTION_ID_HEADER)
        if not connection_id:
            raise ProtocolError(f"the initialize answer has no {CONNECTION_ID_HEADER} header")
        try:
            check_header_value(CONNECTION_ID_HEADER, connection_id)
        except ConfigurationError as exc:
            raise ProtocolError(f"the server sent an unusable {CONNECTION_ID_HEADER}") from exc
        reply = decode_frame(answer.body)
        if not isinstance(reply, dict) or "method" in reply or reply.get("id") != message.get("id"):
            # Anything else would leave initialize waiting for an answer that cannot come.
            raise ProtocolError(f"the initialize answer is not its JSON-RPC response: {excerpt(answer.body)}")
        self._http.connection_id = connection_id
        self._info = attrs.evolve(self._info, connection_id=connection_id, http_version=answer.http_version)
        logger.debug("connection %s open at %s over %s", connection_id, self._info.target, answer.http_version)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._connection_task = self._tasks.spawn(self._run_connection_stream(ready), name="acp-http-connection-stream")
        try:
            await ready
        except asyncio.CancelledError:
            self._connection_task.cancel()
            raise
        except AcpError as exc:
            self._fail(f"the connection stream could not be opened: {exc}")
            if type(exc) is TransportError:  # a network failure: the link is dead
                raise TransportClosed(f"the connection stream could not be opened: {exc}") from exc
            raise
        self._inbox.deliver(reply)
        self._forget_stale_connections()

    def _forget_stale_connections(self) -> None:
        """``DELETE`` the connections of earlier links that dropped, in the background (see :mod:`._carried`)."""
        stale = self._carried.stale
        while stale:
            old = stale.popleft()
            if old != self._http.connection_id:
                delete = delete_stale(self._http, self._carried, old, self._info.target)
                self._tasks.spawn(delete, name="acp-http-delete-stale")

    async def _run_connection_stream(self, ready: asyncio.Future[None]) -> None:
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
        try:
            if not ready.done():
                ready.set_result(None)
            reason, _ = await self._pump(response, None)
        finally:
            await self._http.close_sse(response)
        self._fail(f"connection stream: {reason}")

    # -- session streams ---------------------------------------------------------------------

    def _ensure_session_stream(self, session_id: str, *, established: bool) -> None:
        if self._closed is not None:
            return
        try:
            _header_session_id(session_id)
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
        if stream is None and len(self._sessions) >= self._max_streams:
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
                        self._max_streams,
                        session_id,
                    )
                else:
                    logger.debug("no stream for session %s: max_session_streams reached", session_id)
            return
        self._streamless.discard(session_id)
        stream = _SessionStream(session_id, established)
        self._sessions[session_id] = stream
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
        while self._closed is None and not stream.closing:
            stream.got_data = False
            error: AcpError
            delay: float | None = None
            try:
                response = await self._http.open_sse(sid)
            except UnknownSession as exc:
                if not stream.established.is_set():
                    logger.debug("session stream %s: unknown before the session is established; waiting", sid)
                    await stream.established.wait()
                    continue
                error = exc
            except UnknownConnection as exc:
                self._fail(f"session stream: {exc}")
                return
            except ServiceUnavailable as exc:
                error, delay = exc, exc.retry_after
            except (AuthenticationFailed, NotAcceptable, UnsafeRedirect, ProtocolError, MessageTooLarge) as exc:
                self._fail(f"the stream of session {sid} was refused: {exc}")
                return
            except AcpError as exc:
                error = exc
            else:
                try:
                    reason, lost = await self._pump(response, sid, stream)
                finally:
                    await self._http.close_sse(response)
                if self._closed is not None or stream.closing:
                    return
                if lost:
                    # A skipped event may have been an answer the client waits for: only a
                    # recovery can tell, so this end is a drop, now (not the idle timeout's).
                    self._fail(f"the stream of session {sid} {reason} after skipping an oversized event")
                    return
                error = TransportClosed(reason)
                logger.info("session stream %s at %s ended (%s); reopening", sid, self._info.target, reason)
            if stream.got_data:
                failures = 0
            failures += 1
            if failures > self._retries:
                if isinstance(error, UnknownSession):
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
            if delay is None:
                delay = _SESSION_RETRY_DELAYS[min(failures, len(_SESSION_RETRY_DELAYS)) - 1]
            await asyncio.sleep(min(delay, _MAX_RETRY_DELAY))

    # -- reading SSE -------------------------------------------------------------------------

    async def _pump(
        self, response: Reply, source: str | None, stream: _SessionStream | None = None
    ) -> tuple[str, bool]:
        """Read one SSE stream into the inbox until it ends.

        Returns:
            Why it ended, and whether it skipped an oversized event (a lost message).
        """
        reader = EventReader(
            self._inbox,
            limits=self._limits,
            content_encoding=response.headers.get("content-encoding", ""),
            target=self._info.target,
            inspect=self._inspect_inbound,
            source=source,
        )

        def after_chunk() -> bool:
            if stream is None:
                return False
            stream.got_data = True
            return stream.closing

        try:
            if not await reader.read(response.aiter_raw(), after_chunk):
                return "session closed", reader.lost
        except httpx.ReadTimeout:
            return f"no data for {self._idle:g}s (idle timeout)", reader.lost
        except httpx.HTTPError as exc:
            return f"broken: {describe_error(exc)}", reader.lost
        except ProtocolError as exc:
            return f"unreadable: {exc}", reader.lost
        return "ended by the server", reader.lost

    def _inspect_inbound(self, message: Message, source: str | None) -> None:
        """Apply what the router decides about session streams for an inbound message."""
        for action in self._router.inbound(message, source):
            if type(action) is Open:
                self._ensure_session_stream(action.session_id, established=True)
            elif type(action) is Close:
                self._drop_session_stream(action.session_id)
            elif type(action) is Abandon:
                stream = self._sessions.get(action.session_id)
                if stream is not None and not stream.established.is_set():
                    self._drop_session_stream(action.session_id)

    # -- POST --------------------------------------------------------------------------------

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

    # -- helpers -----------------------------------------------------------------------------

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
        if not self._released and self._http.connection_id is not None:
            self._carried.stale.append(self._http.connection_id)  # dropped, not closed: DELETEd from the next link
        self._inbox.close(reason)
        self._tasks.cancel()
