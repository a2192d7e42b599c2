"""The WebSocket transport against real loopback servers (``websockets`` servers and raw TCP ones)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import pytest
import trustme
from websockets.asyncio.server import ServerConnection

from acp_client.exceptions import (
    AuthenticationFailed,
    ConfigurationError,
    ConnectError,
    HttpStatusError,
    MalformedFrame,
    MessageTooLarge,
    ServiceUnavailable,
    TlsVerificationError,
    TransportClosed,
    TransportError,
    UnsafeRedirect,
)
from acp_client.transports import CookieStore, TlsConfig
from acp_client.transports.base import Connector, Limits, Transport
from acp_client.transports.websocket import WebSocketConnector, WebSocketTransport
from tests.peers.python_sdk import PythonSdkPeer

from ._ws_servers import (
    PongingEcho,
    RawScript,
    RawServer,
    WsServer,
    header_value,
    http_response,
    server_frame,
    switching_protocols,
)

REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
GOOD = '{"jsonrpc":"2.0","method":"ping"}'

# --------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture
async def ws_server() -> AsyncIterator[WsServer]:
    server = await WsServer().start()
    yield server
    await server.stop()


@pytest.fixture
async def make_ws_server() -> AsyncIterator[Callable[..., Awaitable[WsServer]]]:
    servers: list[WsServer] = []

    async def make(**kwargs: object) -> WsServer:
        server = await WsServer(**kwargs).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.stop()


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[..., Awaitable[RawServer]]]:
    servers: list[RawServer] = []

    async def make(script: RawScript, **kwargs: object) -> RawServer:
        server = await RawServer(script, **kwargs).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.stop()


@pytest.fixture
async def opened() -> AsyncIterator[list[WebSocketTransport]]:
    """Transports to close at the end of the test, whatever happens."""
    transports: list[WebSocketTransport] = []
    yield transports
    for transport in transports:
        await transport.aclose()


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
# Round trip, handshake contents


async def test_connector_and_transport_satisfy_the_protocols(
    ws_server: WsServer, opened: list[WebSocketTransport]
) -> None:
    connector = WebSocketConnector(ws_server.url)
    assert isinstance(connector, Connector)
    assert isinstance(await connect(connector, opened), Transport)


async def test_round_trip(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    messages: list[dict[str, object] | list[object]] = [
        REQUEST,
        {"jsonrpc": "2.0", "method": "session/update", "params": {"text": 'héllo ✓ \u2028 "quoted"'}},
        [{"jsonrpc": "2.0", "id": 2, "method": "a"}, {"jsonrpc": "2.0", "id": 3, "method": "b"}],
        {"jsonrpc": "2.0", "id": "x", "result": {"big": "y" * 200_000}},
    ]
    for message in messages:
        await transport.send(message)
    for message in messages:
        assert await transport.receive() == message
    assert transport.info.kind == "websocket"
    assert transport.info.target == ws_server.url
    assert not transport.closed


async def test_frames_on_the_wire_are_compact_text(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    seen: list[str | bytes] = []

    async def record(connection: ServerConnection) -> None:
        seen.append(await connection.recv())
        await connection.wait_closed()

    ws_server.handler = record
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    await transport.send(REQUEST)
    await transport.aclose()
    assert seen == [json.dumps(REQUEST, separators=(",", ":"))]


async def test_connection_id_headers_and_subprotocol(
    make_ws_server: Callable[..., Awaitable[WsServer]], opened: list[WebSocketTransport]
) -> None:
    ws_server = await make_ws_server(subprotocols=["acp.v2", "other"])
    ws_server.response_headers = [("Acp-Connection-Id", "conn-42")]
    connector = WebSocketConnector(
        ws_server.url + "?tenant=a",
        headers={"Authorization": "Bearer token", "X-Client": "tests", "User-Agent": "my-editor/1.0"},
        subprotocols=["acp.v2", "acp.v1"],
    )
    transport = await connect(connector, opened)
    assert transport.info.connection_id == "conn-42"
    assert transport.subprotocol == "acp.v2"
    request = ws_server.requests[-1]
    assert request["Authorization"] == "Bearer token"
    assert request["X-Client"] == "tests"
    assert request.get_all("User-Agent") == ["my-editor/1.0"]
    assert request["Sec-WebSocket-Protocol"] == "acp.v2, acp.v1"
    assert ws_server.paths[-1] == "/acp?tenant=a"
    assert connector.target == ws_server.url  # no query, no credentials


async def test_no_connection_id_and_no_subprotocol(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    assert transport.info.connection_id is None
    assert transport.subprotocol is None
    assert "Sec-WebSocket-Protocol" not in ws_server.requests[-1]


async def test_http_scheme_is_mapped_and_credentials_are_not_in_the_target(ws_server: WsServer) -> None:
    connector = WebSocketConnector(f"http://user:secret@127.0.0.1:{ws_server.port}/acp?token=abc")
    assert connector.target == f"ws://127.0.0.1:{ws_server.port}/acp"
    assert "secret" not in repr(connector)


async def test_compression_can_be_disabled(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    await connect(WebSocketConnector(ws_server.url, compression=False), opened)
    assert "Sec-WebSocket-Extensions" not in ws_server.requests[-1]
    await connect(WebSocketConnector(ws_server.url), opened)
    assert "permessage-deflate" in ws_server.requests[-1]["Sec-WebSocket-Extensions"]


# --------------------------------------------------------------------------------------------
# Configuration is validated before anything touches the network


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Token": "abc\r\nInjected: 1"},
        {"X-Token": "abc\ndef"},
        {"X-Token": "abc\x00"},
        {"Bad\r\nName": "x"},
        {"Bad Name": "x"},
        {"Host": "evil.example"},
        {"Sec-WebSocket-Key": "x"},
        {"upgrade": "h2c"},
        {"X-Emoji": "\U0001f600"},
    ],
)
async def test_unsafe_headers_are_rejected_before_connecting(
    raw_server: Callable[..., Awaitable[RawServer]], headers: dict[str, str]
) -> None:
    server = await raw_server(handshake_then_silent)
    with pytest.raises(ConfigurationError) as info:
        WebSocketConnector(server.url, headers=headers)
    assert "Injected" not in str(info.value)
    assert server.heads == []


@pytest.mark.parametrize(
    ("url", "kwargs"),
    [
        ("ftp://127.0.0.1/acp", {}),
        ("ws:///acp", {}),
        ("ws://127.0.0.1/acp", {"subprotocols": "acp.v1"}),
        ("ws://127.0.0.1/acp", {"subprotocols": ["bad protocol"]}),
        ("ws://127.0.0.1/acp", {"subprotocols": [""]}),
        ("ws://127.0.0.1/acp", {"ping_interval": 0}),
        ("ws://127.0.0.1/acp", {"open_timeout": -1}),
        ("ws://127.0.0.1/acp", {"limits": Limits(max_message_bytes=0)}),
        ("wss://127.0.0.1/acp", {"tls": TlsConfig(ca_file="/nonexistent/ca.pem")}),
    ],
)
def test_invalid_configuration(url: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        WebSocketConnector(url, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Cookies


async def test_cookies_from_the_101_are_sent_on_the_next_connect(
    ws_server: WsServer, opened: list[WebSocketTransport]
) -> None:
    jar = CookieStore()
    ws_server.response_headers = [
        ("Set-Cookie", "route=backend-2; Path=/; HttpOnly"),
        ("Set-Cookie", "affinity=7; Path=/acp; Max-Age=3600"),
        ("Set-Cookie", "elsewhere=1; Path=/other"),
    ]
    connector = WebSocketConnector(ws_server.url, cookies=jar)
    first = await connect(connector, opened)
    assert "Cookie" not in ws_server.requests[-1]
    assert len(jar) == 3
    await first.aclose()
    ws_server.response_headers = []
    await connect(connector, opened)
    assert ws_server.requests[-1]["Cookie"] == "affinity=7; route=backend-2"


async def test_app_cookie_header_and_store_cookies_are_merged(
    ws_server: WsServer, opened: list[WebSocketTransport]
) -> None:
    jar = CookieStore()
    jar.capture(ws_server.url, ["lb=1; Path=/"])
    await connect(WebSocketConnector(ws_server.url, headers={"Cookie": "app=2"}, cookies=jar), opened)
    assert ws_server.requests[-1].get_all("Cookie") == ["app=2; lb=1"]


async def test_cookies_do_not_go_to_another_port_or_host(
    make_ws_server: Callable[..., Awaitable[WsServer]], opened: list[WebSocketTransport]
) -> None:
    first, second = await make_ws_server(), await make_ws_server()
    jar = CookieStore()
    first.response_headers = [("Set-Cookie", "route=first; Path=/")]
    await connect(WebSocketConnector(first.url, cookies=jar), opened)
    await connect(WebSocketConnector(second.url, cookies=jar), opened)
    assert "Cookie" not in second.requests[-1]
    # Same port, another host name (localhost vs 127.0.0.1) is another origin too.
    await connect(WebSocketConnector(first.url_for("/acp", host="localhost"), cookies=jar), opened)
    assert "Cookie" not in first.requests[-1]
    await connect(WebSocketConnector(first.url, cookies=jar), opened)
    assert first.requests[-1]["Cookie"] == "route=first"


async def test_secure_cookies_are_neither_accepted_nor_sent_over_ws(
    ws_server: WsServer, opened: list[WebSocketTransport]
) -> None:
    jar = CookieStore()
    ws_server.response_headers = [("Set-Cookie", "sec=1; Secure; Path=/")]
    await connect(WebSocketConnector(ws_server.url, cookies=jar), opened)
    assert len(jar) == 0
    # A Secure cookie for the TLS origin of the same host:port is not sent over plain ws.
    jar.capture(f"https://127.0.0.1:{ws_server.port}/acp", ["sec=1; Secure; Path=/"])
    ws_server.response_headers = []
    await connect(WebSocketConnector(ws_server.url, cookies=jar), opened)
    assert "Cookie" not in ws_server.requests[-1]


async def test_cookies_from_a_refused_handshake_are_captured(
    raw_server: Callable[..., Awaitable[RawServer]],
) -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(http_response(503, "Service Unavailable", [("Set-Cookie", "route=b3; Path=/")]))
        await writer.drain()

    server = await raw_server(refuse)
    jar = CookieStore()
    connector = WebSocketConnector(server.url, cookies=jar)
    with pytest.raises(ServiceUnavailable):
        await connector.connect()
    with pytest.raises(ServiceUnavailable):
        await connector.connect()
    assert header_value(server.heads[-1], "Cookie") == "route=b3"


# --------------------------------------------------------------------------------------------
# Inbound frames that are not JSON-RPC messages


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        "",
        '"a string"',
        "42",
        "null",
        "[" * 5000 + "]" * 5000,
        '{"jsonrpc":"2.0","id":' + "7" * 5000 + "}",
    ],
    ids=["invalid-json", "empty", "string", "bare-number", "null", "deep-nesting", "5000-digits"],
)
async def test_malformed_frames_are_reported_and_the_link_survives(
    ws_server: WsServer, opened: list[WebSocketTransport], bad: str
) -> None:
    ws_server.handler = sends(bad, GOOD)
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    with pytest.raises(MalformedFrame) as info:
        await transport.receive()
    assert len(info.value.excerpt) <= 200
    assert await transport.receive() == json.loads(GOOD)
    await transport.send(REQUEST)  # still usable both ways


async def test_binary_frame_is_reported_and_ignored(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    ws_server.handler = sends(b'{"jsonrpc":"2.0","method":"binary"}', GOOD)
    transport = await connect(WebSocketConnector(ws_server.url), opened)
    with pytest.raises(MalformedFrame, match="binary frame"):
        await transport.receive()
    assert await transport.receive() == json.loads(GOOD)


@pytest.mark.parametrize("compression", [True, False])
async def test_oversized_message_closes_with_1009(
    ws_server: WsServer, opened: list[WebSocketTransport], compression: bool
) -> None:
    closes: list[int | None] = []

    async def handler(connection: ServerConnection) -> None:
        await connection.send(GOOD)
        # Highly compressible: tiny on the wire with deflate, 10 KiB once decompressed.
        await connection.send('{"jsonrpc":"2.0","method":"x","params":{"pad":"' + "a" * 10_000 + '"}}')
        await connection.wait_closed()
        closes.append(connection.close_code)

    ws_server.handler = handler
    limits = Limits(max_message_bytes=4096)
    transport = await connect(WebSocketConnector(ws_server.url, limits=limits, compression=compression), opened)
    assert await transport.receive() == json.loads(GOOD)
    with pytest.raises(MessageTooLarge) as info:
        await transport.receive()
    assert info.value.limit == 4096
    with pytest.raises(TransportClosed, match="1009"):
        await transport.receive()
    with pytest.raises(TransportClosed) as closed:
        await transport.send(REQUEST)
    assert closed.value.maybe_delivered is False
    await _wait_for(lambda: bool(closes))
    assert closes == [1009]


async def test_message_at_the_limit_is_accepted(ws_server: WsServer, opened: list[WebSocketTransport]) -> None:
    body = '{"jsonrpc":"2.0","method":"x","params":{"pad":"'
    frame = body + "a" * (4096 - len(body) - 3) + '"}}'
    assert len(frame) == 4096
    ws_server.handler = sends(frame)
    transport = await connect(WebSocketConnector(ws_server.url, limits=Limits(max_message_bytes=4096)), opened)
    assert (await transport.receive())["method"] == "x"  # type: ignore[call-overload]


async def test_oversized_message_from_a_server_that_then_goes_silent(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head) + server_frame(1, b'"' + b"x" * 5000 + b'"'))
        await writer.drain()
        while await reader.read(65536):
            pass  # never answers the close frame, never closes TCP

    server = await raw_server(script)
    connector = WebSocketConnector(
        server.url, limits=Limits(max_message_bytes=1000), close_timeout=0.3, compression=False
    )
    transport = await connect(connector, opened)
    start = time.monotonic()
    with pytest.raises(MessageTooLarge):
        await asyncio.wait_for(transport.receive(), 5)
    assert elapsed_since(start) < 3
    with pytest.raises(TransportClosed):
        await transport.receive()


async def test_invalid_utf8_text_frame_ends_the_link_with_a_clear_reason(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head) + server_frame(1, b"\xff\xfe"))
        await writer.drain()
        await reader.read(65536)  # the client's close frame; then hang up

    server = await raw_server(script)
    transport = await connect(WebSocketConnector(server.url, compression=False, close_timeout=0.5), opened)
    with pytest.raises(TransportClosed, match="1007"):
        await asyncio.wait_for(transport.receive(), 5)


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
    await _wait_for(lambda: transport.closed)
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
    await _wait_for(lambda: script.pings >= 4)
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
    await _wait_for(lambda: bool(codes))
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


# --------------------------------------------------------------------------------------------
# Handshake failures


def _answer(status: int, phrase: str, headers: Sequence[tuple[str, str]] = (), body: bytes = b"") -> RawScript:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(http_response(status, phrase, headers, body))
        await writer.drain()

    return script


@pytest.mark.parametrize(
    ("status", "phrase", "headers", "error", "retry_after"),
    [
        (401, "Unauthorized", [("WWW-Authenticate", "Bearer")], AuthenticationFailed, None),
        (403, "Forbidden", [], AuthenticationFailed, None),
        (503, "Service Unavailable", [("Retry-After", "7")], ServiceUnavailable, 7.0),
        (429, "Too Many Requests", [("Retry-After", "120")], ServiceUnavailable, 120.0),
        (503, "Service Unavailable", [], ServiceUnavailable, None),
        (503, "Service Unavailable", [("Retry-After", "soon")], ServiceUnavailable, None),
        (404, "Not Found", [], HttpStatusError, None),
        (500, "Internal Server Error", [], HttpStatusError, None),
        (200, "OK", [], HttpStatusError, None),
        (302, "Found", [], HttpStatusError, None),  # a redirect without Location
    ],
)
async def test_http_status_on_the_handshake(
    raw_server: Callable[..., Awaitable[RawServer]],
    status: int,
    phrase: str,
    headers: list[tuple[str, str]],
    error: type[HttpStatusError],
    retry_after: float | None,
) -> None:
    server = await raw_server(_answer(status, phrase, headers, b"go away"))
    with pytest.raises(HttpStatusError) as info:
        await WebSocketConnector(server.url).connect()
    assert type(info.value) is error
    assert info.value.status == status
    assert info.value.retry_after == retry_after
    assert info.value.body == "go away"


async def test_retry_after_as_an_http_date(raw_server: Callable[..., Awaitable[RawServer]]) -> None:
    from email.utils import formatdate

    when = formatdate(time.time() + 60, usegmt=True)
    server = await raw_server(_answer(503, "Service Unavailable", [("Retry-After", when)]))
    with pytest.raises(ServiceUnavailable) as info:
        await WebSocketConnector(server.url).connect()
    assert info.value.retry_after is not None
    assert 50 <= info.value.retry_after <= 61


async def test_connection_refused() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConnectError) as info:
        await WebSocketConnector(f"ws://127.0.0.1:{port}/acp").connect()
    assert type(info.value) is ConnectError
    assert info.value.maybe_delivered is False


async def test_open_timeout(raw_server: Callable[..., Awaitable[RawServer]]) -> None:
    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        await reader.read()

    server = await raw_server(never_answer)
    start = time.monotonic()
    with pytest.raises(ConnectError, match="timed out"):
        await WebSocketConnector(server.url, open_timeout=0.3).connect()
    assert elapsed_since(start) < 2


async def test_garbage_instead_of_http(raw_server: Callable[..., Awaitable[RawServer]]) -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()

    server = await raw_server(garbage)
    with pytest.raises(ConnectError, match="handshake"):
        await WebSocketConnector(server.url).connect()


async def test_subprotocol_refused_by_the_server(raw_server: Callable[..., Awaitable[RawServer]]) -> None:
    async def wrong_protocol(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head, [("Sec-WebSocket-Protocol", "other")]))
        await writer.drain()

    server = await raw_server(wrong_protocol)
    with pytest.raises(ConnectError):
        await WebSocketConnector(server.url, subprotocols=["acp.v1"]).connect()


# --------------------------------------------------------------------------------------------
# Redirects


def _redirect_then_accept(location: str, *, status: int = 302, cookie: str | None = None) -> RawScript:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        path = head.split(b" ")[1].decode()
        if path == "/acp":
            headers = [("Location", location)]
            if cookie is not None:
                headers.append(("Set-Cookie", cookie))
            writer.write(http_response(status, "Redirect", headers))
            await writer.drain()
        else:
            await handshake_then_eof_on_input(reader, writer, head)

    return script


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_same_origin_redirect_is_followed(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport], status: int
) -> None:
    server = await raw_server(_redirect_then_accept("/v2/acp", status=status, cookie="moved=1; Path=/"))
    jar = CookieStore()
    connector = WebSocketConnector(
        server.url, headers={"Authorization": "Bearer t"}, cookies=jar, compression=False, close_timeout=0.5
    )
    transport = await connect(connector, opened)
    assert transport.info.target == f"ws://127.0.0.1:{server.port}/v2/acp"
    assert len(server.heads) == 2
    second = server.heads[1]
    assert second.startswith(b"GET /v2/acp ")
    assert header_value(second, "Authorization") == "Bearer t"
    assert header_value(second, "Cookie") == "moved=1"


async def test_absolute_same_origin_redirect_with_http_scheme(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    holder: list[RawServer] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        await _redirect_then_accept(f"http://127.0.0.1:{holder[0].port}/next")(reader, writer, head)

    holder.append(await raw_server(script))
    transport = await connect(WebSocketConnector(holder[0].url, compression=False, close_timeout=0.5), opened)
    assert transport.info.target.endswith("/next")


async def test_cross_origin_redirect_is_refused_and_sends_nothing_there(
    raw_server: Callable[..., Awaitable[RawServer]],
) -> None:
    elsewhere = await raw_server(handshake_then_eof_on_input)
    server = await raw_server(_redirect_then_accept(elsewhere.url))
    jar = CookieStore()
    jar.capture(server.url, ["route=1; Path=/"])
    connector = WebSocketConnector(
        server.url,
        headers={"Authorization": "Bearer secret", "X-Api-Key": "k"},
        secret_headers=["X-Api-Key"],
        cookies=jar,
    )
    with pytest.raises(UnsafeRedirect) as info:
        await connector.connect()
    assert info.value.maybe_delivered is False
    assert elsewhere.heads == []  # not even a connection attempt carrying credentials


async def test_redirect_to_another_host_name_is_refused(
    raw_server: Callable[..., Awaitable[RawServer]],
) -> None:
    holder: list[RawServer] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        await _redirect_then_accept(f"ws://localhost:{holder[0].port}/next")(reader, writer, head)

    holder.append(await raw_server(script))
    with pytest.raises(UnsafeRedirect):
        await WebSocketConnector(holder[0].url).connect()
    assert len(holder[0].heads) == 1


@pytest.mark.parametrize("location", ["ftp://127.0.0.1/x", "javascript:alert(1)", "ws://[bad/"])
async def test_redirect_to_nonsense_is_refused(raw_server: Callable[..., Awaitable[RawServer]], location: str) -> None:
    server = await raw_server(_redirect_then_accept(location))
    with pytest.raises(UnsafeRedirect):
        await WebSocketConnector(server.url).connect()


async def test_redirect_from_wss_to_ws_is_refused(
    raw_server: Callable[..., Awaitable[RawServer]], ca: trustme.CA
) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    holder: list[RawServer] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        # Same host and port, but a downgrade to plain ws://.
        await _redirect_then_accept(f"ws://127.0.0.1:{holder[0].port}/next")(reader, writer, head)

    holder.append(await raw_server(script, ssl_context=context))
    tls = TlsConfig(ca_data=ca.cert_pem.bytes().decode())
    connector = WebSocketConnector(holder[0].url, headers={"Authorization": "Bearer t"}, tls=tls)
    assert connector.target.startswith("wss://")
    with pytest.raises(UnsafeRedirect, match="another origin"):
        await connector.connect()
    assert len(holder[0].heads) == 1


async def test_redirect_loop_is_bounded(raw_server: Callable[..., Awaitable[RawServer]]) -> None:
    server = await raw_server(_answer(302, "Found", [("Location", "/acp")]))
    with pytest.raises(UnsafeRedirect, match="redirects"):
        await WebSocketConnector(server.url).connect()
    assert 2 <= len(server.heads) <= 10


# --------------------------------------------------------------------------------------------
# TLS


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def tls_server(ca: trustme.CA) -> AsyncIterator[WsServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    server = await WsServer(ssl_context=context).start()
    yield server
    await server.stop()


async def test_tls_verified_with_the_ca(tls_server: WsServer, ca: trustme.CA, opened: list[WebSocketTransport]) -> None:
    tls = TlsConfig(ca_data=ca.cert_pem.bytes().decode())
    transport = await connect(WebSocketConnector(tls_server.url, tls=tls), opened)
    assert tls_server.url.startswith("wss://")
    await transport.send(REQUEST)
    assert await transport.receive() == REQUEST


async def test_tls_ca_file(
    tls_server: WsServer, ca: trustme.CA, opened: list[WebSocketTransport], tmp_path: Path
) -> None:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    await connect(WebSocketConnector(tls_server.url, tls=TlsConfig(ca_file=str(path))), opened)


async def test_tls_untrusted_certificate_is_fatal(tls_server: WsServer) -> None:
    with pytest.raises(TlsVerificationError) as info:
        await WebSocketConnector(tls_server.url).connect()
    assert "certificate" in str(info.value)
    assert tls_server.requests == []


async def test_tls_verify_off_for_one_connector_does_not_affect_another(
    tls_server: WsServer, opened: list[WebSocketTransport]
) -> None:
    insecure = WebSocketConnector(tls_server.url, tls=TlsConfig(verify=False))
    default = WebSocketConnector(tls_server.url)
    await connect(insecure, opened)
    with pytest.raises(TlsVerificationError):
        await default.connect()
    await connect(insecure, opened)
    with pytest.raises(TlsVerificationError):
        await WebSocketConnector(tls_server.url).connect()


async def test_tls_certificate_for_another_host_name_fails_verification(ca: trustme.CA) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("agent.example").configure_cert(context)
    server = await WsServer(ssl_context=context).start()
    try:
        tls = TlsConfig(ca_data=ca.cert_pem.bytes().decode())
        with pytest.raises(TlsVerificationError):
            await WebSocketConnector(server.url, tls=tls).connect()
    finally:
        await server.stop()


async def test_secure_cookie_is_sent_over_wss(
    tls_server: WsServer, ca: trustme.CA, opened: list[WebSocketTransport]
) -> None:
    jar = CookieStore()
    tls_server.response_headers = [("Set-Cookie", "__Host-route=z; Secure; Path=/")]
    connector = WebSocketConnector(tls_server.url, cookies=jar, tls=TlsConfig(ca_data=ca.cert_pem.bytes().decode()))
    await connect(connector, opened)
    assert len(jar) == 1
    await connect(connector, opened)
    assert tls_server.requests[-1]["Cookie"] == "__Host-route=z"


# --------------------------------------------------------------------------------------------
# Secrets never reach the logs


async def test_secrets_are_absent_from_logs(
    ws_server: WsServer, opened: list[WebSocketTransport], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    jar = CookieStore()
    jar.capture(ws_server.url, ["stored=SECRET-COOKIE; Path=/"])
    ws_server.response_headers = [("Set-Cookie", "fresh=SECRET-SET-COOKIE; Path=/"), ("Acp-Connection-Id", "c-1")]
    connector = WebSocketConnector(
        f"ws://user:SECRET-PASSWORD@127.0.0.1:{ws_server.port}/acp",
        headers={"Authorization": "Bearer SECRET-TOKEN", "X-Api-Key": "SECRET-KEY", "X-Trace": "visible-trace"},
        secret_headers=["x-api-key"],
        cookies=jar,
    )
    transport = await connect(connector, opened)
    await transport.send(REQUEST)
    await transport.receive()
    await transport.aclose()
    ours = [record for record in caplog.records if not record.name.startswith("websockets.server")]
    text = "\n".join(record.getMessage() for record in ours)
    assert "visible-trace" in text  # the headers were logged, just not the secret ones
    assert "c-1" in text
    assert "SECRET" not in text
    # And the secrets did go on the wire.
    request = ws_server.requests[-1]
    assert request["Authorization"] == "Bearer SECRET-TOKEN"
    assert request["X-Api-Key"] == "SECRET-KEY"
    assert request["Cookie"] == "stored=SECRET-COOKIE"


async def test_a_query_string_token_is_absent_from_the_handshake_log(
    ws_server: WsServer, opened: list[WebSocketTransport], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    connector = WebSocketConnector(f"ws://127.0.0.1:{ws_server.port}/acp?token=SECRET-QUERY")
    transport = await connect(connector, opened)
    await transport.aclose()
    ours = [record for record in caplog.records if not record.name.startswith("websockets.server")]
    text = "\n".join(record.getMessage() for record in ours)
    assert "> GET /acp" in text  # the request line was logged, without its query
    assert "SECRET" not in text


async def test_handshake_errors_do_not_leak_the_url_credentials(
    raw_server: Callable[..., Awaitable[RawServer]],
) -> None:
    server = await raw_server(_answer(401, "Unauthorized"))
    with pytest.raises(AuthenticationFailed) as info:
        await WebSocketConnector(f"ws://u:SECRET@127.0.0.1:{server.port}/acp?token=SECRET").connect()
    assert "SECRET" not in str(info.value)


# --------------------------------------------------------------------------------------------
# Helpers


async def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------------------------------
# The official ACP Python SDK's server as an independent peer


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "tests", "version": "0"}},
}


@pytest.mark.parametrize("secure", [False, True], ids=["ws", "wss"])
async def test_initialize_against_the_python_sdk_server(
    python_sdk_peer: PythonSdkPeer, opened: list[WebSocketTransport], secure: bool
) -> None:
    if secure:
        connector = WebSocketConnector(python_sdk_peer.wss_url, tls=TlsConfig(ca_file=python_sdk_peer.ca_file))
    else:
        connector = WebSocketConnector(python_sdk_peer.ws_url)
    transport = await connect(connector, opened)
    assert transport.info.connection_id  # the SDK names the connection in its 101 answer
    await transport.send(INITIALIZE)
    answer = await asyncio.wait_for(transport.receive(), 10)
    assert isinstance(answer, dict)
    assert answer["id"] == 0
    assert answer["result"]["protocolVersion"] == 1
    assert answer["result"]["agentCapabilities"]["loadSession"] is True
    # A request the agent does not know comes back as a JSON-RPC error on the same link.
    await transport.send({"jsonrpc": "2.0", "id": 1, "method": "no/such_method", "params": {}})
    error = await asyncio.wait_for(transport.receive(), 10)
    assert isinstance(error, dict)
    assert error["id"] == 1
    assert error["error"]["code"] == -32601
