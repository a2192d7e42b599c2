"""Fixtures of the ``acp_client.sync`` tests: ``side`` (the reference server behind a fault proxy, on a
loop thread of their own) and ``make_client`` (a connected facade on its proxied WebSocket URL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from acp_client.sync import EventLoopThread, SyncAcpClient
from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer
from tests._support import FAST_RETRY
from tests.sync._support import DEADLINE, AgentSide


@pytest.fixture
def side() -> Iterator[AgentSide]:
    loop = EventLoopThread(name="agent-side")
    loop.start()

    async def start() -> AgentSide:
        agent = ReferenceAgent()
        server = ReferenceServer(agent)
        await server.start()
        proxy = FaultProxy("127.0.0.1", server.port)
        await proxy.start()
        return AgentSide(loop, agent, server, proxy)

    agent_side = loop.run(start(), timeout=DEADLINE)
    try:
        yield agent_side
    finally:

        async def stop() -> None:
            await agent_side.proxy.aclose()
            await agent_side.server.aclose()

        loop.run(stop(), timeout=DEADLINE)
        loop.close()


@pytest.fixture
def make_client(side: AgentSide) -> Iterator[Callable[..., SyncAcpClient]]:
    """``make_client(**kwargs)``: a connected facade on the proxied WebSocket URL (closed at
    teardown)."""
    clients: list[SyncAcpClient] = []

    def make(connect: bool = True, **kwargs: Any) -> SyncAcpClient:
        kwargs.setdefault("retry", FAST_RETRY)
        kwargs.setdefault("default_timeout", DEADLINE)
        client = SyncAcpClient(side.url, **kwargs)
        clients.append(client)
        if connect:
            client.connect(timeout=DEADLINE)
        return client

    yield make
    for client in clients:
        client.close()
