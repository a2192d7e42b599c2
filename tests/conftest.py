"""Shared test configuration. Peer fixtures live in ``tests/peers/`` and are loaded here."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from acp_client.testing import FakeClock
from tests._farm import Farm
from tests._world import World

pytest_plugins = [
    "tests.peers.python_sdk",
    "tests.peers.haproxy",
    "tests.peers.postgres",
    "tests.peers.reference",
    "tests.peers.typescript_sdk",
    # After typescript_sdk, whose cache helpers it imports (so pytest rewrites that module first).
    "tests.peers.real_agents",
    "tests.peers.claude_agents",
    "tests.peers.codex_pi_agents",
    "tests.peers.qwen_daemon",
]


@pytest_asyncio.fixture
async def farm(request: pytest.FixtureRequest) -> AsyncIterator[Farm]:
    """Three instances (``tests/_farm.py``) on a fake clock, each with its own store;
    ``@pytest.mark.farm(shared=("a", "b"))`` (on a test or a module) makes those share one."""
    marker = request.node.get_closest_marker("farm")
    farm = Farm(FakeClock(), **(marker.kwargs if marker is not None else {}))
    yield farm
    await farm.aclose()


@pytest_asyncio.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    """Clients sharing one agent and one SQLite store (``tests/_world.py``), on a fake clock."""
    world = World(tmp_path)
    yield world
    for side in world.sides:
        await side.close()
    world.store.close()
