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
  ``session/load``, ``session/resume`` or ``session/fork``, or any answer whose ``result`` carries
  a ``sessionId``), the transport opens that **session stream**: a ``GET`` with
  ``Acp-Session-Id`` too.
* :meth:`HttpTransport.aclose` sends ``DELETE`` to end the connection on the server. A link that
  dropped cannot (its server may be unreachable); its connection id is kept by the connector, and
  the next link of that connector, once initialized, sends the ``DELETE`` for it in the background
  (bounded by ``_STALE_DELETE_TIMEOUT``, failures logged at DEBUG): a server that never expires
  connections (the official Python SDK 0.12.1) does not keep one per reconnect.

Messages are accepted from any stream and delivered in arrival order; correlation is the
connection layer's job.

**Two server dialects.** The official TypeScript server (SDK 2.4.0) wants ``Acp-Session-Id`` on
every POST whose params carry a ``sessionId`` (``400`` without it) and answers those on the
session stream; the official Python server (SDK 0.12.1) answers ``404`` to that header for a
session not yet established on the connection. The transport starts without the header on such
POSTs; a ``400`` that names the session id makes it retry with the header (opening the session
stream first) and a ``404`` "unknown session" makes it retry without; the dialect that worked is
remembered for the rest of the connection, and by the connector for its next links (a wrong guess
after a change of server costs the same one retry). A session stream ``GET`` answered ``404`` before the
session is established waits for the establishing answer and is then reopened; a ``404`` that
persists after it becomes :class:`~acp_client.exceptions.UnknownSession`, raised by the next
``send()`` of a session-scoped method for that session (never a hang).

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
Cookies come from (and go back to) a :class:`~acp_client.transports._cookies.CookieStore`, on
every request and answer; ``httpx``'s own cookie jar is disabled. Header values are checked for
CR/LF/NUL before anything is sent. Bodies are decompressed here, in bounded steps, and capped at
:attr:`Limits.max_http_body_bytes`; SSE lines and events at :attr:`Limits.max_sse_line_bytes` and
:attr:`Limits.max_message_bytes` (an oversized event is skipped and reported as
:class:`~acp_client.exceptions.MessageTooLarge` from ``receive()``; the stream goes on).
Inbound messages wait in a bounded queue: when it is full, the SSE readers stop reading, which
pushes back on the server through TCP / HTTP/2 flow control. Proxy settings and ``.netrc`` from
the environment are not used.

No ``httpx`` type crosses this module's boundary.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import ssl
import zlib
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping
from http.cookiejar import Cookie, CookieJar
from typing import Any, Final, TypeAlias
from urllib.parse import urljoin, urlsplit

import attrs
import httpx

from .._jsonrpc import Message, decode_frame, encode, excerpt
from ..exceptions import (
    AcpError,
    AuthenticationFailed,
    BatchNotSupported,
    ConfigurationError,
    ConnectError,
    HttpStatusError,
    MalformedFrame,
    MessageTooLarge,
    MissingHeader,
    NotAcceptable,
    ProtocolError,
    ServiceUnavailable,
    TlsVerificationError,
    TransportClosed,
    TransportError,
    UnknownConnection,
    UnknownSession,
    UnsafeRedirect,
    UnsupportedMediaType,
)
from ._cookies import CookieStore
from ._security import (
    DEFAULT_SECRET_HEADERS,
    TlsConfig,
    check_header_value,
    check_headers,
    check_session_id,
    origin_of,
    parse_retry_after,
    redirect_allowed,
    safe_url,
)
from ._sse import SseEvent, SseParser
from .base import Limits, TransportInfo, describe

__all__ = ["CONNECTION_ID_HEADER", "SESSION_ID_HEADER", "HttpConnector", "HttpTransport"]

logger = logging.getLogger(__name__)

CONNECTION_ID_HEADER: Final = "Acp-Connection-Id"
SESSION_ID_HEADER: Final = "Acp-Session-Id"

#: Methods whose POST always carries ``Acp-Session-Id`` (both official servers require it).
SESSION_SCOPED_METHODS: Final = frozenset(
    {"session/prompt", "session/cancel", "session/set_mode", "session/set_config_option", "session/close"}
)
#: Methods whose successful answer establishes the session on the connection.
ESTABLISHING_METHODS: Final = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
#: How many redirects a GET or DELETE follows (each one same-origin) before giving up.
MAX_REDIRECTS: Final = 5

