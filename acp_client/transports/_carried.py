"""What an HTTP connector carries from one link to the next: the connection ids of links that
dropped, for the next link to ``DELETE`` in the background (the rule is in
:mod:`acp_client.transports.http`), and the server's header dialect it learnt
(:attr:`._routing.Router.header_everywhere`), so a reconnect does not pay a refusal per session again.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Final

from .._util._logging import get_logger
from ._exchange import HttpExchange

__all__ = ["Carried", "delete_stale"]

logger = get_logger("acp_client.transports.http")

#: Connection ids of dropped links a connector remembers.
MAX_STALE: Final = 16
#: The most a background ``DELETE`` of a dropped link's connection may take.
STALE_DELETE_TIMEOUT: Final = 2.0
#: How long after ``initialize`` that ``DELETE`` waits: the recovery's own requests go first (it would
#: take a pooled connection from them, and server time); not much longer, as a server may keep
#: running the dropped connection's turns until it hears of it.
STALE_DELETE_DELAY: Final = 0.25


class Carried:
    """What a connector carries from one link to the next (shared by its links)."""

    __slots__ = ("header_everywhere", "stale")

    def __init__(self) -> None:
        #: Connection ids of links that dropped, not yet DELETEd.
        self.stale: collections.deque[str] = collections.deque(maxlen=MAX_STALE)
        #: The header dialect learnt last.
        self.header_everywhere: bool | None = None


async def delete_stale(exchange: HttpExchange, carried: Carried, connection_id: str, target: str) -> None:
    """``DELETE`` a dropped link's connection on ``exchange``'s link (best effort; never raises)."""
    try:
        await asyncio.sleep(STALE_DELETE_DELAY)
        status = await asyncio.wait_for(exchange.delete(connection_id), timeout=STALE_DELETE_TIMEOUT)
        logger.debug("DELETE of dropped connection %s at %s answered %s", connection_id, target, status)
    except asyncio.CancelledError:
        carried.stale.append(connection_id)  # this link ended first: the next one tries again
        raise
    except Exception as exc:  # best effort: nothing depends on it
        logger.debug("DELETE of dropped connection %s at %s failed: %s", connection_id, target, exc)
