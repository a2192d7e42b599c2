"""The built-in :class:`~acp_client.store.base.SessionStore`: one SQLite file, standard library only.

Why it is safe to share:

- **Several processes.** The file is in WAL mode (readers never block the writer); every write is one ``BEGIN
  IMMEDIATE`` transaction, so writers queue for the lock (up to ``busy_timeout``, then
  :class:`~acp_client.exceptions.SessionStoreBusy`) instead of failing half-way, and nothing is read, changed in Python
  and written back outside a transaction.
- **Several threads.** One connection per store, used under a lock. Open a new store in each process: a connection must
  not cross a ``fork``.
- **Not our file.** Before anything is written, the file is identified (the SQLite header, the ``application_id``
  :data:`APPLICATION_ID`, the tables). A file that is not an SQLite database
  (:class:`~acp_client.exceptions.SessionStoreCorrupt`), another application's database
  (:class:`~acp_client.exceptions.SessionStoreForeign`) or a newer schema this version cannot use
  (:class:`~acp_client.exceptions.SessionStoreTooNew`) is refused and left as it was. Only a missing or empty (0-byte,
  or table-less) file is initialized.

Schema versions: ``PRAGMA user_version`` holds the schema version, ``store_meta.compatible_version`` the oldest schema
version whose code may still read and write the file. An older file is migrated (one transaction); a newer one is used
as it is when its ``compatible_version`` is not above :data:`SCHEMA_VERSION` (an additive change), and refused
otherwise.

Ownership (schema version 3): each row has a lease (``lease_owner``, ``lease_token``, ``lease_expires_at``); claims,
renewals and fenced writes each run in one ``BEGIN IMMEDIATE`` transaction, so two processes cannot both take a session,
and a fenced write checks the lease under the lock it writes with. Version 3 raises ``compatible_version`` to 3: an
older acp_client, which would ignore the leases, is refused the file.

New files are created readable by their owner only (``0600``): MCP server entries may hold credentials.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from ..exceptions import (
    ConfigurationError,
    SessionStoreBusy,
    SessionStoreCorrupt,
    SessionStoreError,
    SessionStoreForeign,
)
from ._rows import (
    LEASE,
    RowStore,
    check_session_ids,
    check_version,
    check_window,
    dump_json,
    leases_of,
    record_values,
    renamed,
)
from ._schema import (
    _MIGRATIONS,
    _UPSERT,
    READS,
    SCHEMA_VERSION,
    Migration,
    _chunks,
    _from_micros,
    _loads,
    _micros,
    claim_leases,
    use_wal,
)
from ._sqlite_file import prepare
from .base import (
    APPLICATION_ID,
    DEFAULT_TRANSCRIPT_TAIL_BYTES,
    Fence,
    Lease,
    SharedSessionStore,
    StoredSession,
    as_utc,
    check_owner,
)

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "SqliteSessionStore"]

_MEMORY: Final = ":memory:"

# SQLite primary result codes (``sqlite3.Error.sqlite_errorcode & 0xFF``).
_BUSY_CODES: Final = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES: Final = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
_TOUCH: Final = "UPDATE sessions SET last_used_at = ? WHERE endpoint = ? AND session_id = ?"


class SqliteSessionStore(RowStore, SharedSessionStore):
    """A :class:`~acp_client.store.base.SharedSessionStore` in one SQLite file (see the module docstring).

    Its methods are the protocol's, each write one transaction. Any call may also raise
    :class:`~acp_client.exceptions.SessionStoreBusy` (another writer held the lock past ``busy_timeout``) or
    :class:`~acp_client.exceptions.SessionStoreCorrupt` (the file is damaged); a listing skips a damaged record (logged
    as a warning), :meth:`get` raises for it.

    Args:
        path: The database file (``~`` is expanded); created (mode ``0600``) when missing, in a directory that must
            exist (a mistyped path is an error, not a new empty store); an empty file is made ``0600`` before it becomes
            a store; a symbolic link is refused. ``":memory:"`` keeps everything in this process, for tests.
        busy_timeout: How long a call waits for another process's write lock, in seconds.
        max_transcript_bytes: The bound of each stored conversation (compact JSON bytes, default 4 MiB); past it the
            oldest messages are dropped and counted in its header. ``0`` keeps only the header.
        create: Create the file when it is missing (else raise :class:`SessionStoreError`).
        clock: The time leases are measured on (an aware or UTC datetime; default: this host's clock). Every process
            sharing the file should use the same one.
        allow_symlink: Open a ``path`` that is a symbolic link (where it points).

    Raises:
        SessionStoreCorrupt: The file is not an SQLite database, or is damaged.
        SessionStoreForeign: The file is an SQLite database of another application.
        SessionStoreTooNew: The file's schema is newer than this acp_client can use.
        SessionStoreBusy: Another process held the lock past ``busy_timeout`` while the file was being initialized or
            migrated.
        SessionStoreReadOnly: The file, or its directory, cannot be written by this process.
        SessionStoreError: The file cannot be opened or created (missing directory, permissions, not a regular file, a
            symbolic link without ``allow_symlink``...).
        ConfigurationError: A negative ``busy_timeout`` or ``max_transcript_bytes``.
    """

    _migrations: tuple[Migration, ...] = _MIGRATIONS
    _sql = READS

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        max_transcript_bytes: int = DEFAULT_TRANSCRIPT_TAIL_BYTES,
        create: bool = True,
        clock: Callable[[], datetime] | None = None,
        allow_symlink: bool = False,
    ) -> None:
        if clock is not None and not callable(clock):
            raise ConfigurationError("clock must be callable or None")
        self._clock = clock
        if busy_timeout < 0:
            raise ConfigurationError("busy_timeout must not be negative")
        if max_transcript_bytes < 0:
            raise ConfigurationError("max_transcript_bytes must not be negative")
        self._path = os.path.expanduser(os.fspath(path))
        self._busy_timeout = busy_timeout
        self._max_transcript_bytes = max_transcript_bytes
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if self._path != _MEMORY:
            prepare(self._path, create=create, allow_symlink=allow_symlink)
        with self._errors("open"):
            conn = sqlite3.connect(self._path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        try:
            self._schema_version = self._open(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _open(self, conn: sqlite3.Connection) -> int:
        """Identify the file, initialize or migrate it when it is ours; returns its schema version."""
        version, needs_work = self._identify(conn)
        if self._path != _MEMORY:  # the file is ours or empty: WAL before the first write (it stays)
            use_wal(conn, self._busy_timeout, lambda: self._errors("open"))
        if needs_work:
            with self._transaction(conn, "initialize"):
                version, needs_work = self._identify(conn)  # another process may have done it meanwhile
                if needs_work:
                    for step in range(version, len(self._migrations)):
                        self._migrations[step](conn)
                    version = len(self._migrations)
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {version}")
        with self._errors("open"):
            conn.execute("PRAGMA synchronous = NORMAL")
        return version

    def _identify(self, conn: sqlite3.Connection) -> tuple[int, bool]:
        """``(schema version, needs initializing or migrating)``; raises for a file not ours (reads only: nothing is
        written to a file this refuses)."""
        with self._errors("open"):
            # One read snapshot for the three reads: another process initializing the file commits its tables and its
            # application id together, and must not be seen half done.
            own = not conn.in_transaction
            if own:
                conn.execute("BEGIN")
            try:
                app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
                version = int(conn.execute("PRAGMA user_version").fetchone()[0])
                names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
            finally:
                if own:
                    conn.execute("COMMIT")
        if app_id == 0 and version == 0 and not names:
            return 0, True  # empty: ours to initialize
        if app_id != APPLICATION_ID:
            raise SessionStoreForeign(
                f"{self._path} is an SQLite database of another application, not a session store (left untouched)",
                path=self._path,
            )
        if not {"sessions", "store_meta", "transcripts"} <= names or version < 1:
            raise SessionStoreCorrupt(f"session store {self._path} is missing its tables", path=self._path)
        supported = len(self._migrations)
        if version > supported:
            with self._errors("open"):
                row = conn.execute("SELECT value FROM store_meta WHERE key = 'compatible_version'").fetchone()
            compatible = int(row[0]) if row is not None and str(row[0]).isdigit() else version
            check_version(self._path, self._path, version, compatible, supported)
        return version, version < supported

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Map ``sqlite3`` / OS errors to the store's exception tree."""
        try:
            yield
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            primary = code & 0xFF if isinstance(code, int) else None
            text = str(exc)
            where = f"session store {self._path}: {action} failed: {text}"
            if primary in _BUSY_CODES or (primary is None and "locked" in text):
                raise SessionStoreBusy(
                    f"session store {self._path} stayed locked by another writer for over "
                    f"{self._busy_timeout:g}s ({action})",
                    path=self._path,
                ) from exc
            if primary in _CORRUPT_CODES or (primary is None and ("not a database" in text or "malformed" in text)):
                raise SessionStoreCorrupt(where + " (the file is damaged or not a database)", path=self._path) from exc
            raise SessionStoreError(where, path=self._path) from exc
        except OSError as exc:
            raise SessionStoreError(f"session store {self._path}: {action} failed: {exc}", path=self._path) from exc

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection, action: str) -> Iterator[None]:
        """One write transaction: the write lock is taken first (waiting up to the busy timeout)."""
        with self._errors(action):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # the body or COMMIT failed: leave no transaction open
                    conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                raise SessionStoreError(f"session store {self._path} is closed", path=self._path)
            yield self._conn

    _loads = staticmethod(_loads)
    _time = staticmethod(_from_micros)

    def _query(self, action: str, sql: str, params: Mapping[str, Any]) -> list[Any]:
        with self._connection() as conn, self._errors(action):
            return conn.execute(sql, params).fetchall()

    def save(self, session: StoredSession, *, fence: Fence | None = None) -> None:
        row = record_values(session, _micros)
        with self._connection() as conn, self._transaction(conn, "save"):
            if fence is not None and not self._fenced(conn, session.endpoint, session.session_id, fence):
                raise self._stale(session.session_id, fence.owner, fence.token, None, None)
            conn.execute(_UPSERT, row)

    def delete(self, endpoint: str, session_id: str, *, fence: Fence | None = None) -> bool:
        with self._connection() as conn, self._transaction(conn, "delete"):
            if fence is not None and not self._fenced(conn, endpoint, session_id, fence):
                return False
            key = (endpoint, session_id)
            conn.execute("DELETE FROM transcripts WHERE endpoint = ? AND session_id = ?", key)
            return conn.execute("DELETE FROM sessions WHERE endpoint = ? AND session_id = ?", key).rowcount > 0

    def _rename(
        self, endpoint: str, old_session_id: str, new_session_id: str, *, when: datetime, fence: Fence | None
    ) -> StoredSession | None:
        with self._connection() as conn, self._transaction(conn, "rename"):
            if fence is not None and not self._fenced(conn, endpoint, old_session_id, fence):
                return None
            row = conn.execute(self._sql.get, {"endpoint": endpoint, "session_id": old_session_id}).fetchone()
            if row is None:
                return None
            old = self._decode(row)
            if new_session_id == old_session_id:
                return old
            new = renamed(old, new_session_id, when)
            for table in ("sessions", "transcripts"):
                conn.execute(f"DELETE FROM {table} WHERE endpoint = ? AND session_id = ?", (endpoint, new_session_id))
            # The lease and the conversation move with the session.
            previous = dump_json(list(new.previous_session_ids), "previous_session_ids")
            conn.execute(
                "UPDATE sessions SET session_id = ?, previous_session_ids = ?, updated_at = ? "
                "WHERE endpoint = ? AND session_id = ?",
                (new_session_id, previous, _micros(new.updated_at), endpoint, old_session_id),
            )
            conn.execute(
                "UPDATE transcripts SET session_id = ? WHERE endpoint = ? AND session_id = ?",
                (new_session_id, endpoint, old_session_id),
            )
        return new

    def touch(
        self, endpoint: str, session_id: str, *, when: datetime | None = None, fence: Fence | None = None
    ) -> bool:
        stamp = _micros(as_utc(when))
        with self._connection() as conn, self._transaction(conn, "touch"):
            if fence is not None and not self._fenced(conn, endpoint, session_id, fence):
                return False
            return conn.execute(_TOUCH, (stamp, endpoint, session_id)).rowcount > 0

    def _save_tail(
        self, action: str, endpoint: str, session_id: str, tail: str, *, when: datetime | None, fence: Fence | None
    ) -> bool:
        with self._connection() as conn, self._transaction(conn, action):
            if fence is not None and not self._fenced(conn, endpoint, session_id, fence):
                return False
            key = (endpoint, session_id)
            if when is None:
                stored = conn.execute("SELECT 1 FROM sessions WHERE endpoint = ? AND session_id = ?", key).fetchone()
            else:
                stored = conn.execute(_TOUCH, (_micros(when), *key)).rowcount > 0
            if not stored:
                return False
            conn.execute(
                "INSERT INTO transcripts (endpoint, session_id, tail) VALUES (?, ?, ?) "
                "ON CONFLICT (endpoint, session_id) DO UPDATE SET tail = excluded.tail",
                (*key, tail),
            )
        return True

    def _window(self, owner: str, duration: float, now: datetime | None) -> tuple[int, int]:
        """``(now, now + duration)`` in microseconds, for a lease of ``owner`` (both checked)."""
        check_window(owner, duration)
        stamp = self._now(now)
        return stamp, stamp + int(duration * 1_000_000)

    def _now(self, now: datetime | None) -> int:
        if now is None and self._clock is not None:
            now = self._clock()
        return _micros(as_utc(now))

    def _fenced(self, conn: sqlite3.Connection, endpoint: str, session_id: str, fence: Fence) -> bool:
        """Inside a write transaction: ``True`` when the session is stored under ``fence``'s lease, ``False`` when it is
        not stored; raises when another lease holds it."""
        row = conn.execute(self._sql.lease, {"endpoint": endpoint, "session_id": session_id}).fetchone()
        if row is None:
            return False
        if row[1] != fence.owner or int(row[2]) != fence.token:
            raise self._stale(session_id, fence.owner, fence.token, row[1], int(row[2]))
        return True

    def claim(
        self, endpoint: str, session_ids: Sequence[str], owner: str, *, duration: float, now: datetime | None = None
    ) -> list[Lease]:
        session_ids = check_session_ids(session_ids)
        stamp, until = self._window(owner, duration, now)
        with self._connection() as conn, self._transaction(conn, "claim"):
            leases = claim_leases(conn, endpoint, session_ids, owner, now=stamp, until=until)
        return sorted(leases, key=lambda lease: lease.session_id)

    def save_owned(self, session: StoredSession, owner: str, *, duration: float, now: datetime | None = None) -> Lease:
        row = record_values(session, _micros)
        stamp, until = self._window(owner, duration, now)
        endpoint, session_id = session.endpoint, session.session_id
        with self._connection() as conn, self._transaction(conn, "save owned"):
            held = conn.execute(self._sql.lease, {"endpoint": endpoint, "session_id": session_id}).fetchone()
            if held is not None and held[1] is not None and held[1] != owner and int(held[3]) > stamp:
                raise self._stale(session_id, owner, None, held[1], int(held[2]))
            conn.execute(_UPSERT, row)
            (lease,) = claim_leases(conn, endpoint, [session_id], owner, now=stamp, until=until)
        return lease

    def renew(self, endpoint: str, owner: str, *, duration: float, now: datetime | None = None) -> list[Lease]:
        until = self._window(owner, duration, now)[1]
        with self._connection() as conn, self._transaction(conn, "renew"):
            rows = conn.execute(
                f"UPDATE sessions SET lease_expires_at = ? WHERE endpoint = ? AND lease_owner = ? RETURNING {LEASE}",
                (until, endpoint, owner),
            ).fetchall()
        return leases_of(rows, self._time)

    def release(self, endpoint: str, owner: str, session_ids: Sequence[str] | None = None) -> int:
        check_owner(owner)
        update = "UPDATE sessions SET lease_owner = NULL, lease_expires_at = 0 WHERE endpoint = ? AND lease_owner = ?"
        with self._connection() as conn, self._transaction(conn, "release"):
            if session_ids is None:
                return conn.execute(update, (endpoint, owner)).rowcount
            released = 0
            for chunk in _chunks(list(dict.fromkeys(session_ids))):
                marks = ", ".join("?" for _ in chunk)
                released += conn.execute(f"{update} AND session_id IN ({marks})", (endpoint, owner, *chunk)).rowcount
        return released

    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        """Close the file (idempotent). Later calls raise :class:`SessionStoreError`."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __repr__(self) -> str:
        return f"<SqliteSessionStore {self._path!r} schema={self._schema_version}>"
