"""Loopback servers for the WebSocket transport tests.

* :class:`WsServer`: a real ``websockets`` server whose per-connection behaviour a test sets
  (echo by default); it records each handshake's request headers and can add response headers.
* :class:`RawServer`: a bare asyncio TCP server for misbehaviour (redirects, error statuses, a
  handshake followed by silence, hand-made frames).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import ssl
import struct
from collections.abc import Awaitable, Callable, Sequence

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

Handler = Callable[[ServerConnection], Awaitable[None]]


async def echo(connection: ServerConnection) -> None:
    """Send every message back (text as text, binary as binary)."""
    async for message in connection:
        await connection.send(message)


class WsServer:
    """A ``websockets`` server on a free loopback port.

    Attributes:
        handler: What each connection runs (default: :func:`echo`). Set it before connecting.
        response_headers: Extra headers added to every 101 answer.
        requests: The request headers of every handshake, in order.
        connections: Every server-side connection, in order.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        subprotocols: list[str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.handler: Handler = echo
        self.response_headers: list[tuple[str, str]] = []
        self.requests: list[Headers] = []
        self.paths: list[str] = []
        self.connections: list[ServerConnection] = []
        self._ssl = ssl_context
        self._subprotocols = subprotocols
        self._host = host
        self._server: Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        scheme = "wss" if self._ssl is not None else "ws"
        return f"{scheme}://{self._host}:{self.port}/acp"

    def url_for(self, path: str, host: str | None = None) -> str:
        scheme = "wss" if self._ssl is not None else "ws"
        return f"{scheme}://{host or self._host}:{self.port}{path}"

    async def _handle(self, connection: ServerConnection) -> None:
        self.connections.append(connection)
        await self.handler(connection)

    def _process_response(self, connection: ServerConnection, request: Request, response: Response) -> Response:
        self.requests.append(request.headers)
        self.paths.append(request.path)
        for name, value in self.response_headers:
            response.headers[name] = value
        return response

    async def start(self) -> WsServer:
        self._server = await serve(
            self._handle,
            "127.0.0.1",
            0,
            ssl=self._ssl,
            subprotocols=self._subprotocols,  # type: ignore[arg-type]  # plain strings are fine at runtime
            process_response=self._process_response,
            max_size=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


# --------------------------------------------------------------------------------------------
# Raw TCP server

RawScript = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes], Awaitable[None]]


async def read_head(reader: asyncio.StreamReader) -> bytes:
    """The HTTP request head (up to and including the blank line)."""
    return await reader.readuntil(b"\r\n\r\n")


def header_value(head: bytes, name: str) -> str | None:
    """One header's value from a raw request head."""
    for line in head.decode("latin-1").split("\r\n")[1:]:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == name.lower():
            return value.strip()
    return None


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()


def switching_protocols(head: bytes, extra: Sequence[tuple[str, str]] = ()) -> bytes:
    """A 101 answer completing the handshake of ``head``."""
    key = header_value(head, "Sec-WebSocket-Key") or ""
    lines = [
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Accept: {accept_key(key)}",
        *(f"{name}: {value}" for name, value in extra),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def http_response(status: int, phrase: str, headers: Sequence[tuple[str, str]] = (), body: bytes = b"") -> bytes:
    lines = [f"HTTP/1.1 {status} {phrase}", *(f"{name}: {value}" for name, value in headers)]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def server_frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    """An unmasked frame as a server sends it (1 = text, 2 = binary, 8 = close, 9 = ping)."""
    first = (0x80 if fin else 0) | opcode
    length = len(payload)
    if length < 126:
        head = struct.pack("!BB", first, length)
    elif length < 1 << 16:
        head = struct.pack("!BBH", first, 126, length)
    else:
        head = struct.pack("!BBQ", first, 127, length)
    return head + payload


class RawServer:
    """An asyncio TCP server running ``script(reader, writer, request_head)`` per connection.

    The writer is closed after the script returns. ``heads`` records every request head.
    """

    def __init__(self, script: RawScript, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.heads: list[bytes] = []
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @property
    def url(self) -> str:
        scheme = "wss" if self._ssl is not None else "ws"
        return f"{scheme}://127.0.0.1:{self.port}/acp"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            head = await read_head(reader)
            self.heads.append(head)
            await self.script(reader, writer, head)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def start(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        # Hang up on every client: scripts blocked reading see EOF and return by themselves.
        for writer in list(self._writers):
            writer.transport.abort()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        for task in list(self._tasks):  # a script that ignores EOF (should not happen)
            task.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def read_client_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One (masked) client frame: ``(opcode, unmasked payload)``. No fragmentation support."""
    first, second = await reader.readexactly(2)
    length = second & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", await reader.readexactly(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", await reader.readexactly(8))
    mask = await reader.readexactly(4) if second & 0x80 else b"\0\0\0\0"
    data = await reader.readexactly(length)
    return first & 0x0F, bytes(byte ^ mask[index % 4] for index, byte in enumerate(data))


class PongingEcho:
    """A raw script: completes the handshake, answers pings, echoes text, answers a close.

    Attributes:
        pings: How many pings the client sent.
    """

    def __init__(self) -> None:
        self.pings = 0

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head))
        while True:
            opcode, payload = await read_client_frame(reader)
            if opcode == 9:
                self.pings += 1
                writer.write(server_frame(10, payload))
            elif opcode == 1:
                writer.write(server_frame(1, payload))
            elif opcode == 8:
                writer.write(server_frame(8, payload))
                await writer.drain()
                return
            await writer.drain()
