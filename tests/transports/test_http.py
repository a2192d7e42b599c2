"""The Streamable HTTP transport against real loopback servers (hypercorn, in-process).

Peers: :class:`~tests.transports._http_servers.FakeAcpServer` in both official dialects (and
misbehaving on demand), and the official ACP Python SDK's own ASGI app with a tiny agent.
"""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import json
import logging
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trustme

from acp_client._jsonrpc import notification_message, request_message
from acp_client.exceptions import (
    AuthenticationFailed,
    BatchNotSupported,
    ConfigurationError,
    ConnectError,
    HttpStatusError,
    MalformedFrame,
    MessageTooLarge,
    MissingHeader,
    NotAcceptable,
    ProtocolError,
    ServiceUnavailable,
    TlsVerificationError,
    TransportClosed,
    TransportError,
    UnknownConnection,
    UnknownSession,
    UnsafeRedirect,
    UnsupportedMediaType,
)
from acp_client.transports import CookieStore, TlsConfig
from acp_client.transports import http as http_module
from acp_client.transports._security import parse_retry_after
from acp_client.transports.base import Connector, Limits, Transport
from acp_client.transports.http import HttpConnector, HttpTransport

from ._http_servers import END, App, FakeAcpServer, Hypercorn, Recorded, Reply

SECRET = "Bearer s3cr3t-token-value"
SECRET_API_KEY = "key-0123456789abcdef"


