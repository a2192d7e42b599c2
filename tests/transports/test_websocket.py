"""The WebSocket transport against real loopback servers: round trips and handshake contents,
configuration checks, cookies, inbound frames that are not JSON-RPC messages.

Servers: ``websockets``' own (:class:`~tests.transports._ws_servers.WsServer`) and raw asyncio scripts
(:class:`~tests.transports._ws_servers.RawServer`) for what a real server would never send.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import pytest
from websockets.asyncio.server import ServerConnection

from acp_client.exceptions import (
    ConfigurationError,
    MalformedFrame,
    MessageTooLarge,
    ServiceUnavailable,
    TransportClosed,
)
from acp_client.transports import CookieStore, TlsConfig
from acp_client.transports.base import Connector, Limits, Transport
from acp_client.transports.websocket import WebSocketConnector, WebSocketTransport
from tests._support import eventually
from tests.transports._ws_support import GOOD, REQUEST, connect, elapsed_since, handshake_then_silent, sends

from ._ws_servers import RawServer, WsServer, header_value, http_response, server_frame, switching_protocols

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
    await eventually(lambda: bool(closes))
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


def _note(index: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "n", "params": {"i": index}}).encode()


async def test_binary_frames_and_fragments_keep_the_order_of_messages(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        fragmented = _note(3)
        writer.write(
            switching_protocols(head)
            + server_frame(1, _note(0))
            + server_frame(1, _note(1))
            + server_frame(2, _note(2))
            + server_frame(1, fragmented[:10], fin=False)
            + server_frame(0, fragmented[10:])
            + server_frame(1, _note(4))
        )
        await writer.drain()
        await reader.read(65536)

    server = await raw_server(script)
    transport = await connect(WebSocketConnector(server.url, compression=False), opened)
    assert [(await transport.receive())["params"]["i"] for _ in range(2)] == [0, 1]  # type: ignore[call-overload]
    with pytest.raises(MalformedFrame, match="binary frame"):
        await transport.receive()
    assert [(await transport.receive())["params"]["i"] for _ in range(2)] == [3, 4]  # type: ignore[call-overload]


async def test_a_burst_pauses_reading_until_the_client_catches_up(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head) + b"".join(server_frame(1, _note(i)) for i in range(300)))
        await writer.drain()
        await reader.read(65536)

    server = await raw_server(script)
    transport = await connect(WebSocketConnector(server.url, compression=False), opened)
    socket_transport = transport._ws.transport
    await eventually(lambda: not socket_transport.is_reading())  # more than max_queue (16) waiting
    received = [(await transport.receive())["params"]["i"] for _ in range(300)]  # type: ignore[call-overload]
    assert received == list(range(300))
    assert socket_transport.is_reading()  # resumed once few enough were waiting


async def test_messages_already_read_come_before_the_end_of_the_link(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head) + b"".join(server_frame(1, _note(i)) for i in range(3)))
        await writer.drain()
        writer.close()  # no closing handshake: a drop

    server = await raw_server(script)
    transport = await connect(WebSocketConnector(server.url, compression=False), opened)
    await eventually(lambda: transport.closed)
    assert [(await transport.receive())["params"]["i"] for _ in range(3)] == [0, 1, 2]  # type: ignore[call-overload]
    with pytest.raises(TransportClosed, match="1006"):
        await asyncio.wait_for(transport.receive(), 5)


async def test_a_frame_over_the_cap_is_refused_on_its_header(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    """Only the header of a 1 GiB frame arrives: the client refuses it (1009) without waiting for the payload."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head) + bytes([0x81, 127]) + (1 << 30).to_bytes(8, "big") + b"{")
        await writer.drain()
        while await reader.read(65536):
            pass

    server = await raw_server(script)
    connector = WebSocketConnector(server.url, limits=Limits(max_message_bytes=1000), close_timeout=0.3)
    transport = await connect(connector, opened)
    start = time.monotonic()
    with pytest.raises(MessageTooLarge):
        await asyncio.wait_for(transport.receive(), 5)
    assert elapsed_since(start) < 3


async def test_a_masked_frame_from_the_agent_fails_the_link_with_1002(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        good = server_frame(1, _note(0))
        masked = bytes([0x81, 0x80 | 2]) + b"\x00\x00\x00\x00" + b"{}"  # a server must never mask
        writer.write(switching_protocols(head) + good + masked)
        await writer.drain()
        await reader.read(65536)

    server = await raw_server(script)
    transport = await connect(WebSocketConnector(server.url, close_timeout=0.3), opened)
    assert (await transport.receive())["params"]["i"] == 0  # type: ignore[call-overload]
    with pytest.raises(TransportClosed, match="1002"):
        await asyncio.wait_for(transport.receive(), 5)


async def test_a_frame_cut_short_by_the_end_of_tcp_is_a_drop(
    raw_server: Callable[..., Awaitable[RawServer]], opened: list[WebSocketTransport]
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        writer.write(switching_protocols(head) + server_frame(1, _note(0))[:-3])
        await writer.drain()
        writer.close()

    server = await raw_server(script)
    transport = await connect(WebSocketConnector(server.url), opened)
    with pytest.raises(TransportClosed, match="1006"):
        await asyncio.wait_for(transport.receive(), 5)
