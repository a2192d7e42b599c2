"""Two "processes" in one test: clients (``Side``) that share one agent, one fake clock and one
SQLite session store (``World``; the ``world`` fixture in ``tests/conftest.py``). A first client
writes the store and closes; a second one, with the same store and agent, recovers what it finds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from acp_client import AcpClient, Callbacks, ConnectionState, RecoveryOutcome
from acp_client.store import SessionStoreUnavailable, SqliteSessionStore, StoredSession
from acp_client.testing import FakeClock, ReferenceAgent, inside

from ._harness import FAST_RETRY, HarnessConnector

KEY = "memory://reference-agent"


class OutageStore(SqliteSessionStore):
    """An SQLite store whose writes of records and conversations (a turn's end included) fail while
    ``down`` (a database server gone away)."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise SessionStoreUnavailable("the database server went away", path=str(self.path))

    def save(self, session: StoredSession, **fenced: Any) -> None:
        self._check()
        super().save(session, **fenced)

    def save_transcript(self, endpoint: str, session_id: str, entries: Any, **fenced: Any) -> bool:
        self._check()
        return super().save_transcript(endpoint, session_id, entries, **fenced)

    def save_turn(self, endpoint: str, session_id: str, entries: Any, **options: Any) -> bool:
        self._check()
        return super().save_turn(endpoint, session_id, entries, **options)


class Side:
    """One client over the shared agent, recording states and outcomes."""

    def __init__(self, agent: ReferenceAgent, clock: FakeClock, store: Any, **kwargs: Any) -> None:
        self.connector = HarnessConnector(agent)
        self.states: list[ConnectionState] = []
        self.outcomes: list[RecoveryOutcome] = []
        callbacks = Callbacks(
            on_state_change=self.states.append,
            on_resume=self.outcomes.append,
            on_replay=self.outcomes.append,
            on_new_session=self.outcomes.append,
            on_recovery_failed=self.outcomes.append,
        )
        callbacks = attrs.evolve(callbacks, **kwargs.pop("callbacks", {}))
        self.client = AcpClient(
            self.connector,
            session_store=store,
            session_store_key=KEY,
            clock=clock,
            retry=FAST_RETRY,
            callbacks=callbacks,
            **kwargs,
        )

    async def flush(self) -> None:
        persistence = inside(self.client).engine.persistence
        assert persistence is not None
        await persistence.bridge.flush()

    async def close(self) -> None:
        await self.client.aclose()
        await self.connector.aclose()


class World:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock()
        self.agent = ReferenceAgent(clock=self.clock)
        self.store = SqliteSessionStore(tmp_path / "sessions.db")
        self.sides: list[Side] = []

    def side(self, **kwargs: Any) -> Side:
        side = Side(self.agent, self.clock, self.store, **kwargs)
        self.sides.append(side)
        return side

    async def first_run(self, count: int = 2) -> list[str]:
        """A first 'process': opens ``count`` sessions, one turn each, and closes."""
        side = self.side()
        await side.client.connect()
        ids = []
        for index in range(count):
            handle = await side.client.new_session(f"/work/p{index}")
            await handle.prompt(f"hello {index}")
            ids.append(handle.session_id)
        await side.close()
        return ids

    def stored(self) -> dict[str, StoredSession]:
        return {record.session_id: record for record in self.store.load(KEY)}
