"""A deliberately minimal, FAST ACP agent for the throughput benchmark. Not a real agent.

Run as a subprocess (``python benchmarks/_fast_agent.py --updates N``); it prints
``READY <port>`` and serves, on ``127.0.0.1:<port>``, path ``/acp``:

* WebSocket (a ``GET`` with ``Upgrade: websocket``), hand-written RFC 6455 framing; permessage-deflate
  is accepted when the client offers it, with context takeover both ways, as servers negotiate it by
  default (hypercorn, uvicorn), so every client runs with the compression it gets by default;
* Streamable HTTP/1.1 (``POST`` initialize → 200 + ``Acp-Connection-Id``, later ``POST``\\ s → 202,
  answers on SSE: the connection stream, and a session stream per ``Acp-Session-Id``). It accepts
  ``Acp-Session-Id`` on any POST, so every client dialect works.

With compression, each frame depends on every earlier one, so a prompt's updates are compressed as they
are written (in pieces, the first going out at once); the agent's CPU is its own process's.

ACP v1 only: ``initialize``, ``session/new``, ``session/prompt``; anything else with an id is answered
``-32601``. A prompt streams ``N`` ``agent_message_chunk`` updates and then answers
``{"stopReason": "end_turn"}``. To take the agent out of the measurement, the updates of a session
are encoded once (JSON when the session is created, WebSocket frames or SSE events as one blob at
its first prompt, which the benchmark runs as a warm-up), and every prompt writes that blob at
once: all clients read the same bytes in the same large pieces.

It runs in its own process, so its CPU is not the client's. It exits when its stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import struct
import sys
import zlib
from typing import Any

_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_WORDS = ("lorem ", "ipsum ", "dolor ", "sit ", "amet, ", "consectetur ", "adipiscing ", "elit ")


def _dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def update_messages(session_id: str, count: int) -> list[bytes]:
    """The ``session/update`` notifications of one prompt, JSON-encoded (about 190 bytes each)."""
    out = []
    for index in range(count):
        text = f"{index}: " + "".join(_WORDS[(index + k) % len(_WORDS)] for k in range(6))
        out.append(
            _dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": session_id,
                        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
                    },
                }
            )
        )
    return out


def ws_frame(payload: bytes, opcode: int = 0x1, *, rsv1: bool = False) -> bytes:
    """One unmasked, unfragmented server frame (``rsv1``: its payload is compressed)."""
    size = len(payload)
    first = 0x80 | (0x40 if rsv1 else 0) | opcode
    if size < 126:
        header = struct.pack("!BB", first, size)
    elif size < 65536:
        header = struct.pack("!BBH", first, 126, size)
    else:
        header = struct.pack("!BBQ", first, 127, size)
    return header + payload


_FLUSH_TAIL = b"\x00\x00\xff\xff"
#: Updates compressed and written per piece.
_PIECE = 256


class Deflate:
    """permessage-deflate (RFC 7692) for one connection: one compressor, one decompressor, both kept
    across messages (context takeover), raw DEFLATE with a 32 KiB window."""

    def __init__(self) -> None:
        self.compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
        self.decompressor = zlib.decompressobj(-15)

    def frame(self, payload: bytes) -> bytes:
        data = self.compressor.compress(payload) + self.compressor.flush(zlib.Z_SYNC_FLUSH)
        return ws_frame(data[:-4] if data.endswith(_FLUSH_TAIL) else data, rsv1=True)

    def inflate(self, data: bytes) -> bytes:
        return self.decompressor.decompress(data + _FLUSH_TAIL)


def sse_event(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


def _chunk(pieces: list[bytes]) -> list[bytes]:
    """One HTTP/1.1 chunk of a chunked body, made of ``pieces`` (not copied together)."""
    return [b"%x\r\n" % sum(len(p) for p in pieces), *pieces, b"\r\n"]


class Agent:
    """The JSON-RPC logic, shared by both transports."""

    def __init__(self, updates: int) -> None:
        self.updates = updates
        self._ids = itertools.count(1)
        #: session id -> the encoded updates of one prompt (built once).
        self.blobs: dict[str, list[bytes]] = {}

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    def handle(self, message: dict[str, Any]) -> tuple[list[bytes], str | None]:
        """Answer one inbound message: ``(encoded outbound messages, session id they belong to)``."""
        method = message.get("method")
        request_id = message.get("id")
        if method is None or request_id is None:
            return [], None  # a notification (session/cancel ...) or a response: nothing to do
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False, "promptCapabilities": {}},
                "agentInfo": {"name": "fast-bench-agent", "version": "0"},
                "authMethods": [],
            }
            return [_dumps({"jsonrpc": "2.0", "id": request_id, "result": result})], None
        if method == "session/new":
            created = self.new_id("sess")
            self.blobs[created] = update_messages(created, self.updates)
            return [_dumps({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": created}})], None
        if method == "session/prompt":
            session_id: Any = params.get("sessionId")
            updates = self.blobs.get(session_id, [])
            answer = _dumps({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})
            return [*updates, answer], session_id
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return [_dumps({"jsonrpc": "2.0", "id": request_id, "error": error})], None


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]] | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = raw.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


#: Seconds of silence after which an SSE stream gets a keepalive comment (the official servers' interval).
_KEEPALIVE = 15.0


class _Stream:
    """One SSE stream's outbox; data waits here until a GET listens."""

    def __init__(self) -> None:
        self.pending: list[bytes] = []
        self.wakeup = asyncio.Event()

    def push(self, data: bytes) -> None:
        self.pending.append(data)
        self.wakeup.set()


