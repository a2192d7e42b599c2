"""The Streamable HTTP transport: one ACP connection over one HTTP endpoint, with SSE streams.

The wire (one endpoint URL, ``/acp`` by convention):

* ``initialize`` is a ``POST`` without ``Acp-Connection-Id``, answered ``200`` with the JSON-RPC
  response as its JSON body (delivered by :meth:`HttpTransport.receive` like any other message) and
  the connection's id in ``Acp-Connection-Id``. Right after it the transport opens the
  **connection stream** (a ``GET`` with ``Accept: text/event-stream``); ``send(initialize)``
  returns once it is open, so its failures (401, 406, a refused redirect...) are raised there.
* Every later message is a ``POST`` carrying ``Acp-Connection-Id``, answered ``202`` (the answer
  comes on an SSE stream). Session-scoped methods (:data:`SESSION_SCOPED_METHODS`) and replies to
  agent requests that came on a session stream also carry ``Acp-Session-Id``.
* Once a session is established (a successful answer to one of :data:`ESTABLISHING_METHODS`),
  the transport opens its **session stream**: a ``GET`` with ``Acp-Session-Id`` too.
* :meth:`HttpTransport.aclose` sends ``DELETE``. A link that dropped cannot (its server may be
  unreachable): the connector's next link sends it in the background once initialized (briefly
  delayed and bounded, failures logged at DEBUG), so a server that never expires connections
  (the official Python SDK 0.12.1) does not keep one per reconnect. A connection dropped while a
  turn may still run on it (a ``session/prompt`` unanswered, a v2 turn not ``idle``) never gets
  that ``DELETE``: it would abort the turn; the server's expiry ends it.

Messages from every stream are delivered in arrival order; correlation is the connection's job.

**Two server dialects** disagree on when ``Acp-Session-Id`` goes on a POST; the transport learns
which one it talks to from the refusals (:mod:`._routing`), and the connector's next link starts
from what this one learnt. A session stream ``GET`` answered ``404`` before the session is
established waits for the establishing answer and is then reopened; a ``404`` that persists after
it becomes :class:`~acp_client.exceptions.UnknownSession`, raised by the next ``send()`` of a
session-scoped method for that session (never a hang).

**Reattach before reconnect.** A stream that breaks (a reset, ``sse_idle_timeout`` without a
byte) after carrying SSE event ids is reopened on the same connection with ``Last-Event-ID`` and
the resumption headers the server sent (:mod:`._reattach`), for up to ``reattach_timeout``
seconds: the link stays open, pending requests stay pending, and ``watch_resumes`` listeners get a
:class:`~.base.StreamResumed`. The break becomes a drop when the server no longer knows the
connection or the session (404, 403), signals that it cannot resume (a resync), changed its
numbering (an epoch header), or cannot be reached in time; and at once when the stream carried no
event id, since nobody could tell what it was carrying.

**Failures.** A refusal of one POST (4xx/5xx) raises a typed
:class:`~acp_client.exceptions.HttpStatusError` from ``send()``; the transport stays usable.
These close it (``receive()`` then raises :class:`~acp_client.exceptions.TransportClosed`): a
network failure of a POST, a ``404`` for the connection id, the connection stream ending or
breaking and not reattached, no byte on an SSE stream for ``sse_idle_timeout`` seconds and no
reattach (servers send keepalive comments every 15 s; over HTTP/2 the silence is measured per
HTTP connection), a session stream that ``session_stream_retries`` quick attempts cannot reopen.

**Safety.** TLS is verified by default, with a fresh :class:`ssl.SSLContext` per connector.
JSON-RPC POSTs never follow redirects (a 3xx is :class:`~acp_client.exceptions.UnsafeRedirect`);
``GET``/``DELETE`` follow same-origin ones only, so credentials never leave the origin. Cookies
come from and go back to a :class:`~acp_client.transports.CookieStore` on every request. Header
values are checked for CR/LF/NUL before anything is sent. Bodies are decompressed in bounded
steps and capped at :attr:`Limits.max_http_body_bytes`; SSE lines and events at
:attr:`Limits.max_sse_line_bytes` and :attr:`Limits.max_message_bytes` (an oversized event is
skipped and reported as :class:`~acp_client.exceptions.MessageTooLarge` from ``receive()``; the
stream goes on). Inbound messages wait in a bounded queue: a full one stops the SSE readers, which
pushes back on the server through TCP / HTTP/2 flow control. Proxy settings and ``.netrc`` from
the environment are not used. No ``httpx`` type crosses this module's boundary.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final
from urllib.parse import urlsplit

from .._util._checks import check_count, check_seconds
from .._util._logging import get_logger
from ..exceptions import ConfigurationError
from ._cookies import CookieStore
from ._errors import MAX_REDIRECTS
from ._exchange import CONNECTION_ID_HEADER, SESSION_ID_HEADER, LinkSettings
from ._link import Carried, HttpTransport
from ._log_redaction import install_log_redaction
from ._routing import ESTABLISHING_METHODS, SESSION_SCOPED_METHODS
from ._security import DEFAULT_SECRET_HEADERS, TlsConfig, check_headers, origin_of, safe_url
from ._wire import Wire, new_pools
from .base import Limits

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

#: Headers the transport sets itself; an app may not.
_RESERVED_HEADERS: Final = frozenset(
    {"acp-connection-id", "acp-session-id", "accept", "accept-encoding", "content-type", "content-length"}
    | {"transfer-encoding", "host", "connection", "upgrade", "te"}
)
#: TCP connections a link keeps for its POSTs (and DELETEs), beside those its SSE streams hold over
#: HTTP/1.1: what concurrent requests (a recovery's, bounded by ``recovery_concurrency``) share.
_POST_CONNECTIONS: Final = 8


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
        reattach_timeout: Seconds a broken stream that carried event ids is tried again on the
            same connection (``Last-Event-ID``) before the link counts as dropped. Keep it under
            the server's grace for a dropped connection's streams (10 s for Qwen Code's daemon).
            ``0``: never reattach (every broken connection stream is a drop).

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
        reattach_timeout: float = 8.0,
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
        check_seconds("reattach_timeout", reattach_timeout, zero=True)
        secret = frozenset(name.lower() for name in secret_headers) | DEFAULT_SECRET_HEADERS
        install_log_redaction(secret)  # keep these out of httpx/httpcore/hpack/h2/websockets logs
        self._settings = LinkSettings(
            url=url,
            headers=pairs,
            secret_headers=secret,
            cookies=cookies if cookies is not None else CookieStore(),
            limits=limits,
            connect_timeout=connect_timeout,
            sse_idle_timeout=sse_idle_timeout,
            session_stream_retries=session_stream_retries,
            max_session_streams=max_session_streams,
            reattach_timeout=float(reattach_timeout),
        )
        self._http1 = http2 is not True
        self._http2 = origin.secure if http2 is None else http2
        # One fresh context per connector: settings of another client never leak into this one.
        self._ssl = tls.build_context() if origin.secure else None
        self._carried = Carried()

    @property
    def target(self) -> str:
        """The endpoint without user info or query string (safe to log)."""
        return safe_url(self._settings.url)

    @property
    def cookies(self) -> CookieStore:
        """The cookie store this connector reads and fills."""
        return self._settings.cookies

    def _new_client(self, connections: int = 1) -> Wire:
        pools = new_pools(http1=self._http1, http2=self._http2, tls=self._ssl, connections=connections)
        return Wire(pools, self._settings.connect_timeout)

    async def connect(self) -> HttpTransport:
        """Prepare a new link; ``send(initialize)`` makes the first request.

        Returns:
            A transport whose first ``send()`` must be the ``initialize`` request.
        """
        return HttpTransport(
            self._settings,
            client=self._new_client(_POST_CONNECTIONS),
            # httpcore (1.0.x) starves HTTP/2 streams that share a connection with other idle
            # long-lived readers: an SSE event can wait for unrelated bytes (the next keepalive)
            # before it is read. So under HTTP/2 every SSE stream gets a connection of its own,
            # as it would under HTTP/1.1; POSTs share the main client.
            stream_client_factory=self._new_client if self._http2 else None,
            # Over HTTP/1.1 each open SSE stream holds a connection (the connection stream, up to
            # max_session_streams session streams): they share a pool of their own, so the POSTs'
            # pool stays small (httpcore walks every connection of a pool on every request).
            stream_client=None if self._http2 else self._new_client(1 + self._settings.max_session_streams),
            carried=self._carried,
        )
