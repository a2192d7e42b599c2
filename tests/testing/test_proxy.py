"""The fault proxy: byte transparency, cut, blackhole, refuse."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
import websockets
from websockets.exceptions import ConnectionClosed

from acp_client.testing.clock import FakeClock
from acp_client.testing.proxy import FaultProxy
from acp_client.testing.reference_agent import ReferenceAgent, ReferenceServer
from tests._support import eventually
from tests.peers.reference import FaultProxyFactory

from ._raw import TIMEOUT, WsPeer


class EchoServer:
    """Echoes every byte; records what arrived and how each connection ended."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.endings: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    self.endings.append("eof")
                    break
                self.received += data
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            self.endings.append("reset")
        finally:
            writer.close()

    async def aclose(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()


@pytest_asyncio.fixture
async def echo() -> AsyncIterator[EchoServer]:
    server = EchoServer()
    await server.start()
    yield server
    await server.aclose()


async def _open(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def _read_exactly(reader: asyncio.StreamReader, size: int) -> bytes:
    return await asyncio.wait_for(reader.readexactly(size), TIMEOUT)


async def _link_is_dead(reader: asyncio.StreamReader) -> bool:
    """True when the peer reset or closed the connection (read fails or hits EOF)."""
    try:
        data = await asyncio.wait_for(reader.read(100), TIMEOUT)
    except ConnectionError:
        return True
    return data == b""


async def test_forwards_bytes_both_ways(echo: EchoServer, fault_proxy: FaultProxyFactory) -> None:
    proxy = await fault_proxy(echo.port)
    reader, writer = await _open(proxy)
    writer.write(b"hello proxy")
    assert await _read_exactly(reader, 11) == b"hello proxy"
    assert proxy.connection_count == 1 and proxy.total_connections == 1
    writer.write_eof()
    assert await reader.read() == b""  # the half-close travels and the echo server ends
    await eventually(lambda: echo.endings == ["eof"])
    writer.close()
    await eventually(lambda: proxy.connection_count == 0)


def test_url_points_at_the_proxy() -> None:
    proxy = FaultProxy("127.0.0.1", 9000, port=0)
    proxy._port = 4321  # a started proxy knows its port; no socket needed for this check
    assert proxy.url("ws://127.0.0.1:9000/acp?x=1") == "ws://127.0.0.1:4321/acp?x=1"
    assert proxy.url("https://user:pw@localhost:9000/acp") == "https://user:pw@127.0.0.1:4321/acp"
    with pytest.raises(RuntimeError):
        _ = FaultProxy("127.0.0.1", 1).port


async def test_cut_resets_both_sides(echo: EchoServer, fault_proxy: FaultProxyFactory) -> None:
    proxy = await fault_proxy(echo.port)
    reader, writer = await _open(proxy)
    writer.write(b"ping")
    assert await _read_exactly(reader, 4) == b"ping"
    await proxy.cut()
    assert await _link_is_dead(reader)
    await eventually(lambda: echo.endings == ["reset"])
    assert proxy.connection_count == 0
    writer.close()
    reader2, writer2 = await _open(proxy)  # new connections still work
    writer2.write(b"again")
    assert await _read_exactly(reader2, 5) == b"again"
    assert proxy.total_connections == 2
    writer2.close()


async def test_blackhole_holds_bytes_until_lifted(echo: EchoServer, fault_proxy: FaultProxyFactory) -> None:
    proxy = await fault_proxy(echo.port)
    reader, writer = await _open(proxy)
    writer.write(b"a")
    assert await _read_exactly(reader, 1) == b"a"
    await proxy.blackhole()
    assert proxy.blackholed
    writer.write(b"held")
    await writer.drain()
    await eventually(lambda: proxy.held_bytes == 4, what="the bytes to be held")
    assert proxy.held_client_bytes == 4  # all of them from the client
    assert bytes(echo.received) == b"a"  # nothing reached the upstream
    # a new connection is accepted but goes nowhere either
    late_reader, late_writer = await _open(proxy)
    late_writer.write(b"late")
    assert proxy.connection_count == 2
    await proxy.blackhole(False)
    assert await _read_exactly(reader, 4) == b"held"
    assert await _read_exactly(late_reader, 4) == b"late"
    assert proxy.held_bytes == proxy.held_client_bytes == 0  # all forwarded
    writer.close()
    late_writer.close()


async def test_cut_during_blackhole(echo: EchoServer, fault_proxy: FaultProxyFactory) -> None:
    proxy = await fault_proxy(echo.port)
    reader, writer = await _open(proxy)
    writer.write(b"x")
    assert await _read_exactly(reader, 1) == b"x"
    await proxy.blackhole()
    writer.write(b"y")
    await eventually(lambda: proxy.held_client_bytes == 1, what="the byte to be held")
    await asyncio.wait_for(proxy.cut(), TIMEOUT)
    assert await _link_is_dead(reader)
    assert proxy.connection_count == 0
    assert proxy.held_bytes == proxy.held_client_bytes == 0  # dropped with the link
    writer.close()


async def test_refuse_resets_new_connections_for_the_window(echo: EchoServer) -> None:
    clock = FakeClock()
    async with FaultProxy("127.0.0.1", echo.port, clock=clock) as proxy:
        existing_reader, existing_writer = await _open(proxy)
        await proxy.refuse(10.0)
        assert proxy.refusing
        reader, writer = await _open(proxy)  # accepted by the kernel, then reset
        assert await _link_is_dead(reader)
        writer.close()
        assert proxy.refused_connections == 1 and proxy.total_connections == 2
        existing_writer.write(b"still up")  # connections from before the window are untouched
        assert await _read_exactly(existing_reader, 8) == b"still up"
        await clock.advance(10.0)
        assert not proxy.refusing
        reader, writer = await _open(proxy)
        writer.write(b"ok")
        assert await _read_exactly(reader, 2) == b"ok"
        writer.close()
        existing_writer.close()


async def test_upstream_down_resets_the_client(fault_proxy: FaultProxyFactory) -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    proxy = await fault_proxy(port)
    reader, writer = await _open(proxy)
    assert await _link_is_dead(reader)
    writer.close()


async def test_websocket_through_proxy_cut_and_blackhole(
    reference_server: ReferenceServer, fault_proxy: FaultProxyFactory
) -> None:
    proxy = await fault_proxy(reference_server)
    url = proxy.url(reference_server.ws_url)
    peer = WsPeer(await websockets.connect(url, open_timeout=TIMEOUT))
    try:
        await peer.initialize(1)
        session_id = await peer.new_session()
        await proxy.cut()
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(peer.ws.recv(), TIMEOUT)
        await eventually(lambda: reference_server.connection_count == 0)
    finally:
        await peer.aclose()
    peer = WsPeer(await websockets.connect(url, open_timeout=TIMEOUT, ping_interval=None))
    try:
        await peer.initialize(1)
        assert (await peer.result("session/status", {"sessionId": session_id}))["status"] == "active"
        await proxy.blackhole()
        pong = await peer.ws.ping()
        await eventually(lambda: proxy.held_bytes > 0, what="the ping to be held")
        assert not pong.done()  # a half-open link: no pong
        assert reference_server.connection_count == 1  # the server still thinks it is connected
        await proxy.blackhole(False)
        await asyncio.wait_for(pong, TIMEOUT)
    finally:
        with contextlib.suppress(Exception):
            await peer.aclose()


async def test_h2c_through_proxy(reference_server: ReferenceServer, fault_proxy: FaultProxyFactory) -> None:
    proxy = await fault_proxy(reference_server)
    async with httpx.AsyncClient(http1=False, http2=True, timeout=TIMEOUT) as client:
        body = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
        response = await client.post(
            proxy.url(reference_server.http_url), content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 200 and response.http_version == "HTTP/2"
        assert proxy.total_connections == 1


async def test_aclose_is_idempotent(echo: EchoServer) -> None:
    proxy = FaultProxy("127.0.0.1", echo.port)
    await proxy.start()
    reader, writer = await _open(proxy)
    await proxy.aclose()
    await proxy.aclose()
    assert await _link_is_dead(reader)
    writer.close()


async def test_a_slow_reader_gets_every_byte_in_order(fault_proxy: FaultProxyFactory) -> None:
    payload = bytes(range(256)) * (16 * 4096)  # 16 MiB: the proxy pauses and resumes reading many times
    writers: list[asyncio.StreamWriter] = []

    async def send_all(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        writer.write(payload)
        writer.write_eof()
        with contextlib.suppress(ConnectionError):
            await writer.drain()
            await reader.read()
        writer.close()

    upstream = await asyncio.start_server(send_all, "127.0.0.1", 0)
    try:
        proxy = await fault_proxy(upstream.sockets[0].getsockname()[1])
        reader, writer = await _open(proxy)
        received = bytearray()
        while chunk := await asyncio.wait_for(reader.read(4096), TIMEOUT):  # small reads: the proxy's writes back up
            received += chunk
        assert received == payload  # every byte, in order, then the EOF
        assert len(writers) == 1
        writer.close()
        await eventually(lambda: proxy.connection_count == 0)
    finally:
        upstream.close()
        await upstream.wait_closed()


async def test_bytes_and_eof_sent_into_a_blackhole_arrive_in_order_when_lifted(
    echo: EchoServer, fault_proxy: FaultProxyFactory
) -> None:
    proxy = await fault_proxy(echo.port)
    reader, writer = await _open(proxy)
    writer.write(b"before")
    assert await _read_exactly(reader, 6) == b"before"
    await proxy.blackhole()
    writer.write(b"during")
    writer.write_eof()
    await eventually(lambda: proxy.held_bytes == 6, what="the bytes to be held")
    assert bytes(echo.received) == b"before" and echo.endings == []  # neither the bytes nor the EOF went on
    await proxy.blackhole(False)
    assert await _read_exactly(reader, 6) == b"during"
    assert await asyncio.wait_for(reader.read(), TIMEOUT) == b""  # the echo server saw the EOF after the bytes
    assert echo.endings == ["eof"] and bytes(echo.received) == b"beforeduring"
    assert proxy.held_bytes == 0
    writer.close()
    await eventually(lambda: proxy.connection_count == 0)


# -- one kind of HTTP connection at a time ------------------------------------------------------------


def test_each_http_connection_is_named_after_its_latest_request() -> None:
    from acp_client.testing.proxy import _RequestSniffer

    def kind(*chunks: bytes) -> str:
        sniffer = _RequestSniffer()
        for chunk in chunks:
            sniffer.feed(chunk)
        return sniffer.kind

    post = b"POST /acp HTTP/1.1\r\nContent-Length: 5\r\nAcp-Session-Id: s\r\n\r\nhello"
    conn_get = b"GET /acp HTTP/1.1\r\nAccept: text/event-stream\r\nAcp-Connection-Id: c\r\n\r\n"
    session_get = b"GET /acp HTTP/1.1\r\naccept: text/event-stream\r\nacp-session-id: s\r\n\r\n"
    assert kind(post) == "post"
    assert kind(post[:7], post[7:30], post[30:]) == "post"  # split anywhere
    assert kind(post + conn_get) == "connection_stream"  # a kept-alive connection: its latest request
    assert kind(post[:-2], post[-2:] + session_get) == "session_stream"  # the body is skipped by its length
    assert kind(b"DELETE /acp HTTP/1.1\r\n\r\n") == "delete"
    assert kind(b"GET /acp HTTP/1.1\r\nUpgrade: websocket\r\n\r\n") == "websocket"
    assert kind(b"\x16\x03\x01\x02\x00") == "other"  # TLS
    assert kind(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") == "other"  # h2c


async def test_cut_and_silence_one_kind_of_connection(fault_proxy: FaultProxyFactory) -> None:
    async with ReferenceServer(ReferenceAgent()) as server:
        proxy = await fault_proxy(server)
        url = proxy.url(server.http_url)
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, httpx.AsyncClient(timeout=TIMEOUT) as other:
            body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
            answer = await client.post(url, json=body, headers={"Accept": "application/json"})
            headers = {"Accept": "text/event-stream", "Acp-Connection-Id": answer.headers["acp-connection-id"]}
            async with other.stream("GET", url, headers=headers) as stream:
                await eventually(lambda: proxy.connections("connection_stream") == 1)
                assert proxy.connections("post") == 1
                assert await proxy.silence("connection_stream") == 1
                assert await proxy.silence("connection_stream", on=False) == 1
                await proxy.cut("connection_stream")
                with pytest.raises(httpx.HTTPError):
                    await stream.aread()
            assert proxy.connections("post") == 1  # the POSTs' connection was left alone
            with pytest.raises(ValueError, match="unknown connection kind"):
                await proxy.cut("stream")
