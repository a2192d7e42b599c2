"""The HTTP clients of a Streamable HTTP link, behind one small interface (:class:`Wire`).

:class:`~._exchange.HttpExchange` sends every request through a :class:`Wire` and reads the
answer as a :class:`Reply`. Two implementations:

* :class:`H1Wire`: :mod:`._h1`'s keep-alive HTTP/1.1 pool, for a link that speaks HTTP/1.1 only
  (``http://`` by default, or ``http2=False``): a request costs a fraction of what it costs through
  ``httpx`` (see :mod:`._h1`).
* :class:`HttpxWire`: an ``httpx`` client, for a link that may speak HTTP/2 (``https://`` by
  default, or ``http2=True``): ALPN, h2c, multiplexing.

Both raise ``httpx``'s exception types for network failures (one map: :func:`._errors.request_error`)
and neither follows redirects, keeps cookies, reads proxy settings or decompresses: the exchange
does those the same way over both.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator
from http.cookiejar import Cookie, CookieJar
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

import httpx

from ._h1 import H1Pool

__all__ = ["USER_AGENT", "H1Wire", "HeaderView", "HttpxWire", "Reply", "Wire", "new_client"]

USER_AGENT: Final = "acp-reconnect"
#: Seconds an idle connection may wait for reuse: below the 5 s after which many servers (hypercorn,
#: uvicorn, Node) close an idle keep-alive connection, so a POST never races the server's close.
KEEPALIVE_EXPIRY: Final = 2.0
#: Request targets an :class:`H1Wire` remembers (the endpoint, and the few places a redirect leads).
_MAX_TARGETS: Final = 16


class HeaderView(Protocol):
    """What the transport reads of an answer's headers (``httpx.Headers``, :class:`._h1.H1Headers`)."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def get_list(self, key: str, split_commas: bool = False) -> list[str]: ...


class Reply(Protocol):
    """An answer whose head is read and whose body streams (``httpx.Response``, :class:`._h1.H1Response`)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> HeaderView: ...

    @property
    def http_version(self) -> str: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class Wire(Protocol):
    """Sends one request to the endpoint's origin; returns its answer with the body unread."""

    @property
    def is_closed(self) -> bool: ...

    async def send(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes | None, read_timeout: float
    ) -> Reply:
        """Raises ``httpx``'s exception types for network failures. A ``headers`` list is never
        changed once sent (a wire may reuse what it made of it for the next request)."""
        ...

    async def aclose(self) -> None: ...


class _NoCookies(CookieJar):
    """A jar that keeps nothing: cookies are the :class:`CookieStore`'s business, not httpx's."""

    def set_cookie(self, cookie: Cookie) -> None:
        return None

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


@functools.cache
def _cleartext_tls_context() -> ssl.SSLContext:
    """The ``verify`` context of cleartext (``http://``) clients: built once per process.

    Without one, httpx builds a default context (loading the CA bundle: tens of milliseconds) for
    every client it makes, that is on every reconnect. It is never used: a POST follows no redirect
    and a GET or DELETE only a same-origin one, so a cleartext link never reaches TLS.
    """
    return ssl.create_default_context()


def new_client(
    *, http1: bool, http2: bool, tls: ssl.SSLContext | None, connect_timeout: float, connections: int = 1
) -> httpx.AsyncClient:
    """An ``httpx`` client for one link: no redirects, no environment, no cookie jar of its own.

    Args:
        connections: The most TCP connections it keeps, open or idle. Every one may stay alive
            idle: ``httpcore`` (1.0.x) closes each idle connection at once while the pool holds
            more connections, busy ones included, than its keep-alive limit.
    """
    return httpx.AsyncClient(
        limits=httpx.Limits(
            max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=KEEPALIVE_EXPIRY
        ),
        http1=http1,
        http2=http2,
        verify=tls if tls is not None else _cleartext_tls_context(),
        follow_redirects=False,
        trust_env=False,
        cookies=_NoCookies(),
        headers={"User-Agent": USER_AGENT},
        timeout=httpx.Timeout(connect_timeout),
    )


