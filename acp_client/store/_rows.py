"""What both built-in stores do alike: a record's row written and read back (a damaged one refused, or skipped in a
listing), its lease, its conversation, the reads, and the ownership errors."""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TypeVar

import attrs

from .._util._checks import check_seconds
from .._util._logging import get_logger
from ..exceptions import ConfigurationError, SessionStoreCorrupt, SessionStoreFenced, SessionStoreTooNew
from .base import RECORD_COLUMNS, Fence, Lease, StoredSession, as_utc, bound_conversation, check_owner

logger = get_logger("acp_client.store")

Time = Callable[[Any], datetime]
_S = TypeVar("_S", bound="RowStore")

#: The record's columns each store keeps as JSON, and as times (each in its own way).
JSON_COLUMNS: Final = ("mcp_servers", "additional_directories", "config_options", "previous_session_ids", "extra")
TIME_COLUMNS: Final = ("created_at", "updated_at", "last_used_at")
#: A lease as a statement returns it: ``(session_id, owner, token, expires_at)``.
LEASE: Final = "session_id, lease_owner, lease_token, lease_expires_at"


class Reads:
    """The reads both stores run, over their ``sessions`` and ``transcripts`` tables: ``param`` writes a named parameter
    as the driver takes it, ``now`` is a lease's "now" in SQL."""

    def __init__(
        self, sessions: str, transcripts: str, conversation: str, param: Callable[[str], str], now: str
    ) -> None:
        self.one = f"endpoint = {param('endpoint')} AND session_id = {param('session_id')}"
        select = f"SELECT {', '.join(RECORD_COLUMNS)}, lease_owner, lease_token, lease_expires_at FROM {sessions}"
        of_endpoint = f"WHERE endpoint = {param('endpoint')}"
        recent_first = "ORDER BY last_used_at DESC, session_id"
        self.load = f"{select} {of_endpoint} {recent_first}"
        self.get = f"{select} WHERE {self.one}"
        self.lease = f"SELECT {LEASE} FROM {sessions} WHERE {self.one}"
        self.load_transcript = f"SELECT {conversation} FROM {transcripts} WHERE {self.one}"
        free = f"(lease_owner IS NULL OR lease_expires_at <= {now})"
        self.adoptable = f"{select} {of_endpoint} AND {free} {recent_first}"
        self.endpoints = f"SELECT endpoint FROM {sessions} GROUP BY endpoint ORDER BY MAX(last_used_at) DESC, endpoint"
        self.count_all = f"SELECT COUNT(*) FROM {sessions}"
        self.count = f"{self.count_all} {of_endpoint}"


def dump_json(value: Any, what: str) -> str:
    """``value`` as compact JSON text; a ``ConfigurationError`` naming field ``what`` if it cannot be."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"StoredSession.{what} is not JSON-serializable: {exc}") from exc


def dump_conversation(entries: Sequence[Mapping[str, Any]], max_bytes: int) -> str:
    """A conversation bounded to ``max_bytes`` (:func:`bound_conversation`), as JSON text."""
    return dump_json(list(bound_conversation(entries, max_bytes)), "transcript tail")


def record_values(session: StoredSession, when: Callable[[datetime], Any]) -> tuple[Any, ...]:
    """The record's values in ``RECORD_COLUMNS`` order: JSON fields as text, times through ``when``."""
    values = []
    for name in RECORD_COLUMNS:
        value = getattr(session, name)
        if name in JSON_COLUMNS:
            value = dump_json(value, name)
        elif name in TIME_COLUMNS:
            value = when(value)
        elif name == "status" and value is not None:
            value = value.value
        values.append(value)
    return tuple(values)


def renamed(old: StoredSession, new_session_id: str, when: datetime) -> StoredSession:
    """``old`` under ``new_session_id``: the old id last in ``previous_session_ids``, ``updated_at`` set to ``when``,
    its lease along."""
    previous = [item for item in old.previous_session_ids if item != new_session_id]
    return attrs.evolve(
        old,
        session_id=new_session_id,
        previous_session_ids=(*previous, old.session_id),
        updated_at=when,
        lease=None if old.lease is None else attrs.evolve(old.lease, session_id=new_session_id),
    )


