"""Fixtures of the hostile-agent tests: ``ws_agent``, ``http_agent`` and ``peer`` (each of the three
hostile peers in turn: ``ws``, ``http``, ``stdio``); see ``tests/interop/_hostile.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.interop._hostile import HostileHttpAgent, HostileWsAgent, Peer, read_log, stdio_endpoint
from tests.transports._http_servers import Hypercorn


@pytest.fixture
async def ws_agent() -> AsyncIterator[HostileWsAgent]:
    agent = await HostileWsAgent().start()
    try:
        yield agent
    finally:
        await agent.stop()


@pytest.fixture
async def http_agent() -> AsyncIterator[tuple[HostileHttpAgent, Hypercorn]]:
    app = HostileHttpAgent()
    server = await Hypercorn(app).start()  # type: ignore[arg-type]
    try:
        yield app, server
    finally:
        app.shut_down()
        await server.stop()


@pytest.fixture(params=["ws", "http", "stdio"])
async def peer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Peer]:
    kind = request.param
    if kind == "ws":
        ws = await HostileWsAgent().start()
        try:
            yield Peer(kind, ws.url, lambda: ws.received)
        finally:
            await ws.stop()
    elif kind == "http":
        app = HostileHttpAgent()
        server = await Hypercorn(app).start()  # type: ignore[arg-type]
        try:
            yield Peer(kind, server.url, lambda: app.received)
        finally:
            app.shut_down()
            await server.stop()
    else:
        log = tmp_path / "stdio-agent.log"
        yield Peer(kind, stdio_endpoint(log), lambda: read_log(log))
