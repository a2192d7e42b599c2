"""A :class:`~acp_client.store.base.SessionStore` in PostgreSQL, for clients that share their sessions.

The ``postgres`` extra (psycopg 3 and psycopg-pool); psycopg is imported when the first store is
made, so importing this module costs nothing. No psycopg type crosses the public API: every
database failure is a :class:`~acp_client.exceptions.SessionStoreError`.

What it keeps, and how (``acp_client.store._pg_schema``): one PostgreSQL schema (``acp_client`` by
default) holding the records, their conversations (``jsonb``, bounded like SQLite's with
:func:`~acp_client.store.base.bound_conversation`) and the store's identity and schema version.

Why it is safe to share:

- **Every write is one atomic statement or transaction, and idempotent**: ``save`` an upsert of
  the whole record, ``touch`` one ``UPDATE``, ``save_transcript`` an upsert that only lands while
  the record exists (a foreign key ties them), ``delete`` one statement (the conversation goes by
  cascade), ``rename`` one transaction holding the old row's lock, which a repeat recognizes as
  done. So a write whose connection was lost is **retried on a fresh connection**, for up to
  ``reconnect_timeout``: it either lands once or the caller gets
  :class:`~acp_client.exceptions.SessionStoreUnavailable`. Never silently dropped.
- **Bounded connections**: a psycopg pool of at most ``pool_size`` connections (default 4); a call
  waits up to ``connect_timeout`` for one.
- **Not our data**: before anything is written the schema is identified; another application's
  tables (:class:`~acp_client.exceptions.SessionStoreForeign`), our identity without our tables
  (:class:`~acp_client.exceptions.SessionStoreCorrupt`) or a newer incompatible schema
  (:class:`~acp_client.exceptions.SessionStoreTooNew`) is refused and left as it was. An older
  schema is migrated in one transaction, under an advisory lock (two processes opening one new
  database at once initialize it once).

``path`` (in every error and ``repr``) is the DSN with any password masked, and the schema.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from .._version import install_hint
from ..exceptions import (
    ConfigurationError,
    SessionStoreBusy,
    SessionStoreCorrupt,
    SessionStoreDriverMissing,
    SessionStoreError,
    SessionStoreForeign,
    SessionStoreReadOnly,
    SessionStoreTooNew,
    SessionStoreUnavailable,
)
from . import _pg_schema as schema_module
from ._pg_schema import APPLICATION_ID, FORMAT, Migration, Tables, meta_version, redact_dsn
from .base import DEFAULT_TRANSCRIPT_TAIL_BYTES, StoredSession, as_utc, bound_conversation

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["PostgresSessionStore"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_COLUMNS: Final = (
    "endpoint",
    "session_id",
    "cwd",
    "mcp_servers",
    "additional_directories",
    "protocol_version",
    "mode_id",
    "model_id",
    "config_options",
    "title",
    "status",
    "raw_status",
    "created_at",
    "updated_at",
    "last_used_at",
    "previous_session_ids",
    "extra",
)
_JSON_COLUMNS: Final = frozenset(
    {"mcp_servers", "additional_directories", "config_options", "previous_session_ids", "extra"}
)

# SQLSTATEs: a conflict that rolled the transaction back (safe to run again), and refusals to write.
_RETRY_STATES: Final = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
_READ_ONLY_STATES: Final = frozenset({"42501", "25006"})  # insufficient_privilege, read_only_sql_transaction
_BUSY_STATES: Final = frozenset({"55P03", "57014"})  # lock_not_available, query_canceled (statement_timeout)
_MISSING_STATES: Final = frozenset({"42P01", "42703", "3F000"})  # undefined table / column / schema
_RETRY_PAUSE: Final = (0.05, 1.0)  # first and longest pause between attempts, seconds


def _dump(value: Any, what: str) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"StoredSession.{what} is not JSON-serializable: {exc}") from exc


def _import_driver(path: str) -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise SessionStoreDriverMissing(
            f"PostgresSessionStore needs psycopg 3 and psycopg-pool: {install_hint('postgres')}", path=path
        ) from exc
    return psycopg, psycopg_pool


class PostgresSessionStore:
    """A :class:`~acp_client.store.base.SessionStore` in a PostgreSQL database (see the module docstring).

    Args:
        dsn: Where the database is: a ``postgresql://`` URL or libpq ``key=value`` keywords (the
            same as ``psql`` takes; libpq's environment variables and ``~/.pgpass`` apply).
        schema: The PostgreSQL schema the store keeps its tables in (created when missing). Two
            apps, or two tests, can share one database under two schema names.
        pool_size: At most this many connections to the database (default 4).
        connect_timeout: How long a call waits for a connection (a new one, or a free one of the
            pool), in seconds.
        reconnect_timeout: How long a call whose connection was lost keeps trying again on fresh
            connections before it raises :class:`~acp_client.exceptions.SessionStoreUnavailable`.
        max_transcript_bytes: The bound of each stored conversation (compact JSON bytes, default
            4 MiB); past it the oldest messages are dropped and counted in its header.
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

    _migrations: tuple[Migration, ...] = schema_module.MIGRATIONS

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
        self._psycopg, pool_module = _import_driver(self._path)
        self._pool_timeout_error: type[Exception] = pool_module.PoolTimeout
        self._pool_closed_error: type[Exception] = pool_module.PoolClosed
        self._connect_timeout = float(connect_timeout)
        self._reconnect_timeout = float(reconnect_timeout)
        self._max_transcript_bytes = max_transcript_bytes
        self._statements = _Statements(self._tables)
        self._lock = threading.Lock()
        kwargs = self._connection_options(dsn)
        self._dsn, self._options = dsn, kwargs
        with self._errors("open"):
            first = self._psycopg.connect(dsn, **kwargs)
        try:
            self._schema_version = self._open(first, create=create)
        finally:
            first.close()
        self._pool: psycopg_pool.ConnectionPool[Any] | None = pool_module.ConnectionPool(
            dsn,
            kwargs=kwargs,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=self._connect_timeout,
            reconnect_timeout=max(self._reconnect_timeout, self._connect_timeout),
            num_workers=1,
            name=f"acp_client-store-{self._tables.schema}",
        )
        self._pool.open(wait=False)

    def _connection_options(self, dsn: str) -> dict[str, Any]:
        try:
            given = self._psycopg.conninfo.conninfo_to_dict(dsn)
        except self._psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"not a PostgreSQL DSN: {redact_dsn(dsn)} ({exc})") from exc
        options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in given:
            options["connect_timeout"] = max(2, math.ceil(self._connect_timeout))
        if "application_name" not in given:
            options["fallback_application_name"] = "acp_client session store"
        return options

    # -- opening --------------------------------------------------------------------------------

    def _open(self, conn: psycopg.Connection[Any], *, create: bool) -> int:
        """Identify the schema; initialize or migrate it when it is ours or empty (reads only otherwise)."""
        with self._errors("open"):
            version, needs_work = self._identify(conn)
            if not needs_work:
                return version
            if version == 0 and not create:
                raise SessionStoreError(f"session store {self._path} does not exist (create=False)", path=self._path)
            with conn.transaction():
                # One initializer at a time per schema; the others find its work when they get the lock.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{FORMAT}:{self._tables.schema}",))
                version, needs_work = self._identify(conn)
                if needs_work:
                    with conn.cursor() as cur:
                        for step in range(version, len(self._migrations)):
                            self._migrations[step](cur, self._tables)
                        version = len(self._migrations)
                        cur.execute(
                            f"UPDATE {self._tables.meta} SET value = %s WHERE key = 'schema_version'", (str(version),)
                        )
            return version

    def _identify(self, conn: psycopg.Connection[Any]) -> tuple[int, bool]:
        """``(schema version, needs initializing or migrating)``; raises for a schema not ours."""
        t = self._tables
        names = {
            row[0]
            for row in conn.execute(
                "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s",
                (t.schema,),
            )
        }
        if not names:
            return 0, True  # missing or empty: ours to initialize
        where = f"schema {t.schema!r} of {self._path}"
        if "store_meta" not in names:
            raise SessionStoreForeign(
                f"{where} holds tables of another application, not a session store (left untouched): "
                "give the store a schema of its own (schema=...)",
                path=self._path,
            )
        try:
            with conn.transaction():
                meta = dict(conn.execute(f"SELECT key::text, value::text FROM {t.meta}").fetchall())
        except self._psycopg.Error as exc:
            raise SessionStoreForeign(
                f"{where}: its store_meta table is not ours ({exc}) (left untouched)", path=self._path
            ) from exc
        if meta.get("format") != FORMAT or meta.get("application_id") != str(APPLICATION_ID):
            raise SessionStoreForeign(
                f"{where} holds another application's store_meta, not a session store (left untouched)",
                path=self._path,
            )
        version = meta_version(meta, "schema_version")
        if version is None or version < 1 or not {"sessions", "transcripts"} <= names:
            raise SessionStoreCorrupt(
                f"session store {where} is damaged: its tables or its schema version are missing", path=self._path
            )
        supported = len(self._migrations)
        if version > supported:
            compatible = meta_version(meta, "compatible_version") or version
            if compatible > supported:
                raise SessionStoreTooNew(
                    f"session store {where} has schema version {version} (needs a reader of version {compatible} "
                    f"or later); this acp_client supports up to {supported}: upgrade acp_client",
                    path=self._path,
                    version=version,
                    supported=supported,
                )
        return version, version < supported

    # -- plumbing -------------------------------------------------------------------------------

    def _mapped(self, action: str, exc: Exception) -> SessionStoreError:
        """A psycopg error as the store's error (a lost connection is handled by :meth:`_run`)."""
        state = getattr(exc, "sqlstate", None) or ""
        text = str(exc).strip() or type(exc).__name__
        where = f"session store {self._path}: {action} failed: {text}"
        if state in _READ_ONLY_STATES:
            return SessionStoreReadOnly(where + " (this role may not write the store)", path=self._path)
        if state in _BUSY_STATES or state in _RETRY_STATES:
            return SessionStoreBusy(where, path=self._path)
        if state in _MISSING_STATES:
            return SessionStoreCorrupt(where + " (the store's tables were changed or dropped)", path=self._path)
        if state == "22P05":  # untranslatable_character: jsonb holds no NUL character
            return SessionStoreError(where + " (jsonb cannot hold a NUL character)", path=self._path)
        if isinstance(exc, self._psycopg.OperationalError) and not state:
            return SessionStoreUnavailable(
                f"session store {self._path}: cannot reach the database: {text}", path=self._path
            )
        return SessionStoreError(where, path=self._path)

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except SessionStoreError:
            raise
        except self._psycopg.Error as exc:
            raise self._mapped(action, exc) from exc

    def _run(self, action: str, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` on a pooled connection; again on a fresh one while the connection is lost.

        ``work`` must be safe to run twice (every call of this store is: idempotent statements, or
        one transaction that a lost connection rolled back or that a repeat recognizes as done).

        Raises:
            SessionStoreUnavailable: No connection could be had, or kept, for ``reconnect_timeout``.
        """
        deadline: float | None = None
        pause = _RETRY_PAUSE[0]
        while True:
            pool = self._pool
            if pool is None:
                raise SessionStoreError(f"session store {self._path} is closed", path=self._path)
            timeout = (
                self._connect_timeout
                if deadline is None
                else max(0.05, min(self._connect_timeout, deadline - time.monotonic()))
            )
            try:
                with pool.connection(timeout=timeout) as conn:
                    try:
                        return work(conn)
                    except self._psycopg.Error as exc:
                        if not (conn.broken or conn.closed or getattr(exc, "sqlstate", None) in _RETRY_STATES):
                            raise self._mapped(action, exc) from exc
                        failure: Exception = exc
            except self._pool_closed_error as exc:
                raise SessionStoreError(f"session store {self._path} is closed", path=self._path) from exc
            except self._pool_timeout_error as exc:
                failure = exc
            except self._psycopg.OperationalError as exc:  # the connection broke while the pool checked it
                failure = exc
            now = time.monotonic()
            if deadline is None:
                deadline = now + self._reconnect_timeout
                logger.info("session store %s: %s lost its connection (%s); trying again", self._path, action, failure)
                with contextlib.suppress(Exception):
                    pool.check()  # the other idle connections died with it: drop them now
            if now >= deadline:
                raise SessionStoreUnavailable(
                    f"session store {self._path}: {action} failed: the database could not be reached for "
                    f"{self._reconnect_timeout:g}s ({self._why(failure)}); nothing was written, or the outcome "
                    "is unknown",
                    path=self._path,
                ) from failure
            time.sleep(min(pause, max(0.0, deadline - now)))
            pause = min(pause * 2, _RETRY_PAUSE[1])

    def _why(self, failure: Exception) -> str:
        """Why no connection could be had: the pool only says it timed out, so ask the server once."""
        if not isinstance(failure, self._pool_timeout_error):
            return str(failure).strip()
        try:
            self._psycopg.connect(self._dsn, **{**self._options, "connect_timeout": 2}).close()
        except self._psycopg.Error as exc:
            return str(exc).strip().splitlines()[0]
        return str(failure).strip()

    def _row(self, session: StoredSession) -> tuple[Any, ...]:
        return (
            session.endpoint,
            session.session_id,
            session.cwd,
            _dump(list(session.mcp_servers), "mcp_servers"),
            _dump(list(session.additional_directories), "additional_directories"),
            session.protocol_version,
            session.mode_id,
            session.model_id,
            _dump(session.config_options, "config_options"),
            session.title,
            None if session.status is None else session.status.value,
            session.raw_status,
            session.created_at,
            session.updated_at,
            session.last_used_at,
            _dump(list(session.previous_session_ids), "previous_session_ids"),
            _dump(session.extra, "extra"),
        )

    def _decode(self, row: Sequence[Any]) -> StoredSession:
        """One row as a record.

        Raises:
            SessionStoreCorrupt: The row's values are damaged.
        """
        try:
            return StoredSession(
                endpoint=row[0],
                session_id=row[1],
                cwd=row[2],
                mcp_servers=row[3],
                additional_directories=row[4],
                protocol_version=int(row[5]),
                mode_id=row[6],
                model_id=row[7],
                config_options=row[8],
                title=row[9],
                status=row[10],
                raw_status=row[11],
                created_at=as_utc(row[12]),
                updated_at=as_utc(row[13]),
                last_used_at=as_utc(row[14]),
                previous_session_ids=row[15],
                extra=row[16],
            )
        except (TypeError, ValueError, OverflowError, AttributeError, ConfigurationError) as exc:
            raise SessionStoreCorrupt(
                f"session store {self._path}: the record of session {row[1]!r} is damaged: {exc}", path=self._path
            ) from exc

    # -- the SessionStore protocol --------------------------------------------------------------

    def load(self, endpoint: str) -> list[StoredSession]:
        """Every session stored for ``endpoint``, most recently used first (a damaged record is
        skipped and logged as a warning).

        Raises:
            SessionStoreUnavailable: The database cannot be reached.
            SessionStoreError: The store cannot be read.
        """
        rows = self._run("load", lambda conn: conn.execute(self._statements.load, (endpoint,)).fetchall())
        sessions = []
        for row in rows:
            try:
                sessions.append(self._decode(row))
            except SessionStoreCorrupt as exc:
                logger.warning("skipping a stored session: %s", exc)
        return sessions

    def get(self, endpoint: str, session_id: str) -> StoredSession | None:
        """One stored session, or ``None``.

        Raises:
            SessionStoreCorrupt: This record is damaged.
            SessionStoreUnavailable: The database cannot be reached.
            SessionStoreError: The store cannot be read.
        """
        row = self._run("get", lambda conn: conn.execute(self._statements.get, (endpoint, session_id)).fetchone())
        return None if row is None else self._decode(row)

    def save(self, session: StoredSession) -> None:
        """Insert or replace ``session`` in one statement (its conversation is kept).

        Raises:
            ConfigurationError: A JSON field is not JSON-serializable (nothing written).
            SessionStoreUnavailable: The database could not be reached for ``reconnect_timeout``.
            SessionStoreError: The store cannot be written.
        """
        row = self._row(session)
        self._run("save", lambda conn: conn.execute(self._statements.upsert, row))

    def delete(self, endpoint: str, session_id: str) -> bool:
        """Remove one session and its conversation; ``True`` when it was stored (a delete repeated
        after a lost connection may say ``False`` for a record its first attempt removed).

        Raises:
            SessionStoreUnavailable: The database could not be reached for ``reconnect_timeout``.
            SessionStoreError: The store cannot be written.
        """
        cursor = self._run("delete", lambda conn: conn.execute(self._statements.delete, (endpoint, session_id)))
        return cursor.rowcount > 0

    def rename(
        self, endpoint: str, old_session_id: str, new_session_id: str, *, when: datetime | None = None
    ) -> StoredSession | None:
        """Move a session to a new id in one transaction (see :meth:`SessionStore.rename`).

        Repeated after a lost connection, a rename its first attempt made is recognized (the new
        id's record has the old id last in ``previous_session_ids``) and returned, not redone.

        Raises:
            ConfigurationError: ``new_session_id`` is empty.
            SessionStoreUnavailable: The database could not be reached for ``reconnect_timeout``.
            SessionStoreError: The store cannot be written.
        """
        if not new_session_id:
            raise ConfigurationError("the new session id must not be empty")
        stamp = as_utc(when)
        attempts = 0

        def work(conn: psycopg.Connection[Any]) -> StoredSession | None:
            nonlocal attempts
            attempts += 1
            with conn.transaction():
                row = conn.execute(self._statements.get_for_update, (endpoint, old_session_id)).fetchone()
                if row is None:
                    if attempts > 1:  # the first attempt may have committed before its answer was lost
                        done = conn.execute(self._statements.get, (endpoint, new_session_id)).fetchone()
                        if done is not None:
                            record = self._decode(done)
                            if record.previous_session_ids[-1:] == (old_session_id,):
                                return record
                    return None
                old = self._decode(row)
                if new_session_id == old_session_id:
                    return old
                previous = [item for item in old.previous_session_ids if item != new_session_id]
                renamed = attrs.evolve(
                    old, session_id=new_session_id, previous_session_ids=(*previous, old_session_id), updated_at=stamp
                )
                conn.execute(
                    self._statements.delete, (endpoint, new_session_id)
                )  # a stale record, and its conversation
                conn.execute(
                    self._statements.rename,
                    (
                        new_session_id,
                        _dump(list(renamed.previous_session_ids), "previous_session_ids"),
                        stamp,
                        endpoint,
                        old_session_id,
                    ),
                )
                return renamed

        return self._run("rename", work)

    def touch(self, endpoint: str, session_id: str, *, when: datetime | None = None) -> bool:
        """Set ``last_used_at`` (default: now); ``True`` when the session is stored.

        Raises:
            SessionStoreUnavailable: The database could not be reached for ``reconnect_timeout``.
            SessionStoreError: The store cannot be written.
        """
        stamp = as_utc(when)
        cursor = self._run("touch", lambda conn: conn.execute(self._statements.touch, (stamp, endpoint, session_id)))
        return cursor.rowcount > 0

    def save_transcript(self, endpoint: str, session_id: str, entries: Sequence[Mapping[str, Any]]) -> bool:
        """Replace the session's conversation, bounded to ``max_transcript_bytes`` (the oldest whole
        messages dropped and counted in its header); ``False`` (nothing written) when the session
        is not stored.

        Raises:
            ConfigurationError: An entry is not JSON-serializable (nothing written).
            SessionStoreUnavailable: The database could not be reached for ``reconnect_timeout``.
            SessionStoreError: The store cannot be written.
        """
        tail = _dump(list(bound_conversation(entries, self._max_transcript_bytes)), "transcript tail")
        foreign_key = self._psycopg.errors.ForeignKeyViolation

        def work(conn: psycopg.Connection[Any]) -> bool:
            try:
                cursor = conn.execute(
                    self._statements.save_transcript, (endpoint, session_id, tail, endpoint, session_id)
                )
            except foreign_key:  # the record was deleted between the check and the write
                return False
            return cursor.rowcount > 0

        return self._run("save transcript", work)

    def load_transcript(self, endpoint: str, session_id: str) -> tuple[dict[str, Any], ...]:
        """The session's conversation, oldest first (empty when none is stored).

        Raises:
            SessionStoreCorrupt: The stored conversation is damaged.
            SessionStoreUnavailable: The database cannot be reached.
            SessionStoreError: The store cannot be read.
        """
        row = self._run(
            "load transcript",
            lambda conn: conn.execute(self._statements.load_transcript, (endpoint, session_id)).fetchone(),
        )
        if row is None:
            return ()
        try:
            entries = row[0]
            if not isinstance(entries, list):
                raise TypeError(f"a JSON {type(entries).__name__}, not a list")
            return tuple(dict(entry) for entry in entries)
        except (TypeError, ValueError) as exc:
            raise SessionStoreCorrupt(
                f"session store {self._path}: the transcript of session {session_id!r} is damaged: {exc}",
                path=self._path,
            ) from exc

    # -- beyond the protocol --------------------------------------------------------------------

    def endpoints(self) -> list[str]:
        """Every endpoint key with stored sessions, most recently used first.

        Raises:
            SessionStoreError: The store cannot be read.
        """
        rows = self._run("list endpoints", lambda conn: conn.execute(self._statements.endpoints).fetchall())
        return [row[0] for row in rows]

    def count(self, endpoint: str | None = None) -> int:
        """How many sessions are stored (for ``endpoint``, or in all).

        Raises:
            SessionStoreError: The store cannot be read.
        """
        if endpoint is None:
            row = self._run("count", lambda conn: conn.execute(self._statements.count_all).fetchone())
        else:
            row = self._run("count", lambda conn: conn.execute(self._statements.count, (endpoint,)).fetchone())
        return 0 if row is None else int(row[0])

    @property
    def path(self) -> str:
        """Where the store is: the DSN with any password masked, and the schema."""
        return self._path

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the store's tables."""
        return self._tables.schema

    @property
    def schema_version(self) -> int:
        """The store's schema version (``store_meta``)."""
        return self._schema_version

    @property
    def closed(self) -> bool:
        return self._pool is None

    def close(self) -> None:
        """Close every connection (idempotent). Later calls raise :class:`SessionStoreError`."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<PostgresSessionStore {self._path!r} schema_version={self._schema_version}>"


class _Statements:
    """The store's SQL, for one schema."""

    def __init__(self, t: Tables) -> None:
        columns = ", ".join(_COLUMNS)
        values = ", ".join("%s::jsonb" if name in _JSON_COLUMNS else "%s" for name in _COLUMNS)
        select = f"SELECT {columns} FROM {t.sessions}"
        self.load = f"{select} WHERE endpoint = %s ORDER BY last_used_at DESC, session_id"
        self.get = f"{select} WHERE endpoint = %s AND session_id = %s"
        self.get_for_update = f"{self.get} FOR UPDATE"
        self.upsert = (
            f"INSERT INTO {t.sessions} ({columns}) VALUES ({values}) ON CONFLICT (endpoint, session_id) DO UPDATE SET "
            + ", ".join(f"{name} = excluded.{name}" for name in _COLUMNS[2:])
        )
        self.delete = f"DELETE FROM {t.sessions} WHERE endpoint = %s AND session_id = %s"
        # The conversation follows by the foreign key's ON UPDATE CASCADE.
        self.rename = (
            f"UPDATE {t.sessions} SET session_id = %s, previous_session_ids = %s::jsonb, updated_at = %s "
            "WHERE endpoint = %s AND session_id = %s"
        )
        self.touch = f"UPDATE {t.sessions} SET last_used_at = %s WHERE endpoint = %s AND session_id = %s"
        self.save_transcript = (
            f"INSERT INTO {t.transcripts} (endpoint, session_id, conversation) "
            f"SELECT %s, %s, %s::jsonb "
            f"WHERE EXISTS (SELECT 1 FROM {t.sessions} WHERE endpoint = %s AND session_id = %s) "
            "ON CONFLICT (endpoint, session_id) DO UPDATE SET conversation = excluded.conversation"
        )
        self.load_transcript = f"SELECT conversation FROM {t.transcripts} WHERE endpoint = %s AND session_id = %s"
        self.endpoints = (
            f"SELECT endpoint FROM {t.sessions} GROUP BY endpoint ORDER BY MAX(last_used_at) DESC, endpoint"
        )
        self.count_all = f"SELECT COUNT(*) FROM {t.sessions}"
        self.count = f"SELECT COUNT(*) FROM {t.sessions} WHERE endpoint = %s"
