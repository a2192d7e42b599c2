"""One record, one truth: after a mode, model or config option changes, every field of the session
record that names it agrees (issue 17 item 8). Pure.

The current mode is in ``modes.currentModeId`` and, with agents that also expose it as a config
option, in the ``configOptions`` entry of category ``mode``; the model likewise. Whoever changes one
(the app, a recovery's restore, the agent's ``current_mode_update`` / ``config_option_update``),
all of them change together.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from ..types import Session, SessionConfigOption


@attrs.define
class Settings:
    """What the app set on one session (the last mode, model, and config option id → (value, type
    tag) set); ``pending``: a drop cut the last restore off, the next recovery restores again."""

    mode_id: str | None = None
    model_id: str | None = None
    config: dict[str, tuple[Any, str | None]] = attrs.field(factory=dict)
    pending: bool = False

    def __bool__(self) -> bool:
        return self.mode_id is not None or self.model_id is not None or bool(self.config)


def _option_kind(option: SessionConfigOption) -> str | None:
    if option.category in ("mode", "model"):
        return option.category
    if option.id in ("mode", "model"):
        return option.id
    return None


def _set_options(record: Session, kind: str, value: Any) -> tuple[SessionConfigOption, ...] | None:
    if record.config_options is None:
        return None
    return tuple(
        attrs.evolve(option, current_value=value) if _option_kind(option) == kind else option
        for option in record.config_options
    )


def with_mode(record: Session, mode_id: str) -> Session:
    """``record`` with ``mode_id`` as its current mode, in every field that names it."""
    modes = None if record.modes is None else attrs.evolve(record.modes, current_mode_id=mode_id)
    return attrs.evolve(record, modes=modes, config_options=_set_options(record, "mode", mode_id))


def with_model(record: Session, model_id: str) -> Session:
    """``record`` with ``model_id`` as its current model, in every field that names it."""
    models = {**record.models, "currentModelId": model_id} if isinstance(record.models, dict) else record.models
    return attrs.evolve(record, models=models, config_options=_set_options(record, "model", model_id))


def with_config_options(record: Session, options: Iterable[SessionConfigOption]) -> Session:
    """``record`` with the agent's new config options, and the mode and model they name."""
    options = tuple(options)
    updated = attrs.evolve(record, config_options=options)
    for option in options:
        kind, value = _option_kind(option), option.current_value
        if not isinstance(value, str):
            continue
        if kind == "mode" and updated.modes is not None:
            updated = attrs.evolve(updated, modes=attrs.evolve(updated.modes, current_mode_id=value))
        elif kind == "model" and isinstance(updated.models, dict):
            updated = attrs.evolve(updated, models={**updated.models, "currentModelId": value})
    return updated


def with_config_value(record: Session, config_id: str, value: Any) -> Session:
    """``record`` after ``session/set_config_option`` was accepted (when the answer did not list the options)."""
    if record.config_options is None:
        return record
    options = tuple(
        attrs.evolve(option, current_value=value) if option.id == config_id else option
        for option in record.config_options
    )
    return with_config_options(record, options)
