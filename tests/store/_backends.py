"""The contract suite's backends (``acp_client.testing.store_contract.StoreBackend``) for the two
built-in stores: each opens its store on one fresh location and writes raw data there the way only
that store's format knows (older schema versions, damage, another application's tables)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from acp_client.store import PostgresSessionStore, SessionStore, SqliteSessionStore, StoredSession
from acp_client.store import _pg_schema as pg_schema
from acp_client.store import _schema as sqlite_schema
from acp_client.store import sqlite as sqlite_module
from tests.peers.postgres import Database

# -- SQLite ---------------------------------------------------------------------------------------


def _sqlite_add_pinned(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")


def _sqlite_add_pinned_breaking(conn: sqlite3.Connection) -> None:
    _sqlite_add_pinned(conn)
    conn.execute(f"UPDATE store_meta SET value = '{sqlite_schema.SCHEMA_VERSION + 1}' WHERE key = 'compatible_version'")


class _SqliteAdditive(SqliteSessionStore):
    _migrations = (*sqlite_schema._MIGRATIONS, _sqlite_add_pinned)


class _SqliteBreaking(SqliteSessionStore):
    _migrations = (*sqlite_schema._MIGRATIONS, _sqlite_add_pinned_breaking)


_SQLITE_CLASSES: dict[str | None, type[SqliteSessionStore]] = {
    None: SqliteSessionStore,
    "additive": _SqliteAdditive,
    "breaking": _SqliteBreaking,
}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class SqliteBackend:
    """One SQLite file in a test's temporary directory."""

    schema_version = sqlite_schema.SCHEMA_VERSION
    older_versions: Sequence[int] = (1, 2)

    def __init__(self, directory: Path) -> None:
        self.path = directory / "sessions.db"
        self._stores: list[SqliteSessionStore] = []

    def open(self, *, max_transcript_bytes: int | None = None, migration: str | None = None) -> SessionStore:
        options = {} if max_transcript_bytes is None else {"max_transcript_bytes": max_transcript_bytes}
        store = _SQLITE_CLASSES[migration](self.path, **options)
        self._stores.append(store)
        return store

    def version_of(self, store: SessionStore) -> int:
        assert isinstance(store, SqliteSessionStore)
        return store.schema_version

    def _raw(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None)

    def seed_version(self, version: int, session: StoredSession, messages: Sequence[Mapping[str, Any]]) -> None:
        assert version in (1, 2), version
        self.close()
        self.path.unlink(missing_ok=True)
        raw = self._raw()
        raw.execute("BEGIN")
        # That version as its code wrote it: its tables (the migrations up to it are its history),
        # then a record and a conversation: version 1 kept a transcript tail (format 1, the messages
        # alone), version 2 a conversation (format 2: a header and the session's segment first).
        for step in sqlite_schema._MIGRATIONS[:version]:
            step(raw)
        tail: list[Any] = list(messages)
        if version == 2:
            tail = [
                {"format": 2, "dropped": 0},
                {"segment": session.session_id, "began": "created", "lost": False},
                *tail,
            ]
        raw.execute(
            "INSERT INTO sessions (endpoint, session_id, cwd, mcp_servers, additional_directories, protocol_version, "
            "mode_id, model_id, config_options, title, status, raw_status, created_at, updated_at, last_used_at, "
            "previous_session_ids, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session.endpoint,
                session.session_id,
                session.cwd,
                _text(list(session.mcp_servers)),
                _text(list(session.additional_directories)),
                session.protocol_version,
                session.mode_id,
                session.model_id,
                _text(session.config_options),
                session.title,
                None if session.status is None else session.status.value,
                session.raw_status,
                _micros(session.created_at),
                _micros(session.updated_at),
                _micros(session.last_used_at),
                _text(list(session.previous_session_ids)),
                _text(session.extra),
            ),
        )
        raw.execute(
            "INSERT INTO transcripts (endpoint, session_id, tail) VALUES (?, ?, ?)",
            (session.endpoint, session.session_id, _text(tail)),
        )
        raw.execute(f"PRAGMA application_id = {sqlite_module.APPLICATION_ID}")
        raw.execute(f"PRAGMA user_version = {version}")
        raw.execute("COMMIT")
        raw.close()

    def stamp_version(self, version: int, *, compatible: int) -> None:
        raw = self._raw()
        raw.execute(f"PRAGMA user_version = {version}")
        raw.execute("UPDATE store_meta SET value = ? WHERE key = 'compatible_version'", (str(compatible),))
        raw.execute("PRAGMA journal_mode = DELETE")  # fold the WAL in: one file to compare
        raw.close()

    def make_foreign(self) -> None:
        raw = self._raw()
        raw.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        raw.execute("INSERT INTO notes (body) VALUES ('keep me')")
        raw.close()

    def make_corrupt(self) -> None:
        raw = self._raw()
        raw.execute(f"PRAGMA application_id = {sqlite_module.APPLICATION_ID}")
        raw.execute("PRAGMA user_version = 1")
        raw.execute("CREATE TABLE other (x)")
        raw.close()

    def damage_record(self, endpoint: str, session_id: str) -> None:
        raw = self._raw()
        raw.execute(
            "UPDATE sessions SET config_options = '{not json' WHERE endpoint = ? AND session_id = ?",
            (endpoint, session_id),
        )
        raw.close()

    def damage_transcript(self, endpoint: str, session_id: str) -> None:
        raw = self._raw()
        raw.execute(
            "UPDATE transcripts SET tail = '[1, 2' WHERE endpoint = ? AND session_id = ?", (endpoint, session_id)
        )
        raw.close()

    def snapshot(self) -> object:
        return {item.name: item.read_bytes() for item in self.path.parent.iterdir()}

    def close(self) -> None:
        for store in self._stores:
            store.close()
        self._stores.clear()