_JSON: Final = "application/json"
_EVENT_STREAM: Final = "text/event-stream"
_REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
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
#: Inbound messages waiting for ``receive()``; past this the SSE readers stop reading.
_MAX_QUEUED: Final = 1024
#: Requests remembered for session tracking (outgoing) and reply routing (agent requests).
_MAX_TRACKED: Final = 4096
#: How much of an error answer's body is kept for diagnostics.
_ERROR_BODY_BYTES: Final = 4096
#: Decompression output step: memory per step stays bounded whatever the compression ratio.
_INFLATE_STEP: Final = 64 * 1024
#: Pauses before reopening a lost session stream (the n-th quick attempt in a row).
_SESSION_RETRY_DELAYS: Final = (0.05, 0.25, 1.0)
_MAX_RETRY_DELAY: Final = 5.0
_USER_AGENT: Final = "acp-reconnect"
#: Connection ids of dropped links a connector remembers, to ``DELETE`` from the next link.
_MAX_STALE: Final = 16
#: The most a background ``DELETE`` of a dropped link's connection may take.
_STALE_DELETE_TIMEOUT: Final = 2.0

_Inbound: TypeAlias = "Message | AcpError"


class _NoCookies(CookieJar):
    """A jar that keeps nothing: cookies are the :class:`CookieStore`'s business, not httpx's."""

    def set_cookie(self, cookie: Cookie) -> None:
        return None

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


@attrs.frozen(slots=True)
class _Answer:
    """A fully read answer to one POST."""

    status: int
    headers: httpx.Headers
    body: bytes
    http_version: str


@attrs.frozen(slots=True)
class _Route:
    """Where a POST goes: the session id it may carry, and whether to send it first."""

    session_id: str | None = None
    with_header: bool = False
    adaptable: bool = False


class _Learnt:
    """What a connector's links learnt about the server, for the next link to start from."""

    __slots__ = ("session_header_everywhere",)

    def __init__(self) -> None:
        #: See ``HttpTransport._session_header_everywhere``: the server's header dialect.
        self.session_header_everywhere: bool | None = None


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
        self.task: asyncio.Task[None] | None = None


class _Inflater:
    """Bounded decompression of one body (``identity``, ``gzip`` or ``deflate``).

    Raises:
        ProtocolError: An encoding the client did not offer, or corrupt compressed data.
    """

    __slots__ = ("_raw_fallback", "_z", "identity")

    def __init__(self, content_encoding: str) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",")]
        codings = [c for c in codings if c and c != "identity"]
        self._raw_fallback = False
        self._z: Any = None
        if not codings:
            self.identity = True
            return
        self.identity = False
        if codings in (["gzip"], ["x-gzip"]):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif codings == ["deflate"]:
            self._z = zlib.decompressobj(zlib.MAX_WBITS)
            self._raw_fallback = True  # some servers send raw deflate without the zlib wrapper
        else:
            raise ProtocolError(f"unsupported Content-Encoding {content_encoding!r}")

    def pieces(self, data: bytes) -> list[bytes]:
        if self.identity:
            return [data] if data else []
        out: list[bytes] = []
        buf = data
        try:
            while buf and not self._z.eof:
                try:
                    piece = self._z.decompress(buf, _INFLATE_STEP)
                except zlib.error:
                    if not self._raw_fallback:
                        raise
                    self._raw_fallback = False
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                self._raw_fallback = False
                buf = self._z.unconsumed_tail
                if piece:
                    out.append(piece)
        except zlib.error as exc:
            raise ProtocolError(f"corrupt compressed body: {exc}") from exc
        return out


@functools.cache
def _cleartext_tls_context() -> ssl.SSLContext:
    """The ``verify`` context of cleartext (``http://``) clients: built once per process.

    Without one, httpx builds a default context (loading the CA bundle: tens of milliseconds) for
    every client it makes, that is on every reconnect. It is never used: a POST follows no redirect
    and a GET or DELETE only a same-origin one, so a cleartext link never reaches TLS.
    """
    return ssl.create_default_context()


def _content_type(headers: httpx.Headers) -> str:
    value: str = headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower()


def _is_json(content_type: str) -> bool:
    return content_type == _JSON or (content_type.startswith("application/") and content_type.endswith("+json"))


