"""``SyncAcpClient(session_store=...)``: the blocking facade keeps and recovers stored sessions too."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


class SlowTurnStore(SqliteSessionStore):
    """A store whose turn writes take a while (a slow disk or database)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writing = threading.Event()
        self.proceed = threading.Event()

    def save_turn(self, *args: Any, **kwargs: Any) -> bool:
        self.writing.set()
        assert self.proceed.wait(DEADLINE)
        return super().save_turn(*args, **kwargs)


def test_the_sync_prompt_returns_only_once_its_turn_is_written(
    tmp_path: Path, server: tuple[EventLoopThread, ReferenceAgent, ReferenceServer]
) -> None:
    _, _, reference = server
    with (
        SlowTurnStore(tmp_path / "s.db") as store,
        SyncAcpClient(reference.ws_url, session_store=store, default_timeout=DEADLINE) as client,
    ):
        session = client.new_session("/work/sync")
        turn = client.prompt_async(session.session_id, "keep me")
        assert store.writing.wait(DEADLINE)  # the agent ended the turn; its write is under way
        assert client.owned_sessions() == [session.session_id]  # a round trip through the client's loop
        assert not turn.done()  # so the facade has not returned it
        store.proceed.set()
        result = turn.result(DEADLINE)
        assert result.stored is True
        key = client.client.session_store_key
        assert key is not None and "keep me" in str(store.load_transcript(key, session.session_id))
