"""Authority follows the home: what one of several instances may say about a session.

A client facing several instances of one agent records where each session lives (its home; for a
session restored from a store and not placed yet, the home the store recorded). An instance speaks
for the sessions it hosts and no other: a request (``fs/*``, ``terminal/*``, permission...) or a
notification naming a session the client records elsewhere is refused (the request answered
``-32002``, the notification dropped, each refusal counted and logged) and never reaches the app's
handlers, the file system or the transcript. A session the client does not track at all (updates
sent during ``session/new``) is left to the usual handling. A single-endpoint client never builds it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .._util._logging import get_logger
from ..exceptions import RpcError

logger = get_logger("acp_client.reconnect")

#: ``admits(session_id)``: whether this link may speak for the session.
Admits = Callable[[str], bool]


def _session_of(params: Any) -> str | None:
    session_id = params.get("sessionId") if type(params) is dict else None
    return session_id if type(session_id) is str else None


class Authority:
    """Guards one link's inbound requests and notifications on their way to ``on_request`` /
    ``on_notification``; ``target``: the link's endpoint, as the log shows it."""

    def __init__(
        self,
        admits: Admits,
        target: str,
        on_request: Callable[[str, Any], Awaitable[Any]],
        on_notification: Callable[[str, Any], None],
    ) -> None:
        self._admits = admits
        self._target = target
        self._on_request = on_request
        self._on_notification = on_notification
        self.refused = 0

    def _refuse(self, kind: str, method: str, session_id: str) -> None:
        self.refused += 1
        logger.warning(
            "refused %s %s from %s about session %s, which lives on another instance (%d refused)",
            kind,
            method,
            self._target,
            session_id,
            self.refused,
        )

    async def request(self, method: str, params: Any) -> Any:
        session_id = _session_of(params)
        if session_id is not None and not self._admits(session_id):
            self._refuse("request", method, session_id)
            raise RpcError.session_not_found(session_id)
        return await self._on_request(method, params)

    def notification(self, method: str, params: Any) -> None:
        session_id = _session_of(params)
        if session_id is not None and not self._admits(session_id):
            self._refuse("notification", method, session_id)
            return
        self._on_notification(method, params)


#: Makes a link's :class:`Authority` from the handlers it guards.
Guarding = Callable[[Callable[[str, Any], Awaitable[Any]], Callable[[str, Any], None]], Authority]