def lease_of(row: Sequence[Any], when: Time) -> Lease | None:
    """A ``(session_id, owner, token, expires_at)`` row's lease (``None``: never claimed)."""
    session_id, owner, token, expires = row
    if owner is None and not token:
        return None
    return Lease(session_id, owner, int(token), when(expires))


def leases_of(rows: Sequence[Sequence[Any]], when: Time) -> list[Lease]:
    """``(session_id, owner, token, expires_at)`` rows as leases, by session id."""
    leases = (Lease(row[0], row[1], int(row[2]), when(row[3])) for row in rows)
    return sorted(leases, key=lambda lease: lease.session_id)


def check_window(owner: str, duration: float) -> None:
    """Refuse a bad lease ``owner`` or ``duration`` (``ConfigurationError``)."""
    check_owner(owner)
    check_seconds("duration", duration)


def check_session_ids(session_ids: Sequence[str]) -> list[str]:
    """``session_ids`` without repeats (``ConfigurationError`` for one string)."""
    if isinstance(session_ids, str):
        raise ConfigurationError("session_ids must be a sequence of session ids, not a string")
    return list(dict.fromkeys(session_ids))


def check_version(where: str, path: str, version: int, compatible: int, supported: int) -> None:
    """Refuse a store whose schema ``version`` is above ``supported`` unless its ``compatible`` version (the oldest
    whose code may still use it) is not (``SessionStoreTooNew``)."""
    if version > supported and compatible > supported:
        raise SessionStoreTooNew(
            f"session store {where} has schema version {version} (needs a reader of version {compatible} "
            f"or later); this acp_client supports up to {supported}: upgrade acp_client",
            path=path,
            version=version,
            supported=supported,
        )


