"""``SyncAcpClient(session_store=...)``: the blocking facade keeps and recovers stored sessions too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_client import RetryPolicy, State
from acp_client.store import SqliteSessionStore
from acp_client.sync import EventLoopThread, SyncAcpClient
from acp_client.testing import ReferenceAgent, ReferenceServer
from tests._support import agent_on_its_own_loop

DEADLINE = 10.0


@pytest.fixture
def server() -> Iterator[tuple[EventLoopThread, ReferenceAgent, ReferenceServer]]:
    with agent_on_its_own_loop(DEADLINE) as side:
        yield side


def test_sync_client_saves_and_recovers(
    tmp_path: Path, server: tuple[EventLoopThread, ReferenceAgent, ReferenceServer]
) -> None:
    loop, agent, reference = server
    retry = RetryPolicy(initial_delay=0.05, max_delay=0.2)
    with SqliteSessionStore(tmp_path / "s.db") as store:
        with SyncAcpClient(reference.ws_url, session_store=store, retry=retry, default_timeout=DEADLINE) as client:
            session_id = client.new_session("/work/sync").session_id
            client.prompt(session_id, "hello")
            assert client.client.session_store_key == f"ws://127.0.0.1:{reference.port}/acp"
        loop.run(_restart(agent), timeout=DEADLINE)
        with SyncAcpClient(reference.ws_url, session_store=store, retry=retry, default_timeout=DEADLINE) as client:
            assert client.state.state is State.CONNECTED
            assert [outcome.path.value for outcome in client.client.recovery_outcomes] == ["replay"]
            assert client.session(session_id).transcript.text() == "user: hello\nagent: echo: hello"


async def _restart(agent: ReferenceAgent) -> None:
    agent.lose_memory()
