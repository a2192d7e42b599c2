"""The one immutable :class:`Session` record every lifecycle call returns or lists."""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any, Final

import attrs

from .._util._logging import get_logger
from ..exceptions import ConfigurationError
from ._value import value_types
from .lifecycle import (
    ANSWERED,
    ForegroundState,
    ForkSessionResponse,
    LoadSessionResponse,
    NewSessionResponse,
    Probe,
    ResumeSessionResponse,
    SessionConfigOption,
    SessionInfo,
    SessionModeState,
    SessionStatusResponse,
)

__all__ = ["Session", "format_rfc3339", "parse_rfc3339", "parse_timestamp"]

logger = get_logger(__name__)

# The zone is optional here; :func:`parse_rfc3339` requires it, :func:`parse_timestamp` does not.
_TIMESTAMP: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?\Z"
)


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp into an aware :class:`~datetime.datetime`.

    Accepts ``Z`` or a numeric offset and any number of fractional digits (truncated to
    microseconds), on every supported Python version.

    Raises:
        ValueError: ``text`` is not an RFC 3339 date-time (a missing zone included).
    """
    value = _parse(text)
    if value is None or value.tzinfo is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    return value


def parse_timestamp(text: str) -> datetime:
    """Parse a timestamp as agents send it: RFC 3339, or ISO 8601 without a zone.

    The schemas only say ISO 8601, and some agents (fast-agent) write local times without a
    zone (``2026-12-01T13:06:35.841840``). Such a time is kept as a *naive* datetime, exactly as
    sent: no zone is invented for it, and :func:`format_rfc3339` writes it back without one.

    Raises:
        ValueError: ``text`` is not such a date-time.
    """
    value = _parse(text)
    if value is None:
        raise ValueError(f"not an RFC 3339 (or zoneless ISO 8601) timestamp: {text!r}")
    return value


def _parse(text: str) -> datetime | None:
    match = _TIMESTAMP.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    tz: timezone | None = None
    if zulu:
        tz = timezone.utc
    elif sign:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        tz = timezone(-offset if sign == "-" else offset)
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    # RFC 3339 allows a leap second (60); datetime does not: clamp it.
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), min(int(second), 59), micros, tzinfo=tz
        )
    except ValueError:  # month 13, February 30...
        return None


def time_precedes(later: datetime, earlier: datetime) -> bool:
    """Whether ``later`` is known to precede ``earlier``.

    A naive time (zone unknown) cannot be ordered against an aware one: that is never "precedes".
    """
    if (later.tzinfo is None) != (earlier.tzinfo is None):
        return False
    return later < earlier


def format_rfc3339(value: datetime) -> str:
    """Format a datetime as RFC 3339 (UTC is written with ``Z``; a naive one without a zone)."""
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _to_datetime(value: datetime | str | None) -> datetime | None:
    """attrs converter: accept a datetime or a timestamp string (:func:`parse_timestamp`).

    A naive datetime is kept naive: its zone is unknown, and none is invented.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return parse_timestamp(value)
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime or an RFC 3339 string, got {type(value).__name__}")
    return value


