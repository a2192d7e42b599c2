"""The hook points an observer of the client plugs into (telemetry: :mod:`acp_client._telemetry`).

These are plain protocols: nothing here knows OpenTelemetry. The core calls them at a few places
and only when one is installed (one ``is None`` check otherwise):

* :class:`CallObserver` — each JSON-RPC request a :class:`~acp_client._rpc._connection.Connection`
  sends (from before it is sent until it resolves) and each agent→client request its handler
  answers. One per connection, built from the transport by the link's :class:`LinkObserver`.
* :class:`LinkObserver` — one link's reconnect attempts (the supervisor's retry loop), and the
  factory of its connections' call observers. The link's state changes and the recovery outcomes
  are observed where the engine already hands them on.

An observer must never raise into the core, and must not change what the core does beyond the
``_meta`` it adds to outgoing params.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .._codec._jsonrpc import RequestId
from ..state import RecoveryOutcome
from ..transports.base import Transport

__all__ = ["CallObserver", "LinkObserver", "Send"]

#: Sends the request with (possibly amended) params; calls the second argument with the request id
#: once it is allocated; returns the result or raises what the request raised.
Send = Callable[[Any, Callable[[RequestId], None]], Awaitable[Any]]


class CallObserver(Protocol):
    """Sees the calls of one connection."""

    async def outgoing(self, method: str, params: Any, send: Send) -> Any:
        """Run ``send`` (which sends ``method`` and awaits its answer); may add ``_meta`` to the
        params it passes. Returns or raises what ``send`` did."""

    async def incoming(
        self, request_id: RequestId, method: str, params: Any, handle: Callable[[str, Any], Awaitable[Any]]
    ) -> Any:
        """Run the app's ``handle(method, params)`` for one agent→client request. Returns or
        raises what ``handle`` did."""


class LinkObserver(Protocol):
    """Sees one link (the only one, or one instance of an endpoint group)."""

    def calls(self, transport: Transport) -> CallObserver:
        """The observer of a new connection's calls over ``transport``."""

    def reconnecting(self, attempt: int, delay: float, cause: BaseException | None) -> None:
        """Reconnect attempt ``attempt`` starts in ``delay`` seconds; ``cause``: the previous
        attempt's error, or what dropped the link (``None`` when unknown)."""

    def recovering(self) -> AbstractContextManager[None]:
        """Around one recovery round of the link (a part of its outage's episode)."""

    def recovered(self, outcomes: list[RecoveryOutcome]) -> None:
        """The outcomes of that round."""

    def interrupted(self, session_id: str) -> None:
        """A drop of this link cut a prompt of ``session_id`` off."""
