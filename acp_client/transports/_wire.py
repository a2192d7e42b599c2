"""The HTTP client of a Streamable HTTP link, behind one small interface (:class:`Wire`).

:class:`~._exchange.HttpExchange` sends every request through a :class:`Wire` and reads the
answer as a :class:`Reply`. :class:`HttpxWire` is an ``httpx`` client (HTTP/1.1, and HTTP/2 by ALPN
or h2c); it raises ``httpx``'s exception types for network failures (one map:
:func:`._errors.request_error`). It follows no redirect, keeps no cookie, reads no proxy setting
and does not decompress: the exchange does those.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator
from http.cookiejar import Cookie, CookieJar
from typing import Any, Final, Protocol

import httpx

__all__ = ["USER_AGENT", "HeaderView", "HttpxWire", "Reply", "Wire", "new_client"]

USER_AGENT: Final = "acp-reconnect"
#: Seconds an idle connection may wait for reuse: below the 5 s after which many servers (hypercorn,
#: uvicorn, Node) close an idle keep-alive connection, so a POST never races the server's close.
KEEPALIVE_EXPIRY: Final = 2.0
#: Request URLs an :class:`HttpxWire` keeps parsed (the endpoint, and the few places a redirect leads).
_MAX_TARGETS: Final = 16


class HeaderView(Protocol):
    """What the transport reads of an answer's headers (``httpx.Headers``)."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def get_list(self, key: str, split_commas: bool = False) -> list[str]: ...


class Reply(Protocol):
    """An answer whose head is read and whose body streams (``httpx.Response``)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> HeaderView: ...

    @property
    def http_version(self) -> str: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    async def aread(self) -> bytes: ...

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
