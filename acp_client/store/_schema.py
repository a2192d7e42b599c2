"""The SQLite session store's file format: its tables, the migrations between schema versions, and how values sit in
columns (times as integer microseconds since the Unix epoch, UTC; JSON as compact text; a lease as three columns). No
connection is opened here: :mod:`acp_client.store.sqlite` runs these statements inside its transactions.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from ..exceptions import SessionStoreBusy
from ._rows import LEASE, Reads, dump_json, leases_of
from .base import FORMAT, RECORD_COLUMNS, Lease

#: Where a claim may take a session: unowned, the claimer's already, or expired.
_CLAIMABLE: Final = "(lease_owner IS NULL OR lease_owner = ? OR lease_expires_at <= ?)"
#: The most session ids one statement names (well under SQLite's bound parameters).
_CHUNK: Final = 500
_UPSERT: Final = (
    f"INSERT INTO sessions ({', '.join(RECORD_COLUMNS)}) VALUES ({', '.join('?' for _ in RECORD_COLUMNS)}) "
    "ON CONFLICT (endpoint, session_id) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in RECORD_COLUMNS[2:])
)
#: The store's reads, with named parameters (as the PostgreSQL store's).
READS: Final = Reads("sessions", "transcripts", "tail", ":{}".format, ":now")


def _create_v1(conn: sqlite3.Connection) -> None:
    """Schema version 1: the sessions table and the store's identity."""
    conn.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        """
        CREATE TABLE sessions (
            endpoint TEXT NOT NULL,
            session_id TEXT NOT NULL,
            cwd TEXT NOT NULL,
            mcp_servers TEXT NOT NULL DEFAULT '[]',
            additional_directories TEXT NOT NULL DEFAULT '[]',
            protocol_version INTEGER NOT NULL DEFAULT 1,
            mode_id TEXT,
            model_id TEXT,
            config_options TEXT NOT NULL DEFAULT '{}',
            title TEXT,
            status TEXT,
            raw_status TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            last_used_at INTEGER NOT NULL,
            previous_session_ids TEXT NOT NULL DEFAULT '[]',
            extra TEXT NOT NULL DEFAULT '{}',
            UNIQUE (endpoint, session_id)
        )
        """
    )
    conn.execute("CREATE INDEX sessions_by_last_use ON sessions (endpoint, last_used_at DESC)")
    # Apart from the records: restoring reads none of it, saving a record never erases it.
    conn.execute(
        """
        CREATE TABLE transcripts (
            endpoint TEXT NOT NULL,
            session_id TEXT NOT NULL,
            tail TEXT NOT NULL,
            PRIMARY KEY (endpoint, session_id)
        )
        """
    )
    conn.executemany(
        "INSERT INTO store_meta (key, value) VALUES (?, ?)", [("format", FORMAT), ("compatible_version", "1")]
    )


def _v2_conversations(conn: sqlite3.Connection) -> None:
    """Schema version 2: every transcript tail becomes a conversation (format 2: a header and the segment of the session
    it belongs to, then its messages). Additive: a version-1 reader still reads a list of JSON objects."""
    rows = conn.execute("SELECT endpoint, session_id, tail FROM transcripts").fetchall()
    for endpoint, session_id, tail in rows:
        try:
            entries = json.loads(tail)
        except ValueError:
            continue  # a damaged tail stays as it is: reading it reports the damage
        if not isinstance(entries, list) or (entries and isinstance(entries[0], dict) and "format" in entries[0]):
            continue
        converted = [{"format": 2, "dropped": 0}, {"segment": session_id, "began": "created", "lost": False}, *entries]
        conn.execute(
            "UPDATE transcripts SET tail = ? WHERE endpoint = ? AND session_id = ?",
            (dump_json(converted, "transcript tail"), endpoint, session_id),
        )


def _v3_leases(conn: sqlite3.Connection) -> None:
    """Schema version 3: ownership. Every row gets a lease (nobody's, token 0: the sessions of an older file are
    adoptable at once). Not additive for writers: an older acp_client would write past the leases, so
    ``compatible_version`` becomes 3."""
    conn.execute("ALTER TABLE sessions ADD COLUMN lease_owner TEXT")
    conn.execute("ALTER TABLE sessions ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE sessions ADD COLUMN lease_expires_at INTEGER NOT NULL DEFAULT 0")
    conn.execute("CREATE INDEX sessions_by_owner ON sessions (endpoint, lease_owner)")
    conn.execute("UPDATE store_meta SET value = '3' WHERE key = 'compatible_version'")


Migration = Callable[[sqlite3.Connection], None]

#: ``_MIGRATIONS[n]`` takes a file from schema version ``n`` to ``n + 1`` (0: an empty file).
_MIGRATIONS: Final[tuple[Migration, ...]] = (_create_v1, _v2_conversations, _v3_leases)

#: The newest schema version this acp_client writes.
SCHEMA_VERSION: Final = len(_MIGRATIONS)


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _from_micros(value: Any) -> datetime:
    return _EPOCH + timedelta(microseconds=int(value))


def claim_leases(
    conn: sqlite3.Connection, endpoint: str, session_ids: Sequence[str], owner: str, *, now: int, until: int
) -> list[Lease]:
    """Inside a write transaction: give ``owner`` the lease (until ``until``) of each of ``session_ids`` that is
    unowned, ``owner``'s or expired at ``now``; the token grows where the owner changes. The leases taken, in chunks of
    :data:`_CHUNK` ids per statement."""
    leases: list[Lease] = []
    for chunk in _chunks(list(dict.fromkeys(session_ids))):
        marks = ", ".join("?" for _ in chunk)
        rows = conn.execute(
            "UPDATE sessions SET "
            "lease_token = CASE WHEN lease_owner IS ? THEN lease_token ELSE lease_token + 1 END, "
            "lease_owner = ?, lease_expires_at = ? "
            f"WHERE endpoint = ? AND session_id IN ({marks}) AND {_CLAIMABLE} "
            f"RETURNING {LEASE}",
            (owner, owner, until, endpoint, *chunk, owner, now),
        ).fetchall()
        leases.extend(leases_of(rows, _from_micros))
    return leases


def _chunks(items: Sequence[str]) -> list[Sequence[str]]:
    return [items[start : start + _CHUNK] for start in range(0, len(items), _CHUNK)]


def _loads(value: Any) -> Any:
    # Most JSON columns hold an empty list or object: skip the decoder for those (restore speed).
    if value == "[]":
        return ()
    if value == "{}":
        return {}
    return json.loads(value)


def use_wal(
    conn: sqlite3.Connection, busy_timeout: float, errors: Callable[[], contextlib.AbstractContextManager[None]]
) -> None:
    """Switch the file to WAL (once; it stays so). SQLite answers "locked" at once, without its busy handler, while
    another process reads or switches it too: wait for that here, up to the busy timeout (``errors`` maps sqlite3's
    errors to the store's)."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            with errors():
                if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
            return
        except SessionStoreBusy:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
