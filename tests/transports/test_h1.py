"""The HTTP/1.1 client under the Streamable HTTP transport (``acp_client.transports._h1``), against real
servers on loopback: framing, keep-alive reuse, caps."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from acp_client import AcpClient
from acp_client.testing import ReferenceAgent, ReferenceServer
from acp_client.transports._h1 import MAX_HEAD_BYTES, H1Pool

Answer = Callable[[bytes], bytes]


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Answer], asyncio.Future[int]]]:
    """A server answering each request with ``answer(request head)``; the fixture's value starts one and
    returns its port; ``accepted`` counts TCP connections."""
    servers: list[asyncio.Server] = []

    async def start(answer: Answer) -> int:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            start.accepted += 1  # type: ignore[attr-defined]
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
                    if length:
                        await reader.readexactly(int(length[0].split(b":")[1]))
                    reply = answer(head)
                    writer.write(reply)
                    await writer.drain()
                    if b"connection: close" in reply.lower():
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    start.accepted = 0  # type: ignore[attr-defined]
    yield start  # type: ignore[misc]
    for server in servers:
        server.close()


def _pool(port: int, connections: int = 2) -> H1Pool:
    return H1Pool(
        host="127.0.0.1", port=port, tls=None, connect_timeout=5, max_connections=connections, keepalive_expiry=5
    )


async def _read(pool: H1Pool, method: str = "POST", body: bytes | None = b"{}") -> tuple[int, bytes]:
    response = await pool.request(method, "/acp", [("Content-Type", "application/json")], body, 5)
    try:
        return response.status_code, b"".join([piece async for piece in response.aiter_raw()])
    finally:
        await response.aclose()


async def test_chunked_and_sized_answers_are_read_and_the_connection_reused(raw_server) -> None:  # type: ignore[no-untyped-def]
    replies = iter(
        [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok",
            b"HTTP/1.1 204 No Content\r\n\r\n",
        ]
        * 5
    )
    port = await raw_server(lambda head: next(replies))
    pool = _pool(port)
    try:
        for _ in range(5):
            assert await _read(pool) == (200, b"abcde")
            assert await _read(pool) == (202, b"ok")
            assert await _read(pool, "DELETE", None) == (204, b"")
    finally:
        await pool.aclose()
    assert raw_server.accepted == 1 and pool.connections_opened == 1


async def test_connection_close_is_honoured(raw_server) -> None:  # type: ignore[no-untyped-def]
    port = await raw_server(lambda head: b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx")
    pool = _pool(port)
    try:
        for _ in range(3):
            assert await _read(pool) == (200, b"x")
    finally:
        await pool.aclose()
    assert raw_server.accepted == 3


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (MAX_HEAD_BYTES + 10) + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
    ],
    ids=["head-too-long", "two-lengths", "bad-chunk", "not-http", "bad-header"],
)
async def test_a_broken_answer_is_a_protocol_error(raw_server, reply: bytes) -> None:  # type: ignore[no-untyped-def]
    port = await raw_server(lambda head: reply)
    pool = _pool(port)
    try:
        with pytest.raises(httpx.RemoteProtocolError):
            await _read(pool)
    finally:
        await pool.aclose()


async def test_a_silent_server_is_a_read_timeout(raw_server) -> None:  # type: ignore[no-untyped-def]
    port = await raw_server(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    pool = _pool(port)
    try:
        response = await pool.request("POST", "/acp", [], b"{}", 0.2)
        with pytest.raises(httpx.ReadTimeout):
            async for _ in response.aiter_raw():
                pass
        await response.aclose()
    finally:
        await pool.aclose()


async def test_a_connection_reset_as_it_opens_fails_the_request_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that resets what it accepts (a proxy refusing, an overloaded balancer): when the reset is read
    before the request is written (as happens under load), the request fails as a connect error at once, not
    after the read timeout with the request written into a dead socket."""

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    loop = asyncio.get_running_loop()
    opened = loop.create_connection

    async def reset_read_first(factory, *args, **kwargs):  # type: ignore[no-untyped-def]
        ended = asyncio.Event()

        def watched():  # type: ignore[no-untyped-def]
            conn = factory()
            lost = conn.connection_lost

            def connection_lost(exc: Exception | None) -> None:
                lost(exc)
                ended.set()

            conn.connection_lost = connection_lost
            return conn

        opening = await opened(watched, *args, **kwargs)
        await asyncio.wait_for(ended.wait(), 5)  # the reset is read before the pool goes on
        return opening

    monkeypatch.setattr(loop, "create_connection", reset_read_first)
    pool = _pool(int(server.sockets[0].getsockname()[1]))
    try:
        for _ in range(3):  # and the failed connection's place in the pool is free again
            async with asyncio.timeout(5):
                with pytest.raises(httpx.ConnectError, match="closed the connection as soon as it was opened"):
                    await pool.request("POST", "/acp", [], b"{}", 30)
    finally:
        await pool.aclose()
        server.close()


