"""The WebSocket handshake: HTTP statuses and failures, redirects, TLS, and secrets kept out of logs."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import pytest
import trustme

from acp_client.exceptions import (
    AuthenticationFailed,
    ConnectError,
    HttpStatusError,
    ServiceUnavailable,
    TlsVerificationError,
    UnsafeRedirect,
)
from acp_client.transports import CookieStore, TlsConfig
from acp_client.transports.websocket import WebSocketConnector, WebSocketTransport
from tests.transports._ws_support import REQUEST, connect, elapsed_since, handshake_then_eof_on_input

from ._ws_servers import RawScript, RawServer, WsServer, header_value, http_response, switching_protocols

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