class HttpxWire:
    """A :class:`Wire` over an ``httpx`` client."""

    __slots__ = ("_client", "_connect", "_timeouts", "_urls")

    def __init__(self, client: httpx.AsyncClient, connect_timeout: float) -> None:
        self._client = client
        self._connect = connect_timeout
        self._timeouts: dict[float, dict[str, float | None]] = {}
        self._urls: dict[str, httpx.URL] = {}

    @property
    def is_closed(self) -> bool:
        return self._client.is_closed

    async def send(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes | None, read_timeout: float
    ) -> Reply:
        # Built directly: ``AsyncClient.build_request`` would merge the client's defaults, cookies
        # and base URL into every request (this client has none of them but the user agent).
        timeout = self._timeouts.get(read_timeout)
        if timeout is None:
            limits = httpx.Timeout(connect=self._connect, read=read_timeout, write=read_timeout, pool=self._connect)
            self._timeouts[read_timeout] = timeout = limits.as_dict()
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = httpx.URL(url)
            if len(self._urls) < _MAX_TARGETS:
                self._urls[url] = parsed
        if not any(name.lower() == "user-agent" for name, _ in headers):
            headers = [("User-Agent", USER_AGENT), *headers]
        request = httpx.Request(method, parsed, headers=headers, content=body, extensions={"timeout": timeout})
        try:
            return await self._client.send(request, stream=True)
        except RuntimeError as exc:  # httpx refuses to use a client that aclose() closed meanwhile
            if not self._client.is_closed:
                raise
            raise httpx.ConnectError("the client is closed") from exc

    async def aclose(self) -> None:
        await self._client.aclose()


class H1Wire:
    """A :class:`Wire` over an :class:`~._h1.H1Pool` (HTTP/1.1 only).

    Args:
        url: The endpoint (the pool's origin).
        tls: The TLS context for ``https``; ``None`` for ``http``.
        connect_timeout: Seconds to connect, and to wait for a free connection.
        connections: The most TCP connections open at once.
    """

    __slots__ = ("_given", "_pool", "_sent", "_targets")

    def __init__(self, url: str, *, tls: ssl.SSLContext | None, connect_timeout: float, connections: int) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None
        if tls is not None:
            tls.set_alpn_protocols(["http/1.1"])  # this connector's own context: HTTP/1.1 only
        self._pool = H1Pool(
            host=parts.hostname,
            port=parts.port or (443 if tls is not None else 80),
            tls=tls,
            connect_timeout=connect_timeout,
            max_connections=connections,
            keepalive_expiry=KEEPALIVE_EXPIRY,
        )
        self._targets: dict[str, str] = {}
        # The last headers given, and what was sent for them (with a User-Agent).
        self._given: list[tuple[str, str]] | None = None
        self._sent: list[tuple[str, str]] = []

    @property
    def is_closed(self) -> bool:
        return self._pool.is_closed

    @property
    def connections_opened(self) -> int:
        """TCP connections opened so far."""
        return self._pool.connections_opened

    async def send(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes | None, read_timeout: float
    ) -> Reply:
        target = self._targets.get(url)
        if target is None:
            parts = urlsplit(url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            if len(self._targets) < _MAX_TARGETS:
                self._targets[url] = target
        if headers is self._given:  # a link's POSTs share one list: decided once (and the pool
            headers = self._sent  # reuses the request head it encoded for that list)
        else:
            self._given = headers
            if not any(name.lower() == "user-agent" for name, _ in headers):
                headers = [("User-Agent", USER_AGENT), *headers]
            self._sent = headers
        return await self._pool.request(method, target, headers, body, read_timeout)

    async def aclose(self) -> None:
        await self._pool.aclose()
