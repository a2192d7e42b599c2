"""Which turns may still run on one Streamable HTTP connection. Pure.

A connection the client gives up on is ended with ``DELETE`` from the next link, unless a turn may
still run there: the ``DELETE`` would abort it (and throw away what the server keeps for a
reattach). :class:`RunningTurns` follows the turns this link started: a ``session/prompt`` runs
until it is answered (v1), or, when its answer carries no ``stopReason`` (v2: the turn was
accepted), until the session's ``state_update`` says ``idle``.
"""

from __future__ import annotations

from typing import Any

from .._codec._jsonrpc import Message

__all__ = ["RunningTurns"]


class RunningTurns:
    """The turns that may run on one connection (see the module docstring)."""

    __slots__ = ("_accepted", "_prompts")

    def __init__(self) -> None:
        #: ``session/prompt`` requests not answered yet: id → session.
        self._prompts: dict[Any, str | None] = {}
        #: Sessions whose v2 turn was accepted and has not reported ``idle`` yet.
        self._accepted: set[str] = set()

    def __bool__(self) -> bool:
        """Whether a turn may still run."""
        return bool(self._prompts or self._accepted)

    def sent(self, message: Message, session_id: str | None) -> Any:
        """``message`` is being sent; returns the id of the prompt it starts (``None``: not a prompt)."""
        if type(message) is not dict or message.get("method") != "session/prompt":
            return None
        request_id = message.get("id")
        if type(request_id) is not int and type(request_id) is not str:
            return None
        self._prompts[request_id] = session_id
        return request_id

    def unsent(self, request_id: Any) -> None:
        """The prompt was refused or never left: no turn runs for it."""
        self._prompts.pop(request_id, None)

    def inbound(self, message: Message) -> None:
        """An answer (it may end a v1 turn or accept a v2 one) or a ``state_update`` notification."""
        if type(message) is not dict:
            return
        if "id" not in message:
            self._state(message)
            return
        answered = message.get("id")
        if "method" in message or not self._prompts or (type(answered) is not int and type(answered) is not str):
            return
        if answered not in self._prompts:
            return
        session_id = self._prompts.pop(answered)
        result = message.get("result")
        if session_id is not None and type(result) is dict and "stopReason" not in result:
            self._accepted.add(session_id)  # v2: accepted; the turn ends later with state "idle"

    def _state(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if type(params) is not dict:
            return
        update = params.get("update")
        session_id = params.get("sessionId")
        ended = type(update) is dict and update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"
        if ended and type(session_id) is str:
            self._accepted.discard(session_id)