# --------------------------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="session")
def certfile(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tls") / "server.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def trusted(ca: trustme.CA) -> TlsConfig:
    return TlsConfig(ca_data=ca.cert_pem.bytes().decode())


Serve = Callable[..., Awaitable[Hypercorn]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[Hypercorn] = []

    async def start(app: App, **kwargs: Any) -> Hypercorn:
        server = await Hypercorn(app, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        await server.stop()


Link = Callable[..., Awaitable[HttpTransport]]


@pytest.fixture
async def link(serve: Serve) -> AsyncIterator[Link]:
    """Open transports (closed at teardown, before the servers stop)."""
    opened: list[HttpTransport] = []

    async def open_link(
        url_or_connector: str | HttpConnector, *, initialize: bool = True, **kwargs: Any
    ) -> HttpTransport:
        connector = (
            url_or_connector
            if isinstance(url_or_connector, HttpConnector)
            else HttpConnector(url_or_connector, **kwargs)
        )
        transport = await connector.connect()
        opened.append(transport)
        if initialize:
            await init(transport)
        return transport

    yield open_link
    for transport in opened:
        await transport.aclose()


@pytest.fixture
async def fake(serve: Serve) -> tuple[FakeAcpServer, Hypercorn]:
    app = FakeAcpServer("python")
    return app, await serve(app)


@pytest.fixture
async def fake_ts(serve: Serve) -> tuple[FakeAcpServer, Hypercorn]:
    app = FakeAcpServer("typescript")
    return app, await serve(app)


async def init(transport: Transport) -> dict[str, Any]:
    await transport.send(request_message(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
    answer = await recv(transport)
    assert answer["id"] == 0 and "result" in answer
    return answer


async def recv(transport: Transport, timeout: float = 5.0) -> Any:
    return await asyncio.wait_for(transport.receive(), timeout)


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` until it holds (a deadline, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


async def collect_until_response(transport: Transport, request_id: Any, *, reply: bool = True) -> list[Any]:
    """Receive until the response to ``request_id``; answers agent requests on the way."""
    seen: list[Any] = []
    while True:
        message = await recv(transport)
        seen.append(message)
        if "method" in message and "id" in message and reply:
            await transport.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": "ok"}})
        if message.get("id") == request_id and "method" not in message:
            return seen


async def new_session(transport: Transport, request_id: int = 1) -> str:
    await transport.send(request_message(request_id, "session/new", {"cwd": "/", "mcpServers": []}))
    answer = await recv(transport)
    assert answer["id"] == request_id
    return str(answer["result"]["sessionId"])


def texts(messages: list[Any]) -> list[str]:
    return [m["params"]["update"]["content"]["text"] for m in messages if m.get("method") == "session/update"]


def hook_once(predicate: Callable[[Recorded], bool], reply: Reply) -> Callable[[Recorded], Reply | None]:
    fired: list[bool] = []

    def hook(record: Recorded) -> Reply | None:
        if not fired and predicate(record):
            fired.append(True)
            return reply
        return None

    return hook


def is_rpc(method: str) -> Callable[[Recorded], bool]:
    return lambda record: record.method == "POST" and record.rpc_method == method


def json_reply(status: int, value: Any, headers: list[tuple[str, str]] | None = None) -> Reply:
    return Reply(status, [("content-type", "application/json"), *(headers or [])], json.dumps(value).encode())


# --------------------------------------------------------------------------------------------
# the happy path, both dialects, every HTTP version


def test_connector_and_transport_implement_the_protocols() -> None:
    connector = HttpConnector("https://user-free.example:8443/acp?token=abc")
    assert isinstance(connector, Connector)
    assert connector.target == "https://user-free.example:8443/acp"  # no query string: safe to log


async def test_python_dialect_full_flow(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    app.ask_permission = True
    transport = await link(server.url, headers={"Authorization": SECRET})
    assert isinstance(transport, Transport)
    assert transport.info.kind == "http"
    assert transport.info.connection_id == app.connection.id
    assert transport.info.http_version == "HTTP/1.1"
    sid = await new_session(transport)

    await transport.send(request_message(2, "session/status", {"sessionId": sid}))
    assert (await recv(transport)) == {"jsonrpc": "2.0", "id": 2, "result": {"status": "active"}}

    await transport.send(request_message(3, "session/prompt", {"sessionId": sid, "prompt": []}))
    seen = await collect_until_response(transport, 3)
    assert texts(seen) == ["chunk 0", "chunk 1", "chunk 2"]
    assert seen[-1]["result"] == {"stopReason": "end_turn"}
    assert app.permission_answers and app.permission_answers[0]["result"] == {"outcome": "ok"}

    await transport.send(notification_message("session/cancel", {"sessionId": sid}))
    await transport.aclose()
    await transport.aclose()  # idempotent

    posts = app.of("POST")
    assert [p.headers.get("acp-connection-id") for p in posts] == [None] + [app.connection.id] * (len(posts) - 1)
    by_method = {p.rpc_method or "reply": p.headers.get("acp-session-id") for p in posts}
    assert by_method == {
        "initialize": None,
        "session/new": None,
        "session/status": None,  # the Python server would 404 it before establishment: not sent
        "session/prompt": sid,
        "reply": sid,  # the permission request came on the session stream
        "session/cancel": sid,
    }
    gets = app.of("GET")
    assert [g.headers.get("acp-session-id") for g in gets] == [None, sid]
    assert all(g.headers["accept"] == "text/event-stream" for g in gets)
    assert all(r.headers.get("authorization") == SECRET for r in app.requests)
    deletes = app.of("DELETE")
    assert len(deletes) == 1 and deletes[0].headers["acp-connection-id"] == app.connection.id
    with pytest.raises(TransportClosed):
        await transport.receive()
    with pytest.raises(TransportClosed) as closed:
        await transport.send(request_message(9, "session/status", {"sessionId": sid}))
    assert closed.value.maybe_delivered is False


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
async def test_typescript_dialect_full_flow(fake_ts: tuple[FakeAcpServer, Hypercorn], link: Link, http2: bool) -> None:
    app, server = fake_ts
    app.ask_permission = True
    connector = HttpConnector(server.url, http2=http2)
    first = await link(connector)
    assert first.info.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    sid = await new_session(first)
    await first.aclose()

    # A new connection: everything naming the session needs Acp-Session-Id on this server.
    transport = await link(connector)
    await transport.send(request_message(1, "session/status", {"sessionId": sid}))
    assert (await recv(transport))["result"] == {"status": "active"}
    await transport.send(request_message(2, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
    seen = await collect_until_response(transport, 2)
    # The answer comes on the connection stream, the replay on the session stream: across two
    # streams, arrival order is not guaranteed (the connection layer must not rely on it).
    while len(texts(seen)) < 2:
        seen.append(await recv(transport))
    assert texts(seen) == ["replay 1", "replay 2"]
    await transport.send(request_message(3, "session/status", {"sessionId": sid}))
    assert (await recv(transport))["id"] == 3
    await transport.send(request_message(4, "session/prompt", {"sessionId": sid, "prompt": []}))
    seen = await collect_until_response(transport, 4)
    assert texts(seen) == ["chunk 0", "chunk 1", "chunk 2"]
    assert app.permission_answers

    conn = app.connection.id
    posts = [p for p in app.of("POST") if p.headers.get("acp-connection-id") == conn]
    trail = [(p.rpc_method or "reply", p.headers.get("acp-session-id")) for p in posts]
    assert trail == [
        ("session/status", None),  # 400 "Missing Acp-Session-Id": the dialect is learned once...
        ("session/status", sid),
        ("session/load", sid),  # ...and remembered for the connection
        ("session/status", sid),
        ("session/prompt", sid),
        ("reply", sid),
    ]


async def test_tls_with_alpn_h2_and_http1(serve: Serve, link: Link, certfile: str, trusted: TlsConfig) -> None:
    app = FakeAcpServer("python")
    server = await serve(app, certfile=certfile)
    h2 = await link(server.url, tls=trusted)
    assert h2.info.http_version == "HTTP/2"
    sid = await new_session(h2)
    await h2.send(request_message(2, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert texts(await collect_until_response(h2, 2)) == ["chunk 0", "chunk 1", "chunk 2"]
    h1 = await link(server.url, tls=trusted, http2=False)
    assert h1.info.http_version == "HTTP/1.1"


async def test_tls_is_verified_by_default(serve: Serve, link: Link, certfile: str) -> None:
    app = FakeAcpServer("python")
    server = await serve(app, certfile=certfile)
    transport = await link(server.url, initialize=False)
    with pytest.raises(TlsVerificationError) as caught:
        await init(transport)
    assert caught.value.maybe_delivered is False
    assert app.requests == []
    with pytest.raises(TransportClosed):
        await transport.receive()


def test_each_connector_has_its_own_ssl_context(trusted: TlsConfig) -> None:
    one = HttpConnector("https://127.0.0.1:1/acp")
    two = HttpConnector("https://127.0.0.1:1/acp", tls=trusted)
    assert one._ssl is not None and two._ssl is not None and one._ssl is not two._ssl
    assert one._ssl.verify_mode == ssl.CERT_REQUIRED and one._ssl.check_hostname
    assert HttpConnector("http://127.0.0.1:1/acp")._ssl is None


# --------------------------------------------------------------------------------------------
# the session-stream quirk of the Python server


async def test_session_get_before_establishment_is_reopened_after_it(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    app.load_establishes = True
    connector = HttpConnector(server.url)
    first = await link(connector)
    sid = await new_session(first)
    await first.aclose()

    transport = await link(connector)
    # Before session/load this connection does not know the session: the POST is refused (typed),
    # and the session GET the transport opened for it is answered 404 too.
    with pytest.raises(UnknownSession) as refused:
        await transport.send(request_message(1, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert refused.value.maybe_delivered is False
    conn = app.connection
    await until(lambda: any(g.headers.get("acp-session-id") == sid for g in app.of("GET")))

    await transport.send(request_message(2, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
    seen = await collect_until_response(transport, 2)
    assert texts(seen) == ["replay 1", "replay 2"]  # on the connection stream: accepted there too
    await until(lambda: conn.sessions.get(sid) is not None and conn.sessions[sid].receivers == 1)

    await transport.send(request_message(3, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert texts(await collect_until_response(transport, 3)) == ["chunk 0", "chunk 1", "chunk 2"]
    assert not transport.closed


async def test_persisting_unknown_session_becomes_a_typed_error(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake  # load does not establish the session (the official 0.12.1 behaviour)
    connector = HttpConnector(server.url, session_stream_retries=1)
    first = await link(connector)
    sid = await new_session(first)
    await first.aclose()

    transport = await link(connector)
    await transport.send(request_message(1, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
    await collect_until_response(transport, 1)
    await until(lambda: sid in transport._session_errors)
    session_gets = [
        g
        for g in app.of("GET")
        if g.headers.get("acp-session-id") == sid and g.headers["acp-connection-id"] == app.connection.id
    ]
    assert len(session_gets) == 2  # the first attempt and one quick retry
    before = len(app.requests)
    with pytest.raises(UnknownSession) as caught:
        await transport.send(request_message(2, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert caught.value.maybe_delivered is False and caught.value.status == 404
    assert len(app.requests) == before  # refused locally: it would never be answered
    assert not transport.closed  # the connection itself is fine
    await transport.send(request_message(3, "session/status", {"sessionId": sid}))
    assert (await recv(transport))["id"] == 3


async def test_dialect_falls_back_when_the_session_header_is_refused(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    first = await link(server.url)
    sid = await new_session(first)
    transport = await link(server.url)

    # A 400 naming the session id teaches the transport to send Acp-Session-Id...
    def hook(record: Recorded) -> Reply | None:
        if record.rpc_method != "x/probe":
            return None
        if "acp-session-id" not in record.headers:
            return Reply(400, [("content-type", "text/plain")], b"Missing Acp-Session-Id")
        return Reply(202)

    app.hook = hook
    await transport.send(request_message(1, "x/probe", {"sessionId": sid}))
    # ...then a 404 "unknown session" for it (this Python server has not established the
    # session on this connection) makes it retry without, and remember that.
    await transport.send(request_message(2, "session/status", {"sessionId": sid}))
    assert (await recv(transport))["result"] == {"status": "active"}
    await transport.send(request_message(3, "session/status", {"sessionId": sid}))
    assert (await recv(transport))["id"] == 3
    trail = [
        (p.rpc_method, p.headers.get("acp-session-id"))
        for p in app.of("POST")
        if p.headers.get("acp-connection-id") == app.connection.id
    ]
    assert trail == [
        ("x/probe", None),
        ("x/probe", sid),
        ("session/status", sid),
        ("session/status", None),
        ("session/status", None),
    ]


# --------------------------------------------------------------------------------------------
# HTTP statuses -> typed errors


def _date_in(seconds: float) -> str:
    return email.utils.formatdate(time.time() + seconds, usegmt=True)


STATUS_CASES = [
    (400, [], b"Missing session id header", MissingHeader, False),
    (401, [], b"", AuthenticationFailed, False),
    (403, [], b"nope", AuthenticationFailed, False),
    (404, [], b"Unknown session id", UnknownSession, False),
    (406, [], b"", NotAcceptable, False),
    (415, [], b"", UnsupportedMediaType, False),
    (501, [], b"", BatchNotSupported, False),
    (429, [("retry-after", "7")], b"slow down", ServiceUnavailable, False),
    (503, [], b"", ServiceUnavailable, False),
    (418, [], b"teapot", HttpStatusError, False),
    (500, [], b"boom", HttpStatusError, True),
    (502, [], b"", HttpStatusError, True),
]


@pytest.mark.parametrize(("status", "headers", "body", "error", "maybe_delivered"), STATUS_CASES)
async def test_post_status_mapping(
    fake: tuple[FakeAcpServer, Hypercorn],
    link: Link,
    status: int,
    headers: list[tuple[str, str]],
    body: bytes,
    error: type[Exception],
    maybe_delivered: bool,
) -> None:
    app, server = fake
    transport = await link(server.url)
    app.hook = hook_once(is_rpc("x/fail"), Reply(status, [("content-type", "text/plain"), *headers], body))
    with pytest.raises(error) as caught:
        await transport.send(request_message(1, "x/fail", {}))
    assert type(caught.value) is error
    assert isinstance(caught.value, HttpStatusError)
    assert caught.value.status == status
    assert caught.value.maybe_delivered is maybe_delivered
    assert caught.value.body == body.decode()
    if status == 429:
        assert caught.value.retry_after == 7.0
    # A refusal of one POST leaves the transport usable.
    await transport.send(request_message(2, "x/other", {}))
    assert (await recv(transport))["id"] == 2


async def test_503_with_an_http_date_retry_after(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    transport = await link(server.url)
    app.hook = hook_once(is_rpc("x/fail"), Reply(503, [("retry-after", _date_in(30))]))
    with pytest.raises(ServiceUnavailable) as caught:
        await transport.send(request_message(1, "x/fail", {}))
    assert caught.value.retry_after is not None and 25 <= caught.value.retry_after <= 31


async def test_404_for_the_connection_closes_the_transport(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    transport = await link(server.url)
    app.connection.closed = True  # the server forgot the connection (restart, expiry)
    with pytest.raises(UnknownConnection) as caught:
        await transport.send(request_message(1, "session/new", {"cwd": "/", "mcpServers": []}))
    assert caught.value.maybe_delivered is False
    with pytest.raises(TransportClosed) as closed:
        await recv(transport)
    assert "no longer knows connection" in closed.value.reason


def test_parse_retry_after() -> None:
    now = time.time()
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("0") == 0.0
    for bad in (None, "", "-1", "soon", "nan", "inf"):
        assert parse_retry_after(bad) is None
    assert parse_retry_after(email.utils.formatdate(now + 60, usegmt=True), now=now) == pytest.approx(60, abs=1)
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0


# --------------------------------------------------------------------------------------------
# initialize failures


async def test_initialize_answer_must_be_json_with_a_connection_id(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    app.hook = hook_once(is_rpc("initialize"), Reply(200, [("content-type", "text/html")], b"<html>login</html>"))
    transport = await link(server.url, initialize=False)
    with pytest.raises(MalformedFrame) as malformed:
        await init(transport)
    assert "text/html" in str(malformed.value) and "login" in malformed.value.excerpt

    app.hook = hook_once(is_rpc("initialize"), json_reply(200, {"jsonrpc": "2.0", "id": 0, "result": {}}))
    with pytest.raises(ProtocolError, match="Acp-Connection-Id"):
        await init(transport)

    app.hook = hook_once(is_rpc("initialize"), json_reply(401, {"error": "who are you"}))
    with pytest.raises(AuthenticationFailed):
        await init(transport)
    await init(transport)  # an HTTP refusal does not close the transport
    assert transport.info.connection_id == app.connection.id


async def test_connect_refused_is_a_connect_error(link: Link) -> None:
    port = _free_port()
    transport = await link(f"http://127.0.0.1:{port}/acp", initialize=False, connect_timeout=2)
    with pytest.raises(ConnectError) as caught:
        await init(transport)
    assert caught.value.maybe_delivered is False
    with pytest.raises(TransportClosed):
        await recv(transport)


async def test_first_message_must_be_initialize(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    transport = await link(server.url, initialize=False)
    with pytest.raises(TransportError) as caught:
        await transport.send(request_message(1, "session/new", {"cwd": "/"}))
    assert caught.value.maybe_delivered is False
    assert app.requests == []


async def test_connection_stream_refusal_is_raised_from_initialize(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    app.hook = hook_once(lambda r: r.method == "GET", Reply(406, [("content-type", "text/plain")], b"Not Acceptable"))
    transport = await link(server.url, initialize=False)
    with pytest.raises(NotAcceptable):
        await init(transport)
    with pytest.raises(TransportClosed):
        await recv(transport)


async def test_connection_stream_with_wrong_content_type(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    app.hook = hook_once(lambda r: r.method == "GET", json_reply(200, {"not": "sse"}))
    transport = await link(server.url, initialize=False)
    with pytest.raises(ProtocolError, match="application/json"):
        await init(transport)


# --------------------------------------------------------------------------------------------
# body caps and compression


async def test_initialize_body_over_the_cap(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    huge = {"jsonrpc": "2.0", "id": 0, "result": {"blob": "x" * 5000}}
    app.hook = hook_once(is_rpc("initialize"), json_reply(200, huge, [("acp-connection-id", "c1")]))
    transport = await link(server.url, initialize=False, limits=Limits(max_http_body_bytes=4096))
    with pytest.raises(MessageTooLarge) as caught:
        await init(transport)
    assert caught.value.limit == 4096


async def test_compressed_bodies_are_capped_after_decompression(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    bomb = gzip.compress(b'{"jsonrpc":"2.0","id":0,"result":{"x":"' + b"0" * 10_000_000 + b'"}}')
    assert len(bomb) < 20_000
    headers = [("content-type", "application/json"), ("content-encoding", "gzip"), ("acp-connection-id", "c1")]
    app.hook = hook_once(is_rpc("initialize"), Reply(200, headers, bomb))
    transport = await link(server.url, initialize=False, limits=Limits(max_http_body_bytes=1 << 20))
    with pytest.raises(MessageTooLarge):
        await init(transport)

    # A compressed answer within the cap is decoded.
    transport = await link(server.url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"zipped": True}}).encode()
    app.hook = hook_once(is_rpc("x/zip"), Reply(200, headers[:2], gzip.compress(body)))
    await transport.send(request_message(1, "x/zip", {}))
    assert (await recv(transport))["result"] == {"zipped": True}
    assert app.requests[-1].headers["accept-encoding"] == "gzip, deflate"


# --------------------------------------------------------------------------------------------
# redirects and credentials


async def test_post_never_follows_a_redirect(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    transport = await link(server.url)
    app.hook = hook_once(is_rpc("session/new"), Reply(307, [("location", server.url_for("/elsewhere"))]))
    with pytest.raises(UnsafeRedirect) as caught:
        await transport.send(request_message(1, "session/new", {"cwd": "/", "mcpServers": []}))
    assert caught.value.maybe_delivered is False
    assert not [r for r in app.requests if r.path == "/elsewhere"]
    assert not transport.closed


async def test_get_follows_a_same_origin_redirect(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    app.hook = hook_once(lambda r: r.method == "GET", Reply(307, [("location", "/acp/events")]))
    transport = await link(server.url, headers={"Authorization": SECRET})
    sid = await new_session(transport)
    assert sid
    gets = app.of("GET")
    assert [g.path for g in gets[:2]] == ["/acp", "/acp/events"]
    assert gets[1].headers["authorization"] == SECRET  # same origin: credentials may go


@pytest.mark.parametrize("target", ["other-port", "other-host"])
async def test_get_refuses_a_cross_origin_redirect(serve: Serve, link: Link, target: str) -> None:
    app, other_app = FakeAcpServer("python"), FakeAcpServer("python")
    server, other = await serve(app), await serve(other_app)
    location = other.url if target == "other-port" else server.url_for("/acp", host="localhost")
    app.hook = hook_once(lambda r: r.method == "GET", Reply(302, [("location", location)]))
    transport = await link(server.url, initialize=False, headers={"Authorization": SECRET, "X-Api-Key": SECRET_API_KEY})
    with pytest.raises(UnsafeRedirect):
        await init(transport)
    assert other_app.requests == []  # nothing, credentials included, went to the other origin
    assert [r.method for r in app.requests] == ["POST", "GET"]


async def test_get_refuses_https_to_http(serve: Serve, link: Link, certfile: str, trusted: TlsConfig) -> None:
    app, plain_app = FakeAcpServer("python"), FakeAcpServer("python")
    server = await serve(app, certfile=certfile)
    plain = await serve(plain_app)
    app.hook = hook_once(lambda r: r.method == "GET", Reply(301, [("location", plain.url)]))
    transport = await link(server.url, initialize=False, tls=trusted, headers={"Authorization": SECRET})
    with pytest.raises(UnsafeRedirect):
        await init(transport)
    assert plain_app.requests == []


def test_secret_headers_are_dropped_for_another_origin() -> None:
    connector = HttpConnector(
        "http://127.0.0.1:1/acp",
        headers={"Authorization": SECRET, "X-Api-Key": SECRET_API_KEY, "X-Trace": "t"},
        secret_headers=["x-api-key"],
    )
    transport = HttpTransport(
        url="http://127.0.0.1:1/acp",
        client=None,  # type: ignore[arg-type]  # not used by _headers_for
        headers=connector._headers,
        secret_headers=connector._secret,
        cookies=CookieStore(),
        limits=Limits(),
        connect_timeout=1,
        sse_idle_timeout=1,
        session_stream_retries=0,
    )
    same = dict(transport._http._headers_for("http://127.0.0.1:1/other", []))
    assert same["Authorization"] == SECRET and same["X-Api-Key"] == SECRET_API_KEY
    foreign = dict(transport._http._headers_for("http://127.0.0.2:1/acp", []))
    assert foreign == {"X-Trace": "t"}


# --------------------------------------------------------------------------------------------
# cookies


async def test_cookies_are_captured_and_sent_back_across_reconnects(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    store = CookieStore()
    store.capture("http://127.0.0.2:9/acp", ["other=must-not-leak"])
    app.set_cookies = ["affinity=backend-7; Path=/"]
    connector = HttpConnector(server.url, cookies=store, headers={"Cookie": "app=1"})
    transport = await link(connector)
    await new_session(transport)
    await transport.aclose()
    assert app.requests[0].headers["cookie"] == "app=1"  # nothing stored yet
    assert all(r.headers["cookie"] == "app=1; affinity=backend-7" for r in app.requests[1:])
    assert {r.method for r in app.requests[1:]} == {"GET", "POST", "DELETE"}

    before = len(app.requests)
    await link(connector)  # a reconnect: the affinity cookie goes on the very first request
    assert app.requests[before].headers["cookie"] == "app=1; affinity=backend-7"
    assert all("must-not-leak" not in r.headers.get("cookie", "") for r in app.requests)


async def test_a_non_ascii_cookie_from_the_server_does_not_break_later_requests(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    app.set_cookies = ["lb=caf\xe9", "ok=1"]  # sent as one latin-1 octet
    connector = HttpConnector(server.url)
    transport = await link(connector)
    await new_session(transport)  # later requests carry the valid cookie, not a UnicodeEncodeError
    assert app.requests[-1].headers["cookie"] == "ok=1"


async def test_a_private_cookie_store_by_default(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    app.set_cookies = ["lb=1"]
    connector = HttpConnector(server.url)
    await link(connector)
    assert len(connector.cookies) == 1
    assert len(HttpConnector(server.url).cookies) == 0


# --------------------------------------------------------------------------------------------
# header hygiene and secrets


@pytest.mark.parametrize(
    "kwargs",
    [
        {"headers": {"Authorization": "Bearer a\r\nX-Evil: 1"}},
        {"headers": {"X-Ok": "a\nb"}},
        {"headers": {"X-Ok": "a\x00b"}},
        {"headers": {"Bad Name": "v"}},
        {"headers": {"Acp-Session-Id": "s"}},
        {"headers": {"Content-Type": "text/plain"}},
        {"headers": {"Authorization": "Bearer t\u00f6ken"}},  # httpx sends ASCII only: no UnicodeEncodeError later
        {"connect_timeout": 0},
    ],
)
def test_unsafe_configuration_is_refused_before_connecting(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        HttpConnector("http://127.0.0.1:1/acp", **kwargs)


@pytest.mark.parametrize(
    "url", ["ws://127.0.0.1/acp", "ftp://x/acp", "http:///acp", "http://user:pw@127.0.0.1/acp", "http://h/a\r\nb"]
)
def test_unsupported_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        HttpConnector(url)


async def test_session_id_with_crlf_is_refused_before_sending(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    transport = await link(server.url)
    before = len(app.requests)
    for bad in ("s\r\nX-Evil: 1", "s\n", "s\x00"):
        with pytest.raises(ConfigurationError):
            await transport.send(request_message(1, "session/prompt", {"sessionId": bad, "prompt": []}))
        with pytest.raises(ConfigurationError):
            await transport.send(request_message(2, "session/status", {"sessionId": bad}))
    assert len(app.requests) == before
    assert not transport.closed


async def test_a_non_ascii_session_id_is_a_typed_error_not_a_crash(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    # It cannot travel in an Acp-Session-Id header (httpx sends ASCII only).
    app, server = fake
    transport = await link(server.url)
    before = len(app.requests)
    with pytest.raises(ConfigurationError):
        await transport.send(request_message(1, "session/prompt", {"sessionId": "s\u00e9", "prompt": []}))
    assert len(app.requests) == before
    # An agent that names a session so: no stream for it, and the link lives on.
    transport._ensure_session_stream("s\u00e9", established=True)
    assert "s\u00e9" not in transport._sessions
    assert not transport.closed
    await new_session(transport, request_id=2)


async def test_secrets_are_never_logged(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link, caplog: pytest.LogCaptureFixture
) -> None:
    app, server = fake
    app.set_cookies = ["sid=cookie-secret-value"]
    caplog.set_level(logging.DEBUG, logger="acp_client")
    transport = await link(
        server.url, headers={"Authorization": SECRET, "X-Api-Key": SECRET_API_KEY}, secret_headers=["X-Api-Key"]
    )
    sid = await new_session(transport)
    app.hook = hook_once(is_rpc("x/fail"), Reply(401, [], b"denied"))
    with pytest.raises(AuthenticationFailed) as caught:
        await transport.send(request_message(2, "x/fail", {"sessionId": sid}))
    await transport.send(request_message(3, "session/close", {"sessionId": sid}))
    await collect_until_response(transport, 3)
    app.connection.stream.push(END)
    with pytest.raises(TransportClosed):
        await recv(transport)
    await transport.aclose()
    logged = "\n".join(record.getMessage() for record in caplog.records) + str(caught.value)
    assert "POST" in logged  # the transport did log at debug level
    for secret in (SECRET, "s3cr3t", SECRET_API_KEY, "cookie-secret-value"):
        assert secret not in logged


# --------------------------------------------------------------------------------------------
# SSE misbehaviour


async def test_malformed_sse_data_is_reported_and_the_stream_goes_on(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    transport = await link(server.url)
    stream = app.connection.stream
    stream.push(b"data: {not json\n\n")
    stream.push(b'data: "a string"\n\n')
    stream.push(b": keepalive\r\n\r\nevent: ping\r\ndata: x\r\n\r\n")
    stream.push(b'data: {"jsonrpc":"2.0",\ndata: "method":"x/ok"}\r\n\r\n')
    with pytest.raises(MalformedFrame) as first:
        await recv(transport)
    assert "{not json" in first.value.excerpt
    with pytest.raises(MalformedFrame):
        await recv(transport)
    assert (await recv(transport)) == {"jsonrpc": "2.0", "method": "x/ok"}  # non-message events skipped
    assert not transport.closed


async def test_oversized_sse_line_and_event(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    transport = await link(server.url, limits=Limits(max_sse_line_bytes=2048, max_message_bytes=4096))
    stream = app.connection.stream
    stream.push(b"data: " + b"x" * 100_000 + b"\n\n")
    stream.push(b"".join(b"data: " + b"y" * 1000 + b"\n" for _ in range(10)) + b"\n")
    stream.push(b'data: {"jsonrpc":"2.0","method":"x/after"}\n\n')
    with pytest.raises(MessageTooLarge) as line:
        await recv(transport)
    assert line.value.limit == 2048
    with pytest.raises(MessageTooLarge) as event:
        await recv(transport)
    assert event.value.limit == 4096
    assert (await recv(transport))["method"] == "x/after"
    assert not transport.closed


async def test_truncated_final_event_is_reported_then_the_drop(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    transport = await link(server.url)
    app.connection.stream.push(b'data: {"jsonrpc":"2.0","method":"x/ok"}\n\ndata: {"jsonrpc":"2.0","met')
    app.connection.stream.push(END)
    assert (await recv(transport))["method"] == "x/ok"
    with pytest.raises(MalformedFrame, match="ended inside an event"):
        await recv(transport)
    with pytest.raises(TransportClosed) as closed:
        await recv(transport)
    assert "connection stream" in closed.value.reason


async def test_connection_stream_end_is_a_drop(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    transport = await link(server.url)
    app.connection.stream.push(END)
    with pytest.raises(TransportClosed) as closed:
        await recv(transport)
    assert "ended by the server" in closed.value.reason
    with pytest.raises(TransportClosed) as again:
        await transport.send(request_message(1, "session/new", {"cwd": "/"}))
    assert again.value.maybe_delivered is False
    await transport.aclose()
    assert app.of("DELETE") == []  # a dropped link is not DELETEd: a reconnect must not wait on it


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
async def test_idle_timeout_is_a_drop(fake: tuple[FakeAcpServer, Hypercorn], link: Link, http2: bool) -> None:
    app, server = fake
    app.keepalive = None  # silence: no keepalive comments
    transport = await link(server.url, sse_idle_timeout=0.3, http2=http2)
    started = time.monotonic()
    with pytest.raises(TransportClosed) as closed:
        await recv(transport)
    assert "idle" in closed.value.reason
    assert 0.25 <= time.monotonic() - started < 4


async def test_keepalives_keep_an_idle_link_open(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    app.keepalive = 0.05
    transport = await link(server.url, sse_idle_timeout=0.3)
    with pytest.raises(asyncio.TimeoutError):
        await recv(transport, timeout=0.8)
    assert not transport.closed


async def test_lost_session_stream_is_reopened(fake_ts: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake_ts
    transport = await link(server.url)
    sid = await new_session(transport)
    conn = app.connection
    await until(lambda: sid in conn.sessions and conn.sessions[sid].receivers == 1)
    conn.sessions[sid].push(END)  # the server (or a proxy) ends the session stream
    await until(lambda: len([g for g in app.of("GET") if g.headers.get("acp-session-id") == sid]) == 2)
    await transport.send(request_message(2, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert texts(await collect_until_response(transport, 2)) == ["chunk 0", "chunk 1", "chunk 2"]
    assert not transport.closed


@pytest.mark.parametrize("dialect", ["python", "typescript"])
async def test_streams_of_closed_or_unknown_sessions_are_released(serve: Serve, link: Link, dialect: str) -> None:
    app = FakeAcpServer(dialect)  # type: ignore[arg-type]
    server = await serve(app)
    transport = await link(server.url)
    sid = await new_session(transport)
    conn = app.connection
    await until(lambda: sid in conn.sessions and conn.sessions[sid].receivers == 1)
    # A probe first: it teaches the transport the server's dialect (a 400 for the missing header).
    await transport.send(request_message(20, "session/status", {"sessionId": sid}))
    assert (await recv(transport))["id"] == 20
    await transport.send(request_message(2, "session/close", {"sessionId": sid}))
    assert (await recv(transport))["id"] == 2
    if dialect == "typescript":
        await until(lambda: conn.sessions[sid].receivers == 0)
    else:  # the Python dialect keeps answering on a closed session's stream: it stays open
        await asyncio.sleep(0.05)
        assert conn.sessions[sid].receivers == 1 and sid in transport._sessions
    await transport.send(request_message(3, "session/status", {"sessionId": "nope"}))
    assert (await recv(transport))["error"]["code"] == -32002
    if dialect == "typescript":  # the stream opened for the probe is released after the -32002
        await until(lambda: "nope" in conn.sessions and conn.sessions["nope"].receivers == 0)
    assert "nope" not in transport._sessions
    assert not transport.closed


async def test_session_stream_that_cannot_be_reopened_closes_the_link(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    transport = await link(server.url, session_stream_retries=1)
    sid = await new_session(transport)
    conn = app.connection
    await until(lambda: sid in conn.sessions and conn.sessions[sid].receivers == 1)
    app.hook = lambda r: Reply(500, [], b"down") if r.method == "GET" else None
    conn.sessions[sid].push(END)
    with pytest.raises(TransportClosed) as closed:
        await recv(transport)
    assert sid in closed.value.reason and "500" in closed.value.reason


async def test_post_network_failure_is_a_drop(serve: Serve, link: Link) -> None:
    app = FakeAcpServer("python")
    server = await serve(app)
    transport = await link(server.url)
    await server.stop()
    with pytest.raises(TransportClosed) as caught:
        await transport.send(request_message(1, "session/new", {"cwd": "/"}))
    assert caught.value.maybe_delivered is False
    with pytest.raises(TransportClosed):
        await recv(transport)


async def test_post_timeout_after_sending_may_have_been_delivered(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    app.keepalive = 0.05
    hold = asyncio.Event()

    async def never() -> AsyncIterator[bytes]:
        await hold.wait()
        yield b""

    transport = await link(server.url, sse_idle_timeout=0.3)
    app.hook = hook_once(is_rpc("x/slow"), Reply(202, [], stream=never))
    with pytest.raises(TransportClosed) as caught:
        await transport.send(request_message(1, "x/slow", {}))
    hold.set()
    assert caught.value.maybe_delivered is True
    assert transport.closed


async def test_batches(
    fake: tuple[FakeAcpServer, Hypercorn], fake_ts: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    batch = [request_message(1, "x/a", {}), request_message(2, "x/b", {})]
    for app, server in (fake, fake_ts):
        transport = await link(server.url)
        with pytest.raises(BatchNotSupported) as caught:
            await transport.send(batch)
        assert caught.value.status == (501 if app.dialect == "python" else 400)
        assert caught.value.maybe_delivered is False
        assert not transport.closed
    app, server = fake
    transport = await link(server.url)
    app.hook = hook_once(lambda r: isinstance(r.message, list), Reply(202))
    await transport.send(batch)
    assert app.requests[-1].message == batch
    app.connection.stream.push(b'data: [{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]\n\n')
    assert [m["id"] for m in await recv(transport)] == [1, 2]


async def test_a_json_answer_to_a_post_is_delivered(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    transport = await link(server.url)
    app.hook = hook_once(is_rpc("x/direct"), json_reply(200, {"jsonrpc": "2.0", "id": 1, "result": {"direct": True}}))
    await transport.send(request_message(1, "x/direct", {}))
    assert (await recv(transport))["result"] == {"direct": True}
    app.hook = hook_once(is_rpc("x/html"), Reply(200, [("content-type", "text/html")], b"<p>"))
    await transport.send(request_message(2, "x/html", {}))
    with pytest.raises(MalformedFrame, match="text/html"):
        await recv(transport)


async def test_inbound_queue_is_bounded(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_module, "_MAX_QUEUED", 4)
    app, server = fake
    app.updates_per_prompt = 200
    transport = await link(server.url)
    sid = await new_session(transport)
    await transport.send(request_message(2, "session/prompt", {"sessionId": sid, "prompt": []}))
    await until(lambda: len(transport._inbox) >= 4)
    for _ in range(20):  # the reader waits for room instead of buffering more
        await asyncio.sleep(0)
        assert len(transport._inbox) <= 4
    seen = await collect_until_response(transport, 2)
    assert texts(seen) == [f"chunk {i}" for i in range(200)]


async def test_aclose_survives_a_dead_server(serve: Serve, link: Link) -> None:
    app = FakeAcpServer("python")
    server = await serve(app)
    transport = await link(server.url, connect_timeout=1)
    await server.stop()
    await transport.aclose()
    with pytest.raises(TransportClosed):
        await transport.receive()


# --------------------------------------------------------------------------------------------
# the official ACP Python SDK's server as an independent peer


def _official_app(sessions: set[str]) -> App:
    from acp.helpers import update_agent_message_text
    from acp.http.asgi import create_asgi_app
    from acp.schema import (
        AgentCapabilities,
        InitializeResponse,
        LoadSessionResponse,
        NewSessionResponse,
        PromptResponse,
    )

    class TinyAgent:
        """A minimal agent on the official SDK's ``Agent`` interface."""

        def __init__(self, conn: Any) -> None:
            self._conn = conn

        async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
            return InitializeResponse(
                protocol_version=protocol_version, agent_capabilities=AgentCapabilities(load_session=True)
            )

        async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
            session_id = uuid.uuid4().hex
            sessions.add(session_id)
            return NewSessionResponse(session_id=session_id)

        async def load_session(self, cwd: str, session_id: str, **_: Any) -> LoadSessionResponse:
            await self._conn.session_update(session_id, update_agent_message_text("replayed"))
            return LoadSessionResponse()

        async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
            for index in range(3):
                await self._conn.session_update(session_id, update_agent_message_text(f"chunk {index}"))
            return PromptResponse(stop_reason="end_turn")

        async def cancel(self, session_id: str, **_: Any) -> None:
            return None

    return create_asgi_app(TinyAgent)  # type: ignore[return-value]


@pytest.mark.parametrize("mode", ["http1", "h2c", "h2-tls"])
async def test_official_python_sdk_server(
    serve: Serve, link: Link, certfile: str, trusted: TlsConfig, mode: str
) -> None:
    sessions: set[str] = set()
    server = await serve(_official_app(sessions), certfile=certfile if mode == "h2-tls" else None)
    options: dict[str, Any] = {"tls": trusted} if mode == "h2-tls" else {"http2": mode == "h2c"}
    connector = HttpConnector(server.url, session_stream_retries=1, **options)
    transport = await link(connector)
    assert transport.info.http_version == ("HTTP/1.1" if mode == "http1" else "HTTP/2")
    sid = await new_session(transport)
    assert sid in sessions
    await transport.send(
        request_message(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    )
    seen = await collect_until_response(transport, 2)
    assert texts(seen) == ["chunk 0", "chunk 1", "chunk 2"]
    assert seen[-1]["result"]["stopReason"] == "end_turn"
    await transport.aclose()

    # The quirk: on a new connection, session/load does not establish the session on this server
    # (its answer carries no sessionId), so the session stream stays 404: a typed error, no hang.
    again = await link(connector)
    await again.send(request_message(1, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
    seen = await collect_until_response(again, 1)
    assert texts(seen) == ["replayed"]  # delivered on the connection stream
    await until(lambda: sid in again._session_errors)
    with pytest.raises(UnknownSession):
        await again.send(request_message(2, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert not again.closed


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
