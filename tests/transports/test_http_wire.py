"""The HTTP transport's HTTP/1.1 on the wire, against a raw asyncio server: answer framing, keep-alive
reuse, ``Connection: close``, broken and reset answers; and connection reuse against the reference server.

The raw server speaks just enough of the Streamable HTTP handshake (an ``initialize`` answer with an
``Acp-Connection-Id``, a held-open connection stream) to put the client's HTTP/1.1 through each case.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import AsyncIterator, Callable

import pytest

from acp_client import AcpClient
from acp_client._codec._jsonrpc import notification_message
from acp_client.exceptions import TransportClosed, TransportError
from acp_client.testing import ReferenceAgent, ReferenceServer
from acp_client.transports._wire import Wire, new_pools
from acp_client.transports.http import HttpConnector, HttpTransport
from tests.transports._http_support import init

#: ``answer(method, number of this POST)`` -> the bytes of the answer (``b""``: stay silent).
Script = Callable[[str, int], bytes]

_INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}).encode()


def chunked(body: bytes, piece: int = 7) -> bytes:
    out = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + piece]), body[i : i + piece]) for i in range(0, len(body), piece)
    )
    return out + b"0\r\n\r\n"


def init_answer(*, framing: str = "length", close: bool = False) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAcp-Connection-Id: c1\r\n"
    if close:
        head += b"Connection: close\r\n"
    if framing == "chunked":
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(_INIT)
    return head + b"Content-Length: %d\r\n\r\n%s" % (len(_INIT), _INIT)


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
ACCEPTED_THEN_CLOSE = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class RawHttp:
    """Counts TCP connections; answers each POST with ``script``; holds every GET open as an empty SSE stream."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.accepted = 0
        self.posts = 0
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/acp"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                method = lines[0].split(b" ")[0].decode()
                length = [line for line in lines if line.lower().startswith(b"content-length:")]
                body = await reader.readexactly(int(length[0].split(b":")[1])) if length else b""
                if method == "GET":
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                    )
                    await writer.drain()
                    await reader.read()  # held open until the client goes
                    return
                if method == "DELETE":
                    writer.write(ACCEPTED)
                    await writer.drain()
                    continue
                self.posts += 1
                is_init = b'"initialize"' in body
                reply = self.script("initialize" if is_init else "other", self.posts)
                if not reply:
                    await reader.read()
                    return
                writer.write(reply)
                await writer.drain()
                if b"connection: close" in reply.lower():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def raw_http() -> AsyncIterator[Callable[[Script], asyncio.Future[RawHttp]]]:
    servers: list[asyncio.Server] = []
    transports: list[HttpTransport] = []

    async def start(script: Script) -> RawHttp:
        raw = RawHttp(script)
        raw.server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
        servers.append(raw.server)
        return raw

    start.transports = transports  # type: ignore[attr-defined]
    yield start  # type: ignore[misc]
    for transport in transports:
        await transport.aclose()
    for server in servers:
        server.close()


async def _open(raw: RawHttp, **kwargs: object) -> HttpTransport:
    transport = await HttpConnector(raw.url, **kwargs).connect()  # type: ignore[arg-type]
    return transport


async def test_a_chunked_answer_is_read_and_the_posts_reuse_one_connection(raw_http) -> None:  # type: ignore[no-untyped-def]
    raw = await raw_http(lambda method, n: init_answer(framing="chunked") if method == "initialize" else ACCEPTED)
    transport = await _open(raw)
    raw_http.transports.append(transport)
    await init(transport)
    for index in range(20):
        await transport.send(notification_message("note", {"i": index}))
    assert raw.posts == 21
    assert raw.accepted <= 2  # the POSTs' keep-alive connection, and the connection stream's


async def test_connection_close_is_honoured(raw_http) -> None:  # type: ignore[no-untyped-def]
    raw = await raw_http(lambda method, n: init_answer(close=True) if method == "initialize" else ACCEPTED_THEN_CLOSE)
    transport = await _open(raw)
    raw_http.transports.append(transport)
    await init(transport)
    for index in range(3):
        await transport.send(notification_message("note", {"i": index}))
    assert raw.posts == 4
    assert raw.accepted >= 5  # a fresh connection for every POST, plus the connection stream's


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 abc Nope\r\n\r\n",  # no status code
        b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}",  # conflicting lengths
        b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # a broken chunk size
    ],
)
async def test_a_broken_answer_to_a_post_may_have_been_delivered(raw_http, reply: bytes) -> None:  # type: ignore[no-untyped-def]
    raw = await raw_http(lambda method, n: init_answer() if method == "initialize" else reply)
    transport = await _open(raw)
    raw_http.transports.append(transport)
    await init(transport)
    with pytest.raises(TransportClosed) as caught:
        await asyncio.wait_for(transport.send(notification_message("note", {})), 5)
    assert caught.value.maybe_delivered is True  # the request was written before its answer broke


async def test_a_connection_reset_as_it_opens_fails_at_once(raw_http) -> None:  # type: ignore[no-untyped-def]
    """A server that resets what it accepts (a proxy refusing, an overloaded balancer): ``initialize``
    fails at once with a typed error, not after the read timeout."""

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/acp"
        transport = await HttpConnector(url, sse_idle_timeout=30).connect()
        raw_http.transports.append(transport)
        start = time.monotonic()
        with pytest.raises(TransportError):
            await asyncio.wait_for(init(transport), 10)
        assert time.monotonic() - start < 5
    finally:
        server.close()


async def test_a_silent_answer_to_initialize_times_out(raw_http) -> None:  # type: ignore[no-untyped-def]
    raw = await raw_http(lambda method, n: b"")
    transport = await _open(raw, sse_idle_timeout=0.3, connect_timeout=0.3)
    raw_http.transports.append(transport)
    start = time.monotonic()
    with pytest.raises(TransportError, match="Timeout"):
        await asyncio.wait_for(init(transport), 10)
    assert time.monotonic() - start < 5


async def test_concurrent_requests_each_take_an_idle_connection_and_give_it_back(raw_http) -> None:  # type: ignore[no-untyped-def]
    raw = await raw_http(lambda method, n: ACCEPTED)
    wire = Wire(new_pools(http1=True, http2=False, tls=None, connections=4), 5.0)
    try:
        replies = await asyncio.gather(*(wire.send("POST", raw.url, [], b"{}", 5.0) for _ in range(4)))
        assert raw.accepted == 4
        for reply in replies:
            await reply.aread()
            await reply.aclose()
        for _ in range(10):
            reply = await wire.send("POST", raw.url, [], b"{}", 5.0)
            await reply.aread()
            await reply.aclose()
        assert (raw.accepted, raw.posts) == (4, 14)  # every answer closed gave its connection back
    finally:
        await wire.aclose()


async def test_requests_of_one_http_link_share_few_tcp_connections() -> None:
    """100 sequential and 40 concurrent requests on one link: the POSTs reuse keep-alive connections."""
    async with ReferenceServer(ReferenceAgent()) as server, AcpClient(server.http_url, retry=None) as client:
        session = await client.new_session("/tmp")
        before = server.tcp_connections
        for _ in range(100):
            await client.session_status(session.session_id)
        await asyncio.gather(*(client.session_status(session.session_id) for _ in range(40)))
        assert server.tcp_connections - before <= 8  # the POSTs' pool; the streams stay open
