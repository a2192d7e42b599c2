"""Fixtures of the transport tests on loopback servers. On HTTP ones (hypercorn, in-process): a test CA
(``ca``, ``certfile``, ``trusted``), ``serve`` (start an ASGI app), ``link`` (open transports, closed
at teardown), ``fake`` / ``fake_ts`` (the fake ACP server in the Python / TypeScript dialect); and on WebSocket
servers: ``ws_server`` / ``make_ws_server`` (``websockets``' own), ``raw_server`` (raw asyncio scripts),
``opened`` (transports closed at teardown)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trustme

from acp_client.transports import TlsConfig
from acp_client.transports.http import HttpConnector, HttpTransport
from acp_client.transports.websocket import WebSocketTransport
from tests.transports._http_support import Link, Serve, init

from ._http_servers import App, FakeAcpServer, Hypercorn
from ._ws_servers import RawScript, RawServer, WsServer


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
