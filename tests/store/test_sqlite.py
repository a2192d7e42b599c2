"""SqliteSessionStore in one process, what is SQLite's own: the file, its identity and mode, files
that are not ours, a failing migration. What every store must do is the contract suite
(``acp_client.testing.store_contract``, run in ``test_contract.py``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from acp_client import AcpError, ConfigurationError, SessionStoreError
from acp_client.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    SessionStoreCorrupt,
    SessionStoreForeign,
    SqliteSessionStore,
)
from acp_client.store import sqlite as sqlite_module
from acp_client.testing.store_contract import EP, record


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


def snapshot(directory: Path) -> dict[str, bytes]:
    return {item.name: item.read_bytes() for item in directory.iterdir()}


# -- beyond the contract ----------------------------------------------------------------------------


def test_endpoints_and_counts(path: Path) -> None:
    other = "stdio:agent --serve"
    with SqliteSessionStore(path) as store:
        store.save(record("shared", used=1))
        store.save(record("shared", endpoint=other, used=2))
        store.save(record("only-ws"))
        assert store.endpoints() == [other, EP]
        assert (store.count(EP), store.count(other), store.count()) == (2, 1, 3)


def test_a_deleted_or_renamed_away_record_leaves_no_transcript_row(path: Path) -> None:
    with SqliteSessionStore(path) as store:
        for name in ("a", "b"):
            store.save(record(name))
            store.save_transcript(EP, name, [{"role": "user", "text": name}])
        store.rename(EP, "a", "b")
        store.delete(EP, "b")
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM transcripts").fetchone()[0] == 0


def test_rename_rolls_back_on_failure(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SqliteSessionStore(path) as store:
        store.save(record("old"))
        store.save(record("new"))  # a stale record under the new id: deleted before the rename fails

        def broken(value: object, what: str) -> str:
            raise ConfigurationError("boom")

        monkeypatch.setattr(sqlite_module, "dump_json", broken)
        with pytest.raises(ConfigurationError):
            store.rename(EP, "old", "new")
        monkeypatch.undo()
        assert sorted(item.session_id for item in store.load(EP)) == ["new", "old"]  # the delete was rolled back
        store.save(record("after"))  # and no transaction was left open


def test_load_reads_no_transcript(path: Path) -> None:
    # Restoring a thousand sessions before the first probe must not read a thousand transcripts.
    with SqliteSessionStore(path) as store:
        store.save(record())
        store.save_transcript(EP, "s1", [{"text": "t" * 1000}])
        statements: list[str] = []
        assert store._conn is not None
        store._conn.set_trace_callback(statements.append)
        assert store.load(EP) == [record()]
        assert statements and not [sql for sql in statements if "transcripts" in sql]


def test_a_closed_store_raises_a_store_error(path: Path) -> None:
    store = SqliteSessionStore(path)
    store.close()
    store.close()
    assert store.closed
    with pytest.raises(SessionStoreError, match="closed"):
        store.load(EP)


def test_memory_store_for_tests() -> None:
    with SqliteSessionStore(":memory:") as store:
        store.save(record())
        assert store.load(EP) == [record()]
        assert store.path == ":memory:"


def test_options_are_checked(path: Path) -> None:
    with pytest.raises(ConfigurationError):
        SqliteSessionStore(path, busy_timeout=-1)
    with pytest.raises(ConfigurationError):
        SqliteSessionStore(path, max_transcript_bytes=-1)
    assert not path.exists()


# -- the file ----------------------------------------------------------------------------------------


def test_a_new_file_carries_our_identity_and_schema_version_and_is_private(path: Path) -> None:
    (path / ".." / "nested" / "dir").mkdir(parents=True)  # the store creates its file, not directories
    with SqliteSessionStore(path / ".." / "nested" / "dir" / "s.db") as store:
        assert store.schema_version == SCHEMA_VERSION == 3
        created = Path(store.path)
        store.save(record())
        wal = Path(f"{created}-wal")
        assert (wal.stat().st_mode & 0o777) == 0o600  # SQLite gives its side files the same mode
    assert (created.stat().st_mode & 0o777) == 0o600
    raw = sqlite3.connect(created)
    assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert dict(raw.execute("SELECT key, value FROM store_meta")) == {
        "format": "acp_client.session_store",
        "compatible_version": "3",  # version 3 (leases) locks out older writers
    }
    raw.close()


def test_create_false_does_not_create(path: Path) -> None:
    with pytest.raises(SessionStoreError, match="does not exist"):
        SqliteSessionStore(path, create=False)
    assert not path.exists()


def test_an_empty_file_is_initialized(path: Path) -> None:
    path.write_bytes(b"")
    with SqliteSessionStore(path) as store:
        store.save(record())
    with SqliteSessionStore(path) as store:
        assert store.count() == 1


def refused(path: Path, error: type[SessionStoreError], match: str) -> None:
    """Opening ``path`` raises ``error`` and leaves the directory byte-identical."""
    before = snapshot(path.parent)
    with pytest.raises(error, match=match) as info:
        SqliteSessionStore(path)
    assert isinstance(info.value, AcpError)
    assert info.value.path == str(path)
    assert snapshot(path.parent) == before  # the file untouched, no -wal / -shm / -journal beside it


def test_a_random_file_is_refused_and_left_untouched(path: Path) -> None:
    path.write_bytes(os.urandom(4096))
    refused(path, SessionStoreCorrupt, "not an SQLite database")


def test_a_text_file_is_refused_and_left_untouched(path: Path) -> None:
    path.write_text("my notes\n" * 100)
    refused(path, SessionStoreCorrupt, "not an SQLite database")


def test_a_damaged_sqlite_header_is_refused_and_left_untouched(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    refused(path, SessionStoreCorrupt, "damaged or not a database")


def test_a_table_less_database_of_another_application_is_refused(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA application_id = 1234")
    raw.close()
    refused(path, SessionStoreForeign, "another application")
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA application_id = 0")
    raw.execute("PRAGMA user_version = 7")
    raw.close()
    refused(path, SessionStoreForeign, "another application")


def test_a_truncated_store_is_reported_as_corrupt_and_not_written(path: Path) -> None:
    with SqliteSessionStore(path) as store:
        for index in range(300):
            store.save(record(f"s{index}", extra={"text": "z" * 500}))
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA journal_mode = DELETE")
    raw.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    before = snapshot(path.parent)
    with pytest.raises(SessionStoreCorrupt), SqliteSessionStore(path) as store:
        store.load(EP)
    assert snapshot(path.parent)[path.name] == before[path.name]


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SessionStoreError, match="not a regular file"):
        SqliteSessionStore(tmp_path)


# -- migrations ---------------------------------------------------------------------------------------


def _add_pinned(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")


def test_a_failing_migration_leaves_the_file_at_its_version(path: Path) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        _add_pinned(conn)
        raise sqlite3.OperationalError("disk on fire")

    class Broken(SqliteSessionStore):
        _migrations = (*sqlite_module._MIGRATIONS, broken)

    with SqliteSessionStore(path) as store:
        store.save(record())
    with pytest.raises(SessionStoreError, match="disk on fire"):
        Broken(path)
    with SqliteSessionStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.load(EP) == [record()]
    assert "pinned" not in {row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(sessions)")}


def test_a_store_another_process_initializes_meanwhile_is_not_taken_for_foreign(tmp_path: Path) -> None:
    """Two processes creating one new store (seen flaky under load): the second read the header
    (no application id yet), then the first committed its tables and id, then the second read
    the tables — and called the file foreign. The identification reads one snapshot now."""
    path = tmp_path / "fresh.db"
    first = sqlite3.connect(path, isolation_level=None)
    first.execute("PRAGMA journal_mode = WAL")
    first.execute("BEGIN IMMEDIATE")
    for step in sqlite_module._MIGRATIONS:
        step(first)
    first.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    first.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    class CommitsAfterTheHeader:
        """The second process's connection; the first commits right after the header is read."""

        def __init__(self, inner: sqlite3.Connection) -> None:
            self.inner = inner

        @property
        def in_transaction(self) -> bool:
            return self.inner.in_transaction

        def execute(self, sql: str) -> sqlite3.Cursor:
            cursor = self.inner.execute(sql)
            if sql == "PRAGMA application_id" and first.in_transaction:
                first.execute("COMMIT")
            return cursor

    second = sqlite3.connect(path, isolation_level=None)
    store = SqliteSessionStore.__new__(SqliteSessionStore)
    store._path = str(path)
    try:
        # What the second sees is one consistent state: still empty (it then initializes under a
        # write lock, where it finds the first one's work), never half of each.
        assert store._identify(CommitsAfterTheHeader(second)) == (0, True)  # type: ignore[arg-type]
        assert store._identify(second) == (SCHEMA_VERSION, False)
    finally:
        second.close()
        first.close()
