"""Helpers of the WebSocket transport tests: scripted servers' behaviours and the frames they send."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from websockets.asyncio.server import ServerConnection

from acp_client.transports.websocket import WebSocketConnector, WebSocketTransport

from ._ws_servers import switching_protocols

REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
GOOD = '{"jsonrpc":"2.0","method":"ping"}'

# --------------------------------------------------------------------------------------------
# Fixtures


async def connect(connector: WebSocketConnector, opened: list[WebSocketTransport]) -> WebSocketTransport:
    transport = await connector.connect()
    opened.append(transport)
    return transport


def sends(*frames: str | bytes, close: tuple[int, str] | None = None) -> Callable[[ServerConnection], Awaitable[None]]:
    """A server handler that sends ``frames``, then closes with ``close`` or waits for the client."""

    async def handler(connection: ServerConnection) -> None:
        for frame in frames:
            await connection.send(frame)
        if close is not None:
            await connection.close(*close)
        else:
            await connection.wait_closed()

    return handler


async def handshake_then_silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
    """Complete the handshake, then never write again (no pongs, no close answer)."""
    writer.write(switching_protocols(head))
    await writer.drain()
    while await reader.read(65536):
        pass


async def handshake_then_hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
    """Complete the handshake, then close TCP at once (no close frame)."""
    writer.write(switching_protocols(head))
    await writer.drain()


async def handshake_then_eof_on_input(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
    """Complete the handshake; hang up as soon as the client sends anything (e.g. its close frame)."""
    writer.write(switching_protocols(head))
    await writer.drain()
    await reader.read(1)


def elapsed_since(start: float) -> float:
    return time.monotonic() - start


# --------------------------------------------------------------------------------------------
# Helpers