class _HttpConnection:
    def __init__(self) -> None:
        self.stream = _Stream()
        self.sessions: dict[str, _Stream] = {}

    def session(self, session_id: str) -> _Stream:
        stream = self.sessions.get(session_id)
        if stream is None:
            stream = self.sessions[session_id] = _Stream()
        return stream


class Server:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.http: dict[str, _HttpConnection] = {}
        #: session id -> its updates pre-encoded as SSE events / as WebSocket frames (one blob).
        self.sse_blobs: dict[str, bytes] = {}
        self.ws_blobs: dict[str, bytes] = {}

    async def serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await _read_head(reader)
                if head is None:
                    return
                method, _target, headers = head
                if headers.get("upgrade", "").lower() == "websocket":
                    await self._websocket(reader, writer, headers)
                    return
                body = b""
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    body = await reader.readexactly(length)
                if method == "POST":
                    await self._post(writer, headers, body)
                elif method == "GET":
                    await self._get(reader, writer, headers)
                    return
                elif method == "DELETE":
                    self.http.pop(headers.get("acp-connection-id", ""), None)
                    writer.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                else:
                    writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    # -- Streamable HTTP -----------------------------------------------------------------------------

    async def _post(self, writer: asyncio.StreamWriter, headers: dict[str, str], body: bytes) -> None:
        message = json.loads(body)
        connection_id = headers.get("acp-connection-id")
        if connection_id is None:
            out, _ = self.agent.handle(message)
            connection_id = self.agent.new_id("conn")
            self.http[connection_id] = _HttpConnection()
            payload = out[0]
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nacp-connection-id: %s\r\n"
                b"content-length: %d\r\n\r\n%s" % (connection_id.encode(), len(payload), payload)
            )
            return
        connection = self.http.get(connection_id)
        if connection is None:
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 17\r\n\r\nunknown connection")
            return
        writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
        out, session_id = self.agent.handle(message)
        if not out:
            return
        stream = connection.session(session_id) if session_id is not None else connection.stream
        if message.get("method") == "session/prompt" and session_id is not None:
            blob = self.sse_blobs.get(session_id)
            if blob is None:
                blob = self.sse_blobs[session_id] = b"".join(sse_event(m) for m in out[:-1])
            stream.push(blob)
            stream.push(sse_event(out[-1]))
        else:
            stream.push(b"".join(sse_event(m) for m in out))

    async def _get(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]) -> None:
        connection = self.http.get(headers.get("acp-connection-id", ""))
        if connection is None:
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            return
        session_id = headers.get("acp-session-id")
        stream = connection.session(session_id) if session_id else connection.stream
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        closed = asyncio.ensure_future(reader.read())  # EOF (or a reset) when the client hangs up
        try:
            while not closed.done():
                if stream.pending:
                    pieces = list(stream.pending)
                    stream.pending.clear()
                    writer.writelines(_chunk(pieces))
                    await writer.drain()
                    continue
                stream.wakeup.clear()
                waiter = asyncio.ensure_future(stream.wakeup.wait())
                done, _ = await asyncio.wait({waiter, closed}, timeout=_KEEPALIVE, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if not done:  # idle: a keepalive comment, as real servers send (clients time idle streams out)
                    writer.writelines(_chunk([b": keepalive\n\n"]))
                    await writer.drain()
        finally:
            closed.cancel()

    # -- WebSocket ----------------------------------------------------------------------------------

    async def _websocket(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]
    ) -> None:
        key = headers.get("sec-websocket-key", "").encode()
        accept = base64.b64encode(hashlib.sha1(key + _WS_GUID).digest())
        connection_id = self.agent.new_id("conn").encode()
        offers = [offer.split(";")[0].strip() for offer in headers.get("sec-websocket-extensions", "").split(",")]
        deflate = Deflate() if "permessage-deflate" in offers else None
        extension = b"sec-websocket-extensions: permessage-deflate\r\n" if deflate is not None else b""
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
            b"sec-websocket-accept: %s\r\nacp-connection-id: %s\r\n%s\r\n" % (accept, connection_id, extension)
        )
        await writer.drain()

        def frames(messages: list[bytes]) -> bytes:
            if deflate is None:
                return b"".join(ws_frame(m) for m in messages)
            return b"".join(deflate.frame(m) for m in messages)

        while True:
            first, second = await reader.readexactly(2)
            opcode = first & 0x0F
            size = second & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", await reader.readexactly(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", await reader.readexactly(8))
            mask = await reader.readexactly(4) if second & 0x80 else b"\0\0\0\0"
            data = await reader.readexactly(size)
            if size:
                full = (mask * (size // 4 + 1))[:size]
                data = (int.from_bytes(data, "big") ^ int.from_bytes(full, "big")).to_bytes(size, "big")
            if opcode == 0x8:  # close: echo it and hang up
                writer.write(ws_frame(data[:2], 0x8))
                await writer.drain()
                return
            if opcode == 0x9:  # ping
                writer.write(ws_frame(data, 0xA))
                continue
            if opcode != 0x1:
                continue
            if first & 0x40 and deflate is not None:
                data = deflate.inflate(data)
            message = json.loads(data)
            out, session_id = self.agent.handle(message)
            if not out:
                continue
            if message.get("method") == "session/prompt" and session_id is not None and deflate is None:
                blob = self.ws_blobs.get(session_id)
                if blob is None:
                    blob = self.ws_blobs[session_id] = frames(out[:-1])
                writer.writelines([blob, ws_frame(out[-1])])
            else:
                for start in range(0, len(out), _PIECE):  # each piece goes out as soon as it is made
                    writer.write(frames(out[start : start + _PIECE]))
            await writer.drain()


async def _main(updates: int) -> None:
    server = Server(Agent(updates))
    listener = await asyncio.start_server(server.serve_client, "127.0.0.1", 0, limit=1 << 20)
    port = listener.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    async with listener:
        await stdin_closed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--updates", type=int, required=True, help="session/update notifications per prompt")
    args = parser.parse_args()
    asyncio.run(_main(args.updates))


if __name__ == "__main__":
    main()
