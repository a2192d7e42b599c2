"""Ownership on SqliteSessionStore: the shared lease contract (``acp_client.testing.lease_contract``),
and what only the SQLite file shows (migrating an older file, the store's clock)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from acp_client import ConfigurationError
from acp_client.store import APPLICATION_ID, SCHEMA_VERSION, Lease, SqliteSessionStore, StoredSession
from acp_client.store import _schema as schema
from acp_client.testing.lease_contract import SharedSessionStoreContract

EP = "ws://agent.example/acp"
T0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)


class SqliteBackend:
    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self) -> SqliteSessionStore:
        return SqliteSessionStore(self.path, busy_timeout=30.0)

    def close(self) -> None:
        pass


class TestSqliteLeases(SharedSessionStoreContract):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[SqliteBackend]:
        yield SqliteBackend(tmp_path / "sessions.db")


def test_a_version_2_file_is_migrated_and_its_sessions_are_adoptable(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for step in schema._MIGRATIONS[:2]:
        step(raw)
    stamp = 1_700_000_000_000_000
    raw.execute(
        "INSERT INTO sessions (endpoint, session_id, cwd, created_at, updated_at, last_used_at) "
        "VALUES (?, 'old', '/old', ?, ?, ?)",
        (EP, stamp, stamp, stamp),
    )
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.execute("PRAGMA user_version = 2")
    raw.close()
    with SqliteSessionStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 3
        (old,) = store.adoptable(EP, now=T0)
        assert old.session_id == "old" and old.lease is None
        (lease,) = store.claim(EP, ["old"], "a", duration=10, now=T0)
        assert lease == Lease("old", "a", 1, T0 + timedelta(seconds=10))
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT value FROM store_meta WHERE key = 'compatible_version'").fetchone()[0] == "3"
    raw.close()


def test_leases_are_measured_on_the_stores_clock(tmp_path: Path) -> None:
    now = [T0]
    with SqliteSessionStore(tmp_path / "s.db", clock=lambda: now[0]) as store:
        lease = store.save_owned(StoredSession(endpoint=EP, session_id="s", cwd="/"), "a", duration=5)
        assert lease.expires_at == T0 + timedelta(seconds=5)
        assert store.adoptable(EP) == []
        now[0] = T0 + timedelta(seconds=5)
        assert [item.session_id for item in store.adoptable(EP)] == ["s"]
        assert store.claim(EP, ["s"], "b", duration=5)[0].token == 2


def test_a_clock_that_is_not_callable_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="clock"):
        SqliteSessionStore(tmp_path / "s.db", clock=T0)  # type: ignore[arg-type]
