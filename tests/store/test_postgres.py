"""PostgresSessionStore beyond the contract: the optional driver, the DSN as shown, schemas,
bounded connections, and a database that goes away (connections cut, the server stopped)."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from acp_client import ConfigurationError, SessionStoreError
from acp_client.store import PostgresSessionStore, SessionStoreForeign, SessionStoreReadOnly, SessionStoreUnavailable
from acp_client.store._pg_schema import APPLICATION_ID, SCHEMA_VERSION, redact_dsn
from acp_client.testing.postgres import TemporaryPostgres
from acp_client.testing.store_contract import EP, T0, record
from tests._support import eventually_blocking
from tests.peers.postgres import Database

ROOT = Path(__file__).resolve().parents[2]


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )


def test_importing_the_store_does_not_import_psycopg() -> None:
    done = python(
        """
        import sys
        from acp_client.store import PostgresSessionStore
        assert not [name for name in sys.modules if name.startswith("psycopg")], sorted(sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr


def test_without_psycopg_the_error_is_typed_and_names_the_extra() -> None:
    done = python(
        """
        import sys
        sys.modules["psycopg"] = None  # not installed
        from acp_client.store import SessionStoreDriverMissing, SessionStoreError
        from acp_client.store import PostgresSessionStore
        try:
            PostgresSessionStore("postgresql://app:hunter2@db.example/sessions")
        except SessionStoreDriverMissing as exc:
            assert isinstance(exc, SessionStoreError)
            assert "hunter2" not in str(exc) and "hunter2" not in exc.path, exc
            print(exc)
        else:
            raise SystemExit("no error")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'psycopg[binary]>=3.1' 'psycopg-pool>=3.2'" in done.stdout
    assert "the 'postgres' extra" in done.stdout


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://app:hunter2@db.example:5432/sessions", "postgresql://app:***@db.example:5432/sessions"),
        (
            "postgres://app@db.example/s?password=hunter2&sslmode=require",
            "postgres://app@db.example/s?password=***&sslmode=require",
        ),
        ("host=db.example user=app password=hunter2 dbname=s", "host=db.example user=app password=*** dbname=s"),
        ("host=db password = 'hun ter2' dbname=s", "host=db password = *** dbname=s"),
        ("host=/run/postgresql dbname=s", "host=/run/postgresql dbname=s"),
        # An unquoted value with spaces is masked whole, wherever it stands.
        ("host=db password=Qz1Top Wv2Half dbname=s", "host=db password=*** dbname=s"),
        ("password=Qz1Top Wv2Half", "password=***"),
        # Quoted with an escaped quote; sslpassword (the client key's passphrase) too.
        ("host=db password='it\\'s' sslpassword = 'k e y' dbname=s", "host=db password=*** sslpassword = *** dbname=s"),
        ("host=db sslpassword=k3y", "host=db sslpassword=***"),
        (
            "postgresql://app@db/s?sslpassword=k3y&sslmode=require&PASSWORD=x",
            "postgresql://app@db/s?sslpassword=***&sslmode=require&PASSWORD=***",
        ),
    ],
)
def test_the_dsn_is_shown_without_its_password(dsn: str, shown: str) -> None:
    assert redact_dsn(dsn) == shown


def test_an_unreachable_database_is_a_typed_error_naming_it_without_the_password(tmp_path: Path) -> None:
    dsn = f"host={tmp_path} port=1 user=app password=hunter2 dbname=nowhere"  # no server on that socket
    with pytest.raises(SessionStoreUnavailable, match="cannot reach the database") as info:
        PostgresSessionStore(dsn, connect_timeout=2)
    assert "hunter2" not in str(info.value) and "hunter2" not in info.value.path
    assert "dbname=nowhere" in info.value.path


@pytest.mark.parametrize("schema", ["", "has space", 'quo"te', "pg_catalog", "x" * 64, "semi;colon"])
def test_a_schema_name_that_is_not_a_plain_identifier_is_refused(schema: str) -> None:
    with pytest.raises(ConfigurationError, match="schema"):
        PostgresSessionStore("host=/nonexistent dbname=x", schema=schema)


@pytest.mark.parametrize("options", [{"pool_size": 0}, {"connect_timeout": 0}, {"reconnect_timeout": -1}])
def test_bad_options_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        PostgresSessionStore("host=/nonexistent dbname=x", **options)  # type: ignore[arg-type]


def test_a_url_and_keywords_reach_the_same_store(postgres_database: Database) -> None:
    with PostgresSessionStore(postgres_database.url) as by_url:
        by_url.save(record())
        assert by_url.path.startswith("postgresql://") and by_url.path.endswith("(schema acp_client)")
    with PostgresSessionStore(postgres_database.dsn) as by_keywords:
        assert by_keywords.load(EP) == [record()]


def test_two_schemas_in_one_database_are_two_stores(postgres_database: Database) -> None:
    with (
        PostgresSessionStore(postgres_database.dsn, schema="app_one") as one,
        PostgresSessionStore(postgres_database.dsn, schema="app_two") as two,
    ):
        one.save(record("a"))
        two.save(record("b"))
        assert [item.session_id for item in one.load(EP)] == ["a"]
        assert [item.session_id for item in two.load(EP)] == ["b"]
        assert (one.schema, two.schema) == ("app_one", "app_two")


def test_create_false_does_not_create(postgres_database: Database) -> None:
    with pytest.raises(SessionStoreError, match="does not exist"):
        PostgresSessionStore(postgres_database.dsn, create=False)
    with PostgresSessionStore(postgres_database.dsn):
        pass
    with PostgresSessionStore(postgres_database.dsn, create=False) as store:
        assert store.schema_version >= 1


def test_a_closed_store_raises_a_store_error(postgres_database: Database) -> None:
    store = PostgresSessionStore(postgres_database.dsn)
    store.close()
    store.close()
    assert store.closed
    with pytest.raises(SessionStoreError, match="closed"):
        store.load(EP)
    with pytest.raises(SessionStoreError, match="closed"):
        store.save(record())


# -- concurrency, rights, data jsonb cannot hold --------------------------------------------------------


def test_stores_opening_one_new_schema_at_once_initialize_it_once(postgres_database: Database) -> None:
    opened: list[PostgresSessionStore] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_one() -> None:
        try:
            start.wait()
            opened.append(PostgresSessionStore(postgres_database.dsn, schema="fresh", pool_size=1))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert {store.schema_version for store in opened} == {SCHEMA_VERSION}
    meta = execute(postgres_database, "SELECT key, value FROM fresh.store_meta ORDER BY key")
    assert meta == [
        ("application_id", str(APPLICATION_ID)),
        ("compatible_version", "2"),
        ("format", "acp_client.session_store"),
        ("schema_version", str(SCHEMA_VERSION)),
    ]
    for store in opened:
        store.close()


def test_another_applications_store_meta_is_foreign_and_left_untouched(postgres_database: Database) -> None:
    execute(postgres_database, "CREATE SCHEMA acp_client")
    execute(postgres_database, "CREATE TABLE acp_client.store_meta (id int, note text)")
    execute(postgres_database, "INSERT INTO acp_client.store_meta VALUES (1, 'theirs')")
    with pytest.raises(SessionStoreForeign, match="another application"):
        PostgresSessionStore(postgres_database.dsn)
    assert execute(postgres_database, "SELECT * FROM acp_client.store_meta") == [(1, "theirs")]
    assert execute(
        postgres_database,
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'acp_client'",
    ) == [(1,)]


def test_a_role_that_may_only_read_gets_a_typed_error_on_write(postgres_database: Database) -> None:
    with PostgresSessionStore(postgres_database.dsn) as owner:
        owner.save(record())
    role = f"reader_{postgres_database.name}"
    execute(postgres_database, f'CREATE ROLE "{role}" LOGIN')
    execute(postgres_database, f'GRANT USAGE ON SCHEMA acp_client TO "{role}"')
    execute(postgres_database, f'GRANT SELECT ON ALL TABLES IN SCHEMA acp_client TO "{role}"')
    try:
        with PostgresSessionStore(postgres_database.dsn.replace("user=postgres", f"user={role}")) as reader:
            assert reader.load(EP) == [record()]
            with pytest.raises(SessionStoreReadOnly, match="may not write"):
                reader.save(record("s2"))
            with pytest.raises(SessionStoreReadOnly):
                reader.touch(EP, "s1")
    finally:
        execute(postgres_database, f'DROP OWNED BY "{role}"')
        execute(postgres_database, f'DROP ROLE "{role}"')


def test_a_nul_character_jsonb_cannot_hold_is_a_typed_error_and_writes_nothing(postgres_database: Database) -> None:
    with PostgresSessionStore(postgres_database.dsn) as store:
        store.save(record())
        store.save_transcript(EP, "s1", [{"role": "user", "text": "before"}])
        with pytest.raises(SessionStoreError, match="NUL"):
            store.save_transcript(EP, "s1", [{"role": "agent", "text": "a\x00b"}])
        assert store.load_transcript(EP, "s1") == ({"role": "user", "text": "before"},)


def test_every_write_run_twice_leaves_what_one_run_leaves(postgres_database: Database) -> None:
    """What a retry after a lost answer does: each write's work runs again on a fresh connection
    after it committed. The state is the same, and the answer too (delete and release excepted:
    the repeat finds nothing left to do)."""
    store = PostgresSessionStore(postgres_database.dsn)
    link = store._link
    once = link.run

    def twice(action: str, work: Any) -> Any:
        once(action, work)
        return once(action, work)

    link.run = twice  # type: ignore[method-assign]
    try:
        store.save(record("s1", title="t"))
        store.save(record("s2"))
        assert store.save_transcript(EP, "s1", [{"role": "user", "text": "hi"}])
        assert store.touch(EP, "s1", when=T0 + timedelta(hours=1))
        renamed = store.rename(EP, "s1", "s3")
        assert renamed is not None and renamed.previous_session_ids == ("s1",)
        (lease,) = store.claim(EP, ["s3"], "a", duration=30, now=T0)
        assert lease.token == 1  # not bumped by the repeat: it is the owner's own lease
        owned = store.save_owned(record("s4"), "a", duration=30, now=T0)
        assert owned.token == 1
        assert [item.session_id for item in store.renew(EP, "a", duration=30, now=T0)] == ["s3", "s4"]
        store.save(record("s3", title="fenced"), fence=lease.fence)
        assert not store.delete(EP, "s2")  # the repeat found it gone
    finally:
        link.run = once  # type: ignore[method-assign]
    (kept,) = [item for item in store.load(EP) if item.session_id == "s3"]
    assert (kept.title, kept.lease) == ("fenced", lease)  # the fenced save replaced the whole record
    assert store.load_transcript(EP, "s3") == ({"role": "user", "text": "hi"},)
    assert store.get(EP, "s2") is None
    store.close()


def test_connections_are_bounded_by_the_pool_size(postgres_database: Database) -> None:
    store = PostgresSessionStore(postgres_database.dsn, pool_size=2)
    store.save(record())
    holder = psycopg.connect(postgres_database.dsn)
    holder.execute("LOCK TABLE acp_client.sessions IN ACCESS EXCLUSIVE MODE")  # every read waits behind it
    done: list[object] = []
    readers = [threading.Thread(target=lambda: done.append(store.load(EP))) for _ in range(6)]
    try:
        for reader in readers:
            reader.start()
        waiting = eventually_blocking(
            lambda: store_backends(postgres_database, waiting=True) == 2 or None, what="two readers waiting"
        )
        assert waiting
        assert store_backends(postgres_database) == 2  # the other four wait for a connection, not the database
    finally:
        holder.rollback()
        holder.close()
        for reader in readers:
            reader.join()
    assert done == [[record()]] * 6
    store.close()


# -- the database goes away --------------------------------------------------------------------------


def test_connections_cut_between_calls_are_made_again(postgres_database: Database) -> None:
    server = postgres_database.server
    with PostgresSessionStore(postgres_database.dsn, pool_size=2) as store:
        steps: list[Callable[[], object]] = [
            lambda: store.save(record()),
            lambda: store.save_transcript(EP, "s1", [{"role": "user", "text": "hi"}]),
            lambda: store.touch(EP, "s1", when=T0 + timedelta(minutes=1)),
            lambda: store.claim(EP, ["s1"], "a", duration=30, now=T0),
            lambda: store.rename(EP, "s1", "s2"),
            lambda: store.load(EP),
        ]
        for step in steps:
            # The pool holds a connection (it makes a new one in the background after a cut): cut it,
            # as a restart or a proxy would, and the next call must still be made.
            eventually_blocking(lambda: store_backends(postgres_database) or None, what="a pooled connection")
            assert server.terminate(postgres_database.name) >= 1
            step()
        (kept,) = store.load(EP)
        assert (kept.session_id, kept.last_used_at, kept.previous_session_ids) == (
            "s2",
            T0 + timedelta(minutes=1),
            ("s1",),
        )
        assert kept.lease is not None and kept.lease.owner == "a"
        assert store.load_transcript(EP, "s2") == ({"role": "user", "text": "hi"},)


@pytest.mark.parametrize("operation", ["save", "rename"])
def test_a_write_whose_connection_is_cut_mid_statement_is_made_once_on_a_fresh_one(
    postgres_database: Database, operation: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresSessionStore(postgres_database.dsn, pool_size=2)
    store.save(record("old"))
    holder = psycopg.connect(postgres_database.dsn)
    holder.execute("LOCK TABLE acp_client.sessions IN ACCESS EXCLUSIVE MODE")  # the write waits inside the database
    outcome: list[object] = []

    def write() -> None:
        try:
            if operation == "save":
                store.save(record("new", title="written once"))
            else:
                outcome.append(store.rename(EP, "old", "new"))
        except BaseException as exc:  # reported below
            outcome.append(exc)

    writer = threading.Thread(target=write)
    with caplog.at_level(logging.INFO, logger="acp_client.store.postgres"):
        writer.start()
        try:
            (pid,) = eventually_blocking(lambda: waiting_backends(postgres_database) or None, what="the write waiting")
            execute(postgres_database, f"SELECT pg_terminate_backend({pid})")  # cut mid-statement
            eventually_blocking(lambda: "lost its connection" in caplog.text or None, what="the retry")
            eventually_blocking(
                lambda: [p for p in waiting_backends(postgres_database) if p != pid] or None, what="the retry waiting"
            )
        finally:
            holder.rollback()
            holder.close()
            writer.join()
    assert not [item for item in outcome if isinstance(item, BaseException)], outcome
    (stored,) = [item for item in store.load(EP) if item.session_id == "new"]
    if operation == "save":
        assert stored.title == "written once" and store.get(EP, "old") is not None
    else:
        assert stored.previous_session_ids == ("old",) and store.get(EP, "old") is None
        assert outcome == [stored]
    store.close()


@pytest.fixture(scope="module")
def own_server() -> Iterator[TemporaryPostgres]:
    """A server of this module's own, to stop and start (the session's one serves the others)."""
    with TemporaryPostgres() as server:
        yield server


def test_a_database_that_is_down_is_a_typed_error_and_nothing_is_written(own_server: TemporaryPostgres) -> None:
    name = own_server.create_database()
    store = PostgresSessionStore(own_server.dsn(name), connect_timeout=1, reconnect_timeout=1)
    store.save(record("before"))
    own_server.stop()
    try:
        started = time.monotonic()
        with pytest.raises(SessionStoreUnavailable, match="could not be reached for 1s") as info:
            store.save(record("during"))
        assert time.monotonic() - started < 10
        assert "No such file or directory" in str(info.value) or "connect" in str(info.value)
        with pytest.raises(SessionStoreUnavailable):
            store.load(EP)
    finally:
        own_server.start()
    assert [item.session_id for item in store.load(EP)] == ["before"]  # back, and "during" never half-written
    store.save(record("after"))
    assert {item.session_id for item in store.load(EP)} == {"before", "after"}
    store.close()


def test_a_write_made_while_the_database_restarts_lands_when_it_is_back(
    own_server: TemporaryPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    name = own_server.create_database()
    store = PostgresSessionStore(own_server.dsn(name), connect_timeout=1, reconnect_timeout=60)
    store.save(record("before"))
    own_server.stop()
    outcome: list[BaseException] = []

    def write() -> None:
        try:
            store.save(record("during", title="kept"))
        except BaseException as exc:  # reported below
            outcome.append(exc)

    writer = threading.Thread(target=write)
    with caplog.at_level(logging.INFO, logger="acp_client.store.postgres"):
        writer.start()
        try:
            eventually_blocking(lambda: "lost its connection" in caplog.text or None, what="the write retrying")
        finally:
            own_server.start()
            writer.join()
    assert not outcome, outcome
    kept = store.get(EP, "during")
    assert kept is not None and kept.title == "kept"
    store.close()


# -- helpers ---------------------------------------------------------------------------------------------


def execute(database: Database, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database.dsn, autocommit=True) as conn:
        cursor = conn.execute(sql.encode())
        return list(cursor.fetchall()) if cursor.description is not None else []


def store_backends(database: Database, *, waiting: bool = False) -> int:
    """How many connections the stores hold to ``database`` (those waiting for a lock, with ``waiting``)."""
    condition = " AND wait_event_type = 'Lock'" if waiting else ""
    rows = execute(
        database,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'acp_client session store' "
        f"AND datname = '{database.name}'{condition}",
    )
    return int(rows[0][0])


def waiting_backends(database: Database) -> list[int]:
    """The stores' connections to ``database`` waiting for a lock (their server pids)."""
    rows = execute(
        database,
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'acp_client session store' "
        f"AND datname = '{database.name}' AND wait_event_type = 'Lock'",
    )
    return [int(row[0]) for row in rows]


def test_missing_server_binaries_are_an_error_that_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_client.testing import postgres as kit

    monkeypatch.setattr(kit.shutil, "which", lambda name: None)
    monkeypatch.setattr(kit.glob, "glob", lambda pattern: [])
    with pytest.raises(kit.PostgresNotInstalled, match=r"apt-get install postgresql"):
        kit.find_postgres_bindir()