def _to_str_tuple(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(eq=False, repr=False)
class Session:
    """One session, as the client knows it: the same immutable record from every lifecycle call.

    ``session/new``, ``session/load``, ``session/resume``, ``session/fork``, ``session/list`` and
    ``session/status`` all produce (or list) this type. A field the agent did not supply is
    ``None``; nothing is invented. Its wire form (the schema's ``Session``, camelCase) lives in
    the private codec.

    Fields whose meaning the name does not say:

    - ``created_at``, ``updated_at``: usually aware; *naive* when the agent sent a time without a
      zone (kept as sent). ``updated_at`` never precedes ``created_at`` (a naive and an aware
      time are not ordered against each other).
    - ``status``: the normalized ``session/status`` answer (``UNKNOWN`` after a -32002);
      ``raw_status`` the string as the agent sent it; ``state`` the v2 foreground state snapshot.
    - ``modes``: the v1 mode state; ``models``: the model state, as sent (not in the schemas).
    - ``forked_from`` (a fork's parent session id), ``active_turn_id``, ``model_id``,
      ``provider_id``, ``workspace_root``: required-nullable (always written, ``null`` when empty).
    - ``path``: the durable log's path (``""``: no durable log; never hand it to the file system).
    - ``approval_mode``: the effective approval mode, as sent.

    Decoding is lenient: unknown fields are ignored, a malformed optional field becomes ``None``,
    and an ``updatedAt`` that precedes ``createdAt`` is dropped (logged). :meth:`merge` never breaks
    the time order, and takes a status answer (``status``, ``raw_status``, ``state``) whole.

    Raises:
        ConfigurationError: (a ``ValueError``) On construction, when ``updated_at`` precedes
            ``created_at``, a time string is not a timestamp (:func:`parse_timestamp`), or
            ``status`` is not an answer (``Probe.UNREACHABLE`` / ``NOT_PROBED``).
        TypeError: On construction, when a time is neither a datetime nor a string.
    """

    session_id: str
    cwd: str | None = None
    title: str | None = None
    created_at: datetime | None = attrs.field(default=None, converter=_to_datetime)
    updated_at: datetime | None = attrs.field(default=None, converter=_to_datetime)
    status: Probe | None = None
    raw_status: str | None = None
    state: ForegroundState | None = None
    additional_directories: tuple[str, ...] | None = attrs.field(default=None, converter=_to_str_tuple)
    modes: SessionModeState | None = None
    models: dict[str, Any] | None = None
    config_options: tuple[SessionConfigOption, ...] | None = None
    forked_from: str | None = None
    active_turn_id: str | None = None
    model_id: str | None = None
    provider_id: str | None = None
    workspace_root: str | None = None
    turn_count: int | None = None
    path: str | None = None
    approval_mode: Any = None
    meta: dict[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        if self.status is not None and self.status not in ANSWERED:
            raise ConfigurationError(
                f"session {self.session_id}: a status is an answer (active, inactive or unknown), "
                f"not {self.status.value}"
            )
        created, updated = self.created_at, self.updated_at
        if created is not None and updated is not None and time_precedes(updated, created):
            raise ConfigurationError(
                f"session {self.session_id}: updated_at ({format_rfc3339(updated)}) precedes "
                f"created_at ({format_rfc3339(created)})"
            )

    @classmethod
    def from_new(
        cls,
        response: NewSessionResponse,
        *,
        cwd: str,
        additional_directories: Iterable[str] | None = None,
    ) -> Session:
        """The record for a session ``session/new`` just created with ``cwd``."""
        return cls._opened(response.session_id, response, cwd, additional_directories)

    @classmethod
    def from_load(
        cls,
        session_id: str,
        response: LoadSessionResponse | ResumeSessionResponse,
        *,
        cwd: str,
        additional_directories: Iterable[str] | None = None,
    ) -> Session:
        """The record for a session ``session/load`` just loaded."""
        return cls._opened(session_id, response, cwd, additional_directories)

    @classmethod
    def from_resume(
        cls,
        session_id: str,
        response: ResumeSessionResponse,
        *,
        cwd: str,
        additional_directories: Iterable[str] | None = None,
    ) -> Session:
        """The record for a session ``session/resume`` just resumed (same fields as a load)."""
        return cls.from_load(session_id, response, cwd=cwd, additional_directories=additional_directories)

    @classmethod
    def from_fork(
        cls,
        response: ForkSessionResponse,
        *,
        cwd: str,
        forked_from: str,
        additional_directories: Iterable[str] | None = None,
    ) -> Session:
        """The record for the new session ``session/fork`` created from ``forked_from``."""
        return cls._opened(response.session_id, response, cwd, additional_directories, forked_from)

    @classmethod
    def _opened(
        cls,
        session_id: str,
        response: NewSessionResponse | LoadSessionResponse | ResumeSessionResponse | ForkSessionResponse,
        cwd: str,
        additional_directories: Iterable[str] | None,
        forked_from: str | None = None,
    ) -> Session:
        return cls(
            session_id=session_id,
            cwd=cwd,
            additional_directories=_to_str_tuple(additional_directories),
            modes=response.modes,
            models=response.models,
            config_options=response.config_options,
            forked_from=forked_from,
        )

    @classmethod
    def from_info(cls, info: SessionInfo) -> Session:
        """The record for one ``session/list`` entry.

        An ``updatedAt`` without a zone is kept naive (as sent); one that is not a timestamp at
        all becomes ``None`` (logged).
        """
        updated_at: datetime | None = None
        if info.updated_at is not None:
            try:
                updated_at = parse_timestamp(info.updated_at)
            except ValueError:
                logger.warning("session %s: ignoring malformed updatedAt %r", info.session_id, info.updated_at)
        return cls(
            session_id=info.session_id,
            cwd=info.cwd,
            title=info.title,
            updated_at=updated_at,
            additional_directories=info.additional_directories,
            meta=info.meta,
        )

    @classmethod
    def from_status(cls, session_id: str, response: SessionStatusResponse) -> Session:
        """The record for a ``session/status`` answer about ``session_id``."""
        return cls(
            session_id=session_id,
            status=response.status,
            raw_status=response.raw_status,
            state=response.state,
        )

    def merge(self, other: Session) -> Session:
        """A record combining both: every field of ``other`` that is not ``None`` wins.

        A ``session/status`` answer is taken whole: when ``other`` has a ``status``, its
        ``raw_status`` and ``state`` replace this record's even when ``None`` (a v2 state the new
        answer does not report is "not reported", not the previous snapshot).

        If the combination would put ``updated_at`` before ``created_at``, the most recent
        consistent ``updated_at`` of the two is kept (``None`` if neither is consistent).
        """
        mine, theirs = _fields_of(self), _fields_of(other)
        values = [t if t is not None else m for m, t in zip(mine, theirs, strict=True)]
        if other.status is not None:
            values[_RAW_STATUS] = other.raw_status
            values[_STATE] = other.state
        if tuple(values) == mine:  # element by element, identity first
            return self  # nothing new: this (frozen) record is the merged one
        created, updated = values[_CREATED_AT], values[_UPDATED_AT]
        if created is not None and updated is not None and time_precedes(updated, created):
            candidates = [
                d for d in (other.updated_at, self.updated_at) if d is not None and not time_precedes(d, created)
            ]
            if len(candidates) == 2 and (candidates[0].tzinfo is None) == (candidates[1].tzinfo is None):
                values[_UPDATED_AT] = max(candidates)
            else:  # one candidate, or a naive and an aware one that cannot be ordered: the newer answer's
                values[_UPDATED_AT] = candidates[0] if candidates else None
        return Session(*values)


#: Every field of a :class:`Session` in the order of its ``__init__`` (read at once by :meth:`Session.merge`).
_FIELD_NAMES: Final = tuple(field.name for field in attrs.fields(Session))
_fields_of: Final = operator.attrgetter(*_FIELD_NAMES)
_RAW_STATUS: Final = _FIELD_NAMES.index("raw_status")
_STATE: Final = _FIELD_NAMES.index("state")
_CREATED_AT: Final = _FIELD_NAMES.index("created_at")
_UPDATED_AT: Final = _FIELD_NAMES.index("updated_at")


value_types(globals())
