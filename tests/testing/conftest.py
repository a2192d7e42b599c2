"""Fixtures of the reference agent's tests over an in-memory transport: ``peers`` (closed at teardown)
and ``connect(version)`` (a new initialized :class:`~tests.testing._raw.MemoryPeer`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from acp_client.testing.reference_agent import ReferenceAgent

from ._raw import MemoryPeer


@pytest_asyncio.fixture
async def peers(reference_agent: ReferenceAgent) -> AsyncIterator[list[MemoryPeer]]:
    opened: list[MemoryPeer] = []
    yield opened
    for peer in opened:
        await peer.aclose()


@pytest_asyncio.fixture
async def connect(reference_agent: ReferenceAgent, peers: list[MemoryPeer]) -> Any:
    async def make(version: int | None = 1, agent: ReferenceAgent | None = None) -> MemoryPeer:
        peer = MemoryPeer(agent or reference_agent)
        peers.append(peer)
        if version is not None:
            await peer.initialize(version)
        return peer

    return make
