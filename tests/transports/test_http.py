"""The Streamable HTTP transport against real loopback servers (hypercorn, in-process): the happy path
in both dialects and every HTTP version, the session-stream quirk, status mapping, initialize failures.

Peers: :class:`~tests.transports._http_servers.FakeAcpServer` in both official dialects (and
misbehaving on demand); the official SDK's server is in ``test_http_python_sdk.py``.
"""

from __future__ import annotations

import asyncio
import email.utils
import ssl
import time

import pytest

from acp_client import AcpClient
from acp_client._codec._jsonrpc import notification_message, request_message
from acp_client.exceptions import (
    AuthenticationFailed,
    BatchNotSupported,
    ConnectError,
    HttpStatusError,
    MalformedFrame,
    MissingHeader,
    NotAcceptable,
    ProtocolError,
    ServiceUnavailable,
    TlsVerificationError,
    TransportClosed,
    TransportError,
    UnknownConnection,
    UnknownSession,
    UnsupportedMediaType,
)
from acp_client.testing import ReferenceAgent, ReferenceServer
from acp_client.transports import TlsConfig
from acp_client.transports._security import parse_retry_after
from acp_client.transports.base import Connector, Transport
from acp_client.transports.http import HttpConnector
from tests._support import eventually
from tests.transports._http_support import (
    SECRET,
    Link,
    Serve,
    _free_port,
    collect_until_response,
    hook_once,
    init,
    is_rpc,
    json_reply,
    new_session,
    recv,
    texts,
)

from ._http_servers import FakeAcpServer, Hypercorn, Recorded, Reply

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
    await eventually(lambda: any(g.headers.get("acp-session-id") == sid for g in app.of("GET")))

    await transport.send(request_message(2, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
    seen = await collect_until_response(transport, 2)
    assert texts(seen) == ["replay 1", "replay 2"]  # on the connection stream: accepted there too
    await eventually(lambda: conn.sessions.get(sid) is not None and conn.sessions[sid].receivers == 1)

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
    await eventually(lambda: sid in transport._session_errors)
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
# connection reuse


async def test_posts_reuse_connections_while_many_session_streams_are_open() -> None:
    """Each open session stream holds a TCP connection over HTTP/1.1; POSTs still reuse the few
    kept alive for them (httpcore closes idle connections at once when a pool holds more than its
    keep-alive limit, busy ones included: the streams have a pool of their own)."""
    async with (
        ReferenceServer(ReferenceAgent()) as server,
        AcpClient(server.http_url, retry=None, transport_options={"http2": False}) as client,
    ):
        sessions = [await client.new_session("/tmp") for _ in range(30)]  # 30 streams: over httpx's 20
        before = server.tcp_connections
        for session in sessions:
            await client.session_status(session.session_id)
        await asyncio.gather(*(client.session_status(s.session_id) for s in sessions[:8]))
        assert server.tcp_connections - before <= 8  # at most one per concurrent POST, then reused
        for session in sessions:
            await client.session_status(session.session_id)
        assert server.tcp_connections - before <= 8


async def test_a_session_stream_answered_403_is_an_unknown_session_not_a_dead_link(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    # Qwen Code's daemon answers 403 to a session stream the connection does not own.
    app, server = fake
    app.load_establishes = True
    connector = HttpConnector(server.url, session_stream_retries=1)
    first = await link(connector)
    sid = await new_session(first)
    await first.aclose()

    def hook(record: Recorded) -> Reply | None:
        owned = record.method == "GET" and record.headers.get("acp-session-id") == sid
        return Reply(403, [], b"Session not owned by this connection") if owned else None

    app.hook = hook
    transport = await link(connector)
    with pytest.raises(UnknownSession):  # the POST: this connection does not know the session yet
        await transport.send(request_message(1, "session/prompt", {"sessionId": sid, "prompt": []}))
    await eventually(lambda: any(g.headers.get("acp-session-id") == sid for g in app.of("GET")))
    assert not transport.closed  # a 403 before the session is established waits for it, as a 404 does
    await transport.send(request_message(2, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
    await collect_until_response(transport, 2)
    await eventually(lambda: sid in transport._session_errors)  # still refused once established: given up
    with pytest.raises(UnknownSession) as caught:
        await transport.send(request_message(3, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert caught.value.maybe_delivered is False
    assert not transport.closed  # the connection itself is fine
    await transport.send(request_message(4, "session/list", {}))
    assert (await recv(transport))["id"] == 4
