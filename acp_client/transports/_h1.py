"""A small HTTP/1.1 client for the Streamable HTTP transport: one origin, a pool of keep-alive connections.

The HTTP transport sends every request of a link that speaks HTTP/1.1 only (``http://`` by
default, or ``http2=False``) through :class:`H1Pool`; HTTP/2 stays with ``httpx``. The reason is
CPU: a POST through ``httpx`` costs the client several times what the request itself costs
(request and response models, ``httpcore``'s pool walks, ``anyio`` cancel scopes, ``h11``'s
events), and a recovery or a fan-out is hundreds of small POSTs. Here a request is one
``write()`` of bytes built once, and its answer is parsed where it arrives
(:meth:`asyncio.Protocol.data_received`), with one future per wait.

What it does, and no more:

* requests with a ``Content-Length`` body (or none); answers framed by ``Content-Length``,
  ``Transfer-Encoding: chunked`` or the end of the connection; ``1xx`` answers skipped;
* keep-alive: a connection whose answer was read to its end goes back to the pool (unless it
  said ``Connection: close``) and is reused, most recent first; an idle one is closed after
  ``keepalive_expiry`` seconds, and one the server closed is never handed out;
* bounds: the answer's head (status line and headers), a chunk-size line and the trailers are
  capped; a malformed head, a conflicting ``Content-Length`` or a broken chunk is a protocol
  error and the connection is closed; unread body data held per answer is bounded (reading
  pauses, which pushes back through TCP flow control);
* timeouts: connecting (TCP and TLS), waiting for a pooled connection, and each wait for bytes
  of an answer (the idle timeout of an SSE stream).

No redirects, cookies, decompression or body caps: the transport does those above
(:mod:`._exchange`, :mod:`._body`) for both clients alike. Failures are raised as ``httpx``'s
exception types (``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``...), so one table
(:func:`._errors.request_error`) maps both clients' failures to the error tree; none escapes the
transport.
"""

from __future__ import annotations

import asyncio
import collections
import math
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any, Final

import httpx

__all__ = ["H1Headers", "H1Pool", "H1Response"]

#: The longest answer head (status line and headers) accepted.
MAX_HEAD_BYTES: Final = 64 * 1024
#: The most header lines in one answer head.
MAX_HEADERS: Final = 256
#: The longest chunk-size line (with its extensions) accepted.
_MAX_CHUNK_LINE: Final = 1024
#: Unread body bytes held per answer before reading pauses.
_HIGH_WATER: Final = 512 * 1024
_TOKEN: Final = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
#: How early the read-timeout watchdog may find a wait due (the loop runs a timer up to its clock
#: resolution early).
_DUE_SLACK: Final = 1e-3

# Body framing of the answer being read.
_LENGTH, _CHUNKED, _UNTIL_CLOSE = 0, 1, 2
#: Parsed answer heads a pool keeps (see :attr:`H1Pool.heads`), and the longest one it keeps: at
#: most 32 KiB held, whatever the server sends.
_MAX_HEADS: Final = 32
_MAX_REMEMBERED_HEAD: Final = 1024
# Where the chunked decoder is.
_SIZE, _DATA, _DATA_END, _TRAILER = 0, 1, 2, 3


class H1Headers:
    """The headers of an answer: a case-insensitive multi-map (what the transport reads of them)."""

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[str, str]]) -> None:
        #: ``(lowercased name, value)`` in the order received.
        self.items = items

    def get(self, key: str, default: Any = None) -> Any:
        """The values of ``key`` (a header name) joined with ``", "``, or ``default``."""
        name = key.lower()
        values = [value for item, value in self.items if item == name]
        return ", ".join(values) if values else default

    def get_list(self, key: str, split_commas: bool = False) -> list[str]:
        """Every value of ``key``, in order (split at commas too, with ``split_commas``)."""
        name = key.lower()
        values = [value for item, value in self.items if item == name]
        if split_commas:
            return [part.strip() for value in values for part in value.split(",")]
        return values

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(item == name.lower() for item, _ in self.items)


