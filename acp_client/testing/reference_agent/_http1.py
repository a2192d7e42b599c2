"""A lean HTTP/1.1 front for the reference server's ASGI app, inside its fault proxy.

Hypercorn serves everything, but through h11 and a socket hop behind the fault proxy a plain
request costs the agent several times what the agent's own work does. So the proxy's upstream for
a new connection is an :class:`Http1Endpoint` on an in-memory pipe (no socket, no second hop): it
serves the plain requests an ACP client sends — ``GET``, ``POST``, ``DELETE`` in HTTP/1.1 with a
``Content-Length`` body or none — to the same ASGI app, one at a time per connection, keeping the
connection alive between them. Anything else is *handed off* at a request boundary: the endpoint
opens a socket to hypercorn and relays the connection's bytes from there on, the current request
first. That covers WebSocket upgrades, HTTP/2 (prior knowledge, or an ``Upgrade: h2c``), TLS,
HTTP/1.0, chunked request bodies, ``Expect``, methods other than the three, large bodies and any
head this parser does not like (hypercorn then answers it as it always did, a 400 included).

Since the endpoint is the fault proxy's upstream, cut, blackhole and refuse act on it as on a
socket: a cut is an ``http.disconnect`` for the request in progress, a blackhole holds its
bytes both ways.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Final, cast
from urllib.parse import unquote

from ..proxy import FaultProxy

logger = logging.getLogger(__name__)

_Asgi = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
    Awaitable[None],
]

#: The longest request head served here (h11's default limit); a longer one goes to hypercorn.
MAX_HEAD: Final = 16 * 1024
#: The largest request body served here; a larger one goes to hypercorn, which streams it.
MAX_BODY: Final = 1024 * 1024
#: Seconds an idle keep-alive connection stays open (hypercorn's default).
KEEP_ALIVE_TIMEOUT: Final = 5.0
_METHODS: Final = frozenset({b"GET", b"POST", b"DELETE"})
#: Request headers that need what only hypercorn does (upgrades, chunked bodies, 100-continue).
_HAND_OFF_HEADERS: Final = frozenset({b"upgrade", b"transfer-encoding", b"expect", b"http2-settings", b"te"})
_REASONS: Final = {status.value: status.phrase.encode() for status in HTTPStatus}


#: One header line: a token name, a colon, the value (no CR, LF or NUL in it), CRLF.
_HEADER_LINE: Final = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([^\r\n\x00]*)\r\n")


class _Request:
    """A parsed request head, and where its body starts and ends in the buffer."""

    __slots__ = ("body_start", "close", "end", "headers", "method", "target")

    def __init__(
        self,
        method: bytes,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        *,
        body_start: int,
        end: int,
        close: bool,
    ) -> None:
        self.method = method
        self.target = target
        self.headers = headers
        self.body_start = body_start
        self.end = end
        self.close = close


def parse_head(buffer: bytes | bytearray) -> _Request | str | None:
    """The request at the start of ``buffer``: parsed, ``"hand off"``, or ``None`` (need more bytes).

    Only what this module serves parses; anything unusual is ``"hand off"`` (never an error here).
    Header names come lowercased, values without surrounding blanks.
    """
    head_end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if head_end < 0:
        if len(buffer) > MAX_HEAD or (buffer and not buffer[:1].isalpha()):
            return "hand off"
        return None
    line_end = buffer.find(b"\r\n")
    parts = bytes(buffer[:line_end]).split(b" ")
    if len(parts) != 3 or parts[2] != b"HTTP/1.1" or parts[0] not in _METHODS or not parts[1].startswith(b"/"):
        return "hand off"
    headers: list[tuple[bytes, bytes]] = []
    length = 0
    seen_length = close = False
    position, stop = line_end + 2, head_end + 2
    match = _HEADER_LINE.match
    while position < stop:
        found = match(buffer, position, stop)
        if found is None:
            return "hand off"  # an obsolete line folding, a bad name, a stray CR or LF...
        position = found.end()
        name = found.group(1).lower()
        value = found.group(2).rstrip(b" \t")
        if name in _HAND_OFF_HEADERS:
            return "hand off"
        if name == b"content-length":
            if seen_length or not value.isdigit() or len(value) > 9:
                return "hand off"
            seen_length = True
            length = int(value)
            if length > MAX_BODY:
                return "hand off"
        elif name == b"connection":
            tokens = {token.strip().lower() for token in value.split(b",")}
            if b"upgrade" in tokens:
                return "hand off"
            close = b"close" in tokens
        headers.append((name, value))
    return _Request(parts[0], parts[1], headers, body_start=head_end + 4, end=head_end + 4 + length, close=close)


class _Exchange:
    """One request served to the ASGI app: its body once, then ``http.disconnect``; its answer."""

    def __init__(self, endpoint: Http1Endpoint, body: bytes, close: bool) -> None:
        self.endpoint = endpoint
        self.body: bytes | None = body
        self.close = close
        self.gone = asyncio.get_running_loop().create_future()
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.started = False
        self.chunked = False
        self.done = False

    async def receive(self) -> dict[str, Any]:
        body, self.body = self.body, None
        if body is not None:
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.shield(self.gone)
        return {"type": "http.disconnect"}

    def disconnect(self) -> None:
        if not self.gone.done():
            self.gone.set_result(None)

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if self.gone.done() or self.done:
            return  # as hypercorn does: what is sent after a disconnect goes nowhere
        if kind == "http.response.start":
            self.status = int(message["status"])
            self.headers = list(message.get("headers", ()))
            # The head goes out with the first body (one write for a whole answer), or on its own
            # once the app stops to wait (an event stream's head, before its first event).
            asyncio.get_running_loop().call_soon(self._flush_head)
            return
        if kind != "http.response.body" or not self.status:
            return
        body = bytes(message.get("body", b""))
        more = bool(message.get("more_body", False))
        out = bytearray()
        if not self.started:
            self.started = True
            out += self._head(body, more)
        if self.chunked:
            if body:
                out += b"%x\r\n" % len(body) + body + b"\r\n"
            if not more:
                out += b"0\r\n\r\n"
        else:
            out += body
        if not more:
            self.done = True
        self.endpoint.write(bytes(out))
        if self.done:
            self.endpoint.finished(self)
        else:
            await self.endpoint.drained()

    def _flush_head(self) -> None:
        if not self.started and not self.gone.done() and not self.done:
            self.started = True
            self.endpoint.write(self._head(b"", True))

    def _head(self, body: bytes, more: bool) -> bytes:
        names = {name.lower() for name, _ in self.headers}
        headers = list(self.headers)
        if b"content-length" not in names:
            if more:
                self.chunked = True
                headers.append((b"transfer-encoding", b"chunked"))
            else:
                headers.append((b"content-length", str(len(body)).encode()))
        if self.close:
            headers.append((b"connection", b"close"))
        reason = _REASONS.get(self.status, b"")
        lines = [b"HTTP/1.1 %d %s" % (self.status, reason)]
        lines.extend(bytes(name) + b": " + bytes(value) for name, value in headers)
        return b"\r\n".join(lines) + b"\r\n\r\n"


class Http1Endpoint(asyncio.Protocol):
    """Serves one connection's plain HTTP/1.1 requests to ``app``; hands the rest to ``fallback``.

    Args:
        app: The ASGI application.
        fallback: ``(host, port)`` of hypercorn, serving the same app.
    """

    def __init__(self, app: _Asgi, fallback: tuple[str, int]) -> None:
        self._app = app
        self._fallback = fallback
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._exchange: _Exchange | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._paused = False
        self._drain: asyncio.Future[None] | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._relay: _Relay | None = None
        self._handing_off = False
        self._closed = False

    # -- asyncio.Protocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        if self._relay is not None:
            self._relay.forward(data)
            return
        self._buffer += data
        if self._exchange is None and not self._handing_off:
            self._next()

    def eof_received(self) -> bool | None:
        if self._relay is not None:
            self._relay.forward_eof()
            return True
        # As hypercorn does: a client that half-closes is gone; its request is abandoned.
        self._end()
        return False

    def pause_writing(self) -> None:
        self._paused = True
        if self._relay is not None:
            self._relay.pause()

    def resume_writing(self) -> None:
        self._paused = False
        if self._relay is not None:
            self._relay.resume()
        self._release_drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()
        if self._relay is not None:
            self._relay.close(exc)

    # -- serving ------------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._transport is not None and not self._closed:
            self._transport.write(data)

    async def drained(self) -> None:
        if self._paused and not self._closed:
            if self._drain is None:
                self._drain = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drain)

    def finished(self, exchange: _Exchange) -> None:
        """``exchange``'s answer is complete: the next request may start."""
        exchange.disconnect()
        if exchange is not self._exchange:
            return
        self._exchange = None
        if exchange.close:
            self._close()
            return
        self._arm_idle()
        self._next()

    def _next(self) -> None:
        if self._closed or not self._buffer:
            return
        request = parse_head(self._buffer)
        if request is None:
            return
        if isinstance(request, str):
            self._hand_off()
            return
        if len(self._buffer) < request.end:
            return
        body = bytes(self._buffer[request.body_start : request.end])
        del self._buffer[: request.end]
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        exchange = self._exchange = _Exchange(self, body, request.close)
        task = asyncio.get_running_loop().create_task(self._serve(request, exchange))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, request: _Request, exchange: _Exchange) -> None:
        target = request.target
        path, _, query = target.partition(b"?")
        transport = self._transport
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method.decode("ascii"),
            "scheme": "http",
            "path": unquote(path.decode("latin-1")),
            "raw_path": path,
            "query_string": query,
            "root_path": "",
            "headers": request.headers,
            "client": transport.get_extra_info("peername") if transport is not None else None,
            "server": transport.get_extra_info("sockname") if transport is not None else None,
            "extensions": {},
        }
        try:
            await self._app(scope, exchange.receive, exchange.send)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.debug("the ASGI app failed on %s %s", scope["method"], scope["path"], exc_info=True)
        if not exchange.done:
            if exchange.started or exchange.gone.done():
                self._close()  # an answer cut short (or nobody to answer): the connection cannot go on
            else:
                await exchange.send({"type": "http.response.start", "status": 500, "headers": []})
                await exchange.send({"type": "http.response.body", "body": b""})

    def _release_drain(self) -> None:
        """Wake a writer waiting in :meth:`drained` (the buffer has room, or the connection is over)."""
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _arm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(KEEP_ALIVE_TIMEOUT, self._close)

    def _close(self) -> None:
        if not self._closed:
            self._end()
            if self._transport is not None:
                self._transport.close()

    def _end(self) -> None:
        """The connection is over: the request in progress sees a disconnect."""
        self._closed = True
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if self._exchange is not None:
            self._exchange.disconnect()
        self._release_drain()

    # -- handing off to hypercorn -------------------------------------------------------------------

    def _hand_off(self) -> None:
        """Relay this connection to hypercorn from here on (the unparsed bytes first)."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self._handing_off = True
        task = asyncio.get_running_loop().create_task(self._connect_fallback())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect_fallback(self) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        relay = _Relay(transport)
        try:
            await asyncio.get_running_loop().create_connection(lambda: relay, *self._fallback)
        except OSError as exc:
            logger.info("reference server could not reach hypercorn: %s", exc)
            transport.abort()
            return
        if self._closed:
            relay.close(None)
            return
        pending, self._buffer = bytes(self._buffer), bytearray()
        self._relay = relay
        relay.forward(pending)
        if self._paused:
            relay.pause()


class _Relay(asyncio.Protocol):
    """The socket to hypercorn for a handed-off connection: bytes both ways, flow control both ways."""

    def __init__(self, front: asyncio.Transport) -> None:
        self._front = front
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self._front.is_closing():
            self._front.write(data)

    def eof_received(self) -> bool | None:
        if not self._front.is_closing():
            self._front.write_eof()
        return True

    def pause_writing(self) -> None:
        self._front.pause_reading()

    def resume_writing(self) -> None:
        self._front.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._front.is_closing():
            if exc is not None:
                self._front.abort()
            else:
                self._front.close()

    def forward(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing() and data:
            self._transport.write(data)

    def forward_eof(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            with contextlib.suppress(OSError):
                self._transport.write_eof()

    def pause(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def close(self, exc: Exception | None) -> None:
        if self._transport is not None and not self._transport.is_closing():
            if exc is not None:
                self._transport.abort()
            else:
                self._transport.close()


class _PipeEnd(asyncio.Transport):
    """One end of an in-memory pipe: what it writes is its peer protocol's ``data_received``, at once.

    Pausing reading here is the peer protocol's ``pause_writing`` (there is no buffer in between).
    Closing either end ends both: each protocol sees ``connection_lost`` (an abort: with an error).
    """

    def __init__(self, protocol: asyncio.BaseProtocol, extra: dict[str, Any]) -> None:
        super().__init__(extra)
        self._protocol = cast(asyncio.Protocol, protocol)
        self.peer: _PipeEnd = self
        self._closing = False
        self._reading = True

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = cast(asyncio.Protocol, protocol)

    def is_closing(self) -> bool:
        return self._closing

    def is_reading(self) -> bool:
        return self._reading and not self._closing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing and data:
            self.peer._protocol.data_received(bytes(data))

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if self._closing:
            return
        if not self.peer._protocol.eof_received():
            self.peer.close()

    def pause_reading(self) -> None:
        if self._reading and not self._closing:
            self._reading = False
            self.peer._protocol.pause_writing()

    def resume_reading(self) -> None:
        if not self._reading and not self._closing:
            self._reading = True
            self.peer._protocol.resume_writing()

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self._end(None)

    def abort(self) -> None:
        self._end(ConnectionResetError("the in-memory pipe was aborted"))

    def _end(self, exc: Exception | None) -> None:
        if self._closing:
            return
        loop = asyncio.get_running_loop()
        for end in (self, self.peer):
            if not end._closing:
                end._closing = True
                loop.call_soon(end._protocol.connection_lost, exc if end is self.peer else None)


def pipe(
    a: asyncio.Protocol, b: asyncio.Protocol, extra: dict[str, Any] | None = None
) -> tuple[asyncio.Transport, asyncio.Transport]:
    """Connect protocols ``a`` and ``b`` by an in-memory pipe (``connection_made`` runs on both)."""
    end_a, end_b = _PipeEnd(a, dict(extra or {})), _PipeEnd(b, dict(extra or {}))
    end_a.peer, end_b.peer = end_b, end_a
    a.connection_made(end_a)
    b.connection_made(end_b)
    return end_a, end_b


class FrontDoor(FaultProxy):
    """The reference server's fault proxy: each connection's upstream is an :class:`Http1Endpoint`
    (which hands what it does not serve to hypercorn at ``upstream_host:upstream_port``)."""

    def __init__(self, app: _Asgi, upstream_host: str, upstream_port: int, **options: Any) -> None:
        super().__init__(upstream_host, upstream_port, **options)
        self._app = app

    async def _open_upstream(self, protocol_factory: Callable[[], asyncio.Protocol]) -> None:
        side = protocol_factory()
        extra: dict[str, Any] = {}
        client = getattr(getattr(getattr(side, "link", None), "client", None), "transport", None)
        if client is not None:
            extra = {"peername": client.get_extra_info("peername"), "sockname": client.get_extra_info("sockname")}
        pipe(side, Http1Endpoint(self._app, (self.upstream_host, self.upstream_port)), extra)
