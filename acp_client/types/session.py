"""The one immutable :class:`Session` record every lifecycle call returns or lists."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, Final

import attrs

from ..exceptions import ConfigurationError, InvalidMessage
from .lifecycle import (
    ForegroundState,
    ForkSessionResponse,
    LoadSessionResponse,
    NewSessionResponse,
    ResumeSessionResponse,
    SessionConfigOption,
    SessionInfo,
    SessionModeState,
    SessionStatus,
    SessionStatusResponse,
    normalize_status,
)

__all__ = ["Session", "format_rfc3339", "parse_rfc3339"]

logger = logging.getLogger(__name__)

_RFC3339: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)

#: Keys :meth:`Session.to_json` always writes, as ``null`` when empty (required-nullable in the
#: ``Session`` schema: rejecting their ``null`` was a real production defect).
REQUIRED_NULLABLE_KEYS: Final = ("activeTurnId", "forkedFrom", "modelId", "providerId", "workspaceRoot")


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp into an aware :class:`~datetime.datetime`.

    Accepts ``Z`` or a numeric offset and any number of fractional digits (truncated to
    microseconds), on every supported Python version.

    Raises:
        ValueError: ``text`` is not an RFC 3339 date-time.
    """
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    if zulu:
        tz = timezone.utc
    else:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        tz = timezone(-offset if sign == "-" else offset)
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    # RFC 3339 allows a leap second (60); datetime does not: clamp it.
    return datetime(int(year), int(month), int(day), int(hour), int(minute), min(int(second), 59), micros, tzinfo=tz)


