"""The first hour of an integrator: opening a link fails fast, with one clear type per cause.

* ``Timeouts.connect`` bounds the whole opening (TCP, TLS, WebSocket handshake, ``initialize``) and
  running out raises :class:`ConnectTimeout` for ``ws://``, ``wss://`` and ``http://`` alike.
* A peer answering ``initialize`` with something that is not JSON-RPC is "not an ACP endpoint",
  at once; an HTTP 404/405/501 on ``initialize`` is "no ACP endpoint at URL (HTTP 404)".
* ``ws:/host`` (one slash) gets a message showing the correct form.
* ``RequestTimeout`` is a ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio
from websockets.asyncio.server import ServerConnection, serve

from acp_client import (
    AcpClient,
    Callbacks,
    ConfigurationError,
    ConnectError,
    RequestTimeout,
    State,
    StreamResumed,
    Timeouts,
)
from acp_client.exceptions import MalformedFrame
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent, ReferenceServer
from acp_client.transports import BatchNotSupported, ConnectTimeout, HttpStatusError, UnknownConnection
from acp_client.transports._errors import request_error

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest_asyncio.fixture
async def tcp_server() -> AsyncIterator[Callable[[Handler], Awaitable[int]]]:
    servers: list[asyncio.Server] = []
    writers: list[asyncio.StreamWriter] = []

    async def start(handler: Handler) -> int:
        async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            await handler(reader, writer)

        server = await asyncio.start_server(tracked, "127.0.0.1", 0)
        servers.append(server)
        port: int = server.sockets[0].getsockname()[1]
        return port

    yield start
    for writer in writers:
        writer.close()
    for server in servers:
        server.close()
        await server.wait_closed()


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # accept the TCP connection, never say a word


def _http(status: int, content_type: bytes, body: bytes) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 %d Whatever\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                    % (status, content_type, len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    return handle


async def _fails(client: AcpClient, within: float) -> BaseException:
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        await asyncio.wait_for(client.connect(), 30)
    elapsed = time.monotonic() - started
    assert elapsed < within, f"took {elapsed:.2f}s"
    assert client.state.state is State.FAILED
    await client.aclose()
    return caught.value


def test_timeouts_are_timeout_errors() -> None:
    assert isinstance(RequestTimeout("session/prompt", 1.0), TimeoutError)
    error = ConnectTimeout("timed out", timeout=2.0, phase="initialize")
    assert isinstance(error, ConnectError) and isinstance(error, RequestTimeout) and isinstance(error, TimeoutError)
    assert error.method == "initialize" and error.timeout == 2.0 and error.maybe_delivered is False


@pytest.mark.parametrize("scheme", ["ws", "wss", "http", "https"])
async def test_connect_timeout_bounds_a_silent_server_with_one_type(
    tcp_server: Callable[[Handler], Awaitable[int]], scheme: str
) -> None:
    port = await tcp_server(_silent)  # TCP accepted; TLS / handshake / initialize never answered
    client = AcpClient(f"{scheme}://127.0.0.1:{port}/acp", retry=None, timeouts=Timeouts(connect=0.5))
    error = await _fails(client, within=3.0)
    assert type(error) is ConnectTimeout, repr(error)
    assert "0.5s" in str(error)


async def test_connect_timeout_covers_initialize_over_websocket() -> None:
    agent = ReferenceAgent()
    agent.stall()  # the handshake succeeds; initialize is never answered
    async with ReferenceServer(agent) as server:
        client = AcpClient(server.ws_url, retry=None, timeouts=Timeouts(connect=0.5))
        error = await _fails(client, within=3.0)
    assert type(error) is ConnectTimeout and error.phase == "initialize"  # type: ignore[attr-defined]


def test_the_transport_bound_follows_the_connect_timeout() -> None:
    # No more fixed 10 s for the WebSocket opening, or for the HTTP connection: Timeouts.connect rules.
    ws = AcpClient("ws://127.0.0.1:1/acp", timeouts=Timeouts(connect=42.0)).connector
    http = AcpClient("http://127.0.0.1:1/acp", timeouts=Timeouts(connect=42.0)).connector
    assert ws._open_timeout == 42.0  # type: ignore[attr-defined]
    assert http._settings.connect_timeout == 42.0  # type: ignore[attr-defined]
    mine = AcpClient("ws://127.0.0.1:1/acp", transport_options={"open_timeout": 3.0}).connector
    assert mine._open_timeout == 3.0  # type: ignore[attr-defined]


def test_an_http_connect_timeout_is_a_connect_timeout() -> None:
    error = request_error(
        httpx.ConnectTimeout("slow"), what="POST", target="http://h/acp", idle=45.0, sent=False, connecting=True
    )
    assert type(error) is ConnectTimeout


async def test_a_websocket_peer_answering_non_json_is_not_an_acp_endpoint() -> None:
    async def greet(connection: ServerConnection) -> None:
        async for _ in connection:
            await connection.send("<html><body>Welcome to nginx!</body></html>")

    async with serve(greet, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        client = AcpClient(f"ws://127.0.0.1:{port}/acp", retry=None, timeouts=Timeouts(connect=20))
        error = await _fails(client, within=3.0)  # at once, not after the 20 s
    assert isinstance(error, MalformedFrame)
    assert "is not an ACP endpoint" in str(error) and "nginx" in error.excerpt


@pytest.mark.parametrize(
    ("content_type", "body"),
    [(b"text/html", b"<html>hello</html>"), (b"application/json", b"<html>hello</html>")],
    ids=["html", "json-typed-html"],
)
async def test_an_http_server_answering_non_json_is_not_an_acp_endpoint(
    tcp_server: Callable[[Handler], Awaitable[int]], content_type: bytes, body: bytes
) -> None:
    port = await tcp_server(_http(200, content_type, body))
    client = AcpClient(f"http://127.0.0.1:{port}/acp", retry=None, timeouts=Timeouts(connect=20))
    error = await _fails(client, within=3.0)
    assert isinstance(error, MalformedFrame) and "is not an ACP endpoint" in str(error)


@pytest.mark.parametrize("status", [404, 405, 501])
async def test_no_acp_endpoint_at_the_url(tcp_server: Callable[[Handler], Awaitable[int]], status: int) -> None:
    port = await tcp_server(_http(status, b"text/html", b"<html><h1>Not Found</h1></html>"))
    url = f"http://127.0.0.1:{port}/acp"
    error = await _fails(AcpClient(url, retry=None), within=3.0)
    assert type(error) is HttpStatusError and not isinstance(error, UnknownConnection | BatchNotSupported)
    assert str(error) == f"no ACP endpoint at {url} (HTTP {status})"
    assert error.status == status and "Not Found" in error.body


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("ws:/127.0.0.1:8000/acp", "ws://127.0.0.1:8000/acp"),
        ("ws//127.0.0.1:8000/acp", "ws://127.0.0.1:8000/acp"),
        ("wss:agent.example/acp", "wss://agent.example/acp"),
        ("http:/localhost:8000/acp", "http://localhost:8000/acp"),
        ("WS://host/acp", "ws://host/acp"),
        ("https:/user:secret@host/acp", "https://host/acp"),
    ],
)
def test_a_mistyped_url_shows_the_correct_form(typed: str, shown: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        AcpClient(typed)
    assert repr(shown) in str(caught.value)
    assert "secret" not in str(caught.value)


# -- a transport that reattaches its streams ------------------------------------------------------------


class _Resuming:
    """A memory link that also says when it reattached a stream (as the HTTP transport does)."""

    def __init__(self, inner: Any, listeners: list[Any]) -> None:
        self._inner, self._listeners = inner, listeners

    @property
    def info(self) -> Any:
        return self._inner.info

    async def send(self, message: Any) -> None:
        await self._inner.send(message)

    async def receive(self) -> Any:
        return await self._inner.receive()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def watch_resumes(self, listener: Any) -> None:
        self._listeners.append(listener)


class _ResumingConnector:
    def __init__(self, inner: MemoryConnector) -> None:
        self.inner = inner
        self.listeners: list[Any] = []

    @property
    def target(self) -> str:
        return self.inner.target

    async def connect(self) -> Any:
        return _Resuming(await self.inner.connect(), self.listeners)


async def test_a_resumed_stream_reaches_the_app_and_recovers_nothing() -> None:
    clock = FakeClock()
    connector = _ResumingConnector(MemoryConnector(ReferenceAgent(clock=clock)))
    resumed: list[StreamResumed] = []
    outcomes: list[Any] = []
    callbacks = Callbacks(on_stream_resumed=resumed.append, on_resume=outcomes.append, on_replay=outcomes.append)
    async with AcpClient(connector, clock=clock, callbacks=callbacks) as client:
        handle = await client.new_session("/work")
        assert len(connector.listeners) == 1  # the link's transport was asked to report its resumes
        event = StreamResumed(handle.session_id, "41", "conn-1", "broken: reset")
        connector.listeners[0](event)
        await clock.settle()
        assert resumed == [event]
        assert outcomes == [] and connector.inner.connects == 1  # nothing to recover, no new link
        assert (await clock.run(handle.prompt("still here"))).stop_reason == "end_turn"