class RowStore(abc.ABC):
    """What both built-in stores share, over what each provides: its attributes below and abstract methods, and how its
    columns hold JSON (``_loads``)."""

    _path: str
    _schema_version: int
    _max_transcript_bytes: int
    _sql: Reads

    @abc.abstractmethod
    def _query(self, action: str, sql: str, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one statement (errors mapped to the store's)."""

    @abc.abstractmethod
    def _now(self, now: datetime | None) -> Any:
        """``now`` as a lease query's ``now`` parameter (``None``: the store's clock)."""

    @abc.abstractmethod
    def _rename(
        self, endpoint: str, old_session_id: str, new_session_id: str, *, when: datetime, fence: Fence | None
    ) -> StoredSession | None:
        """Move a session, its conversation and its lease to a new id in one step (see :meth:`rename`)."""

    @abc.abstractmethod
    def _save_tail(
        self, action: str, endpoint: str, session_id: str, tail: str, *, when: datetime | None, fence: Fence | None
    ) -> bool:
        """Replace the conversation with ``tail`` (and set ``last_used_at`` to ``when``, when given) in one step;
        ``False`` when the session is not stored."""

    @staticmethod
    def _loads(value: Any) -> Any:
        return value

    @staticmethod
    @abc.abstractmethod
    def _time(value: Any) -> datetime:
        """A time column's value as an aware ``datetime``."""

    def _decode(self, row: Sequence[Any]) -> StoredSession:
        """One row (the record's columns, then its lease's) as a record, or ``SessionStoreCorrupt``."""
        try:
            fields = dict(zip(RECORD_COLUMNS, row[: len(RECORD_COLUMNS)], strict=True))
            for name in JSON_COLUMNS:
                fields[name] = self._loads(fields[name])
            for name in TIME_COLUMNS:
                fields[name] = self._time(fields[name])
            fields["protocol_version"] = int(fields["protocol_version"])
            return StoredSession(**fields, lease=lease_of((row[1], *row[17:20]), self._time))
        except (TypeError, ValueError, OverflowError, AttributeError, ConfigurationError) as exc:
            raise SessionStoreCorrupt(
                f"session store {self._path}: the record of session {row[1]!r} is damaged: {exc}", path=self._path
            ) from exc

    def _decoded(self, rows: Sequence[Sequence[Any]]) -> list[StoredSession]:
        """Rows as records; a damaged one is skipped (logged as a warning)."""
        sessions = []
        for row in rows:
            try:
                sessions.append(self._decode(row))
            except SessionStoreCorrupt as exc:
                logger.warning("skipping a stored session: %s", exc)
        return sessions

    def _conversation(self, value: Any, session_id: str) -> tuple[dict[str, Any], ...]:
        """A stored conversation read back, or ``SessionStoreCorrupt``."""
        try:
            entries = self._loads(value)
            if not isinstance(entries, list | tuple):
                raise TypeError(f"a JSON {type(entries).__name__}, not a list")
            return tuple(dict(entry) for entry in entries)
        except (TypeError, ValueError) as exc:
            raise SessionStoreCorrupt(
                f"session store {self._path}: the transcript of session {session_id!r} is damaged: {exc}",
                path=self._path,
            ) from exc

    def _stale(
        self, session_id: str, owner: str, token: int | None, holder: str | None, held: int | None
    ) -> SessionStoreFenced:
        """The error of a write by ``owner`` with ``token`` that ``holder``'s lease (``held``) refused."""
        return SessionStoreFenced.refused(
            self._path, session_id, owner=owner, token=token, holder=holder, holder_token=held
        )

    def load(self, endpoint: str) -> list[StoredSession]:
        return self._decoded(self._query("load", self._sql.load, {"endpoint": endpoint}))

    def get(self, endpoint: str, session_id: str) -> StoredSession | None:
        rows = self._query("get", self._sql.get, {"endpoint": endpoint, "session_id": session_id})
        return self._decode(rows[0]) if rows else None

    def rename(
        self,
        endpoint: str,
        old_session_id: str,
        new_session_id: str,
        *,
        when: datetime | None = None,
        fence: Fence | None = None,
    ) -> StoredSession | None:
        if not new_session_id:
            raise ConfigurationError("the new session id must not be empty")
        return self._rename(endpoint, old_session_id, new_session_id, when=as_utc(when), fence=fence)

    def save_transcript(
        self, endpoint: str, session_id: str, entries: Sequence[Mapping[str, Any]], *, fence: Fence | None = None
    ) -> bool:
        tail = dump_conversation(entries, self._max_transcript_bytes)
        return self._save_tail("save transcript", endpoint, session_id, tail, when=None, fence=fence)

    def save_turn(
        self,
        endpoint: str,
        session_id: str,
        entries: Sequence[Mapping[str, Any]],
        *,
        when: datetime | None = None,
        fence: Fence | None = None,
    ) -> bool:
        """The end of a turn in one step: ``last_used_at`` set to ``when`` (default: now) and the conversation replaced
        as :meth:`save_transcript` replaces it (raises as it does); ``False`` (nothing written) when the session is not
        stored."""
        tail = dump_conversation(entries, self._max_transcript_bytes)
        return self._save_tail("save turn", endpoint, session_id, tail, when=as_utc(when), fence=fence)

    def load_transcript(self, endpoint: str, session_id: str) -> tuple[dict[str, Any], ...]:
        params = {"endpoint": endpoint, "session_id": session_id}
        rows = self._query("load transcript", self._sql.load_transcript, params)
        return self._conversation(rows[0][0], session_id) if rows else ()

    def adoptable(self, endpoint: str, *, now: datetime | None = None) -> list[StoredSession]:
        params = {"endpoint": endpoint, "now": self._now(now)}
        return self._decoded(self._query("list adoptable sessions", self._sql.adoptable, params))

    def lease(self, endpoint: str, session_id: str) -> Lease | None:
        """The session's lease as stored (``None``: not stored, or never claimed)."""
        rows = self._query("read lease", self._sql.lease, {"endpoint": endpoint, "session_id": session_id})
        return lease_of(rows[0], self._time) if rows else None

    def endpoints(self) -> list[str]:
        """Every endpoint key with stored sessions, most recently used first."""
        return [row[0] for row in self._query("list endpoints", self._sql.endpoints, {})]

    def count(self, endpoint: str | None = None) -> int:
        """How many sessions are stored (for ``endpoint``, or in all)."""
        sql, params = (self._sql.count_all, {}) if endpoint is None else (self._sql.count, {"endpoint": endpoint})
        return int(self._query("count", sql, params)[0][0])

    @property
    def path(self) -> str:
        """Where the store is: the database file (``":memory:"`` in memory), or the DSN with any password masked and the
        schema."""
        return self._path

    @property
    def schema_version(self) -> int:
        """The store's schema version (SQLite: ``PRAGMA user_version``; PostgreSQL: ``store_meta``)."""
        return self._schema_version

    @abc.abstractmethod
    def close(self) -> None:
        """Close the store's connection(s); idempotent."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
