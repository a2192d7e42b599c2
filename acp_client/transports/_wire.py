"""The HTTP client of a Streamable HTTP link: :class:`Wire`.

A wire is a connection pool of ``httpcore`` (``httpx``'s own engine: HTTP/1.1, and HTTP/2 by ALPN
or h2c) used through its public request API: a link needs none of what ``httpx.AsyncClient`` adds
(redirects, cookies, auth, proxies, decoding; the exchange does its own), and skipping it saves
about a quarter of the CPU per request, which a recovery of thousands of sessions pays thousands of
times. A wire raises ``httpx``'s exception types for network failures.
"""

from __future__ import annotations

import asyncio
import functools
import select
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any, Final, NoReturn, TypeVar

import httpcore
import httpx

_USER_AGENT: Final = b"acp-reconnect"
T = TypeVar("T")
#: Seconds an idle connection may wait for reuse: below the 5 s after which many servers (hypercorn,
#: uvicorn, Node) close an idle keep-alive connection, so a POST never races the server's close.
KEEPALIVE_EXPIRY: Final = 2.0
#: Request URLs a :class:`Wire` keeps parsed (the endpoint, and the few places a redirect leads).
_MAX_TARGETS: Final = 16


@functools.cache
def _cleartext_tls_context() -> ssl.SSLContext:
    """The TLS context of cleartext pools, built once per process (httpcore would load the CA bundle,
    tens of milliseconds, on every reconnect); never used: a cleartext link never reaches TLS."""
    return ssl.create_default_context()


class _OneWriteStream(httpcore.AsyncNetworkStream):
    """A connection that sends a request's head and body in one write (HTTP/1.1 only).

    httpcore writes them separately: two segments per POST, so the server wakes and parses twice.
    Writes wait until the request ends (httpcore's empty write) or the connection is read. HTTP/1.1
    only: there an answer is always read after its request is sent.
    """

    __slots__ = ("_inner", "_pending", "_poll", "_pollable")

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._pending: list[bytes] = []
        self._poll: select.poll | None = None
        # asyncio's streams read the socket themselves (a poll of it would miss what they hold)
        # and answer ``is_readable`` from their own state at no cost.
        self._pollable = hasattr(select, "poll") and not isinstance(inner, _AsyncioStream)

    async def _flush(self, timeout: float | None) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            await self._inner.write(data, timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush(timeout)
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._pending.append(buffer)
        else:
            await self._flush(timeout)

    async def aclose(self) -> None:
        self._pending.clear()
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        await self._flush(timeout)
        return _OneWriteStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._pollable:
            # Asked of every idle connection on every request the pool places: one poll object per
            # connection, rather than a fresh look-up of its socket each time.
            if self._poll is None:
                sock = self._inner.get_extra_info("socket")
                if sock is None or sock.fileno() < 0:
                    return self._inner.get_extra_info(info)
                self._poll = select.poll()
                self._poll.register(sock, select.POLLIN)
            return bool(self._poll.poll(0))
        return self._inner.get_extra_info(info)


async def _within(awaitable: Awaitable[T], timeout: float | None) -> T:
    if timeout is None:
        return await awaitable
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await awaitable
    return await asyncio.wait_for(awaitable, timeout)


class _AsyncioStream(httpcore.AsyncNetworkStream):
    """A cleartext TCP connection on asyncio's own streams, failures raised as httpcore's (the anyio
    backend's cancel scope around every read and write costs a quarter of the CPU per request)."""

    __slots__ = ("_reader", "_writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return await _within(self._reader.read(max_bytes), timeout)
        except asyncio.TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc) or "read timed out") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self._writer.transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        try:
            self._writer.write(buffer)
            if self._writer.transport.get_write_buffer_size():
                await _within(self._writer.drain(), timeout)
        except asyncio.TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc) or "write timed out") from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._writer.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("TLS is not spoken on a cleartext pool's connections")

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            return self._writer.transport.is_closing() or self._reader.at_eof()
        return None


class _OneWriteBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend for HTTP/1.1 pools: each connection a :class:`_OneWriteStream`
    over asyncio's streams (cleartext) or over httpcore's own anyio backend (TLS)."""

    def __init__(self, *, cleartext: bool) -> None:
        self._cleartext = cleartext
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if not self._cleartext or socket_options:
            return _OneWriteStream(await self._inner.connect_tcp(host, port, timeout, local_address, socket_options))
        local = (local_address, 0) if local_address is not None else None
        try:
            reader, writer = await _within(asyncio.open_connection(host, port, local_addr=local), timeout)
        except asyncio.TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc) or "connect timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return _OneWriteStream(_AsyncioStream(reader, writer))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def new_pools(
    *, http1: bool, http2: bool, tls: ssl.SSLContext | None, connections: int = 1
) -> list[httpcore.AsyncConnectionPool]:
    """The ``httpcore`` connection pools of one wire (no proxy, no retries), ``connections`` in all,
    every one allowed to stay alive idle (httpcore closes idle ones at once past its keep-alive limit).

    HTTP/2 gets one pool (its connections multiplex). HTTP/1.1 only gets a pool per connection: one
    pool hands every request waiting at the same moment the same idle connection, and each one that
    loses that race walks all the pool's connections again (a recovery's concurrent POSTs paid that
    on most requests); a wire sends each request to a pool with nothing in flight.
    """
    size, count = (connections, 1) if http2 else (1, connections)
    return [
        httpcore.AsyncConnectionPool(
            ssl_context=tls if tls is not None else _cleartext_tls_context(),
            max_connections=size,
            max_keepalive_connections=size,
            keepalive_expiry=KEEPALIVE_EXPIRY,
            http1=http1,
            http2=http2,
            network_backend=None if http2 else _OneWriteBackend(cleartext=tls is None),
        )
        for _ in range(count)
    ]


#: httpcore's network failures and the httpx types of the same name the transport maps (the most
#: specific first).
_FAILURES: Final[tuple[tuple[type[Exception], type[httpx.HTTPError]], ...]] = tuple(
    (getattr(httpcore, name), getattr(httpx, name))
    for name in (
        *("ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException"),
        *("ConnectError", "ReadError", "WriteError", "NetworkError", "RemoteProtocolError"),
        *("LocalProtocolError", "ProxyError", "UnsupportedProtocol", "ProtocolError"),
    )
)


def _raise_as_httpx(exc: Exception) -> NoReturn:
    """Raise the ``httpx`` error for an ``httpcore`` one (``exc`` itself: not a network failure)."""
    for core, mapped in _FAILURES:
        if isinstance(exc, core):
            raise mapped(str(exc)) from exc
    raise exc


def _text(value: bytes) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError:
        return value.decode("latin-1")


class HeaderView:
    """An answer's header lines (names compared without case)."""

    __slots__ = ("_lines",)

    def __init__(self, lines: list[tuple[bytes, bytes]]) -> None:
        self._lines = lines

    def get_list(self, key: str) -> list[str]:
        name = key.lower().encode()
        return [_text(value) for line, value in self._lines if line.lower() == name]

    def get(self, key: str, default: Any = None) -> Any:
        values = self.get_list(key)
        return ", ".join(values) if values else default


