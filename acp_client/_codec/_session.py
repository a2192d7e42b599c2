"""The ``Session`` record on the wire (the shape of the ``Session`` schema seed).

Hand-written rather than derived: the required-nullable keys are always written (``null`` when
empty; rejecting their ``null`` was a real production defect), ``forkedFrom`` is an object,
``status`` travels normalized next to ``rawStatus`` in our own form but raw in an agent's, and
decoding is lenient member by member. A time without a zone (fast-agent writes
``2026-12-01T13:06:35.841840``) is read naive and written back without a zone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from ..exceptions import InvalidMessage
from ..types.lifecycle import ANSWERED, Probe, SessionConfigOption, SessionModeState, normalize_status
from ..types.session import Session, format_rfc3339, parse_timestamp, time_precedes
from ._base import DecodeError, logger
from ._converter import Builder
from ._shapes import structure_foreground_state

_T = TypeVar("_T")


#: The statuses our own form of a record may hold (an agent's answers; never ``unreachable``).
_ANSWERED_VALUES = frozenset(answer.value for answer in ANSWERED)


def register_session(builder: Builder) -> None:
    """Install the ``Session`` hooks on ``builder``."""

    def structure_session(value: Any, _: Any) -> Session:
        try:
            return session_from_json(value, builder)
        except InvalidMessage as exc:
            raise DecodeError(str(exc)) from exc

    builder.conv.register_structure_hook(Session, structure_session)
    builder.conv.register_unstructure_hook(Session, lambda obj: session_to_json(obj, builder))


#: The members written even when ``null`` (required-nullable in the schema).
_ALWAYS_WRITTEN = frozenset({"forkedFrom", "activeTurnId", "modelId", "providerId", "workspaceRoot"})


def session_to_json(session: Session, builder: Builder) -> dict[str, Any]:
    """``session`` as a JSON-ready object; nested protocol values in ``builder``'s version."""
    unstructure: Callable[[Any], Any] = builder.conv.unstructure
    created, updated, state, modes = session.created_at, session.updated_at, session.state, session.modes
    directories, options = session.additional_directories, session.config_options
    out: dict[str, Any] = {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "title": session.title,
        "createdAt": None if created is None else format_rfc3339(created),
        "updatedAt": None if updated is None else format_rfc3339(updated),
        "status": None if session.status is None else session.status.value,
        "rawStatus": session.raw_status,
        "state": None if state is None else unstructure(state),
        "additionalDirectories": None if directories is None else list(directories),
        "modes": None if modes is None else unstructure(modes),
        "models": session.models,
        "configOptions": None if options is None else [unstructure(option) for option in options],
        "forkedFrom": None if session.forked_from is None else {"sessionId": session.forked_from},
        "activeTurnId": session.active_turn_id,
        "modelId": session.model_id,
        "providerId": session.provider_id,
        "workspaceRoot": session.workspace_root,
        "turnCount": session.turn_count,
        "path": session.path,
        "approvalMode": session.approval_mode,
        "_meta": session.meta,
    }
    # with a status, a null rawStatus says none is known (else a reader takes ``status`` as the raw one)
    kept = _ALWAYS_WRITTEN | {"rawStatus"} if session.status is not None else _ALWAYS_WRITTEN
    return {key: value for key, value in out.items() if value is not None or key in kept}


def session_from_json(data: Any, builder: Builder) -> Session:
    """Decode a ``Session`` object (our own form, or an agent's), leniently.

    ``status`` is read as :func:`normalize_status` does, except that our own form (the one with
    ``rawStatus``) holds it normalized already, ``unknown`` (:attr:`Probe.UNKNOWN`) included.

    Raises:
        InvalidMessage: ``data`` is not an object or has no string ``sessionId``.
    """
    if not isinstance(data, Mapping):
        raise InvalidMessage(f"a Session must be an object, got {type(data).__name__}")
    session_id = data.get("sessionId")
    if not isinstance(session_id, str):
        raise InvalidMessage("a Session needs a string sessionId")

    created_at = _lenient_time(data, "createdAt", session_id)
    updated_at = _lenient_time(data, "updatedAt", session_id)
    if created_at is not None and updated_at is not None and time_precedes(updated_at, created_at):
        logger.warning(
            "session %s: updatedAt %s precedes createdAt %s; dropping updatedAt",
            session_id,
            data.get("updatedAt"),
            data.get("createdAt"),
        )
        updated_at = None

    status: Probe | None = None
    raw_status = _member(data, "rawStatus", str)
    wire_status = data.get("status")
    if isinstance(wire_status, str):
        if "rawStatus" in data:  # our own form: ``status`` is already normalized
            status = Probe(wire_status) if wire_status in _ANSWERED_VALUES else normalize_status(wire_status)
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
    options = data.get("configOptions")
    config_options = builder.lenient_items(SessionConfigOption, options) if isinstance(options, list) else None
    return Session(
        session_id=session_id,
        cwd=_member(data, "cwd", str),
        title=_member(data, "title", str),
        created_at=created_at,
        updated_at=updated_at,
        status=status,
        raw_status=raw_status,
        state=structure_foreground_state(data.get("state"), None),
        additional_directories=additional_directories,
        modes=builder.lenient(SessionModeState, data.get("modes"), None),
        models=_member(data, "models", dict),
        config_options=config_options,
        forked_from=forked if isinstance(forked, str) else None,
        active_turn_id=_member(data, "activeTurnId", str),
        model_id=_member(data, "modelId", str),
        provider_id=_member(data, "providerId", str),
        workspace_root=_member(data, "workspaceRoot", str),
        turn_count=_member(data, "turnCount", int),
        path=_member(data, "path", str),
        approval_mode=data.get("approvalMode"),
        meta=_member(data, "_meta", dict),
    )


def _member(data: Mapping[str, Any], key: str, kind: type[_T]) -> _T | None:
    """``data[key]`` when it is a ``kind`` (never a bool for ``int``), else ``None``."""
    value = data.get(key)
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


def _lenient_time(data: Mapping[str, Any], key: str, session_id: str) -> datetime | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_timestamp(value)
        except ValueError:
            pass
    logger.warning("session %s: ignoring malformed %s %r", session_id, key, value)
    return None
