"""The WebSocket transport: one ACP connection over one WebSocket (``ws://`` or ``wss://``).

The client opens the link with a ``GET`` upgrade; each text frame carries one JSON-RPC message
(or batch). The server may name the connection in an ``Acp-Connection-Id`` header of its 101
answer; it ends up in :attr:`TransportInfo.connection_id`. Binary frames are reported (as
:class:`~acp_client.exceptions.MalformedFrame`) and otherwise ignored.

``websockets`` (its documented asyncio API) owns the handshake, framing, compression, the size cap
and the closing handshake; none of its types cross this module's boundary. A close by the agent, a
TCP reset or an unanswered keepalive ping ends the link promptly, and ``receive()`` / ``send()``
then raise :class:`~acp_client.exceptions.TransportClosed` with a precise ``reason``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import ssl
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Final, Literal
from urllib.parse import urljoin, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection as WebSocketConnection
from websockets.asyncio.client import connect as _ws_connect
from websockets.datastructures import Headers
from websockets.exceptions import ConcurrencyError, ConnectionClosed, InvalidStatus, WebSocketException
from websockets.frames import CloseCode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.proxy import get_proxy
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from .._codec._jsonrpc import Message, decode_frame, encode, excerpt
from .._util._checks import check_seconds
from .._util._logging import get_logger
from ..exceptions import (
    ConfigurationError,
    ConnectTimeout,
    MalformedFrame,
    MessageTooLarge,
    TransportClosed,
    TransportError,
    UnsafeRedirect,
)
from ._cookies import CookieStore, with_cookie
from ._errors import MAX_REDIRECTS, REDIRECT_STATUSES, describe_error, open_error, status_error
from ._log_redaction import install_log_redaction
from ._security import DEFAULT_SECRET_HEADERS, TlsConfig, check_headers, redact_headers, redirect_allowed, safe_url
from .base import Limits, TransportInfo

__all__ = ["WebSocketConnector", "WebSocketTransport"]

logger = get_logger(__name__)

#: Handshake headers the WebSocket library owns; an app may not set them.
_RESERVED_HEADERS: Final = frozenset(
    {"host", "connection", "upgrade", "content-length", "transfer-encoding"}
    | {f"sec-websocket-{name}" for name in ("key", "version", "extensions", "protocol", "accept")}
)
_TOKEN_CHARS: Final = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_BODY_EXCERPT: Final = 500
#: What an HTTP/1.1 header value may hold (visible ISO-8859-1, spaces and tabs).
_HEADER_VALUE: Final = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_WS_SCHEMES: Final = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}
#: The environment variables that decide websockets' proxy for a URL (urllib reads both cases;
#: REQUEST_METHOD makes it ignore HTTP_PROXY in a CGI process).
_PROXY_VARIABLES: Final = (
    *(f"{scheme}_proxy" for scheme in ("no", "ws", "wss", "socks", "https", "http")),
    *(f"{scheme}_PROXY" for scheme in ("NO", "WS", "WSS", "SOCKS", "HTTPS", "HTTP")),
    "REQUEST_METHOD",
)


@functools.lru_cache(maxsize=256)
def _resolve_proxy(url: str, environment: tuple[str | None, ...]) -> str | None:
    return get_proxy(parse_uri(url))


def proxy_for(url: str) -> str | Literal[True] | None:
    """The proxy websockets would pick for ``url`` (``None``: connect directly).

    websockets scans the whole environment on every connect (about 0.4 ms, paid per instance of a
    fan-out). Where only environment variables decide (not macOS or Windows), the answer is kept per
    URL and per value of those variables; elsewhere ``True`` lets websockets resolve it.
    """
    if sys.platform in ("darwin", "win32"):
        return True
    return _resolve_proxy(url, tuple(os.environ.get(name) for name in _PROXY_VARIABLES))


class _NoRedirectConnect(_ws_connect):
    """``websockets.connect`` that returns redirects to us instead of following them itself."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


class _Connection(WebSocketConnection):
    """websockets' client connection, with every closing handshake bounded by ``close_timeout``.

    When a frame from the agent starts the closing handshake (its close frame, or 1009 / 1007 from
    websockets), websockets waits for the agent to end TCP with no timer: a silent agent would leave
    ``recv()`` waiting forever. ``close()`` applies the timeout, so it is started here (through
    ``connect(create_connection=...)``, the documented customization).
    """

    acp_closer: asyncio.Task[None] | None = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.state is State.CLOSING and self.acp_closer is None:
            self.acp_closer = asyncio.get_running_loop().create_task(self.close())


