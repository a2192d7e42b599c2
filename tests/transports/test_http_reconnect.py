"""What an HTTP connector carries from one link to the next (issue 12, item 3: the HTTP recovery tail).

* After a drop, the next link DELETEs the dropped link's connection: a server that never expires
  connections (the official Python SDK 0.12.1) would otherwise keep one per reconnect. Best effort:
  sent in the background once the new link is initialized, bounded in time, never awaited by the
  reconnect, a failure only logged; one cut short by the next drop is tried again from the link after.
* The server's header dialect, learnt by one link, is where the next link starts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest

from acp_client import AcpClient, Callbacks, RetryPolicy, State
from acp_client._codec._jsonrpc import request_message
from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer
from acp_client.transports import _link as link_module
from acp_client.transports.base import Transport
from acp_client.transports.http import HttpConnector
from tests._support import eventually

from ._http_servers import END, FakeAcpServer, Hypercorn, Receive, Scope, Send


async def initialize(transport: Transport) -> None:
    await transport.send(request_message(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
    answer = await asyncio.wait_for(transport.receive(), 5.0)
    assert answer["id"] == 0 and "result" in answer


async def drop(transport: Transport) -> None:
    """Wait until the transport has seen its link end (the server ended the connection stream)."""
    with pytest.raises(Exception, match="connection stream"):
        await asyncio.wait_for(transport.receive(), 5.0)


@pytest.fixture(autouse=True)
def _prompt_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_module, "STALE_DELETE_DELAY", 0.05)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeAcpServer, Hypercorn]]:
    app = FakeAcpServer("python")
    server = await Hypercorn(app).start()
    yield app, server
    await server.stop()


async def test_the_next_link_deletes_the_dropped_connection(fake: tuple[FakeAcpServer, Hypercorn]) -> None:
    app, server = fake
    connector = HttpConnector(server.url)
    first = await connector.connect()
    await initialize(first)
    old = app.connection.id
    app.connection.stream.push(END)  # the link drops
    await drop(first)
    await first.aclose()
    assert app.of("DELETE") == []  # the dead link itself does not try

    second = await connector.connect()
    try:
        await initialize(second)
        assert app.connection.id != old
        await eventually(lambda: app.of("DELETE"))
        deletes = app.of("DELETE")
        assert [d.headers["acp-connection-id"] for d in deletes] == [old]
        # Once only: a third link has nothing left to delete (closed links DELETE themselves).
        await second.aclose()
        third = await connector.connect()
        await initialize(third)
        await third.aclose()
        assert [d.headers["acp-connection-id"] for d in app.of("DELETE")].count(old) == 1
    finally:
        await second.aclose()


async def test_a_slow_or_failing_delete_never_delays_the_new_link(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(link_module, "STALE_DELETE_TIMEOUT", 0.2)
    app = FakeAcpServer("python")
    release = asyncio.Event()
    deletes: list[str] = []

    async def stalling(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") == "DELETE":  # the server takes forever to answer a DELETE
            deletes.append(dict(scope["headers"]).get(b"acp-connection-id", b"").decode())
            await release.wait()
        await app(scope, receive, send)

    server = await Hypercorn(stalling).start()
    connector = HttpConnector(server.url)
    first = await connector.connect()
    await initialize(first)
    old = app.connection.id
    app.connection.stream.push(END)
    await drop(first)
    await first.aclose()

    caplog.set_level(logging.DEBUG, logger="acp_client.transports.http")
    second = await connector.connect()
    try:
        started = time.monotonic()
        await initialize(second)
        await second.send(request_message(1, "session/new", {"cwd": "/", "mcpServers": []}))
        answer = await asyncio.wait_for(second.receive(), 5.0)
        assert answer["id"] == 1 and "result" in answer
        assert time.monotonic() - started < 1.0  # the hanging DELETE was never waited for
        await eventually(lambda: "DELETE of dropped connection" in caplog.text)  # gave up after the bound, quietly
        assert not [r for r in caplog.records if r.levelno > logging.DEBUG and "DELETE" in r.getMessage()]
        assert not second.closed  # a failed DELETE does not hurt the link
        assert deletes == [old]
    finally:
        release.set()
        await second.aclose()
        await server.stop()


async def test_client_reconnect_deletes_the_old_connection_on_a_real_server() -> None:
    """End to end: AcpClient over HTTP, a network cut, the reference server sees the DELETE."""
    async with ReferenceServer(ReferenceAgent()) as server, FaultProxy("127.0.0.1", server.port) as proxy:
        states: list[State] = []
        policy = RetryPolicy(initial_delay=0.05, max_delay=0.2, max_elapsed=20)
        async with AcpClient(
            proxy.url(server.http_url),
            retry=policy,
            callbacks=Callbacks(on_state_change=lambda s: states.append(s.state)),
        ) as client:
            session = await client.new_session("/work")
            await client.prompt(session.session_id, "hello")
            first_ids = {r.header("acp-connection-id") for r in server.requests if r.transport == "http"} - {None}
            assert len(first_ids) == 1
            (old,) = first_ids
            await proxy.cut()
            await eventually(lambda: states[-2:] == [State.RECOVERING, State.CONNECTED])
            await eventually(lambda: any(r.method == "DELETE" for r in server.requests))
            deletes = [r for r in server.requests if r.method == "DELETE"]
            assert [r.header("acp-connection-id") for r in deletes] == [old]
            assert (await client.prompt(session.session_id, "again")).stop_reason == "end_turn"


async def test_a_delete_cut_short_by_the_next_drop_is_retried_from_the_link_after() -> None:
    app = FakeAcpServer("python")
    hold = asyncio.Event()
    never = asyncio.Event()
    deletes: list[str] = []

    async def holding(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") == "DELETE":
            deletes.append(dict(scope["headers"]).get(b"acp-connection-id", b"").decode())
            if not hold.is_set():
                await never.wait()  # the first attempt never gets an answer
        await app(scope, receive, send)

    server = await Hypercorn(holding).start()
    try:
        connector = HttpConnector(server.url)
        first = await connector.connect()
        await initialize(first)
        old = app.connection.id
        app.connection.stream.push(END)
        await drop(first)
        await first.aclose()

        second = await connector.connect()
        await initialize(second)
        await eventually(lambda: deletes == [old])
        app.connection.stream.push(END)  # the second link drops while its DELETE is pending
        await drop(second)
        await second.aclose()

        hold.set()
        third = await connector.connect()
        try:
            await initialize(third)
            await eventually(lambda: len([d for d in app.of("DELETE") if d.headers["acp-connection-id"] == old]) == 1)
            assert deletes.count(old) == 2  # tried again, and answered this time
        finally:
            await third.aclose()
    finally:
        await server.stop()


async def test_the_header_dialect_learnt_by_one_link_is_where_the_next_link_starts() -> None:
    """The TypeScript server wants Acp-Session-Id on every POST naming a session: the first link learns
    it from a 400; a reconnect starts with the header instead of paying that round trip again."""
    app = FakeAcpServer("typescript")
    server = await Hypercorn(app).start()
    try:
        connector = HttpConnector(server.url)
        for link in range(2):
            transport = await connector.connect()
            try:
                await initialize(transport)
                since = len(app.requests)
                await transport.send(request_message(1, "session/status", {"sessionId": "sess-x"}))
                answer = await asyncio.wait_for(transport.receive(), 5.0)
                assert answer["id"] == 1
                posts = [r for r in app.requests[since:] if r.method == "POST"]
                headers = [p.headers.get("acp-session-id") for p in posts]
                assert headers == ([None, "sess-x"] if link == 0 else ["sess-x"]), (link, headers)
            finally:
                await transport.aclose()
    finally:
        await server.stop()