def _is_tls_failure(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        if "CERTIFICATE_VERIFY_FAILED" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _session_id_of(params: Any) -> str | None:
    if isinstance(params, dict):
        value = params.get("sessionId")
        if isinstance(value, str):
            return value
    return None


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


def _hashable_id(message: dict[str, Any]) -> int | str | None:
    value = message.get("id")
    if isinstance(value, int | str) and not isinstance(value, bool):
        return value
    return None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _mentions_session(body: bytes) -> bool:
    return b"session" in body.lower()


def _is_session_404(body: bytes, session_header_sent: bool) -> bool:
    text = body.lower()
    if b"connection" in text:
        return False
    if b"session" in text:
        return True
    return session_header_sent


def _remember(table: dict[Any, Any], key: Any, value: Any) -> None:
    table[key] = value
    if len(table) > _MAX_TRACKED:
        del table[next(iter(table))]


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
        if connect_timeout <= 0 or sse_idle_timeout <= 0:
            raise ConfigurationError("timeouts must be positive")
        if session_stream_retries < 0:
            raise ConfigurationError("session_stream_retries must be zero or more")
        self._url = url
        self._secure = origin.secure
        self._headers = pairs
        self._secret = frozenset(name.lower() for name in secret_headers) | DEFAULT_SECRET_HEADERS
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
        #: Connection ids of this connector's links that dropped, not yet DELETEd.
        self._stale: collections.deque[str] = collections.deque(maxlen=_MAX_STALE)
        #: The header dialect learnt by earlier links: a reconnect does not pay for learning it again.
        self._learnt = _Learnt()

    @property
    def target(self) -> str:
        """The endpoint without user info or query string (safe to log)."""
        return safe_url(self._url)

    @property
    def cookies(self) -> CookieStore:
        """The cookie store this connector reads and fills."""
        return self._cookies

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            http1=self._http1,
            http2=self._http2,
            verify=self._ssl if self._ssl is not None else _cleartext_tls_context(),
            follow_redirects=False,
            trust_env=False,
            cookies=_NoCookies(),
            headers={"User-Agent": _USER_AGENT},
            timeout=httpx.Timeout(self._connect_timeout),
        )

    async def connect(self) -> HttpTransport:
        """Prepare a new link; ``send(initialize)`` makes the first request.

        Returns:
            A transport whose first ``send()`` must be the ``initialize`` request.
        """
        return HttpTransport(
            url=self._url,
            client=self._new_client(),
            # httpcore (1.0.x) starves HTTP/2 streams that share a connection with other idle
            # long-lived readers: an SSE event can wait for unrelated bytes (the next keepalive)
            # before it is read. So under HTTP/2 every SSE stream gets a connection of its own,
            # as it would under HTTP/1.1; POSTs share the main client.
            stream_client_factory=self._new_client if self._http2 else None,
            headers=self._headers,
            secret_headers=self._secret,
            cookies=self._cookies,
            limits=self._limits,
            connect_timeout=self._connect_timeout,
            sse_idle_timeout=self._idle,
            session_stream_retries=self._retries,
            stale_connections=self._stale,
            learnt=self._learnt,
        )