def format_rfc3339(value: datetime) -> str:
    """Format an aware datetime as RFC 3339 (UTC is written with ``Z``)."""
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _to_datetime(value: datetime | str | None) -> datetime | None:
    """attrs converter: accept a datetime or an RFC 3339 string; a naive datetime is taken as UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        return parse_rfc3339(value)
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime or an RFC 3339 string, got {type(value).__name__}")
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _to_str_tuple(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class Session:
    """One session, as the client knows it: the same immutable record from every lifecycle call.

    ``session/new``, ``session/load``, ``session/resume``, ``session/fork``, ``session/list`` and
    ``session/status`` all produce (or list) this type. A field the agent did not supply is
    ``None``; nothing is invented.

    Fields (wire names in brackets, as written by :meth:`to_json`):

    - ``session_id`` [sessionId]: the session identity (required).
    - ``cwd`` [cwd]: the working directory the session was created or loaded with.
    - ``title`` [title]: a human-readable title.
    - ``created_at`` [createdAt]: creation time (aware datetime; RFC 3339 on the wire).
    - ``updated_at`` [updatedAt]: last activity time; never precedes ``created_at``.
    - ``status`` [status]: the normalized ``session/status`` answer (``UNKNOWN`` after a -32002).
    - ``raw_status`` [rawStatus]: the status string as the agent sent it.
    - ``state`` [state]: the v2 foreground state snapshot, when reported.
    - ``additional_directories`` [additionalDirectories]: extra workspace roots.
    - ``modes`` [modes]: the v1 mode state.
    - ``models`` [models]: the model state, as sent (unstable, not in the schemas).
    - ``config_options`` [configOptions]: the session's config options.
    - ``forked_from`` [forkedFrom]: the parent session id for a fork (required-nullable).
    - ``active_turn_id`` [activeTurnId]: the current foreground turn (required-nullable).
    - ``model_id`` [modelId]: the model in use (required-nullable).
    - ``provider_id`` [providerId]: the model provider (required-nullable).
    - ``workspace_root`` [workspaceRoot]: the workspace root (required-nullable).
    - ``turn_count`` [turnCount]: completed turns.
    - ``path`` [path]: the durable log's path (``""``: no durable log; never hand it to the file
      system).
    - ``approval_mode`` [approvalMode]: the effective approval mode, as sent.
    - ``meta`` [_meta]: the ``_meta`` extension object.

    Rules:

    - Constructing a record whose ``updated_at`` precedes ``created_at`` raises
      ``ConfigurationError`` (a ``ValueError``).
    - :meth:`from_wire` is lenient: unknown fields are ignored, a malformed optional field becomes
      ``None``, and an ``updatedAt`` that precedes ``createdAt`` is dropped to ``None`` with a
      warning logged (the rest of the record is kept).
    - :meth:`to_json` always writes the required-nullable keys (``activeTurnId``, ``forkedFrom``,
      ``modelId``, ``providerId``, ``workspaceRoot``), as ``null`` when empty; other ``None``
      fields are omitted.
    - :meth:`merge` never breaks the time order (it keeps the most recent consistent
      ``updated_at``, or ``None``), and takes a status answer (``status``, ``raw_status``,
      ``state``) whole.

    Raises:
        ConfigurationError: (a ``ValueError``) On construction, when ``updated_at`` precedes
            ``created_at`` or a time string is not RFC 3339.
        TypeError: On construction, when a time is neither a datetime nor a string.
    """

    session_id: str
    cwd: str | None = None
    title: str | None = None
    created_at: datetime | None = attrs.field(default=None, converter=_to_datetime)
    updated_at: datetime | None = attrs.field(default=None, converter=_to_datetime)
    status: SessionStatus | None = None
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
        if self.created_at is not None and self.updated_at is not None and self.updated_at < self.created_at:
            raise ConfigurationError(
                f"session {self.session_id}: updated_at ({format_rfc3339(self.updated_at)}) precedes "
                f"created_at ({format_rfc3339(self.created_at)})"
            )

    # ----------------------------------------------------------------------------------------
    # builders

    @classmethod
    def from_new(
        cls,
        response: NewSessionResponse,
        *,
        cwd: str,
        additional_directories: Iterable[str] | None = None,
    ) -> Session:
        """The record for a session ``session/new`` just created with ``cwd``."""
        return cls(
            session_id=response.session_id,
            cwd=cwd,
            additional_directories=_to_str_tuple(additional_directories),
            modes=response.modes,
            models=response.models,
            config_options=response.config_options,
        )

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
        return cls(
            session_id=session_id,
            cwd=cwd,
            additional_directories=_to_str_tuple(additional_directories),
            modes=response.modes,
            models=response.models,
            config_options=response.config_options,
        )

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
        return cls(
            session_id=response.session_id,
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

        An ``updatedAt`` that is not a valid RFC 3339 timestamp becomes ``None`` (logged).
        """
        updated_at: datetime | None = None
        if info.updated_at is not None:
            try:
                updated_at = parse_rfc3339(info.updated_at)
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
        values: dict[str, Any] = {}
        for field in attrs.fields(Session):
            mine = getattr(self, field.name)
            theirs = getattr(other, field.name)
            values[field.name] = theirs if theirs is not None else mine
        if other.status is not None:
            values["raw_status"] = other.raw_status
            values["state"] = other.state
        created = values["created_at"]
        if created is not None and values["updated_at"] is not None and values["updated_at"] < created:
            candidates = [d for d in (other.updated_at, self.updated_at) if d is not None and d >= created]
            values["updated_at"] = max(candidates) if candidates else None
        return Session(**values)

    # ----------------------------------------------------------------------------------------
    # wire form

    def to_json(self, *, protocol_version: int = 1) -> dict[str, Any]:
        """The record as a JSON-ready object (camelCase keys).

        Required-nullable keys are always present (``null`` when empty); other ``None`` fields are
        omitted. ``protocol_version`` picks the encoding of nested protocol values (config
        options).
        """
        from .._converter import to_wire

        out: dict[str, Any] = {"sessionId": self.session_id}
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.title is not None:
            out["title"] = self.title
        if self.created_at is not None:
            out["createdAt"] = format_rfc3339(self.created_at)
        if self.updated_at is not None:
            out["updatedAt"] = format_rfc3339(self.updated_at)
        if self.status is not None:
            out["status"] = self.status.value
            out["rawStatus"] = self.raw_status  # null: none known (else a reader takes ``status``)
        elif self.raw_status is not None:
            out["rawStatus"] = self.raw_status
        if self.state is not None:
            out["state"] = to_wire(self.state, protocol_version=protocol_version)
        if self.additional_directories is not None:
            out["additionalDirectories"] = list(self.additional_directories)
        if self.modes is not None:
            out["modes"] = to_wire(self.modes, protocol_version=protocol_version)
        if self.models is not None:
            out["models"] = self.models
        if self.config_options is not None:
            out["configOptions"] = to_wire(self.config_options, protocol_version=protocol_version)
        out["forkedFrom"] = None if self.forked_from is None else {"sessionId": self.forked_from}
        out["activeTurnId"] = self.active_turn_id
        out["modelId"] = self.model_id
        out["providerId"] = self.provider_id
        out["workspaceRoot"] = self.workspace_root
        if self.turn_count is not None:
            out["turnCount"] = self.turn_count
        if self.path is not None:
            out["path"] = self.path
        if self.approval_mode is not None:
            out["approvalMode"] = self.approval_mode
        if self.meta is not None:
            out["_meta"] = self.meta
        return out

    @classmethod
    def from_wire(cls, data: Any, *, protocol_version: int = 1) -> Session:
        """Decode a ``Session`` object (the shape :meth:`to_json` writes, or an agent's).

        Lenient: unknown fields are ignored and a malformed optional field becomes ``None``. An
        ``updatedAt`` that precedes ``createdAt`` is dropped to ``None`` and a warning is logged.
        ``status`` accepts ``active``/``open``/``inactive``/``saved`` and any other string (read
        as inactive); ``unknown`` is read as :attr:`SessionStatus.UNKNOWN` only in the form
        :meth:`to_json` writes (with ``rawStatus``). ``rawStatus`` (when the member is absent:
        ``status``) becomes ``raw_status``.

        Raises:
            InvalidMessage: ``data`` is not an object or has no string ``sessionId``.
        """
        from .._converter import decode_foreground_state, from_wire_lenient

        if not isinstance(data, Mapping):
            raise InvalidMessage(f"a Session must be an object, got {type(data).__name__}")
        session_id = data.get("sessionId")
        if not isinstance(session_id, str):
            raise InvalidMessage("a Session needs a string sessionId")

        created_at = _lenient_time(data, "createdAt", session_id)
        updated_at = _lenient_time(data, "updatedAt", session_id)
        if created_at is not None and updated_at is not None and updated_at < created_at:
            logger.warning(
                "session %s: updatedAt %s precedes createdAt %s; dropping updatedAt",
                session_id,
                data.get("updatedAt"),
                data.get("createdAt"),
            )
            updated_at = None

        status: SessionStatus | None = None
        raw_status = _opt_str(data, "rawStatus")
        wire_status = data.get("status")
        if isinstance(wire_status, str):
            if "rawStatus" in data:  # our own form: ``status`` is already normalized
                try:
                    status = SessionStatus(wire_status)
                except ValueError:
                    status = normalize_status(wire_status)
            else:  # an agent's Session: its status string is the raw one ("unknown" is no -32002)
                status = normalize_status(wire_status)
                raw_status = wire_status

        directories = data.get("additionalDirectories")
        additional_directories = (
            tuple(d for d in directories if isinstance(d, str)) if isinstance(directories, list) else None
        )
        forked = data.get("forkedFrom")
        if isinstance(forked, Mapping):
            forked = forked.get("sessionId")
        turn_count = data.get("turnCount")
        models = data.get("models")
        meta = data.get("_meta")
        options_raw = data.get("configOptions")
        config_options: tuple[SessionConfigOption, ...] | None = None
        if isinstance(options_raw, list):
            config_options = tuple(
                option
                for option in (
                    from_wire_lenient(SessionConfigOption, item, protocol_version=protocol_version)
                    for item in options_raw
                )
                if option is not None
            )
        return cls(
            session_id=session_id,
            cwd=_opt_str(data, "cwd"),
            title=_opt_str(data, "title"),
            created_at=created_at,
            updated_at=updated_at,
            status=status,
            raw_status=raw_status,
            state=decode_foreground_state(data.get("state")),
            additional_directories=additional_directories,
            modes=from_wire_lenient(SessionModeState, data.get("modes"), protocol_version=protocol_version),
            models=models if isinstance(models, dict) else None,
            config_options=config_options,
            forked_from=forked if isinstance(forked, str) else None,
            active_turn_id=_opt_str(data, "activeTurnId"),
            model_id=_opt_str(data, "modelId"),
            provider_id=_opt_str(data, "providerId"),
            workspace_root=_opt_str(data, "workspaceRoot"),
            turn_count=turn_count if isinstance(turn_count, int) and not isinstance(turn_count, bool) else None,
            path=_opt_str(data, "path"),
            approval_mode=data.get("approvalMode"),
            meta=meta if isinstance(meta, dict) else None,
        )


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _lenient_time(data: Mapping[str, Any], key: str, session_id: str) -> datetime | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_rfc3339(value)
        except ValueError:
            pass
    logger.warning("session %s: ignoring malformed %s %r", session_id, key, value)
    return None
