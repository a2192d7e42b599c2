"""When a turn's result may reach the app: durable before acknowledged.

A turn has ended for the agent (v1: its ``session/prompt`` answer; v2: ``idle``). With a session
store, the app hears of it only once the turn's conversation is written, after every write queued
before it (``Persistence.durable``), and, with a shared store, only while the session is still this
client's (``Ownership.check``). A turn whose session was lost while it ran fails with
:class:`~acp_client.exceptions.SessionOwnershipLost` at once, never ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from ..exceptions import SessionOwnershipLost
from ..state import PromptResult
from ..transcript import TurnStatus

if TYPE_CHECKING:
    from .._sessions._table import Tracked
    from ._persistence import Persistence


async def acknowledge(
    body: asyncio.Future[PromptResult],
    future: asyncio.Future[PromptResult],
    tracked: Tracked,
    persistence: Persistence | None,
    lease_check: Callable[[str], Awaitable[None]] | None,
) -> PromptResult:
    """The result ``prompt()`` returns (``body``: the running turn; ``future``: how the session
    table ended it), once the turn is durable, with ``stored`` set when a store kept (or failed to
    keep) its conversation.

    Raises:
        SessionOwnershipLost: The session is another client's now: at once, whatever the agent
            still does with the turn (nothing more is sent for it, no ``session/cancel`` either).
        SessionNotTracked / RecoveryFailed: The session was forgotten or abandoned while it ran.
    """
    if not future.done():
        await asyncio.wait({body, future}, return_when=asyncio.FIRST_COMPLETED)
    if not body.done() and future.done() and not future.cancelled():
        error = future.exception()
        if isinstance(error, SessionOwnershipLost):
            raise error
    result = await asyncio.shield(body)
    stored = await persistence.durable(tracked) if persistence is not None else None
    if future.done() and not future.cancelled():
        error = future.exception()
        if error is not None:  # lost, forgotten or abandoned while it ran
            raise error
    if lease_check is not None:
        await lease_check(tracked.session_id)
    return attrs.evolve(result, stored=stored) if stored is not None else result


def settle(future: asyncio.Future[PromptResult]) -> Callable[[PromptResult | BaseException], None]:
    """The one way the session table ends a turn: its result or error, once; an error nobody
    awaits is retrieved (the ``prompt()`` caller may be gone, or a v1 turn never awaits it)."""

    def end(outcome: PromptResult | BaseException) -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
            future.exception()
        else:
            future.set_result(outcome)

    return end


def retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def status_of(stop_reason: str | None) -> TurnStatus:
    return TurnStatus.CANCELLED if stop_reason == "cancelled" else TurnStatus.COMPLETE
