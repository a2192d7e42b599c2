"""A :class:`~acp_client.store.base.SessionStore` in PostgreSQL, for clients that share their sessions.

The ``postgres`` extra (psycopg 3 and psycopg-pool), imported when the first store is made. No psycopg type crosses the
public API: every database failure is a :class:`~acp_client.exceptions.SessionStoreError`. What it keeps, and how:
``_pg_schema``.

Why it is safe to share:

- **Every write is one atomic statement or transaction, and idempotent**: ``save`` an upsert of the whole record,
  ``touch`` one ``UPDATE``, ``save_transcript`` an upsert that only lands while the record exists (a foreign key ties
  them), ``delete`` one statement (the conversation goes by cascade), ``rename`` one transaction holding the old row's
  lock, which a repeat recognizes as done. So a write whose connection was lost is **retried on a fresh connection**,
  for up to ``reconnect_timeout``: it either lands once or the caller gets
  :class:`~acp_client.exceptions.SessionStoreUnavailable`. Never silently dropped.
- **Bounded connections**: a pool of at most ``pool_size`` connections; a call waits up to ``connect_timeout`` for one.
- **Not our data**: the schema is identified before anything is written; another application's tables, our identity
  without our tables or a newer incompatible schema is refused and left as it was. An older schema is migrated in one
  transaction, under an advisory lock (two processes opening one new database at once initialize it once).

**Ownership** (schema version 2): each record carries a lease (owner, fencing token, expiry). A claim, a renewal, a
release and ``save_owned`` are each one statement; a fenced write is one statement whose ``WHERE`` names the lease it
expects (``rename``: a transaction holding the row's lock), so no read-then-write race exists: of two clients claiming
one session at once, the second's statement waits for the first's row and finds it taken. Lease time is the **database
server's clock** (``statement_timestamp()``) unless a call passes ``now=``, so replicas on several hosts agree on it.

``path`` (in every error and ``repr``) is the DSN with any password masked, and the schema.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigurationError, SessionStoreError, SessionStoreFenced
from ._pg_link import PgLink
from ._pg_schema import MIGRATIONS, Migration, Statements, Tables, open_schema, redact_dsn
from ._rows import RowStore, check_session_ids, check_window, dump_json, lease_of, leases_of, record_values, renamed
from .base import (
    DEFAULT_TRANSCRIPT_TAIL_BYTES,
    RECORD_COLUMNS,
    Fence,
    Lease,
    SharedSessionStore,
    StoredSession,
    as_utc,
    check_owner,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresSessionStore"]


class PostgresSessionStore(RowStore, SharedSessionStore):
    """A :class:`~acp_client.store.base.SharedSessionStore` in a PostgreSQL database (see the module docstring).

    Any call may also raise :class:`~acp_client.exceptions.SessionStoreUnavailable` (the database could not be reached
    for ``reconnect_timeout``) or :class:`~acp_client.exceptions.SessionStoreCorrupt` (the store's tables were changed);
    a listing skips a damaged record (logged as a warning), :meth:`get` raises for it.

    Args:
        dsn: Where the database is: a ``postgresql://`` URL or libpq ``key=value`` keywords (the same as ``psql`` takes;
            libpq's environment variables and ``~/.pgpass`` apply).
        schema: The PostgreSQL schema the store keeps its tables in (created when missing). Two apps, or two tests, can
            share one database under two schema names.
        pool_size: At most this many connections to the database (default 4).
        connect_timeout: How long a call waits for a connection (a new one, or a free one of the pool), in seconds.
        reconnect_timeout: How long a call whose connection was lost keeps trying again on fresh connections before it
            raises :class:`~acp_client.exceptions.SessionStoreUnavailable`.
        max_transcript_bytes: The bound of each stored conversation (compact JSON bytes, default 4 MiB); past it the
            oldest messages are dropped and counted in its header.
        create: Create the schema when it is missing or empty (else raise ``SessionStoreError``).

    Raises:
        SessionStoreDriverMissing: psycopg or psycopg-pool is not installed (the ``postgres`` extra).
        SessionStoreUnavailable: The database cannot be reached (refused, down, authentication).
        SessionStoreForeign: The schema holds tables of another application.
        SessionStoreCorrupt: The schema carries our identity without our tables.
        SessionStoreTooNew: The schema is newer than this acp_client can use.
        SessionStoreReadOnly: This role may not create or write the store's tables.
        ConfigurationError: A bad schema name, pool size or timeout.
    """

    _migrations: tuple[Migration, ...] = MIGRATIONS
    _sql: Statements

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "acp_client",
        pool_size: int = 4,
        connect_timeout: float = 5.0,
        reconnect_timeout: float = 10.0,
        max_transcript_bytes: int = DEFAULT_TRANSCRIPT_TAIL_BYTES,
        create: bool = True,
    ) -> None:
        if not isinstance(dsn, str) or not dsn.strip():
            raise ConfigurationError("PostgresSessionStore needs a DSN (postgresql://... or libpq keywords)")
        if not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigurationError(f"pool_size must be at least 1, got {pool_size!r}")
        if connect_timeout <= 0 or reconnect_timeout < 0:
            raise ConfigurationError("connect_timeout must be positive and reconnect_timeout not negative")
        if max_transcript_bytes < 0:
            raise ConfigurationError("max_transcript_bytes must not be negative")
        self._tables = Tables(schema)
        self._path = f"{redact_dsn(dsn)} (schema {self._tables.schema})"
        self._link = PgLink(
            dsn,
            self._path,
            pool_size=pool_size,
            connect_timeout=float(connect_timeout),
            reconnect_timeout=float(reconnect_timeout),
            name=f"acp_client-store-{self._tables.schema}",
        )
        self._max_transcript_bytes = max_transcript_bytes
        self._sql = Statements(self._tables)
        with contextlib.closing(self._link.connect()) as first, self._link.errors("open"):
            self._schema_version = open_schema(
                first, self._tables, self._path, self._migrations, create=create, driver_error=self._link.psycopg.Error
            )
        self._link.open_pool()

    _time = staticmethod(as_utc)

    def _row(self, session: StoredSession) -> dict[str, Any]:
        return dict(zip(RECORD_COLUMNS, record_values(session, as_utc), strict=True))

    def _query(self, action: str, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement (again on a fresh connection if its connection was lost); its rows."""

        def work(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else [()] * max(cursor.rowcount, 0)

        return self._link.run(action, work)

    def save(self, session: StoredSession, *, fence: Fence | None = None) -> None:
        row = self._row(session)
        if fence is None:
            self._query("save", self._sql.upsert, row)
        elif not self._query("save", self._sql.update_fenced, {**row, **_fence(fence)}):
            raise self._refused(session.endpoint, session.session_id, fence.owner, fence.token)

    def delete(self, endpoint: str, session_id: str, *, fence: Fence | None = None) -> bool:
        """Remove one session and its conversation; ``True`` when it was stored (repeated after a lost connection,
        ``False`` for a record its first attempt removed)."""
        statements = (self._sql.delete, self._sql.delete_fenced)
        return self._write("delete", statements, endpoint, session_id, fence=fence)

    def _write(
        self,
        action: str,
        statements: tuple[str, str],
        endpoint: str,
        session_id: str,
        *,
        fence: Fence | None,
        params: Mapping[str, Any] | None = None,
    ) -> bool:
        """One statement on one stored session; ``True`` when it applied. With ``fence``: the fenced statement, and a
        session stored under another lease raises (one that is not stored: ``False``)."""
        sql, fenced_sql = statements
        key = {"endpoint": endpoint, "session_id": session_id, **(params or {})}
        if fence is None:
            return bool(self._query(action, sql, key))
        if self._query(action, fenced_sql, {**key, **_fence(fence)}):
            return True
        held = self._query("read lease", self._sql.lease, {"endpoint": endpoint, "session_id": session_id})
        if not held:
            return False  # not stored: answered as for any session that is not
        raise self._refused(endpoint, session_id, fence.owner, fence.token, lease_of(held[0], as_utc))

    def _rename(
        self, endpoint: str, old_session_id: str, new_session_id: str, *, when: datetime, fence: Fence | None
    ) -> StoredSession | None:
        """One transaction. Repeated after a lost connection, a rename its first attempt made is recognized (the new
        id's record has the old id last in ``previous_session_ids``) and returned, not redone."""
        attempts = 0
        old_key = {"endpoint": endpoint, "session_id": old_session_id}
        new_key = {"endpoint": endpoint, "session_id": new_session_id}

        def work(conn: psycopg.Connection[Any]) -> StoredSession | None:
            nonlocal attempts
            attempts += 1
            with conn.transaction():
                row = conn.execute(self._sql.get_for_update, old_key).fetchone()
                if row is None:
                    if attempts > 1:  # the first attempt may have committed before its answer was lost
                        found = conn.execute(self._sql.get, new_key).fetchone()
                        done = None if found is None else self._decode(found)
                        if done is not None and done.previous_session_ids[-1:] == (old_session_id,):
                            return done
                    return None
                old = self._decode(row)
                if fence is not None and (old.lease is None or old.lease.fence != fence):
                    raise self._refused(endpoint, old_session_id, fence.owner, fence.token, old.lease)
                if new_session_id == old_session_id:
                    return old
                new = renamed(old, new_session_id, when)
                # A stale record under the new id goes, with its conversation (by cascade).
                conn.execute(self._sql.delete, new_key)
                previous = dump_json(list(new.previous_session_ids), "previous_session_ids")
                moved = {"new_session_id": new_session_id, "previous_session_ids": previous, "updated_at": when}
                conn.execute(self._sql.rename, {**old_key, **moved})
                return new

        return self._link.run("rename", work)

    def touch(
        self, endpoint: str, session_id: str, *, when: datetime | None = None, fence: Fence | None = None
    ) -> bool:
        statements = (self._sql.touch, self._sql.touch_fenced)
        return self._write("touch", statements, endpoint, session_id, fence=fence, params={"when": as_utc(when)})

    def _save_tail(
        self, action: str, endpoint: str, session_id: str, tail: str, *, when: datetime | None, fence: Fence | None
    ) -> bool:
        """One statement, one round trip: the conversation, and the last use ``when`` where given."""
        params: dict[str, Any] = {"conversation": tail}
        statements = (self._sql.save_transcript, self._sql.save_transcript_fenced)
        if when is not None:
            statements = (self._sql.save_turn, self._sql.save_turn_fenced)
            params["when"] = when
        return self._write(action, statements, endpoint, session_id, fence=fence, params=params)

    def _refused(
        self, endpoint: str, session_id: str, owner: str, token: int | None, lease: Lease | None = None
    ) -> SessionStoreFenced:
        """The error of a write by ``owner`` with ``token`` (``None``: ``save_owned``) that the lease refused."""
        if lease is None:
            with contextlib.suppress(SessionStoreError):
                lease = self.lease(endpoint, session_id)
        holder, held = (None, None) if lease is None else (lease.owner, lease.token)
        return self._stale(session_id, owner, token, holder, held)

    def claim(
        self, endpoint: str, session_ids: Sequence[str], owner: str, *, duration: float, now: datetime | None = None
    ) -> list[Lease]:
        """Take the free leases of ``session_ids`` in one statement (see :meth:`SharedSessionStore.claim`): of two
        clients claiming one session at once, the second's statement waits for the row and sees it taken. Repeated after
        a lost connection, a claim that was made is the owner's own and is simply extended."""
        window = self._window(owner, duration, now)
        session_ids = check_session_ids(session_ids)
        if not session_ids:
            return []
        params = {**window, "endpoint": endpoint, "session_ids": session_ids}
        return leases_of(self._query("claim", self._sql.claim, params), as_utc)

    def save_owned(self, session: StoredSession, owner: str, *, duration: float, now: datetime | None = None) -> Lease:
        params = {**self._row(session), **self._window(owner, duration, now)}
        rows = self._query("save owned", self._sql.save_owned, params)
        if not rows:
            raise self._refused(session.endpoint, session.session_id, owner, None)
        (lease,) = leases_of(rows, as_utc)
        return lease

    def renew(self, endpoint: str, owner: str, *, duration: float, now: datetime | None = None) -> list[Lease]:
        params = {**self._window(owner, duration, now), "endpoint": endpoint}
        return leases_of(self._query("renew", self._sql.renew, params), as_utc)

    def release(self, endpoint: str, owner: str, session_ids: Sequence[str] | None = None) -> int:
        params: dict[str, Any] = {"endpoint": endpoint, "owner": check_owner(owner)}
        if session_ids is None:
            return len(self._query("release", self._sql.release, params))
        params["session_ids"] = list(dict.fromkeys(session_ids))
        return len(self._query("release", self._sql.release_some, params))

    def _window(self, owner: str, duration: float, now: datetime | None) -> dict[str, Any]:
        """The parameters of a lease for ``owner`` of ``duration`` seconds from ``now`` (both checked)."""
        check_window(owner, duration)
        return {"owner": owner, "duration": float(duration), "now": self._now(now)}

    @staticmethod
    def _now(now: datetime | None) -> datetime | None:
        return None if now is None else as_utc(now)

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the store's tables."""
        return self._tables.schema

    @property
    def closed(self) -> bool:
        return self._link.closed

    def close(self) -> None:
        """Close every connection (idempotent). Later calls raise :class:`SessionStoreError`."""
        self._link.close()

    def __repr__(self) -> str:
        return f"<PostgresSessionStore {self._path!r} schema_version={self._schema_version}>"


def _fence(fence: Fence) -> dict[str, Any]:
    return {"fence_owner": fence.owner, "fence_token": fence.token}
