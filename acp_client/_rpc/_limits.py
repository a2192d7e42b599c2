"""What one connection bounds, so a hostile agent cannot make it grow: the in-flight cap on
agent→client requests (with the queue of refusals it sends instead), and the memory of request ids
the client gave up on.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Any, Final

from .._codec import _jsonrpc
from .._codec._jsonrpc import RequestId
from .._util._checks import check_count
from .._util._logging import get_logger
from ..exceptions import InternalError

logger = get_logger(__name__)

#: How many ids of requests the client gave up on (timeout, cancellation) are remembered, so a
#: late answer to one is recognised as such rather than reported as a protocol error.
ABANDONED_IDS_KEPT: Final = 1024
#: Refusals waiting to be sent before the reader stops reading until they are (back-pressure on a
#: flood, so refusing it does not take unbounded memory either).
MAX_QUEUED_REFUSALS: Final = 256


class AbandonedIds:
    """The ids of requests the client stopped waiting for, the newest :data:`ABANDONED_IDS_KEPT`."""

    def __init__(self, kept: int = ABANDONED_IDS_KEPT) -> None:
        self._kept = kept
        self._ids: dict[RequestId, None] = {}  # insertion-ordered: the oldest go first

    def remember(self, request_id: RequestId) -> None:
        self._ids[request_id] = None
        if len(self._ids) > self._kept:
            del self._ids[next(iter(self._ids))]

    def take(self, request_id: RequestId) -> bool:
        """Whether ``request_id`` was abandoned; forgets it (a second answer to it is news)."""
        if request_id in self._ids:
            del self._ids[request_id]
            return True
        return False


class IncomingCap:
    """At most ``limit`` agent→client requests handled at once; the excess is answered with an
    ``Internal error`` from one task, one after another (not one task each: that is the flood), so
    the client's own requests keep resolving. Once ``is_closed()``, queued refusals are dropped.
    """

    def __init__(
        self,
        limit: int,
        *,
        send: Callable[[_jsonrpc.Message], Awaitable[None]],
        spawn: Callable[[Awaitable[Any]], asyncio.Future[Any]],
        is_closed: Callable[[], bool],
    ) -> None:
        check_count("max_incoming_requests", limit)
        self._limit = limit
        self._send = send
        self._spawn = spawn
        self._is_closed = is_closed
        self._count = 0
        self._refusing = False
        self._refusals: collections.deque[dict[str, Any]] = collections.deque()
        self._sender: asyncio.Future[Any] | None = None

    def started(self) -> None:
        self._count += 1

    def finished(self) -> None:
        self._count -= 1

    def refusal(self, request_id: RequestId) -> dict[str, Any] | None:
        """The error answer for a request over the cap (``None``: handle it)."""
        if self._count < self._limit:
            self._refusing = False
            return None
        if not self._refusing:  # once per burst: a flood must not flood the log too
            self._refusing = True
            logger.warning("agent sent more than %d concurrent requests; refusing the excess", self._limit)
        error = InternalError(f"Too many concurrent requests (the client handles {self._limit} at a time)")
        return _jsonrpc.error_message(request_id, error.code, error.message)

    def queue(self, reply: dict[str, Any]) -> None:
        """Send ``reply`` after the refusals already queued."""
        self._refusals.append(reply)
        if self._sender is None or self._sender.done():
            self._sender = self._spawn(self._send_refusals())

    @property
    def flooded(self) -> bool:
        """Too many refusals are queued: the reader should :meth:`drain` before reading on."""
        return len(self._refusals) >= MAX_QUEUED_REFUSALS and self._sender is not None

    async def drain(self) -> None:
        """Wait until the queued refusals are sent (the reader calls this when :attr:`flooded`)."""
        if self._sender is not None:
            await asyncio.shield(self._sender)

    async def _send_refusals(self) -> None:
        while self._refusals:
            if self._is_closed():
                self._refusals.clear()
                return
            await self._send(self._refusals.popleft())