#: A parsed answer head: status, version, headers; keep-alive, body framing, ``Content-Length``.
_Head = tuple[int, str, H1Headers, bool, int, int]


class H1Response:
    """One answer: its head, and its body as it arrives (:meth:`aiter_raw`). Close it with :meth:`aclose`.

    Attributes:
        status_code: The HTTP status.
        headers: The answer's headers.
        http_version: ``"HTTP/1.1"`` (or ``"HTTP/1.0"``).
    """

    __slots__ = ("_conn", "_done", "_error", "_held", "_pieces", "headers", "http_version", "status_code")

    def __init__(self, conn: _Connection, status: int, version: str, headers: H1Headers) -> None:
        self._conn: _Connection | None = conn
        self.status_code = status
        self.http_version = version
        self.headers = headers
        self._pieces: collections.deque[bytes] = collections.deque()
        self._held = 0
        self._done = False
        self._error: BaseException | None = None

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (de-chunked, not decompressed).

        Raises:
            httpx.ReadTimeout: No byte for the read timeout.
            httpx.RemoteProtocolError: A broken answer, or the connection ended inside it.
        """
        pieces = self._pieces
        while True:
            if pieces:
                piece = pieces.popleft()
                self._held -= len(piece)
                conn = self._conn
                if conn is not None and conn.paused and self._held < _HIGH_WATER // 2:
                    conn.resume()
                yield piece
                continue
            if self._error is not None:
                raise self._error
            if self._done:
                return
            conn = self._conn
            assert conn is not None
            await conn.wait()

    async def aclose(self) -> None:
        """Done with the answer: its connection goes back to the pool if the body was read to its end."""
        self._pieces.clear()
        conn, self._conn = self._conn, None
        if conn is not None and not self._done:
            conn.abandon()

    def _add(self, piece: bytes) -> None:
        self._pieces.append(piece)
        self._held += len(piece)


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; reads the answer to the request it carries."""

    def __init__(self, pool: H1Pool) -> None:
        self._pool = pool
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._waiter: asyncio.Future[None] | None = None
        self._timeout = 0.0
        #: No longer usable (closed by either side, or broken).
        self.closed = False
        self.paused = False
        self.idle_since = 0.0
        self._lost: BaseException | None = None
        # The answer being read.
        self._response: H1Response | None = None
        self._in_head = False
        self._scanned = 0
        self._framing = _LENGTH
        self._remaining = 0
        self._chunk_state = _SIZE
        self._keep_alive = True
        self._pending: asyncio.Future[H1Response] | None = None
        #: The wait the read timeout applies to now (the head's future or a body wait), and when
        #: it times out (``loop.time()`` scale): the pool's one watchdog timer checks it.
        self.watched: asyncio.Future[Any] | None = None
        self.due = 0.0

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._buf += data
            self._parse_head()
        elif self._response is not None:
            self._body(data)
        else:
            self._fail(httpx.RemoteProtocolError("the server sent bytes no request asked for"))
            return
        self._wake()

    def eof_received(self) -> bool:
        self._ended(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)

    def pause_writing(self) -> None:
        return None

    def resume_writing(self) -> None:
        return None

    # -- requests --------------------------------------------------------------------------------

    def start(self, request: bytes, timeout: float) -> asyncio.Future[H1Response]:
        """Send one request; returns the future of its answer's head."""
        assert self._transport is not None and self._response is None
        self._timeout = timeout
        self._in_head = True
        self._scanned = 0
        self._buf.clear()
        self._pending = pending = asyncio.get_running_loop().create_future()
        self._transport.write(request)
        return pending

    async def head(self, pending: asyncio.Future[H1Response]) -> H1Response:
        """The answer's head, once read (``ReadTimeout`` after the read timeout)."""
        if not pending.done():
            self._pool.watch(self, pending, self._timeout)
            try:
                return await pending
            finally:
                self._pool.unwatch(self)
        return pending.result()

    async def wait(self) -> None:
        """Until the next bytes (or the end) arrive; ``ReadTimeout`` after the read timeout."""
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        self._pool.watch(self, waiter, self._timeout)
        try:
            await waiter
        finally:
            self._pool.unwatch(self)
            self._waiter = None

    def resume(self) -> None:
        self.paused = False
        if self._transport is not None and not self.closed:
            self._transport.resume_reading()

    def abandon(self) -> None:
        """The answer will not be read to its end: the connection cannot be reused."""
        self._response = None
        self.close()

    def close(self) -> None:
        """Close the connection; a request or answer still waiting on it fails."""
        if self._pending is not None or self._response is not None:
            self._fail(httpx.ReadError("the connection was closed by the client"))
        else:
            self._shut()

    def discard(self) -> None:
        """The request failed or was cancelled: close the connection, quietly."""
        pending, self._pending = self._pending, None
        if pending is not None and not pending.done():
            pending.cancel()
        self._response = None
        self._shut()

    def _shut(self) -> None:
        self.closed = True
        self._in_head = False
        if self._transport is not None:
            self._transport.close()
        self._pool.forget(self)

    # -- parsing ---------------------------------------------------------------------------------

    def _parse_head(self) -> None:
        buf = self._buf
        while self._in_head:
            end = buf.find(b"\r\n\r\n", max(0, self._scanned - 3))
            if end < 0:
                self._scanned = len(buf)
                if len(buf) > MAX_HEAD_BYTES:
                    self._fail(httpx.RemoteProtocolError(f"an answer head longer than {MAX_HEAD_BYTES} bytes"))
                return
            if end > MAX_HEAD_BYTES:
                self._fail(httpx.RemoteProtocolError(f"an answer head longer than {MAX_HEAD_BYTES} bytes"))
                return
            head = bytes(buf[:end])
            del buf[: end + 4]
            self._scanned = 0
            known = self._pool.heads.get(head)
            if known is None:
                try:
                    status, version, headers = _parse_head(head)
                except ValueError as exc:
                    self._fail(httpx.RemoteProtocolError(f"a malformed answer head: {exc}"))
                    return
                if 100 <= status < 200:
                    continue  # an interim answer (100 Continue...): the real one follows
                try:
                    known = (status, version, headers, *_framing_of(status, version, headers))
                except ValueError as exc:
                    self._fail(httpx.RemoteProtocolError(str(exc)))
                    return
                self._pool.remember_head(head, known)
            status, version, headers, self._keep_alive, self._framing, self._remaining = known
            if self._framing == _CHUNKED:
                self._chunk_state = _SIZE
            self._in_head = False
            self._response = response = H1Response(self, status, version, headers)
            pending, self._pending = self._pending, None
            if pending is not None and not pending.done():
                pending.set_result(response)
            rest = bytes(buf)
            buf.clear()
            if self._framing == _LENGTH and self._remaining == 0:
                if rest:
                    self._fail(httpx.RemoteProtocolError("the server sent bytes past the end of an answer"))
                    return
                self._complete()
            elif rest:
                self._body(rest)

    def _body(self, data: bytes) -> None:
        response = self._response
        assert response is not None
        if self._framing == _CHUNKED:
            self._chunks(data, response)
        elif self._framing == _LENGTH:
            remaining = self._remaining
            if len(data) > remaining:
                self._fail(httpx.RemoteProtocolError("the server sent bytes past the end of an answer"))
                return
            self._remaining = remaining - len(data)
            response._add(data)
            if self._remaining == 0:
                self._complete()
                return
        else:
            response._add(data)
        if response._held > _HIGH_WATER and not self.paused and self._transport is not None:
            self.paused = True
            self._transport.pause_reading()

    def _chunks(self, data: bytes, response: H1Response) -> None:
        """De-chunk ``data``; what it completes goes to the answer as one piece."""
        buf = self._buf
        if buf:
            buf += data
            data = bytes(buf)
            buf.clear()
        out: list[bytes] = []
        pos, size, state = 0, len(data), self._chunk_state
        while pos < size:
            if state == _DATA:
                take = min(self._remaining, size - pos)
                out.append(data[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    state = _DATA_END
            elif state == _SIZE:
                end = data.find(b"\r\n", pos)
                if end < 0:
                    if size - pos > _MAX_CHUNK_LINE:
                        self._fail(httpx.RemoteProtocolError("a chunk-size line too long"))
                        return
                    buf += data[pos:]
                    break
                line = data[pos:end].split(b";", 1)[0].strip()
                if not line or len(line) > 16 or not _HEX.issuperset(line):
                    self._fail(httpx.RemoteProtocolError(f"a malformed chunk size {bytes(line[:32])!r}"))
                    return
                pos = end + 2
                self._remaining = int(line, 16)
                state = _DATA if self._remaining else _TRAILER
            elif state == _DATA_END:
                if size - pos < 2:
                    buf += data[pos:]
                    break
                if data[pos : pos + 2] != b"\r\n":
                    self._fail(httpx.RemoteProtocolError("a chunk not followed by CRLF"))
                    return
                pos += 2
                state = _SIZE
            else:  # trailers, up to an empty line
                end = data.find(b"\r\n", pos)
                if end < 0:
                    if size - pos > MAX_HEAD_BYTES:
                        self._fail(httpx.RemoteProtocolError("trailers too long"))
                        return
                    buf += data[pos:]
                    break
                empty = end == pos
                pos = end + 2
                if empty:
                    self._chunk_state = state
                    if out:
                        response._add(b"".join(out) if len(out) > 1 else out[0])
                    if pos < size:
                        self._fail(httpx.RemoteProtocolError("the server sent bytes past the end of an answer"))
                        return
                    self._complete()
                    return
        self._chunk_state = state
        if out:
            response._add(b"".join(out) if len(out) > 1 else out[0])

    # -- ends ------------------------------------------------------------------------------------

    def _complete(self) -> None:
        response = self._response
        assert response is not None
        response._done = True
        response._conn = None
        self._response = None
        if self._keep_alive and not self.closed:
            self._pool.release(self)
        else:
            self.close()

    def _ended(self, exc: Exception | None) -> None:
        """The connection ended (EOF, reset, closed)."""
        response = self._response
        if response is not None and self._framing == _UNTIL_CLOSE and exc is None and not self._in_head:
            self._complete()  # the end of the connection is the end of this answer
        elif response is not None or self._in_head:
            detail = f": {exc}" if exc is not None else ""
            self._fail(httpx.RemoteProtocolError(f"the server closed the connection inside an answer{detail}"))
        if not self.closed:
            self.closed = True
            self._pool.forget(self)
        self._wake()

    def _fail(self, error: BaseException) -> None:
        if self._lost is None:
            self._lost = error
        pending, self._pending = self._pending, None
        if pending is not None and not pending.done():
            pending.set_exception(error)
        response = self._response
        if response is not None and response._error is None:
            response._error = error
        self._shut()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def expire(self, waiter: asyncio.Future[Any]) -> None:
        """The read timeout passed while ``waiter`` waited."""
        if not waiter.done():
            waiter.set_exception(httpx.ReadTimeout(f"no data for {self._timeout:g}s"))


def _framing_of(status: int, version: str, headers: H1Headers) -> tuple[bool, int, int]:
    """How the body of an answer ends: whether the connection is kept alive after it, its framing,
    and its length (for ``Content-Length`` framing).

    Raises:
        ValueError: An unusable ``Content-Length``.
    """
    connections: list[str] = []
    encodings: list[str] = []
    lengths: list[str] = []
    for name, value in headers.items:
        if name == "content-length":
            lengths.append(value)
        elif name == "transfer-encoding":
            encodings.append(value)
        elif name == "connection":
            connections.append(value)
    keep_alive = version == "HTTP/1.1" and "close" not in ", ".join(connections).lower()
    if status in (204, 304):
        return keep_alive, _LENGTH, 0
    if encodings:
        if ", ".join(encodings).rsplit(",", 1)[-1].strip().lower() == "chunked":
            return keep_alive, _CHUNKED, 0
        return False, _UNTIL_CLOSE, 0
    if lengths:
        values = {value.strip() for value in ",".join(lengths).split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit() or not next(iter(values)).isascii():
            raise ValueError(f"an unusable Content-Length: {', '.join(lengths)!r}")
        return keep_alive, _LENGTH, int(next(iter(values)))
    return False, _UNTIL_CLOSE, 0


def _parse_head(head: bytes) -> tuple[int, str, H1Headers]:
    """The status, version and headers of an answer head.

    Raises:
        ValueError: It is not an HTTP/1.x answer head.
    """
    lines = head.split(b"\r\n")
    status_line = lines[0]
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise ValueError(f"not an HTTP/1.x status line: {status_line[:64]!r}")
    code = parts[1]
    if len(code) != 3 or not code.isdigit():
        raise ValueError(f"a bad status code {code[:16]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise ValueError(f"more than {MAX_HEADERS} headers")
    items: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or not _TOKEN.issuperset(name):
            raise ValueError(f"a malformed header line {line[:64]!r}")
        if b"\n" in value or b"\r" in value or b"\x00" in value:
            raise ValueError("a header value with CR, LF or NUL")
        items.append((name.decode("ascii").lower(), value.strip(b" \t").decode("latin-1")))
    return int(code), parts[0].decode("ascii"), H1Headers(items)


class H1Pool:
    """Keep-alive HTTP/1.1 connections to one origin; :meth:`request` sends one request on one of them.

    Args:
        host: The server's host name or address (no brackets).
        port: Its port.
        tls: The TLS context (``https``), or ``None`` (cleartext).
        connect_timeout: Seconds to connect (TCP and TLS), and to wait for a free connection.
        max_connections: The most connections open at once; more requests wait for one.
        keepalive_expiry: Seconds an idle connection is kept for reuse.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        connect_timeout: float,
        max_connections: int,
        keepalive_expiry: float,
    ) -> None:
        self._host = host
        self._port = port
        self._tls = tls
        self._connect_timeout = connect_timeout
        self._max = max_connections
        self._expiry = keepalive_expiry
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        # The read timeouts: one timer for the whole pool, not one per request (a recovery sends
        # thousands of POSTs, each answered long before its timeout). It runs at the earliest due
        # time it knows of; then it expires what is due and sets itself for the next one.
        self._watched: set[_Connection] = set()
        self._watchdog: asyncio.TimerHandle | None = None
        self._watchdog_at = math.inf
        self.is_closed = False
        #: TCP connections this pool has opened so far.
        self.connections_opened = 0
        #: Answer heads already parsed (a server answers most POSTs with the same bytes, its
        #: ``Date`` changing once a second): what :func:`_parse_head` and :func:`_framing_of` made of them.
        self.heads: dict[bytes, _Head] = {}
        #: The encoded head of the last request but its ``Content-Length``, with what it was made of.
        self._last_head: tuple[Iterable[tuple[str, str]], str, str, bytes] | None = None

    async def request(
        self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes | None, read_timeout: float
    ) -> H1Response:
        """Send one request; returns its answer once its head is read.

        Args:
            method: ``POST``, ``GET``...
            target: The path and query.
            headers: Every header but ``Host`` and ``Content-Length`` (values already checked).
                The same list passed again must hold the same headers: the head encoded for it
                last time is reused.
            body: The body, sent with its ``Content-Length`` (``None``: no body).
            read_timeout: Seconds each wait for bytes of the answer may take.

        Raises:
            httpx.PoolTimeout: No connection was free in time.
            httpx.ConnectError / httpx.ConnectTimeout: A new connection could not be opened.
            httpx.ReadTimeout: The answer's head did not come in time.
            httpx.RemoteProtocolError: A broken answer, or the connection ended before it.
        """
        cached = self._last_head
        if cached is not None and cached[0] is headers and cached[1] == method and cached[2] == target:
            head = cached[3]  # the same headers as the last request (a link's POSTs share one list)
        else:
            lines = [f"{method} {target} HTTP/1.1\r\nHost: {self._authority()}\r\n"]
            lines.extend([f"{name}: {value}\r\n" for name, value in headers])
            head = "".join(lines).encode("latin-1")
            self._last_head = (headers, method, target, head)
        length = b"" if body is None else b"Content-Length: %d\r\n" % len(body)
        data = b"".join((head, length, b"\r\n", body or b""))
        conn = await self._acquire()
        try:
            return await conn.head(conn.start(data, read_timeout))
        except BaseException:
            conn.discard()
            raise

    def _authority(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        default = 443 if self._tls is not None else 80
        return host if self._port == default else f"{host}:{self._port}"

    async def _acquire(self) -> _Connection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout
        while True:
            if self.is_closed:
                raise httpx.ConnectError("the client is closed")
            now = loop.time()
            while self._idle:
                conn = self._idle.pop()
                if conn.closed:
                    continue
                if now - conn.idle_since > self._expiry:
                    conn.close()
                    continue
                return conn
            if len(self._open) < self._max:
                return await self._connect(deadline - now)
            waiter = loop.create_future()
            self._waiters.append(waiter)
            timer = loop.call_at(deadline, _timeout_waiter, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self, timeout: float) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = _Connection(self)
        self._open.add(conn)
        try:
            opening = loop.create_connection(
                lambda: conn,
                self._host,
                self._port,
                ssl=self._tls,
                server_hostname=self._host if self._tls is not None else None,
            )
            await asyncio.wait_for(opening, max(timeout, 0.0))
        except asyncio.TimeoutError as exc:
            self.forget(conn)
            raise httpx.ConnectTimeout(f"timed out after {self._connect_timeout:g}s connecting") from exc
        except (OSError, ssl.SSLError) as exc:
            self.forget(conn)
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            self.forget(conn)
            conn.close()
            raise
        self.connections_opened += 1
        if conn.closed:
            # Accepted and reset at once: the end was read before this task resumed. Writing to it would be
            # dropped in silence and the answer awaited until the read timeout. Nothing was sent, so it is a
            # failed connect (safe to retry), not an answer cut off. (An idle one is checked by _acquire.)
            raise httpx.ConnectError("the server closed the connection as soon as it was opened")
        return conn

    def remember_head(self, head: bytes, parsed: _Head) -> None:
        if len(head) > _MAX_REMEMBERED_HEAD:  # a big head is rare, and must not be held on to
            return
        if len(self.heads) >= _MAX_HEADS:
            self.heads.clear()
        self.heads[head] = parsed

    def watch(self, conn: _Connection, waiter: asyncio.Future[Any], timeout: float) -> None:
        """``waiter`` fails with ``ReadTimeout`` unless it is done within ``timeout`` seconds (or
        :meth:`unwatch` is called first)."""
        loop = asyncio.get_running_loop()
        conn.watched, conn.due = waiter, loop.time() + timeout
        self._watched.add(conn)
        if conn.due < self._watchdog_at:
            if self._watchdog is not None:
                self._watchdog.cancel()
            self._watchdog, self._watchdog_at = loop.call_at(conn.due, self._check_due), conn.due

    def unwatch(self, conn: _Connection) -> None:
        conn.watched = None
        self._watched.discard(conn)

    def _check_due(self) -> None:
        self._watchdog, self._watchdog_at = None, math.inf
        loop = asyncio.get_running_loop()
        now = loop.time() + _DUE_SLACK
        due = [conn for conn in self._watched if conn.due <= now]
        for conn in due:
            waiter = conn.watched
            self.unwatch(conn)
            if waiter is not None:
                conn.expire(waiter)
        if self._watched:
            when = min(conn.due for conn in self._watched)
            self._watchdog, self._watchdog_at = loop.call_at(when, self._check_due), when

    def release(self, conn: _Connection) -> None:
        """An answer was read to its end: ``conn`` may carry the next request."""
        if self.is_closed:
            conn.close()
            return
        conn.idle_since = asyncio.get_running_loop().time()
        self._idle.append(conn)
        self._wake_one()

    def forget(self, conn: _Connection) -> None:
        """``conn`` is closed: its place in the pool is free."""
        if conn in self._open:
            self._open.discard(conn)
            self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        """Close every connection (open answers end)."""
        self.is_closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog, self._watchdog_at = None, math.inf
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


def _timeout_waiter(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.PoolTimeout("no connection became free in time"))