def _status_error(response: Response, url: str) -> TransportError:
    """The exception for a handshake answered with an HTTP error status."""
    status = response.status_code
    text = (response.body or b"")[: _BODY_EXCERPT * 4].decode("utf-8", "replace")[:_BODY_EXCERPT]
    message = f"WebSocket handshake to {safe_url(url)} refused: HTTP {status} {response.reason_phrase}".rstrip()
    return status_error(status, message, body=text, retry_after=response.headers.get("Retry-After"))


def _normalize_url(url: str) -> str:
    parts = urlsplit(url)
    scheme = _WS_SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ConfigurationError(f"a WebSocket URL must start with ws:// or wss://, got {safe_url(url)!r}")
    if not parts.hostname:
        raise ConfigurationError(f"URL has no host: {safe_url(url)!r}")
    return urlunsplit((scheme, parts.netloc, parts.path or "/", parts.query, ""))


class WebSocketTransport:
    """One open WebSocket link to an agent (a :class:`~.base.Transport`). Made by :class:`WebSocketConnector`."""

    def __init__(
        self,
        connection: WebSocketConnection,
        info: TransportInfo,
        *,
        limit: int,
        ping_interval: float | None,
        ping_timeout: float | None,
        close_timeout: float,
    ) -> None:
        self._ws = connection
        self._info = info
        self._limit = limit
        self._close_timeout = close_timeout
        #: Why this side ended the link (ping timeout, aclose); wins over what websockets saw.
        self._local_reason: str | None = None
        self._too_large_reported = False
        self._closing: asyncio.Task[None] | None = None
        #: The tasks inside send() or receive() now: a ping timeout wakes them at once.
        self._busy: set[asyncio.Task[Any]] = set()
        #: Those of them this transport cancelled (their CancelledError becomes TransportClosed).
        self._cut: set[asyncio.Task[Any]] = set()
        self._keepalive: asyncio.Task[None] | None = None
        if ping_interval is not None:
            self._keepalive = asyncio.get_running_loop().create_task(self._keep_alive(ping_interval, ping_timeout))

    @property
    def info(self) -> TransportInfo:
        """What is known about this link (target, ``Acp-Connection-Id``)."""
        return self._info

    @property
    def subprotocol(self) -> str | None:
        """The subprotocol the server selected, or ``None``."""
        return self._ws.subprotocol

    @property
    def closed(self) -> bool:
        """Whether the link has ended (or is ending)."""
        return self._local_reason is not None or self._ws.state is not State.OPEN

    async def send(self, message: Message) -> None:
        """Send one message or batch as a text frame.

        Raises:
            TransportClosed: The link has ended. ``maybe_delivered`` is ``False`` when it had
                already ended before this call wrote anything, ``True`` when it ended while the
                frame was being written.
        """
        text = encode(message)
        ws = self._ws
        if self._local_reason is not None:
            raise TransportClosed(self._local_reason, maybe_delivered=False)
        was_open = ws.state is State.OPEN
        try:
            with self._wakeable(maybe_delivered=True):
                await ws.send(text)
        except ConnectionClosed as exc:
            # websockets writes nothing on a link that is no longer open.
            raise TransportClosed(self._reason(exc), maybe_delivered=was_open) from exc
        if ws.state is not State.OPEN:
            # The link ended while the frame was being written: it may or may not have reached the agent.
            raise TransportClosed(self._current_reason(), maybe_delivered=True)

    async def receive(self) -> Message:
        """The next inbound message or batch.

        Raises:
            MalformedFrame: A frame was not a JSON-RPC message, or was binary; the link is kept.
            MessageTooLarge: An inbound message exceeded ``Limits.max_message_bytes``; the link
                was closed with 1009 (raised once; later calls raise ``TransportClosed``).
            TransportClosed: The link has ended; ``reason`` says how.
            TransportError: ``receive()`` was called concurrently from two tasks.
        """
        if self._local_reason is not None:
            raise TransportClosed(self._local_reason, maybe_delivered=False)
        try:
            with self._wakeable(maybe_delivered=False):
                data = await self._ws.recv()
        except ConnectionClosed as exc:
            raise self._closed_error(exc) from exc
        except ConcurrencyError as exc:
            raise TransportError("receive() called while another receive() is waiting") from exc
        if type(data) is str:
            return decode_frame(data)
        raise MalformedFrame(f"binary frame ignored ({len(data)} bytes)", excerpt=excerpt(data))

    @contextlib.contextmanager
    def _wakeable(self, *, maybe_delivered: bool) -> Iterator[None]:
        """Run a send or receive that :meth:`_dead` may wake: its cancellation by this transport
        alone (not by its owner) becomes ``TransportClosed``."""
        task = asyncio.current_task()
        assert task is not None
        self._busy.add(task)
        try:
            yield
        except asyncio.CancelledError:
            if task in self._cut:
                self._cut.discard(task)
                uncancel = getattr(task, "uncancel", None)  # Python 3.11+; 3.10 cannot tell the two apart
                if uncancel is None or uncancel() == 0:
                    raise TransportClosed(self._current_reason(), maybe_delivered=maybe_delivered) from None
            raise
        finally:
            self._busy.discard(task)

    async def aclose(self) -> None:
        """Close the link (close code 1000), waiting at most ``close_timeout`` for the agent.

        Idempotent; never raises for a link that is already dead.
        """
        if self._closing is None:
            if self._ws.state is State.OPEN and self._local_reason is None:
                self._local_reason = "closed by client (aclose)"
            self._closing = asyncio.get_running_loop().create_task(self._close())
        # Shield: a caller cancelled while closing must not leave the close half done.
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        keepalive, self._keepalive = self._keepalive, None
        if keepalive is not None and keepalive is not asyncio.current_task():
            keepalive.cancel()
        try:
            # websockets waits close_timeout for the agent's answer, then drops the TCP connection.
            await asyncio.wait_for(self._ws.close(), self._close_timeout + 1.0)
        except (asyncio.TimeoutError, OSError, WebSocketException) as exc:
            logger.debug("closing %s did not complete cleanly: %r", self._info.target, exc)
        finally:
            if keepalive is not None:
                await asyncio.gather(keepalive, return_exceptions=True)

    def _closed_error(self, exc: ConnectionClosed) -> TransportError:
        sent = exc.sent
        if (
            not self._too_large_reported
            and self._local_reason is None
            and sent is not None
            and sent.code == CloseCode.MESSAGE_TOO_BIG
            and (exc.rcvd is None or exc.rcvd_then_sent is False)
        ):
            self._too_large_reported = True
            return MessageTooLarge(
                f"inbound WebSocket message exceeded {self._limit} bytes; link closed (1009)", limit=self._limit
            )
        return TransportClosed(self._reason(exc), maybe_delivered=False)

    def _reason(self, exc: ConnectionClosed) -> str:
        """A precise, human-readable reason for the end of the link."""
        if self._local_reason is not None:
            return self._local_reason
        if exc.sent is not None and (exc.rcvd is None or exc.rcvd_then_sent is False):
            return f"closed by client {exc.sent}"  # "1000 (OK) bye"
        if exc.rcvd is not None:
            return f"closed by agent {exc.rcvd}"
        cause = exc.__cause__
        return "connection dropped (1006)" + (f": {describe_error(cause)}" if cause is not None else "")

    def _current_reason(self) -> str:
        """The reason while no ``ConnectionClosed`` says more (the link may still be closing)."""
        if self._local_reason is not None:
            return self._local_reason
        code = self._ws.close_code
        if code is None or code == CloseCode.ABNORMAL_CLOSURE:
            return "connection dropped (1006)"
        return f"connection closed ({code} {self._ws.close_reason})".replace(" )", ")")

    async def _keep_alive(self, interval: float, timeout: float | None) -> None:
        """Ping every ``interval`` seconds; a pong ``timeout`` late ends the link at once, waking
        :meth:`send` and :meth:`receive` (websockets' own keepalive would wait ``close_timeout`` more)."""
        ws = self._ws

        async def ping() -> None:
            pong = await ws.ping()
            if timeout is not None:
                await pong

        ended = asyncio.ensure_future(ws.wait_closed())
        try:
            while True:
                done, _ = await asyncio.wait([ended], timeout=interval)
                if done or ws.state is not State.OPEN:
                    return
                try:
                    # The timeout covers writing the ping too: a dead peer with full buffers blocks it.
                    await asyncio.wait_for(ping(), timeout)
                except (ConnectionClosed, ConcurrencyError):
                    return
                except asyncio.TimeoutError:
                    if ws.state is State.OPEN:
                        self._dead(f"ping timeout (no pong within {timeout:g}s)")
                    return
        except Exception:  # a bug here must not pass silently, nor take the link down
            logger.warning("WebSocket keepalive to %s failed", self._info.target, exc_info=True)
        finally:
            ended.cancel()

    def _dead(self, reason: str) -> None:
        """End the link from this side: wake whoever waits in it, then close it in the background."""
        self._local_reason = reason
        logger.info("WebSocket to %s: %s; dropping the link", self._info.target, reason)
        for task in self._busy:
            self._cut.add(task)
            task.cancel()
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self._close())


