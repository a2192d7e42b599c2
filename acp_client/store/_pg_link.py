"""The PostgreSQL store's link to its database: the pool, retrying on a lost connection, and the one table that maps
psycopg's errors to the store's.

:meth:`PgLink.run` runs one piece of work on a pooled connection. When the connection is lost (the server restarted or
went away, a proxy or an administrator cut it), the work runs again on a fresh connection, with growing pauses, for up
to ``reconnect_timeout``: the store's work is always safe to run twice (idempotent statements, or one transaction that
the lost connection rolled back or that a repeat recognizes as done). Past that the caller gets
:class:`~acp_client.exceptions.SessionStoreUnavailable`: a write is never dropped in silence. Any other database error
is mapped at once (:meth:`PgLink.mapped`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._util._logging import get_logger
from .._util._version import install_hint
from ..exceptions import (
    ConfigurationError,
    SessionStoreBusy,
    SessionStoreCorrupt,
    SessionStoreDriverMissing,
    SessionStoreError,
    SessionStoreReadOnly,
    SessionStoreUnavailable,
)
from ._pg_schema import redact_dsn

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

logger = get_logger("acp_client.store.postgres")

T = TypeVar("T")

# SQLSTATEs: a conflict that rolled the transaction back (safe to run again), and refusals to write.
_RETRY_STATES: Final = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
_READ_ONLY_STATES: Final = frozenset({"42501", "25006"})  # insufficient_privilege, read_only_sql_transaction
_BUSY_STATES: Final = frozenset({"55P03", "57014"})  # lock_not_available, query_canceled (statement_timeout)
_MISSING_STATES: Final = frozenset({"42P01", "42703", "3F000"})  # undefined table / column / schema
_NUL_STATE: Final = "22P05"  # untranslatable_character: jsonb holds no NUL character
_RETRY_PAUSE: Final = (0.05, 1.0)  # first and longest pause between attempts, seconds


class PgLink:
    """The connections of one store (see the module docstring).

    ``dsn`` is kept for connecting and never shown; ``path`` is the DSN as shown (in every error); ``name`` is the
    pool's (in psycopg's log); the rest are as :class:`PostgresSessionStore` takes them. Raises
    ``SessionStoreDriverMissing`` without psycopg, ``ConfigurationError`` for a DSN libpq cannot read.
    """

    def __init__(
        self, dsn: str, path: str, *, pool_size: int, connect_timeout: float, reconnect_timeout: float, name: str
    ) -> None:
        self.path = path
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise SessionStoreDriverMissing(
                f"PostgresSessionStore needs psycopg 3 and psycopg-pool: {install_hint('postgres')}", path=path
            ) from exc
        self.psycopg: Any = psycopg
        self._pool_module: Any = psycopg_pool
        self._dsn = dsn
        self._connect_timeout = connect_timeout
        self._reconnect_timeout = reconnect_timeout
        try:
            given = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"not a PostgreSQL DSN: {redact_dsn(dsn)} ({exc})") from exc
        self._options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in given:
            self._options["connect_timeout"] = max(2, math.ceil(connect_timeout))
        if "application_name" not in given:
            self._options["fallback_application_name"] = "acp_client session store"
        #: Opened by :meth:`open_pool`, once the store's schema is known to be usable.
        self._pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            dsn,
            kwargs=self._options,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=connect_timeout,
            reconnect_timeout=max(reconnect_timeout, connect_timeout),
            num_workers=1,
            name=name,
        )

    def connect(self) -> psycopg.Connection[Any]:
        """One connection of its own, outside the pool (for opening the store)."""
        with self.errors("open"):
            connection: psycopg.Connection[Any] = self.psycopg.connect(self._dsn, **self._options)
        return connection

    def open_pool(self) -> None:
        """Start the pool (its first connection is made in the background)."""
        self._pool.open(wait=False)

    def mapped(self, action: str, exc: Exception) -> SessionStoreError:
        """A psycopg error as the store's error (a lost connection is handled by :meth:`run`)."""
        state = getattr(exc, "sqlstate", None) or ""
        text = str(exc).strip() or type(exc).__name__
        where = f"session store {self.path}: {action} failed: {text}"
        if state in _READ_ONLY_STATES:
            return SessionStoreReadOnly(where + " (this role may not write the store)", path=self.path)
        if state in _BUSY_STATES or state in _RETRY_STATES:
            return SessionStoreBusy(where, path=self.path)
        if state in _MISSING_STATES:
            return SessionStoreCorrupt(where + " (the store's tables were changed or dropped)", path=self.path)
        if state == _NUL_STATE:
            return SessionStoreError(where + " (jsonb cannot hold a NUL character)", path=self.path)
        if isinstance(exc, self.psycopg.OperationalError) and not state:
            return SessionStoreUnavailable(
                f"session store {self.path}: cannot reach the database: {text}", path=self.path
            )
        return SessionStoreError(where, path=self.path)

    @contextlib.contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """psycopg's errors raised inside, as the store's."""
        try:
            yield
        except SessionStoreError:
            raise
        except self.psycopg.Error as exc:
            raise self.mapped(action, exc) from exc

    def run(self, action: str, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` on a pooled connection; again on a fresh one while the connection is lost (see the module
        docstring)."""
        deadline: float | None = None
        pause = _RETRY_PAUSE[0]
        pool = self._pool
        while True:
            timeout = self._connect_timeout
            if deadline is not None:
                timeout = max(0.05, min(timeout, deadline - time.monotonic()))
            try:
                with pool.connection(timeout=timeout) as conn:
                    try:
                        return work(conn)
                    except self.psycopg.Error as exc:
                        if not (conn.broken or conn.closed or getattr(exc, "sqlstate", None) in _RETRY_STATES):
                            raise self.mapped(action, exc) from exc
                        failure: Exception = exc
            except self._pool_module.PoolClosed as exc:
                raise SessionStoreError(f"session store {self.path} is closed", path=self.path) from exc
            except self._pool_module.PoolTimeout as exc:
                failure = exc
            except self.psycopg.OperationalError as exc:  # the connection broke while the pool handed it out
                failure = exc
            now = time.monotonic()
            if deadline is None:
                deadline = now + self._reconnect_timeout
                logger.info("session store %s: %s lost its connection (%s); trying again", self.path, action, failure)
                with contextlib.suppress(Exception):
                    pool.check()  # the other idle connections died with it: drop them now
            if now >= deadline:
                raise SessionStoreUnavailable(
                    f"session store {self.path}: {action} failed: the database could not be reached for "
                    f"{self._reconnect_timeout:g}s ({self._why(failure)}); nothing was written, or the outcome "
                    "is unknown",
                    path=self.path,
                ) from failure
            time.sleep(min(pause, max(0.0, deadline - now)))
            pause = min(pause * 2, _RETRY_PAUSE[1])

    def _why(self, failure: Exception) -> str:
        """Why no connection could be had: the pool only says it timed out, so ask the server once."""
        if not isinstance(failure, self._pool_module.PoolTimeout):
            return str(failure).strip()
        try:
            self.psycopg.connect(self._dsn, **{**self._options, "connect_timeout": 2}).close()
        except self.psycopg.Error as exc:
            return str(exc).strip().splitlines()[0]
        return str(failure).strip()

    @property
    def closed(self) -> bool:
        return self._pool.closed

    def close(self) -> None:
        """Close every connection (idempotent)."""
        self._pool.close()
