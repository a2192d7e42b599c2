"""Restoring what the app set on a session (mode, model, config options) after a recovery that
rebuilt it: a replay or a new session may bring it back with the agent's defaults.

The app's choices (:class:`Settings`) are applied again where the agent's answer advertises them;
the outcome's notes say what could not be. A drop while restoring leaves ``Settings.pending`` set:
the next recovery tries again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._codec import to_wire
from .._rpc._connection import Connection
from .._sessions._coherence import Settings, with_config_value, with_mode, with_model
from ..exceptions import ConnectionLost, InvalidMessage, RequestTimeout, RpcError, TransportError
from ..types import Session, SetSessionConfigOptionRequest, SetSessionModelRequest, SetSessionModeRequest


def _plan(settings: Settings, record: Session) -> tuple[list[tuple[str, str, Any]], list[str]]:
    """The calls to make (``(method, what, request)``) and the notes for what is not advertised."""
    calls: list[tuple[str, str, Any]] = []
    notes: list[str] = []

    def wanted(chosen: str, offered: Iterable[object] | None, what: str, method: str, request: Any) -> None:
        if offered is not None and chosen in offered:
            calls.append((method, what, request))
        else:
            notes.append(f"could not restore {what}: the agent does not offer it now")

    sid, mode, model = record.session_id, settings.mode_id, settings.model_id
    if mode is not None:
        modes = None if record.modes is None else [item.id for item in record.modes.available_modes]
        wanted(mode, modes, f"mode {mode!r}", "session/set_mode", SetSessionModeRequest(sid, mode))
    if model is not None:
        listed = record.models.get("availableModels") if isinstance(record.models, dict) else None
        models = (
            [item.get("modelId") for item in listed if isinstance(item, dict)] if isinstance(listed, list) else None
        )
        wanted(model, models, f"model {model!r}", "session/set_model", SetSessionModelRequest(sid, model))
    configs = None if record.config_options is None else [option.id for option in record.config_options]
    for config_id, (value, kind) in settings.config.items():
        request = SetSessionConfigOptionRequest(session_id=sid, config_id=config_id, value=value, type=kind)
        wanted(config_id, configs, f"config option {config_id!r} = {value!r}", "session/set_config_option", request)
    return calls, notes


async def restore(
    conn: Connection, settings: Settings, record: Session, *, version: int, timeout: float | None
) -> tuple[tuple[str, ...], Session]:
    """Apply ``settings`` to the session ``record`` describes, over ``conn``: notes for the outcome,
    and the record with what the agent accepted. Never raises for a refusal or a drop (a drop leaves
    ``settings.pending`` set and ends the restore)."""
    if not settings:
        return (), record
    calls, notes = _plan(settings, record)
    settings.pending = True
    restored: list[str] = []
    for method, what, request in calls:
        try:
            await conn.request(method, to_wire(request, protocol_version=version), timeout=timeout)
        except (ConnectionLost, TransportError) as exc:
            notes.append(f"restoring {what} was cut off by a drop ({exc}): the next recovery tries again")
            break
        except (RpcError, RequestTimeout, InvalidMessage) as exc:
            notes.append(f"could not restore {what}: {method} refused: {exc}")
            continue
        restored.append(what)
        record = _accepted(record, request)
    else:
        settings.pending = False
    done = (f"restored {', '.join(restored)}",) if restored else ()
    return (*done, *notes), record


def _accepted(record: Session, request: Any) -> Session:
    if isinstance(request, SetSessionModeRequest):
        return with_mode(record, request.mode_id)
    if isinstance(request, SetSessionModelRequest):
        return with_model(record, request.model_id)
    return with_config_value(record, request.config_id, request.value)
