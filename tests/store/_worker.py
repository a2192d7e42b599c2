"""A second process for the store tests: ``python -m tests.store._worker MODE ...``.

Modes:

- ``write PATH NAME COUNT READY``: open the store (PATH: an SQLite file, or a PostgreSQL DSN),
  create READY, wait for a line on stdin (the go), then write (see :func:`expected_ids` for what
  ends up stored).
- ``hold PATH SECONDS READY``: take the store's write lock with a raw ``sqlite3`` connection,
  write one row, create READY, hold the lock SECONDS, commit.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from acp_client.store import PostgresSessionStore, SessionStore, SqliteSessionStore, StoredSession

EP = "ws://agent.example/acp"
EP2 = "stdio:agent --serve"


def expected_ids(name: str, count: int) -> tuple[set[str], set[str]]:
    """The session ids a ``write`` worker leaves under ``EP`` and ``EP2``."""
    first = {f"{name}-{i}-renamed" if i % 7 == 0 else f"{name}-{i}" for i in range(count)}
    second = {f"{name}-{i}" for i in range(count) if i % 5 == 0 and i % 3 != 0}
    return first, second


def open_store(path: str) -> SessionStore:
    """An SQLite store for a file name, a PostgreSQL one for a DSN (keywords or a URL)."""
    if path.startswith(("postgresql:", "postgres:")) or "=" in path:
        return PostgresSessionStore(path, pool_size=2)
    return SqliteSessionStore(path, busy_timeout=30.0)


def write(path: str, name: str, count: int, ready: Path) -> None:
    store = open_store(path)
    ready.touch()
    sys.stdin.readline()  # the go: every writer starts at once
    for i in range(count):
        session_id = f"{name}-{i}"
        store.save(
            StoredSession(
                endpoint=EP,
                session_id=session_id,
                cwd=f"/work/{name}",
                config_options={"i": i},
                extra={"writer": name, "i": i},
            )
        )
        assert store.save_transcript(EP, session_id, [{"role": "agent", "text": f"{name} {i}"}])
        store.touch(EP, "shared")
        if i % 5 == 0:
            store.save(StoredSession(endpoint=EP2, session_id=session_id, cwd="/other"))
            if i % 3 == 0:
                assert store.delete(EP2, session_id)
        if i % 7 == 0:
            assert store.rename(EP, session_id, f"{session_id}-renamed") is not None
        store.load(EP)  # readers run between the writes
    store.close()  # type: ignore[attr-defined]


def hold(path: str, seconds: float, ready: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    stamp = int(datetime.now(timezone.utc).timestamp() * 1_000_000)
    conn.execute(
        "INSERT INTO sessions (endpoint, session_id, cwd, created_at, updated_at, last_used_at) "
        "VALUES (?, 'held', '/held', ?, ?, ?)",
        (EP, stamp, stamp, stamp),
    )
    ready.touch()
    time.sleep(seconds)  # the scenario: a lock held this long by another process
    conn.execute("COMMIT")
    conn.close()


def main(argv: list[str]) -> None:
    mode, path = argv[0], argv[1]
    if mode == "write":
        write(path, argv[2], int(argv[3]), Path(argv[4]))
    elif mode == "hold":
        hold(path, float(argv[2]), Path(argv[3]))
    else:  # pragma: no cover
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
