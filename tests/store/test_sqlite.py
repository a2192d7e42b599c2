"""SqliteSessionStore in one process: round trip, schema, refusing files that are not ours."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest

from acp_client import (
    AcpError,
    ConfigurationError,
    Probe,
    SessionStoreCorrupt,
    SessionStoreError,
    SessionStoreForeign,
    SessionStoreTooNew,
)
from acp_client.store import APPLICATION_ID, SCHEMA_VERSION, SqliteSessionStore, StoredSession
from acp_client.store import sqlite as sqlite_module

T0 = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=timezone.utc)
EP = "ws://agent.example/acp"


def record(session_id: str = "s1", *, endpoint: str = EP, used: int = 0, **fields: object) -> StoredSession:
    return StoredSession(
        endpoint=endpoint,
        session_id=session_id,
        cwd="/work",
        created_at=T0,
        updated_at=T0,
        last_used_at=T0 + timedelta(seconds=used),
        **fields,  # type: ignore[arg-type]
    )


def full_record() -> StoredSession:
    return StoredSession(
        endpoint="stdio:python -m agent",
        session_id="sess-ü-1",
        cwd="/home/ünï/project",
        mcp_servers=({"name": "fs", "command": "/bin/fs", "args": ["-x"], "env": [{"name": "K", "value": "v"}]},),
        additional_directories=("/extra/one", "/extra/two"),
        protocol_version=2,
        mode_id="architect",
        model_id="model-7",
        config_options={"reasoning": "high", "tools": True, "n": 3},
        title="Fix the flaky test ✓",
        status=Probe.INACTIVE,
        raw_status="saved",
        created_at=T0,
        updated_at=T0 + timedelta(minutes=5),
        last_used_at=datetime(2026, 3, 4, 8, 0, 0, 1, tzinfo=timezone(timedelta(hours=-3))),
        previous_session_ids=("old-1", "old-2"),
        extra={"label": "main", "nested": {"a": [1, 2, None]}},
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


def snapshot(directory: Path) -> dict[str, bytes]:
    return {item.name: item.read_bytes() for item in directory.iterdir()}


# -- round trip --------------------------------------------------------------------------------------


def test_every_field_round_trips_through_the_file(path: Path) -> None:
    stored = full_record()
    fields = attrs.asdict(stored, recurse=False)
    assert fields.pop("lease") is None  # the store's bookkeeping, filled in on reads (not a record field)
    assert all(value not in (None, (), {}) for value in fields.values())
    with SqliteSessionStore(path) as store:
        store.save(stored)
    with SqliteSessionStore(path) as store:  # a later process: read back from disk
        (loaded,) = store.load(stored.endpoint)
        assert loaded == stored
        assert store.get(stored.endpoint, stored.session_id) == stored
        assert loaded.last_used_at.tzinfo is timezone.utc


def test_defaults_round_trip(path: Path) -> None:
    stored = StoredSession(endpoint=EP, session_id="s", cwd="/")
    with SqliteSessionStore(path) as store:
        store.save(stored)
        assert store.get(EP, "s") == stored


def test_save_replaces_the_whole_record(path: Path) -> None:
    with SqliteSessionStore(path) as store:
        store.save(record(title="first", mode_id="a", extra={"x": 1}))
        store.save(record(title="second"))
        assert store.get(EP, "s1") == record(title="second")
        assert store.count() == 1


def test_load_is_most_recently_used_first_and_touch_reorders(path: Path) -> None:
    with SqliteSessionStore(path) as store:
        for index, name in enumerate(["a", "b", "c"]):
            store.save(record(name, used=index))
        assert [item.session_id for item in store.load(EP)] == ["c", "b", "a"]
        assert store.touch(EP, "a", when=T0 + timedelta(hours=1))
        assert [item.session_id for item in store.load(EP)] == ["a", "c", "b"]
        assert store.get(EP, "a").last_used_at == T0 + timedelta(hours=1)  # type: ignore[union-attr]
        assert not store.touch(EP, "missing")
        store.touch(EP, "b")
        assert store.load(EP)[0].session_id == "b"  # now


def test_sessions_are_scoped_by_endpoint(path: Path) -> None:
    other = "stdio:agent --serve"
    with SqliteSessionStore(path) as store:
        store.save(record("shared", title="on ws", used=1))
        store.save(record("shared", endpoint=other, title="on stdio", used=2))
        store.save(record("only-ws"))
        assert {item.session_id for item in store.load(EP)} == {"shared", "only-ws"}
        assert [item.title for item in store.load(other)] == ["on stdio"]
        assert store.load("http://elsewhere/") == []
        assert store.endpoints() == [other, EP]
        assert store.delete(other, "shared")
        assert not store.delete(other, "shared")
        assert store.get(EP, "shared").title == "on ws"  # type: ignore[union-attr]
        assert (store.count(EP), store.count(other), store.count()) == (2, 0, 2)


def test_rename_is_one_step_and_remembers_the_old_id(path: Path) -> None:
    with SqliteSessionStore(path) as store:
        store.save(record("old", mode_id="m", previous_session_ids=("older",)))
        store.save(record("new", title="stale record under the new id"))
        renamed = store.rename(EP, "old", "new", when=T0 + timedelta(minutes=1))
        assert renamed is not None
        assert renamed.session_id == "new" and renamed.mode_id == "m"
        assert renamed.previous_session_ids == ("older", "old")
        assert renamed.updated_at == T0 + timedelta(minutes=1)
        assert store.load(EP) == [renamed]
        assert store.rename(EP, "old", "other") is None  # nothing stored under it: nothing written
        assert store.rename(EP, "new", "new") == renamed
        with pytest.raises(ConfigurationError):
            store.rename(EP, "new", "")


def test_rename_rolls_back_on_failure(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SqliteSessionStore(path) as store:
        store.save(record("old"))

        def broken(self: SqliteSessionStore, session: StoredSession) -> tuple[object, ...]:
            raise ConfigurationError("boom")

        monkeypatch.setattr(SqliteSessionStore, "_row", broken)
        with pytest.raises(ConfigurationError):
            store.rename(EP, "old", "new")
        monkeypatch.undo()
        assert [item.session_id for item in store.load(EP)] == ["old"]  # the delete was rolled back
        store.save(record("after"))  # and no transaction was left open


def test_transcript_tail_is_bounded_on_save(path: Path) -> None:
    entries = tuple({"role": "agent", "text": f"{i}: " + "y" * 200} for i in range(1000))
    with SqliteSessionStore(path, max_transcript_bytes=8 * 1024) as store:
        store.save(record())
        assert store.save_transcript(EP, "s1", entries)
        tail = store.load_transcript(EP, "s1")
        assert 0 < len(tail) < 1000 and tail[-1] == entries[-1]
        assert list(tail) == list(entries[-len(tail) :])
        size = sqlite3.connect(path).execute("SELECT length(CAST(tail AS BLOB)) FROM transcripts").fetchone()[0]
        assert size <= 8 * 1024
    with SqliteSessionStore(path, max_transcript_bytes=0) as store:
        store.save_transcript(EP, "s1", entries)
        assert store.load_transcript(EP, "s1") == ()


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


def test_the_transcript_lives_beside_the_record(path: Path) -> None:
    tail = ({"role": "user", "text": "hi"}, {"role": "agent", "text": "hello ✓", "messageId": "m1"})
    with SqliteSessionStore(path) as store:
        assert not store.save_transcript(EP, "s1", tail)  # no record: nothing written
        assert store.load_transcript(EP, "s1") == ()
        store.save(record())
        assert store.save_transcript(EP, "s1", tail)
    with SqliteSessionStore(path) as store:
        assert store.load_transcript(EP, "s1") == tail
        store.save(record(title="saving the record keeps the tail"))
        assert store.load_transcript(EP, "s1") == tail
        assert store.load_transcript("ws://other/", "s1") == ()  # scoped by endpoint
        store.rename(EP, "s1", "s2")  # moves with the record
        assert store.load_transcript(EP, "s1") == ()
        assert store.load_transcript(EP, "s2") == tail
        store.save(record("s3"))
        store.save_transcript(EP, "s3", tail[:1])
        store.rename(EP, "s2", "s3")  # replaces the stale record under the new id, and its tail
        assert store.load_transcript(EP, "s3") == tail
        assert store.delete(EP, "s3")  # goes with the record
        assert store.load_transcript(EP, "s3") == ()
        assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM transcripts").fetchone()[0] == 0


def test_a_value_that_is_not_json_is_refused_before_writing(path: Path) -> None:
    with SqliteSessionStore(path) as store:
        with pytest.raises(ConfigurationError):
            store.save(record(extra={"when": datetime.now()}))
        with pytest.raises(ConfigurationError):
            store.save(record(config_options={"x": float("nan")}))
        assert store.count() == 0
        store.save(record())
        with pytest.raises(ConfigurationError):
            store.save_transcript(EP, "s1", [{"when": datetime.now()}])
        assert store.load_transcript(EP, "s1") == ()


def test_a_damaged_record_is_skipped_by_load_and_named_by_get(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with SqliteSessionStore(path) as store:
        store.save(record("good"))
        store.save(record("bad"))
        raw = sqlite3.connect(path)
        raw.execute("UPDATE sessions SET config_options = '{not json' WHERE session_id = 'bad'")
        raw.execute("INSERT INTO transcripts VALUES (?, 'good', '[1, 2')", (EP,))
        raw.commit()
        raw.close()
        with caplog.at_level(logging.WARNING, logger="acp_client.store.sqlite"):
            assert [item.session_id for item in store.load(EP)] == ["good"]
        assert "'bad'" in caplog.text
        with pytest.raises(SessionStoreCorrupt, match="bad"):
            store.get(EP, "bad")
        with pytest.raises(SessionStoreCorrupt, match="transcript of session 'good'"):
            store.load_transcript(EP, "good")


def test_many_threads_share_one_store(path: Path) -> None:
    store = SqliteSessionStore(path)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for index in range(40):
                store.save(record(f"t{worker}-{index}", used=index))
                store.load(EP)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert store.count(EP) == 160
    store.close()


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


def test_another_applications_database_is_refused_and_left_untouched(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    raw.execute("INSERT INTO notes (body) VALUES ('keep me')")
    raw.commit()
    raw.close()
    refused(path, SessionStoreForeign, "another application")


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


def test_our_id_without_our_tables_is_corrupt(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.execute("PRAGMA user_version = 1")
    raw.execute("CREATE TABLE other (x)")
    raw.close()
    refused(path, SessionStoreCorrupt, "missing its tables")


def newer(path: Path, *, version: int, compatible: int) -> None:
    with SqliteSessionStore(path) as store:
        store.save(record())
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {version}")
    raw.execute("UPDATE store_meta SET value = ? WHERE key = 'compatible_version'", (str(compatible),))
    raw.commit()
    raw.execute("PRAGMA journal_mode = DELETE")  # fold the WAL in: one file to compare
    raw.close()


def test_a_newer_incompatible_schema_is_refused_and_left_untouched(path: Path) -> None:
    newer(path, version=6, compatible=4)
    refused(path, SessionStoreTooNew, "schema version 6.*upgrade acp_client")
    try:
        SqliteSessionStore(path)
    except SessionStoreTooNew as exc:
        assert (exc.version, exc.supported) == (6, SCHEMA_VERSION)


def test_a_newer_compatible_schema_is_used_as_it_is(path: Path) -> None:
    newer(path, version=4, compatible=3)
    with SqliteSessionStore(path) as store:
        assert store.schema_version == 4
        assert store.load(EP) == [record()]
        store.save(record("s2"))
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 4  # never downgraded


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


def _add_pinned_breaking(conn: sqlite3.Connection) -> None:
    _add_pinned(conn)
    conn.execute(f"UPDATE store_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'compatible_version'")


class _V2Store(SqliteSessionStore):
    _migrations = (*sqlite_module._MIGRATIONS, _add_pinned)


class _V2BreakingStore(SqliteSessionStore):
    _migrations = (*sqlite_module._MIGRATIONS, _add_pinned_breaking)


def test_an_older_file_is_migrated_in_place_keeping_its_sessions(path: Path) -> None:
    with SqliteSessionStore(path) as store:
        store.save(full_record())
    with _V2Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION + 1
        assert store.load(full_record().endpoint) == [full_record()]
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    assert "pinned" in {row[1] for row in raw.execute("PRAGMA table_info(sessions)")}
    raw.close()
    with SqliteSessionStore(path) as store:  # additive: the older code still reads and writes it
        assert store.schema_version == SCHEMA_VERSION + 1
        store.save(record())


def test_a_migration_that_breaks_older_readers_locks_them_out(path: Path) -> None:
    with SqliteSessionStore(path) as store:
        store.save(record())
    with _V2BreakingStore(path):
        pass
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA journal_mode = DELETE")
    raw.close()
    refused(path, SessionStoreTooNew, f"schema version {SCHEMA_VERSION + 1}")


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
