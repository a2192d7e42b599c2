"""The WebSocket transport when the link ends: close frames, TCP drops, ping timeouts, ``aclose``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import time
from collections.abc import Awaitable, Callable

import pytest
from websockets.asyncio.server import ServerConnection

from acp_client.exceptions import TransportClosed, TransportError
from acp_client.transports.websocket import WebSocketConnector, WebSocketTransport
from tests._support import eventually
from tests.transports._ws_support import (
    GOOD,
    REQUEST,
    connect,
    elapsed_since,
    handshake_then_hang_up,
    handshake_then_silent,
    sends,
)

from ._ws_servers import PongingEcho, RawServer, WsServer, server_frame, switching_protocols

# --------------------------------------------------------------------------------------------
# The link ends: drop detection


async def test_close_by_agent(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    ws_server.handler = sends(GOOD, close=(1000, "bye"))
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    assert await transport.receive() == json.loads(GOOD)  # queued frames first
    with pytest.raises(TransportClosed) as info:
        await transport.receive()
    assert info.value.reason == "closed by agent 1000 (OK) bye"
    with pytest.raises(TransportClosed, match="closed by agent 1000"):
        await transport.receive()  # every later call too
    with pytest.raises(TransportClosed) as sent:
        await transport.send(REQUEST)
    assert sent.value.maybe_delivered is False
    assert transport.closed


async def test_close_by_agent_with_an_application_code(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    ws_server.handler = sends(close=(4001, "session evicted"))
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    with pytest.raises(TransportClosed, match=r"closed by agent 4001 \(private use\) session evicted"):
        await transport.receive()


async def test_tcp_drop_without_close_frame(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    server = await raw_server(handshake_then_hang_up)
    transport = await connect(WebSocketConnector(server.url, compression=False), opened)
    with pytest.raises(TransportClosed) as info:
        await asyncio.wait_for(transport.receive(), 5)
    assert info.value.reason.startswith("connection dropped (1006)")


async def test_agent_close_frame_without_tcp_close_is_bounded(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head) + server_frame(8, struct.pack("!H", 1001) + b"restarting"))
        await writer.drain()
        while await reader.read(65536):
            pass  # never closes TCP

    server = await raw_server(script)
    transport = await connect(WebSocketConnector(server.url, compression=False, close_timeout=0.3), opened)
    start = time.monotonic()
    with pytest.raises(TransportClosed, match=r"closed by agent 1001 .* restarting"):
        await asyncio.wait_for(transport.receive(), 5)
    assert elapsed_since(start) < 3


async def test_ping_timeout_is_detected_promptly(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    server = await raw_server(handshake_then_silent)
    connector = WebSocketConnector(server.url, ping_interval=0.2, ping_timeout=0.2, close_timeout=5.0)
    transport = await connect(connector, opened)
    start = time.monotonic()
    with pytest.raises(TransportClosed) as info:
        await asyncio.wait_for(transport.receive(), 5)
    assert info.value.reason.startswith("ping timeout")
    assert elapsed_since(start) < 2  # interval + timeout, not + close_timeout
    with pytest.raises(TransportClosed, match="ping timeout") as sent:
        await transport.send(REQUEST)
    assert sent.value.maybe_delivered is False


async def test_ping_timeout_is_seen_by_send_without_a_receiver(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    """Nobody is receiving: send() alone notices the drop once the ping timed out."""
    server = await raw_server(handshake_then_silent)
    transport = await connect(WebSocketConnector(server.url, ping_interval=0.1, ping_timeout=0.1), opened)
    await eventually(lambda: transport.closed)
    with pytest.raises(TransportClosed, match="ping timeout"):
        await transport.send(REQUEST)


async def handshake_then_stop_reading(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
    """Complete the handshake, then neither read nor write: the client's buffers fill up."""
    writer.write(switching_protocols(head))
    await writer.drain()
    writer.transport.pause_reading()
    await reader.read()  # returns when the server is stopped


async def test_ping_timeout_unblocks_a_send_stuck_on_a_peer_that_stopped_reading(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    server = await raw_server(handshake_then_stop_reading)
    connector = WebSocketConnector(server.url, ping_interval=0.2, ping_timeout=0.3, compression=False)
    transport = await connect(connector, opened)
    big = {"jsonrpc": "2.0", "method": "x", "params": {"pad": "p" * (8 * 1024 * 1024)}}
    start = time.monotonic()
    with pytest.raises(TransportClosed, match="ping timeout") as info:
        for _ in range(20):  # far more than loopback socket buffers hold
            await asyncio.wait_for(transport.send(big), 10)
    assert info.value.maybe_delivered is True  # it was partly written
    assert elapsed_since(start) < 5


async def test_answered_pings_keep_the_link(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    script = PongingEcho()
    server = await raw_server(script)
    connector = WebSocketConnector(server.url, ping_interval=0.05, ping_timeout=0.5, compression=False)
    transport = await connect(connector, opened)
    await eventually(lambda: script.pings >= 4)
    assert not transport.closed
    await transport.send(REQUEST)
    assert await transport.receive() == REQUEST


async def test_no_pings_when_disabled(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    script = PongingEcho()
    server = await raw_server(script)
    connector = WebSocketConnector(server.url, ping_interval=None, compression=False)
    transport = await connect(connector, opened)
    for index in range(5):  # several round trips, no ping in between
        message = {"jsonrpc": "2.0", "id": index, "method": "x"}
        await transport.send(message)
        assert await transport.receive() == message
    assert script.pings == 0


async def test_aclose_is_idempotent_and_bounded(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    server = await raw_server(handshake_then_silent)
    transport = await connect(WebSocketConnector(server.url, close_timeout=0.3, compression=False), opened)
    start = time.monotonic()
    await asyncio.gather(transport.aclose(), transport.aclose())
    await transport.aclose()
    assert elapsed_since(start) < 2.5
    with pytest.raises(TransportClosed, match="closed by client") as info:
        await transport.receive()
    with pytest.raises(TransportClosed) as sent:
        await transport.send(REQUEST)
    assert sent.value.maybe_delivered is False
    assert info.value.reason == sent.value.reason


async def test_aclose_sends_a_normal_close(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    codes: list[int | None] = []

    async def handler(connection: ServerConnection) -> None:
        await connection.wait_closed()
        codes.append(connection.close_code)

    ws_server.handler = handler
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    await transport.aclose()
    await eventually(lambda: bool(codes))
    assert codes == [1000]


async def test_aclose_after_a_drop_keeps_the_drop_reason(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    server = await raw_server(handshake_then_hang_up)
    transport = await connect(WebSocketConnector(server.url, compression=False), opened)
    with pytest.raises(TransportClosed):
        await transport.receive()
    await transport.aclose()
    with pytest.raises(TransportClosed, match="connection dropped"):
        await transport.receive()


async def test_receive_waiting_when_aclose_is_called(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    waiting = asyncio.ensure_future(transport.receive())
    await asyncio.sleep(0)
    await transport.aclose()
    with pytest.raises(TransportClosed, match="closed by client"):
        await asyncio.wait_for(waiting, 5)


async def test_concurrent_receive_is_an_error(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    first = asyncio.ensure_future(transport.receive())
    await asyncio.sleep(0)
    with pytest.raises(TransportError, match="another receive"):
        await transport.receive()
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