class WebSocketConnector:
    """Opens WebSocket links to one agent endpoint.

    A :class:`~.base.Connector`. Everything is validated here, so a bad header fails before any
    connection attempt.

    Args:
        url: The ``ws://`` or ``wss://`` endpoint (``http(s)://`` is accepted and mapped).
        headers: Extra handshake headers (e.g. ``Authorization``). The handshake's own headers
            (``Host``, ``Upgrade``, ``Sec-WebSocket-*``...) cannot be set.
        secret_headers: More header names whose values must never be logged (``Authorization``,
            ``Proxy-Authorization`` and ``Cookie`` always are).
        subprotocols: Subprotocols to offer, in order of preference.
        ping_interval: Seconds between keepalive pings; ``None`` disables them.
        ping_timeout: Seconds to wait for a pong before declaring the link dead; ``None``: forever.
        open_timeout: Seconds allowed for the whole opening (TCP, TLS, handshake, redirects).
        close_timeout: Seconds allowed for the closing handshake.
        limits: Inbound size caps (``max_message_bytes`` is the per-message cap, after
            decompression).
        cookies: The client's cookie store: its cookies go on the handshake and the server's
            ``Set-Cookie`` answers go back into it.
        tls: TLS settings for ``wss://`` (a fresh ``SSLContext`` is built for this connector).
        compression: Offer permessage-deflate.

    Raises:
        ConfigurationError: An invalid URL, header, subprotocol, timeout or TLS file.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        secret_headers: Collection[str] = (),
        subprotocols: Sequence[str] | None = None,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        open_timeout: float = 10.0,
        close_timeout: float = 5.0,
        limits: Limits = Limits(),  # noqa: B008  # frozen, so a shared default is safe
        cookies: CookieStore | None = None,
        tls: TlsConfig = TlsConfig(),  # noqa: B008  # frozen, so a shared default is safe
        compression: bool = True,
    ) -> None:
        self._url = _normalize_url(url)
        pairs = check_headers(headers)
        for name, value in pairs:
            if name.lower() in _RESERVED_HEADERS:
                raise ConfigurationError(f"header {name!r} is set by the WebSocket handshake itself")
            if not _HEADER_VALUE.fullmatch(value):
                # Never echo the value: it may be a credential.
                raise ConfigurationError(f"header {name!r} has a character HTTP/1.1 cannot carry")
        if any(name.lower() == "authorization" for name, _ in pairs):
            # An explicit Authorization header wins over credentials in the URL (never send both).
            parts = urlsplit(self._url)
            self._url = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, ""))
        self._headers = pairs
        self._secret = frozenset(name.lower() for name in secret_headers) | DEFAULT_SECRET_HEADERS
        install_log_redaction(self._secret)  # keep these out of httpx/httpcore/hpack/h2/websockets logs
        if isinstance(subprotocols, str):
            raise ConfigurationError("subprotocols must be a sequence of strings, not a string")
        for protocol in subprotocols or ():
            if not isinstance(protocol, str) or not protocol or not set(protocol) <= _TOKEN_CHARS:
                raise ConfigurationError(f"invalid subprotocol {protocol!r}")
        self._subprotocols = None if subprotocols is None else [Subprotocol(p) for p in subprotocols]
        check_seconds("ping_interval", ping_interval, optional=True)
        check_seconds("ping_timeout", ping_timeout, optional=True)
        check_seconds("open_timeout", open_timeout)
        check_seconds("close_timeout", close_timeout)
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._open_timeout = open_timeout
        self._close_timeout = close_timeout
        self._limits = limits
        self._cookies = cookies
        self._compression = compression
        self._ssl: ssl.SSLContext | None = None
        if self._url.startswith("wss:"):
            try:
                self._ssl = tls.build_context()
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                raise ConfigurationError(f"cannot load the TLS configuration: {exc}") from exc

    @property
    def target(self) -> str:
        """The endpoint, with credentials and query removed (safe to log)."""
        return safe_url(self._url)

    def __repr__(self) -> str:
        return f"<WebSocketConnector {self.target}>"

    async def connect(self) -> WebSocketTransport:
        """Open a new link (following same-origin redirects only).

        Raises:
            ConnectError: Refused, unreachable, timed out, or the handshake failed.
            TlsVerificationError: The agent's certificate did not verify.
            AuthenticationFailed: The handshake was answered 401 or 403.
            ServiceUnavailable: The handshake was answered 429 or 503 (see ``retry_after``).
            HttpStatusError: The handshake was answered with another HTTP status.
            UnsafeRedirect: A redirect to another origin, or too many redirects.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._open_timeout
        url = self._url
        for _ in range(MAX_REDIRECTS + 1):
            remaining = deadline - loop.time()
            if remaining <= 0:
                limit = self._open_timeout
                raise ConnectTimeout(f"timed out after {limit:g}s opening {self.target}", timeout=limit)
            cookie = self._cookies.header_for(url) if self._cookies is not None else None
            headers = with_cookie(list(self._headers), cookie)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "opening WebSocket to %s, headers %s", safe_url(url), redact_headers(headers, self._secret)
                )
            try:
                connection = await self._open(url, headers, remaining)
            except InvalidStatus as exc:
                response = exc.response
                self._capture(url, response.headers)
                location = response.headers.get("Location")
                if response.status_code not in REDIRECT_STATUSES or location is None:
                    raise _status_error(response, url) from exc
                url = self._follow(url, location, response.status_code)
                continue
            answer = connection.response
            assert answer is not None  # a completed handshake has its answer
            self._capture(url, answer.headers)
            connection_id = answer.headers.get("Acp-Connection-Id")
            info = TransportInfo(kind="websocket", target=safe_url(url), connection_id=connection_id)
            logger.debug(
                "WebSocket open to %s (connection id %s, subprotocol %s)",
                info.target,
                connection_id,
                connection.subprotocol,
            )
            return WebSocketTransport(
                connection,
                info,
                limit=self._limits.max_message_bytes,
                ping_interval=self._ping_interval,
                ping_timeout=self._ping_timeout,
                close_timeout=self._close_timeout,
            )
        raise UnsafeRedirect(f"more than {MAX_REDIRECTS} redirects opening {self.target}")

    def _follow(self, url: str, location: str, status: int) -> str:
        """The URL to try after a redirect, when it is safe to follow."""
        try:
            normalized = _normalize_url(urljoin(url, location))
        except (ConfigurationError, ValueError):
            raise UnsafeRedirect(
                f"WebSocket handshake to {safe_url(url)} redirected ({status}) to an invalid or "
                "non-WebSocket location; not followed"
            ) from None
        if not redirect_allowed(url, normalized):
            raise UnsafeRedirect(
                f"WebSocket handshake to {safe_url(url)} redirected ({status}) to another origin "
                f"({safe_url(normalized)}); not followed"
            )
        logger.debug("following a same-origin %d redirect from %s to %s", status, safe_url(url), safe_url(normalized))
        return normalized

    def _capture(self, url: str, headers: Headers) -> None:
        if self._cookies is not None:
            self._cookies.capture(url, headers.get_all("Set-Cookie"))

    async def _open(self, url: str, headers: list[tuple[str, str]], timeout: float) -> WebSocketConnection:
        """One handshake attempt; maps every failure but ``InvalidStatus`` to our errors."""
        try:
            return await _NoRedirectConnect(
                url,
                additional_headers=headers,
                subprotocols=self._subprotocols,
                compression="deflate" if self._compression else None,
                open_timeout=timeout,
                ping_interval=None,  # our own keepalive (see WebSocketTransport._keep_alive)
                ping_timeout=None,
                close_timeout=self._close_timeout,
                max_size=self._limits.max_message_bytes,
                proxy=proxy_for(url),
                create_connection=_Connection,
                ssl=self._ssl,  # None for ws:// (a redirect never changes the scheme: same origin only)
            )
        except InvalidStatus:
            raise
        except Exception as exc:
            error = open_error(exc, url, self._open_timeout)
            if error is None:
                raise
            raise error from exc