class Reply:
    """An answer whose head is read and whose body streams (unread until asked for)."""

    __slots__ = ("_busy", "_pool", "_response", "headers", "http_version", "status_code")

    def __init__(self, response: httpcore.Response, busy: list[int], pool: int) -> None:
        self._response = response
        self._busy = busy
        self._pool = pool
        self.status_code = response.status
        self.headers = HeaderView(response.headers)
        version = response.extensions.get("http_version", b"HTTP/1.1")
        self.http_version = version.decode("ascii") if isinstance(version, bytes) else str(version)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_stream():
                if chunk:
                    yield chunk
        except Exception as exc:
            _raise_as_httpx(exc)

    async def aread(self) -> bytes:
        return b"".join([chunk async for chunk in self.aiter_raw()])

    async def aclose(self) -> None:
        if self._pool >= 0:
            self._busy[self._pool] -= 1
            self._pool = -1
        await self._response.aclose()


class _Target:
    """What a request URL becomes once: httpcore's URL and the ``Host`` header."""

    __slots__ = ("host", "url")

    def __init__(self, url: str) -> None:
        parsed = httpx.URL(url)
        self.host = parsed.netloc
        self.url = httpcore.URL(
            scheme=parsed.raw_scheme, host=parsed.raw_host, port=parsed.port, target=parsed.raw_path
        )


class Wire:
    """Sends one request to the endpoint's origin over ``httpcore`` pools (:func:`new_pools`: the first
    with nothing in flight, else the least busy); returns its answer with the body unread. A
    ``headers`` list is never changed once sent (the wire may reuse it)."""

    __slots__ = ("_busy", "_closed", "_connect", "_pools", "_targets", "_timeouts")

    def __init__(self, pools: list[httpcore.AsyncConnectionPool], connect_timeout: float) -> None:
        self._pools = pools
        #: Requests in flight per pool (sent, their answer not yet closed).
        self._busy = [0] * len(pools)
        self._connect = connect_timeout
        self._closed = False
        self._timeouts: dict[float, dict[str, float | None]] = {}
        self._targets: dict[str, _Target] = {}

    @property
    def is_closed(self) -> bool:
        return self._closed

    async def send(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes | None, read_timeout: float
    ) -> Reply:
        if self._closed:
            raise httpx.ConnectError("the client is closed")
        timeout = self._timeouts.get(read_timeout)
        if timeout is None:
            limits = httpx.Timeout(connect=self._connect, read=read_timeout, write=read_timeout, pool=self._connect)
            self._timeouts[read_timeout] = timeout = limits.as_dict()
        target = self._targets.get(url)
        if target is None:
            target = _Target(url)
            if len(self._targets) < _MAX_TARGETS:
                self._targets[url] = target
        request = httpcore.Request(
            method,
            target.url,
            headers=self._lines(headers, target.host, body),
            content=body if body is not None else b"",
            extensions={"timeout": timeout},
        )
        busy = self._busy
        index = busy.index(0) if 0 in busy else busy.index(min(busy))
        busy[index] += 1
        try:
            response = await self._pools[index].handle_async_request(request)
        except BaseException as exc:
            busy[index] -= 1
            if isinstance(exc, Exception):
                _raise_as_httpx(exc)
            raise
        return Reply(response, busy, index)

    @staticmethod
    def _lines(headers: list[tuple[str, str]], host: bytes, body: bytes | None) -> list[tuple[bytes, bytes]]:
        """The header lines of a request: ``Host``, the given ones, a user agent, ``Content-Length``."""
        lines = [(b"Host", host)]
        lines.extend((name.encode("ascii"), value.encode("ascii")) for name, value in headers)
        if not any(name.lower() == "user-agent" for name, _ in headers):
            lines.append((b"User-Agent", _USER_AGENT))
        if body is not None:
            lines.append((b"Content-Length", str(len(body)).encode()))
        return lines

    async def aclose(self) -> None:
        self._closed = True
        for pool in self._pools:
            await pool.aclose()
