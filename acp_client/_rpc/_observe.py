"""The hook points telemetry (:mod:`acp_client._telemetry`) plugs into: plain protocols, called only
when an observer is installed. An observer never raises into the core and changes nothing it does
beyond the ``_meta`` it adds to outgoing params.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .._codec._jsonrpc import RequestId
from ..state import RecoveryOutcome
from ..transports.base import Transport

#: Sends the request with (possibly amended) params; calls the second argument with the request id
#: once it is allocated; returns the result or raises what the request raised.
Send = Callable[[Any, Callable[[RequestId], None]], Awaitable[Any]]


class CallObserver(Protocol):
    """Sees each request a connection sends (until it resolves) and each agent request it answers."""

    async def outgoing(self, method: str, params: Any, send: Send) -> Any:
        """Run ``send`` (it may add ``_meta`` to the params it passes); returns or raises what it did."""

    async def incoming(
        self, request_id: RequestId, method: str, params: Any, handle: Callable[[str, Any], Awaitable[Any]]
    ) -> Any:
        """Run the app's ``handle(method, params)`` for one agent→client request; returns or raises what it did."""


class LinkObserver(Protocol):
    """Sees one link: its reconnect attempts, and its connections through their call observers."""

    def calls(self, transport: Transport) -> CallObserver:
        """The observer of a new connection's calls over ``transport``."""

    def reconnecting(self, attempt: int, delay: float, cause: BaseException | None) -> None:
        """Reconnect attempt ``attempt`` starts in ``delay`` seconds; ``cause``: the previous
        attempt's error, or what dropped the link (``None`` when unknown)."""

    def recovering(self) -> AbstractContextManager[None]:
        """Around one recovery round of the link (a part of its outage's episode)."""

    def recovered(self, outcomes: list[RecoveryOutcome]) -> None: ...

    def interrupted(self, session_id: str) -> None:
        """A drop of this link cut a prompt of ``session_id`` off."""