class HttpTransport:
    """One Streamable HTTP link (implements :class:`~.base.Transport`). Made by :class:`HttpConnector`."""

    def __init__(
        self,
        *,
        url: str,
        client: httpx.AsyncClient,
        headers: list[tuple[str, str]],
        secret_headers: frozenset[str],
        cookies: CookieStore,
        limits: Limits,
        connect_timeout: float,
        sse_idle_timeout: float,
        session_stream_retries: int,
        stream_client_factory: Callable[[], httpx.AsyncClient] | None = None,
        stale_connections: collections.deque[str] | None = None,
        learnt: _Learnt | None = None,
    ) -> None:
        self._url = url
        #: Shared with the connector: ids of dropped links, DELETEd once this link is initialized.
        self._stale = stale_connections if stale_connections is not None else collections.deque(maxlen=_MAX_STALE)
        self._origin = origin_of(url)
        self._client = client
        #: Makes a dedicated client (connection) per SSE stream; ``None``: streams share ``client``.
        self._stream_client_factory = stream_client_factory
        #: The dedicated client of each open SSE response, by ``id(response)``.
        self._stream_clients: dict[int, httpx.AsyncClient] = {}
        self._headers = headers
        self._secret = secret_headers
        self._cookies = cookies
        self._limits = limits
        self._connect_timeout = connect_timeout
        self._idle = sse_idle_timeout
        self._retries = session_stream_retries
        self._post_timeout = httpx.Timeout(
            connect=connect_timeout, read=sse_idle_timeout, write=sse_idle_timeout, pool=connect_timeout
        )
        # The read timeout is the idle timeout of SSE streams: it also bounds the wait for headers.
        self._stream_timeout = httpx.Timeout(
            connect=connect_timeout, read=sse_idle_timeout, write=connect_timeout, pool=connect_timeout
        )
        self._info = TransportInfo(kind="http", target=safe_url(url), ordered=False)
        self._connection_id: str | None = None
        self._inbox: collections.deque[_Inbound] = collections.deque()
        self._wakeup = asyncio.Event()
        self._space = asyncio.Event()
        self._closed: TransportClosed | None = None
        self._released = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._connection_task: asyncio.Task[None] | None = None
        self._sessions: dict[str, _SessionStream] = {}
        self._session_errors: dict[str, UnknownSession] = {}
        #: Outgoing requests that matter for session tracking: id -> (method, params sessionId).
        self._outgoing: dict[int | str, tuple[str, str | None]] = {}
        #: Agent requests awaiting a reply: id -> (params sessionId, session stream it came on).
        self._reply_routes: dict[int | str, tuple[str | None, str | None]] = {}
        #: Whether this server wants Acp-Session-Id on every POST whose params carry a sessionId
        #: (TypeScript dialect: True; Python dialect: False; not known yet: None).
        self._learnt = learnt if learnt is not None else _Learnt()
        self._session_header_everywhere: bool | None = self._learnt.session_header_everywhere

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
        if self._connection_id is None:
            if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
                await self._initialize(message)
                return
            raise TransportError(
                "the first message on a Streamable HTTP link must be the initialize request", maybe_delivered=False
            )
        route = self._route_for(message)
        members = message if isinstance(message, list) else [message]
        if route.session_id is not None:
            blocked = self._session_errors.get(route.session_id)
            if blocked is not None and any(
                isinstance(m, dict) and m.get("method") in SESSION_SCOPED_METHODS for m in members
            ):
                raise UnknownSession(str(blocked), status=404, body=blocked.body, maybe_delivered=False)
        tracked = [key for m in members if isinstance(m, dict) and (key := self._note_outgoing(m)) is not None]
        try:
            await self._post(message, route)
        except BaseException:
            for key in tracked:
                self._outgoing.pop(key, None)
            raise

    async def receive(self) -> Message:
        """The next inbound message or batch, from any stream, in arrival order.

        Raises:
            MalformedFrame: An event whose data is not a JSON-RPC message, or an event cut off by
                the end of its stream (the transport stays usable).
            MessageTooLarge: An oversized SSE line or event was skipped (the stream goes on).
            TransportClosed: The link has ended; ``reason`` says why.
        """
        inbox = self._inbox
        while True:
            if inbox:
                item = inbox.popleft()
                if len(inbox) < _MAX_QUEUED:
                    self._space.set()
                if type(item) is dict or type(item) is list:
                    return item
                assert isinstance(item, AcpError)
                raise item
            if self._closed is not None:
                raise TransportClosed(self._closed.reason, maybe_delivered=False)
            self._wakeup.clear()
            await self._wakeup.wait()

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
            tasks = [task for task in self._tasks if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            if self._connection_id is not None and was_open:
                try:
                    await asyncio.wait_for(self._delete(), timeout=min(self._connect_timeout, 5.0))
                except (AcpError, httpx.HTTPError, asyncio.TimeoutError, OSError) as exc:
                    logger.debug("DELETE of the connection at %s failed: %s", self._info.target, exc)
        finally:
            for stream_client in list(self._stream_clients.values()):
                await stream_client.aclose()
            self._stream_clients.clear()
            await self._client.aclose()

    # -- initialize and the connection stream ------------------------------------------------

    async def _initialize(self, message: dict[str, Any]) -> None:
        logger.debug("POST %s to %s", describe(message), self._info.target)
        answer = await self._post_once(encode(message).encode(), None, initialize=True)
        if answer.status != 200:
            raise self._status_error(answer, what="initialize", session_header=False)
        content_type = _content_type(answer.headers)
        if not _is_json(content_type):
            raise MalformedFrame(
                f"initialize was answered 200 with Content-Type {content_type or 'none'!r}, not JSON",
                excerpt=excerpt(answer.body),
            )
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
        self._connection_id = connection_id
        self._info = attrs.evolve(self._info, connection_id=connection_id, http_version=answer.http_version)
        logger.debug("connection %s open at %s over %s", connection_id, self._info.target, answer.http_version)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._connection_task = self._spawn(self._run_connection_stream(ready), "acp-http-connection-stream")
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
        self._deliver(reply)
        self._forget_stale_connections()

    def _forget_stale_connections(self) -> None:
        """``DELETE`` the connections of earlier links that dropped, in the background.

        Fire and forget: recovery never waits for it, and a failure (the server restarted and
        answers 404, or is slow) is only logged.
        """
        while self._stale:
            old = self._stale.popleft()
            if old != self._connection_id:
                self._spawn(self._delete_stale(old), "acp-http-delete-stale")

    async def _delete_stale(self, connection_id: str) -> None:
        try:
            await asyncio.wait_for(self._delete(connection_id), timeout=_STALE_DELETE_TIMEOUT)
        except asyncio.CancelledError:
            self._stale.append(connection_id)  # this link ended first: the next one tries again
            raise
        except Exception as exc:  # best effort: nothing depends on it
            logger.debug("DELETE of dropped connection %s at %s failed: %s", connection_id, self._info.target, exc)

    async def _run_connection_stream(self, ready: asyncio.Future[None]) -> None:
        try:
            response = await self._open_sse(None)
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
            reason = await self._pump(response, None)
        finally:
            await self._close_sse(response)
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
        stream = _SessionStream(session_id, established)
        self._sessions[session_id] = stream
        stream.task = self._spawn(self._run_session_stream(stream), "acp-http-session-stream")

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
                response = await self._open_sse(sid)
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
                    reason = await self._pump(response, sid, stream)
                finally:
                    await self._close_sse(response)
                if self._closed is not None or stream.closing:
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
                        self._connection_id,
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

    async def _open_sse(self, session_id: str | None) -> httpx.Response:
        """GET a stream; returns the open ``200 text/event-stream`` response (the caller closes it)."""
        assert self._connection_id is not None
        extra = [
            ("Accept", _EVENT_STREAM),
            ("Accept-Encoding", "identity"),
            ("Cache-Control", "no-cache"),
            (CONNECTION_ID_HEADER, self._connection_id),
        ]
        if session_id is not None:
            extra.append((SESSION_ID_HEADER, session_id))
        client = self._stream_client_factory() if self._stream_client_factory is not None else None
        try:
            response = await self._request_following("GET", extra, self._stream_timeout, client=client)
        except BaseException:
            if client is not None:
                await client.aclose()
            raise
        if client is not None:
            self._stream_clients[id(response)] = client
        try:
            if response.status_code != 200:
                body = await self._read_error_body(response)
                answer = _Answer(response.status_code, response.headers, body, response.http_version)
                what = "session stream" if session_id is not None else "connection stream"
                raise self._status_error(answer, what=what, session_header=session_id is not None)
            content_type = _content_type(response.headers)
            if content_type != _EVENT_STREAM:
                raise ProtocolError(f"the SSE GET was answered with Content-Type {content_type or 'none'!r}")
            _Inflater(response.headers.get("content-encoding", ""))  # refuse an encoding we cannot read
        except BaseException:
            await self._close_sse(response)
            raise
        return response

    async def _close_sse(self, response: httpx.Response) -> None:
        """Close an SSE response, and the dedicated client it came on, if any."""
        try:
            await response.aclose()
        finally:
            client = self._stream_clients.pop(id(response), None)
            if client is not None:
                await client.aclose()

    async def _pump(self, response: httpx.Response, source: str | None, stream: _SessionStream | None = None) -> str:
        """Read one SSE stream into the inbox until it ends; returns why it ended."""
        limits = self._limits
        parser = SseParser(max_line_bytes=limits.max_sse_line_bytes, max_event_bytes=limits.max_message_bytes)
        feed = parser.feed
        inflater = _Inflater(response.headers.get("content-encoding", ""))
        push = self._push
        inspect = self._inspect_inbound
        inbox = self._inbox
        wakeup = self._wakeup
        try:
            async for raw in response.aiter_raw():
                for chunk in (raw,) if inflater.identity else inflater.pieces(raw):
                    for item in feed(chunk):
                        if type(item) is SseEvent:
                            if item.event != "message":
                                logger.debug("ignoring an SSE event of type %r", item.event)
                                continue
                            if not item.data:
                                continue
                            try:
                                message = decode_frame(item.data)
                            except MalformedFrame as exc:
                                await push(exc)
                                continue
                            if type(message) is not dict or "id" in message:  # a notification needs no tracking
                                inspect(message, source)
                            if len(inbox) < _MAX_QUEUED:  # what _deliver() does, inline: the hot path
                                inbox.append(message)
                                wakeup.set()
                            else:
                                await push(message)
                        else:
                            assert isinstance(item, MessageTooLarge)
                            logger.warning("skipped an oversized SSE event from %s: %s", self._info.target, item)
                            await push(item)
                if stream is not None:
                    stream.got_data = True
                    if stream.closing:
                        return "session closed"
        except httpx.ReadTimeout:
            return f"no data for {self._idle:g}s (idle timeout)"
        except httpx.HTTPError as exc:
            return f"broken: {_describe(exc)}"
        except ProtocolError as exc:
            return f"unreadable: {exc}"
        if parser.finish():
            await push(MalformedFrame("an SSE stream ended inside an event; the partial event was discarded"))
        return "ended by the server"

    def _inspect_inbound(self, message: Message, source: str | None) -> None:
        """Track what the transport itself needs: established sessions and reply routes."""
        if type(message) is dict:
            self._inspect_one(message, source)
        else:
            for member in message:
                if isinstance(member, dict):
                    self._inspect_one(member, source)

    def _inspect_one(self, message: dict[str, Any], source: str | None) -> None:
        if "method" in message:
            if "id" in message:  # an agent request: its reply goes back on the same session route
                key = _hashable_id(message)
                params_sid = _session_id_of(message.get("params"))
                if key is not None and (source is not None or params_sid is not None):
                    _remember(self._reply_routes, key, (params_sid, source))
            return
        key = _hashable_id(message)
        if key is None:
            return
        entry = self._outgoing.pop(key, None) if self._outgoing else None
        result = message.get("result")
        if isinstance(result, dict):
            sid = result.get("sessionId")
            if entry is not None:
                method, params_sid = entry
                if method in ESTABLISHING_METHODS:
                    if not isinstance(sid, str):
                        sid = params_sid
                else:
                    sid = None
                if method == "session/close" and params_sid is not None and self._session_header_everywhere:
                    # Only where reopening is safe (the TypeScript dialect buffers until a stream is
                    # opened). The Python SDK 0.12.1 server keeps routing the session's answers to its
                    # stream after a close, and a reopened stream there shares messages with the dead
                    # one, so the stream stays open until the connection ends.
                    self._drop_session_stream(params_sid)
            if isinstance(sid, str) and sid:
                self._ensure_session_stream(sid, established=True)
        elif entry is not None and entry[1] is not None:
            error = message.get("error")
            if isinstance(error, dict) and error.get("code") == -32002:
                stream = self._sessions.get(entry[1])
                if stream is not None and not stream.established.is_set():
                    self._drop_session_stream(entry[1])

    # -- POST --------------------------------------------------------------------------------

    def _route_for(self, message: Message) -> _Route:
        members = message if isinstance(message, list) else [message]
        routes = [self._route_one(m) for m in members if isinstance(m, dict)]
        routes = [route for route in routes if route.session_id is not None]
        if not routes:
            return _Route()
        if len(routes) == 1:
            route = routes[0]
        else:
            ids = {route.session_id for route in routes}
            if len(ids) != 1:
                return _Route()
            route = _Route(
                routes[0].session_id,
                with_header=any(r.with_header for r in routes),
                adaptable=all(r.adaptable for r in routes),
            )
        assert route.session_id is not None
        _header_session_id(route.session_id)
        return route

    def _route_one(self, message: dict[str, Any]) -> _Route:
        method = message.get("method")
        if method is None:
            key = _hashable_id(message)
            entry = self._reply_routes.pop(key, None) if key is not None else None
            if entry is None:
                return _Route()
            params_sid, source = entry
            if source is not None:
                return _Route(source, with_header=True, adaptable=True)
            return _Route(params_sid, with_header=self._session_header_everywhere is True, adaptable=True)
        sid = _session_id_of(message.get("params"))
        if sid is None:
            return _Route()
        if method in SESSION_SCOPED_METHODS:
            return _Route(sid, with_header=True)
        return _Route(sid, with_header=self._session_header_everywhere is True, adaptable=True)

    def _note_outgoing(self, message: dict[str, Any]) -> int | str | None:
        method = message.get("method")
        if not isinstance(method, str):
            return None
        key = _hashable_id(message)
        if key is None:
            return None
        sid = _session_id_of(message.get("params"))
        if method in ESTABLISHING_METHODS or sid is not None:
            _remember(self._outgoing, key, (method, sid))
            return key
        return None

    async def _post(self, message: Message, route: _Route) -> None:
        body = encode(message).encode()
        use_header = route.with_header
        sid = route.session_id
        logger.debug("POST %s to %s", describe(message), self._info.target)
        for attempt in (0, 1):
            if use_header and sid is not None and sid not in self._sessions:
                # The answer may come on the session stream: have it open (the server buffers).
                self._ensure_session_stream(sid, established=False)
            answer = await self._post_once(body, sid if use_header else None)
            if answer.status in (200, 202, 204):
                if answer.status == 200 and answer.body:
                    self._accept_post_body(answer)
                return
            if attempt == 0 and route.adaptable and sid is not None:
                if not use_header and answer.status == 400 and _mentions_session(answer.body):
                    logger.debug("the server wants %s on every POST naming a session", SESSION_ID_HEADER)
                    self._session_header_everywhere = self._learnt.session_header_everywhere = True
                    use_header = True
                    continue
                if use_header and answer.status == 404 and _is_session_404(answer.body, True):
                    logger.debug("the server refuses %s for a session it has not established", SESSION_ID_HEADER)
                    self._session_header_everywhere = self._learnt.session_header_everywhere = False
                    use_header = False
                    continue
            error = self._status_error(
                answer, what="POST", session_header=use_header and sid is not None, batch=isinstance(message, list)
            )
            if isinstance(error, UnknownConnection):
                self._fail(f"the server no longer knows connection {self._connection_id}")
            raise error

    def _accept_post_body(self, answer: _Answer) -> None:
        """A 200 with a body where a 202 was expected: deliver it if it is JSON-RPC."""
        content_type = _content_type(answer.headers)
        if not _is_json(content_type):
            self._deliver(
                MalformedFrame(
                    f"a POST was answered 200 with Content-Type {content_type or 'none'!r}",
                    excerpt=excerpt(answer.body),
                )
            )
            return
        try:
            reply = decode_frame(answer.body)
        except MalformedFrame as exc:
            self._deliver(exc)
            return
        self._inspect_inbound(reply, None)
        self._deliver(reply)

    async def _post_once(self, body: bytes, session_id: str | None, *, initialize: bool = False) -> _Answer:
        extra = [("Content-Type", _JSON), ("Accept", f"{_JSON}, {_EVENT_STREAM}"), ("Accept-Encoding", "gzip, deflate")]
        if not initialize:
            assert self._connection_id is not None
            extra.append((CONNECTION_ID_HEADER, self._connection_id))
        if session_id is not None:
            extra.append((SESSION_ID_HEADER, session_id))
        request = self._client.build_request(
            "POST", self._url, content=body, headers=self._headers_for(self._url, extra), timeout=self._post_timeout
        )
        response = await self._send_request(request, "POST", initialize=initialize)
        try:
            self._capture_cookies(response)
            status = response.status_code
            if status in _REDIRECT_STATUSES:
                raise UnsafeRedirect(
                    f"the server redirected a JSON-RPC POST (HTTP {status}); POSTs never follow redirects"
                )
            if not 200 <= status < 300:
                data = await self._read_error_body(response)
            elif initialize:
                data = await self._read_body(response, self._limits.max_http_body_bytes, truncate=False)
            else:
                try:
                    data = await self._read_body(response, self._limits.max_http_body_bytes, truncate=False)
                except (MessageTooLarge, ProtocolError) as exc:
                    # The server accepted the message; only its unexpected answer body is lost.
                    self._deliver(exc)
                    data = b""
            return _Answer(status, response.headers, data, response.http_version)
        except httpx.HTTPError as exc:
            raise self._network_failure(exc, "POST", initialize=initialize, sent=True) from exc
        finally:
            await response.aclose()

    # -- GET / DELETE with same-origin redirects ---------------------------------------------

    async def _request_following(
        self,
        method: str,
        extra: list[tuple[str, str]],
        timeout: httpx.Timeout,
        *,
        client: httpx.AsyncClient | None = None,
    ) -> httpx.Response:
        """Send a GET or DELETE, following same-origin redirects only; returns the open response."""
        client = client if client is not None else self._client
        url = self._url
        for _ in range(MAX_REDIRECTS + 1):
            request = client.build_request(method, url, headers=self._headers_for(url, extra), timeout=timeout)
            response = await self._send_request(request, method, client=client)
            self._capture_cookies(response)
            if response.status_code not in _REDIRECT_STATUSES:
                return response
            await response.aclose()
            location = response.headers.get("location")
            target = urljoin(url, location) if location else ""
            if not location or not redirect_allowed(url, target):
                raise UnsafeRedirect(
                    f"refused a redirect of {method} from {safe_url(url)} to "
                    f"{safe_url(target) if target else 'nowhere'}: only same-origin redirects are followed"
                )
            logger.debug("following a same-origin redirect of %s to %s", method, safe_url(target))
            url = target
        raise UnsafeRedirect(f"more than {MAX_REDIRECTS} redirects for {method} {self._info.target}")

    async def _send_request(
        self,
        request: httpx.Request,
        what: str,
        *,
        initialize: bool = False,
        client: httpx.AsyncClient | None = None,
    ) -> httpx.Response:
        """Send one request, streaming its answer; failures are mapped to the error tree."""
        client = client if client is not None else self._client
        if client.is_closed or self._client.is_closed:
            raise TransportClosed(self._closed.reason if self._closed else "closed", maybe_delivered=False)
        try:
            return await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self._network_failure(exc, what, initialize=initialize) from exc
        except RuntimeError as exc:  # httpx refuses to use a client that aclose() closed meanwhile
            if not client.is_closed:
                raise
            reason = self._closed.reason if self._closed is not None else "closed by the client"
            raise TransportClosed(reason, maybe_delivered=False) from exc

    async def _delete(self, connection_id: str | None = None) -> None:
        connection_id = connection_id if connection_id is not None else self._connection_id
        assert connection_id is not None
        extra = [(CONNECTION_ID_HEADER, connection_id)]
        response = await self._request_following("DELETE", extra, self._post_timeout)
        try:
            logger.debug("DELETE of %s at %s answered %s", connection_id, self._info.target, response.status_code)
        finally:
            await response.aclose()

    # -- helpers -----------------------------------------------------------------------------

    def _headers_for(self, url: str, extra: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        same_origin = origin_of(url) == self._origin
        headers = [
            (name, value) for name, value in self._headers if same_origin or name.lower() not in self._secret
        ]
        cookie = self._cookies.header_for(url)
        if cookie:
            merged = [value for name, value in headers if name.lower() == "cookie"]
            headers = [(name, value) for name, value in headers if name.lower() != "cookie"]
            headers.append(("Cookie", "; ".join([*merged, cookie])))
        headers.extend(extra)
        return headers

    def _capture_cookies(self, response: httpx.Response) -> None:
        values = response.headers.get_list("set-cookie")
        if values:
            self._cookies.capture(str(response.request.url), values)

    async def _read_body(self, response: httpx.Response, cap: int, *, truncate: bool) -> bytes:
        """Read a body, decompressing in bounded steps; never more than ``cap`` bytes decoded.

        Raises:
            MessageTooLarge: The body exceeds ``cap`` (unless ``truncate``: then it is cut).
            ProtocolError: An unsupported or corrupt Content-Encoding.
        """
        inflater = _Inflater(response.headers.get("content-encoding", ""))
        declared = response.headers.get("content-length", "")
        if not truncate and inflater.identity and declared.isdigit() and int(declared) > cap:
            raise MessageTooLarge(f"an HTTP body of {declared} bytes exceeds the {cap}-byte cap", limit=cap)
        parts: list[bytes] = []
        total = 0
        async for raw in response.aiter_raw():
            for piece in inflater.pieces(raw):
                total += len(piece)
                if total > cap:
                    if truncate:
                        parts.append(piece[: len(piece) - (total - cap)])
                        return b"".join(parts)
                    raise MessageTooLarge(f"an HTTP body exceeds the {cap}-byte cap", limit=cap)
                parts.append(piece)
        return b"".join(parts)

    async def _read_error_body(self, response: httpx.Response) -> bytes:
        """The start of an error answer's body, for diagnostics (empty if unreadable)."""
        try:
            return await self._read_body(response, _ERROR_BODY_BYTES, truncate=True)
        except ProtocolError:
            return b""

    def _status_error(
        self, answer: _Answer, *, what: str, session_header: bool, batch: bool = False
    ) -> TransportError:
        status = answer.status
        text = answer.body.decode("utf-8", "replace")
        detail = f": {excerpt(text)}" if text else ""
        message = f"{what} to {self._info.target} answered HTTP {status}{detail}"
        if status in _REDIRECT_STATUSES:
            return UnsafeRedirect(f"{what} to {self._info.target} was redirected (HTTP {status})")
        if batch and (status == 501 or (status == 400 and b"batch" in answer.body.lower())):
            return BatchNotSupported(message, status=status, body=text, maybe_delivered=False)
        if status == 400:
            return MissingHeader(message, status=status, body=text, maybe_delivered=False)
        if status in (401, 403):
            return AuthenticationFailed(message, status=status, body=text, maybe_delivered=False)
        if status == 404:
            if _is_session_404(answer.body, session_header):
                return UnknownSession(message, status=status, body=text, maybe_delivered=False)
            return UnknownConnection(message, status=status, body=text, maybe_delivered=False)
        if status == 406:
            return NotAcceptable(message, status=status, body=text, maybe_delivered=False)
        if status == 415:
            return UnsupportedMediaType(message, status=status, body=text, maybe_delivered=False)
        if status == 501:
            return BatchNotSupported(message, status=status, body=text, maybe_delivered=False)
        if status in (429, 503):
            retry_after = parse_retry_after(answer.headers.get("retry-after"))
            return ServiceUnavailable(
                message, status=status, body=text, retry_after=retry_after, maybe_delivered=False
            )
        # A 5xx may come after the agent saw the message; a 4xx is a refusal before it.
        return HttpStatusError(message, status=status, body=text, maybe_delivered=status >= 500)

    def _network_failure(
        self, exc: httpx.HTTPError, what: str, *, initialize: bool, sent: bool = False
    ) -> TransportError:
        """Map a network failure of one request.

        A failed POST is connection-level: the link is closed. A GET or DELETE failure is
        returned as a plain :class:`TransportError` for the stream logic to judge.
        """
        maybe_delivered = sent or not isinstance(
            exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | httpx.UnsupportedProtocol
        )
        if isinstance(exc, httpx.TimeoutException):
            cause = f"{type(exc).__name__} after {self._idle:g}s" if maybe_delivered else type(exc).__name__
        else:
            cause = _describe(exc)
        reason = f"{what} to {self._info.target} failed: {cause}"
        if _is_tls_failure(exc):
            self._fail(f"TLS verification failed for {what}")
            return TlsVerificationError(f"the certificate of {self._info.target} did not verify: {exc}")
        if what != "POST":
            return TransportError(reason, maybe_delivered=maybe_delivered)
        self._fail(reason)
        if initialize and not maybe_delivered:
            return ConnectError(f"could not connect to {self._info.target}: {cause}")
        return TransportClosed(reason, maybe_delivered=maybe_delivered)

    def _check_open(self) -> None:
        if self._closed is not None:
            raise TransportClosed(self._closed.reason, maybe_delivered=False)

    def _deliver(self, item: _Inbound) -> None:
        self._inbox.append(item)
        self._wakeup.set()

    async def _push(self, item: _Inbound) -> None:
        """Queue an inbound item, waiting (and so not reading) while the queue is full."""
        while len(self._inbox) >= _MAX_QUEUED and self._closed is None:
            self._space.clear()
            await self._space.wait()
        if self._closed is None:
            self._deliver(item)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            logger.error("%s failed unexpectedly", task.get_name(), exc_info=exc)
            self._fail(f"internal error in {task.get_name()}: {type(exc).__name__}")

    def _fail(self, reason: str, *, level: int = logging.INFO) -> None:
        """Close the link (once): wake the reader, stop every stream."""
        if self._closed is not None:
            return
        self._closed = TransportClosed(reason)
        logger.log(level, "HTTP link to %s closed: %s", self._info.target, reason)
        if not self._released and self._connection_id is not None:
            self._stale.append(self._connection_id)  # dropped, not closed: DELETEd from the next link
        self._wakeup.set()
        self._space.set()
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
