"""The Streamable HTTP transport when streams misbehave or links fail: malformed or oversized SSE,
idle and lost streams, POST failures, batches, the bounded inbound queue."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from acp_client._codec._jsonrpc import request_message
from acp_client.exceptions import BatchNotSupported, MalformedFrame, MessageTooLarge, TransportClosed
from acp_client.transports import _link as link_module
from acp_client.transports.base import Limits
from acp_client.transports.http import HttpConnector
from tests._support import eventually
from tests.transports._http_support import (
    Link,
    Serve,
    collect_until_response,
    hook_once,
    is_rpc,
    json_reply,
    new_session,
    recv,
    texts,
)

from ._http_servers import END, FakeAcpServer, Hypercorn, Recorded, Reply

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
    with pytest.raises(asyncio.TimeoutError):  # the scenario: a real link outlives its real idle timeout
        await recv(transport, timeout=0.8)
    assert not transport.closed


async def test_lost_session_stream_is_reopened(fake_ts: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake_ts
    transport = await link(server.url)
    sid = await new_session(transport)
    conn = app.connection
    await eventually(lambda: sid in conn.sessions and conn.sessions[sid].receivers == 1)
    conn.sessions[sid].push(END)  # the server (or a proxy) ends the session stream
    await eventually(lambda: len([g for g in app.of("GET") if g.headers.get("acp-session-id") == sid]) == 2)
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
    await eventually(lambda: sid in conn.sessions and conn.sessions[sid].receivers == 1)
    # A probe first: it teaches the transport the server's dialect (a 400 for the missing header).
    await transport.send(request_message(20, "session/status", {"sessionId": sid}))
    assert (await recv(transport))["id"] == 20
    await transport.send(request_message(2, "session/close", {"sessionId": sid}))
    assert (await recv(transport))["id"] == 2
    if dialect == "typescript":
        await eventually(lambda: conn.sessions[sid].receivers == 0)
    await transport.send(request_message(3, "session/status", {"sessionId": "nope"}))
    assert (await recv(transport))["error"]["code"] == -32002
    if dialect == "python":  # it keeps answering on a closed session's stream: open a round trip later
        assert conn.sessions[sid].receivers == 1 and sid in transport._sessions
    if dialect == "typescript":  # the stream opened for the probe is released after the -32002
        await eventually(lambda: "nope" in conn.sessions and conn.sessions["nope"].receivers == 0)
    assert "nope" not in transport._sessions
    assert not transport.closed


async def test_session_stream_that_cannot_be_reopened_closes_the_link(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    transport = await link(server.url, session_stream_retries=1)
    sid = await new_session(transport)
    conn = app.connection
    await eventually(lambda: sid in conn.sessions and conn.sessions[sid].receivers == 1)
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
    monkeypatch.setattr(link_module, "_MAX_QUEUED", 4)
    app, server = fake
    app.updates_per_prompt = 200
    transport = await link(server.url)
    sid = await new_session(transport)
    await transport.send(request_message(2, "session/prompt", {"sessionId": sid, "prompt": []}))
    await eventually(lambda: len(transport._inbox) >= 4)
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


async def test_a_server_that_ends_every_reattached_stream_at_once_is_a_drop(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    transport = await link(HttpConnector(server.url, session_stream_retries=2, reattach_timeout=5.0))

    def hook(record: Recorded) -> Reply | None:
        if record.method == "GET" and "last-event-id" in record.headers:
            return Reply(200, [("content-type", "text/event-stream")], b"")  # open, then ended at once
        return None

    app.hook = hook
    app.connection.stream.push(b'id: 1\ndata: {"jsonrpc":"2.0","method":"x/one"}\n\n')
    app.connection.stream.push(END)
    assert (await recv(transport))["method"] == "x/one"
    with pytest.raises(TransportClosed) as closed:
        await recv(transport)
    assert "right after each reattach" in closed.value.reason
    reattaches = [g for g in app.of("GET") if g.headers.get("last-event-id") == "1"]
    assert len(reattaches) == 3  # once at once, then two quick retries: never a tight loop
