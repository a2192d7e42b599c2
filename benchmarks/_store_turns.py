"""``benchmarks/store.py``'s per-turn section: what "durable before acknowledged" costs a turn.

With a session store, ``prompt()`` returns only once the turn's conversation is written (one job on
the store's thread: the whole conversation, one statement on PostgreSQL). This section times
``prompt()`` end to end through :class:`~acp_client.AcpClient` against the bundled reference agent in
this process over a memory link — without a store, with an SQLite store, and with a PostgreSQL store
(a throwaway server, ``fsync`` off: the client's and the protocol's cost, not a disk's) — each shared
(an owner, leases renewed, every write fenced), and prints the median and 95th percentile per turn and
the median each store adds. ``sessions`` sessions take ``turns`` turns each, one after another, so a
conversation grows as a user's does.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from _common import fmt_ms, median, table

from acp_client import AcpClient
from acp_client.store import PostgresSessionStore, SqliteSessionStore
from acp_client.testing import MemoryConnector, ReferenceAgent
from acp_client.testing.postgres import TemporaryPostgres

KEY = "memory://reference-agent"


async def _turns(store: Any, sessions: int, turns: int) -> list[float]:
    """Seconds each ``prompt()`` took, every turn of every session."""
    connector = MemoryConnector(ReferenceAgent())
    options: dict[str, Any] = {} if store is None else {"session_store": store, "session_store_key": KEY}
    took: list[float] = []
    async with AcpClient(connector, retry=None, **options) as client:
        for index in range(sessions):
            handle = await client.new_session(f"/work/turns-{index}")
            for turn in range(turns):
                started = time.perf_counter()
                result = await handle.prompt(f"turn {turn}: a question of an ordinary length, asked once")
                took.append(time.perf_counter() - started)
                assert store is None or result.stored is True
    await connector.aclose()
    return took


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def turn_cost(directory: Path, *, sessions: int, turns: int, postgres: bool) -> None:
    """Print the per-turn table (see the module docstring)."""
    runs: list[tuple[str, list[float]]] = [("no store", asyncio.run(_turns(None, sessions, turns)))]
    with SqliteSessionStore(directory / "turns.db") as sqlite:
        runs.append(("SQLite", asyncio.run(_turns(sqlite, sessions, turns))))
    if postgres:
        with TemporaryPostgres() as server, PostgresSessionStore(server.dsn(server.create_database())) as pg:
            runs.append(("PostgreSQL", asyncio.run(_turns(pg, sessions, turns))))
    base = median(runs[0][1])
    rows = [
        [
            name,
            f"{len(took):,}",
            fmt_ms(median(took)),
            fmt_ms(_p95(took)),
            "" if index == 0 else fmt_ms(median(took) - base),
        ]
        for index, (name, took) in enumerate(runs)
    ]
    print(
        "Per turn: prompt() until it returns, the turn's conversation written first "
        f"({sessions} sessions, {turns} turns each)"
    )
    print(table(["store", "turns", "median ms", "p95 ms", "added per turn ms"], rows))