# -- PostgreSQL -----------------------------------------------------------------------------------


def _pg_add_pinned(cur: Any, t: pg_schema.Tables) -> None:
    cur.execute(f"ALTER TABLE {t.sessions} ADD COLUMN pinned boolean NOT NULL DEFAULT false")


def _pg_add_pinned_breaking(cur: Any, t: pg_schema.Tables) -> None:
    _pg_add_pinned(cur, t)
    cur.execute(
        f"UPDATE {t.meta} SET value = %s WHERE key = 'compatible_version'", (str(pg_schema.SCHEMA_VERSION + 1),)
    )


class _PostgresAdditive(PostgresSessionStore):
    _migrations = (*pg_schema.MIGRATIONS, _pg_add_pinned)


class _PostgresBreaking(PostgresSessionStore):
    _migrations = (*pg_schema.MIGRATIONS, _pg_add_pinned_breaking)


_POSTGRES_CLASSES: dict[str | None, type[PostgresSessionStore]] = {
    None: PostgresSessionStore,
    "additive": _PostgresAdditive,
    "breaking": _PostgresBreaking,
}


class PostgresBackend:
    """One schema in a test's fresh database on the session's PostgreSQL server."""

    schema_version = pg_schema.SCHEMA_VERSION
    older_versions: Sequence[int] = (1,)

    def __init__(self, database: Database, *, schema: str = "acp_client") -> None:
        self.database = database
        self.schema = schema
        self.tables = pg_schema.Tables(schema)
        self._stores: list[PostgresSessionStore] = []

    def open(self, *, max_transcript_bytes: int | None = None, migration: str | None = None) -> SessionStore:
        options: dict[str, Any] = {"schema": self.schema, "pool_size": 2}
        if max_transcript_bytes is not None:
            options["max_transcript_bytes"] = max_transcript_bytes
        store = _POSTGRES_CLASSES[migration](self.database.dsn, **options)
        self._stores.append(store)
        return store

    def version_of(self, store: SessionStore) -> int:
        assert isinstance(store, PostgresSessionStore)
        return store.schema_version

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.database.dsn, autocommit=True) as conn:
            cursor = conn.execute(sql.encode(), params)  # type: ignore[call-overload]
            return list(cursor.fetchall()) if cursor.description is not None else []

    def seed_version(self, version: int, session: StoredSession, messages: Sequence[Mapping[str, Any]]) -> None:
        assert version == 1, version
        self.close()
        t = self.tables
        self.execute(f"DROP SCHEMA IF EXISTS {t.quoted_schema} CASCADE")
        import psycopg

        with psycopg.connect(self.database.dsn, autocommit=True) as conn, conn.transaction(), conn.cursor() as cur:
            # Version 1 as its code wrote it: its tables (the first migration is its history), a
            # record without a lease, and a conversation (format 2 from the start on PostgreSQL).
            pg_schema.MIGRATIONS[0](cur, t)
            cur.execute(f"UPDATE {t.meta} SET value = '1' WHERE key = 'schema_version'")
            cur.execute(
                f"INSERT INTO {t.sessions} (endpoint, session_id, cwd, mcp_servers, additional_directories, "
                "protocol_version, mode_id, model_id, config_options, title, status, raw_status, created_at, "
                "updated_at, last_used_at, previous_session_ids, extra) VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, "
                "%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb)",
                (
                    session.endpoint,
                    session.session_id,
                    session.cwd,
                    _text(list(session.mcp_servers)),
                    _text(list(session.additional_directories)),
                    session.protocol_version,
                    session.mode_id,
                    session.model_id,
                    _text(session.config_options),
                    session.title,
                    None if session.status is None else session.status.value,
                    session.raw_status,
                    session.created_at,
                    session.updated_at,
                    session.last_used_at,
                    _text(list(session.previous_session_ids)),
                    _text(session.extra),
                ),
            )
            conversation = [
                {"format": 2, "dropped": 0},
                {"segment": session.session_id, "began": "created", "lost": False},
                *messages,
            ]
            cur.execute(
                f"INSERT INTO {t.transcripts} (endpoint, session_id, conversation) VALUES (%s, %s, %s::jsonb)",
                (session.endpoint, session.session_id, _text(conversation)),
            )

    def stamp_version(self, version: int, *, compatible: int) -> None:
        t = self.tables
        self.execute(f"UPDATE {t.meta} SET value = %s WHERE key = 'schema_version'", (str(version),))
        self.execute(f"UPDATE {t.meta} SET value = %s WHERE key = 'compatible_version'", (str(compatible),))

    def make_foreign(self) -> None:
        self.execute(f"CREATE SCHEMA {self.tables.quoted_schema}")
        self.execute(f"CREATE TABLE {self.tables.quoted_schema}.notes (id serial PRIMARY KEY, body text)")
        self.execute(f"INSERT INTO {self.tables.quoted_schema}.notes (body) VALUES ('keep me')")

    def make_corrupt(self) -> None:
        t = self.tables
        self.execute(f"CREATE SCHEMA {t.quoted_schema}")
        self.execute(f"CREATE TABLE {t.meta} (key text PRIMARY KEY, value text NOT NULL)")
        self.execute(
            f"INSERT INTO {t.meta} VALUES ('format', %s), ('application_id', %s), ('schema_version', '1'), "
            "('compatible_version', '1')",
            (pg_schema.FORMAT, str(pg_schema.APPLICATION_ID)),
        )

    def damage_record(self, endpoint: str, session_id: str) -> None:
        self.execute(
            f"UPDATE {self.tables.sessions} SET config_options = '[1, 2]' WHERE endpoint = %s AND session_id = %s",
            (endpoint, session_id),
        )

    def damage_transcript(self, endpoint: str, session_id: str) -> None:
        self.execute(
            f'UPDATE {self.tables.transcripts} SET conversation = \'{{"not": "a list"}}\' '
            "WHERE endpoint = %s AND session_id = %s",
            (endpoint, session_id),
        )

    def snapshot(self) -> object:
        """Every relation outside the system schemas, and every table's rows."""
        relations = self.execute(
            "SELECT n.nspname, c.relname, c.relkind FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1, 2"
        )
        schemas = self.execute("SELECT nspname FROM pg_catalog.pg_namespace ORDER BY 1")
        rows = {
            (space, name): sorted(
                row[0] for row in self.execute(f'SELECT row_to_json(t)::text FROM "{space}"."{name}" t')
            )
            for space, name, kind in relations
            if kind == "r"
        }
        return schemas, relations, rows

    def close(self) -> None:
        for store in self._stores:
            store.close()
        self._stores.clear()
