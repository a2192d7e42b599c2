"""The engine's events about sessions, one typed method each; a subscriber (the session store's
bookkeeping, an endpoint group's links) overrides the ones it needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._sessions._table import Tracked
    from ..state import RecoveryOutcome
    from ._supervisor import Supervisor


class SessionEvents:
    """What happens to the client's sessions (each does nothing here; a subscriber never raises)."""

    def tracked(self, tracked: Tracked) -> None:
        """The app opened ``tracked`` (new, fork, load, resume)."""

    def settled(self, tracked: Tracked, link: Supervisor) -> None:
        """``tracked`` lives behind ``link`` now (created, forked or attached there)."""

    def forgotten(self, tracked: Tracked) -> None:
        """The client no longer tracks ``tracked`` (closed, forgotten)."""

    def changed(self, tracked: Tracked, **fields: Any) -> None:
        """The app set ``mode_id`` / ``model_id`` on ``tracked``."""

    def config_changed(self, tracked: Tracked, option_id: str, value: Any) -> None:
        """The app set one config option of ``tracked``."""

    def touched(self, tracked: Tracked) -> None:
        """A prompt is sent in ``tracked``: the most recently used session."""

    def turn_ended(self, tracked: Tracked) -> None:
        """A turn of ``tracked`` ended."""

    def recovered(self, outcomes: list[RecoveryOutcome]) -> None:
        """A recovery round ended (or was cut off by a drop: then ``outcomes`` is empty)."""
