"""The one publisher of a connection state (a link's, and the client's), with its rules:

* A change is published once (a state follows itself only with another attempt).
* Nothing follows a terminal state (``closed``, ``failed``).
* Still down after ``suspended``: a ``reconnecting`` attempt shows as ``suspended``.
* Only legal transitions (:data:`~acp_client.state.LEGAL_TRANSITIONS`) are published; any other is
  held until the next legal one.
"""

from __future__ import annotations

from collections.abc import Callable

from .._util._logging import get_logger
from ..state import LEGAL_TRANSITIONS, ConnectionState, State

logger = get_logger("acp_client.reconnect")


class StateMachine:
    """A connection state; ``publish`` is told each change (what it raises is logged)."""

    def __init__(self, publish: Callable[[ConnectionState], None]) -> None:
        self.state = ConnectionState(State.CONNECTING)
        self._publish = publish

    def set(self, new: ConnectionState) -> None:
        """Move to ``new`` if the rules allow it (see the module docstring)."""
        old = self.state
        if new == old or old.is_terminal:
            return
        if old.state is State.SUSPENDED and new.state is State.RECONNECTING:  # still down: say so
            new = ConnectionState(State.SUSPENDED, new.attempt, new.retry_in, new.cause)
        if new.state is old.state and new.attempt == old.attempt:
            return
        if new.state not in LEGAL_TRANSITIONS[old.state]:
            logger.debug("state transition %s -> %s held (not legal)", old, new)
            return
        self.state = new
        try:
            self._publish(new)
        except Exception:
            logger.exception("state listener raised")