async def test_requests_of_one_http_link_share_few_tcp_connections() -> None:
    """100 sequential and 40 concurrent requests on one link: the POSTs reuse keep-alive connections."""
    async with ReferenceServer(ReferenceAgent()) as server, AcpClient(server.http_url, retry=None) as client:
        session = await client.new_session("/tmp")
        before = server.tcp_connections
        for _ in range(100):
            await client.session_status(session.session_id)
        await asyncio.gather(*(client.session_status(session.session_id) for _ in range(40)))
        assert server.tcp_connections - before <= 8  # the POSTs' pool; the streams stay open


async def test_a_short_read_timeout_is_not_held_up_by_a_longer_one(raw_server) -> None:  # type: ignore[no-untyped-def]
    """The read timeouts of a pool share one timer: a wait armed later with a shorter timeout still ends first."""
    arrived = asyncio.Event()

    def silence(head: bytes) -> bytes:  # never answers
        arrived.set()
        return b""

    port = await raw_server(silence)
    pool = _pool(port)
    try:
        slow = asyncio.ensure_future(pool.request("POST", "/acp", [], b"{}", 60))
        async with asyncio.timeout(10):
            await arrived.wait()  # the slow one is sent, so waiting for its answer's head, first
            with pytest.raises(httpx.ReadTimeout):
                await pool.request("POST", "/acp", [], b"{}", 0.1)
        assert not slow.done()  # its own timeout is still far off
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
    finally:
        await pool.aclose()


async def test_repeated_answer_heads_are_read_right_and_their_memory_stays_bounded(raw_server) -> None:  # type: ignore[no-untyped-def]
    """A pool remembers the heads it parsed (most answers repeat one): each answer is still framed by its own
    head, and however many distinct heads come, the pool keeps a bounded number."""
    count = iter(range(1000))

    def answer(head: bytes) -> bytes:
        n = next(count)
        if n == 150:
            return b"HTTP/1.1 202 Accepted\r\nX-Pad: " + b"p" * 2000 + b"\r\nContent-Length: 0\r\n\r\n"
        if n % 3 == 2:  # a distinct head each time, with a body of its own length
            body = b"x" * (n % 7)
            return b"HTTP/1.1 200 OK\r\nX-N: %d\r\nContent-Length: %d\r\n\r\n%s" % (n, len(body), body)
        return b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"

    port = await raw_server(answer)
    pool = _pool(port)
    try:
        for n in range(150):
            expected = (200, b"x" * (n % 7)) if n % 3 == 2 else (202, b"")
            assert await _read(pool) == expected
        assert 1 <= len(pool.heads) <= 32
        assert await _read(pool) == (202, b"")  # n == 150: a head of its own, too long to be kept
        assert all(len(head) <= 1024 for head in pool.heads)
    finally:
        await pool.aclose()
    assert raw_server.accepted == 1
