"""The outage queue: requests made while their link is down wait here, under one rule.

* Queuing off (``QueueOptions.enabled`` false): a request fails at once with
  :class:`~acp_client.exceptions.ConnectionLost` (``may_have_executed=False``).
* At most ``QueueOptions.max_size`` requests wait; one more fails with ``QueueFull``.
* Each waits at most ``QueueOptions.max_age`` seconds on the clock, then fails with ``ConnectionLost``.

A call may wait more than once (an endpoint group's call waits for its session's home, then on its
link): it carries one :class:`Ticket` through every wait, admitted (``max_size``) once, with
``max_age`` running from its first wait, so the rule holds once per call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar

from ..clock import Clock, move_on_at
from ..config import QueueOptions
from ..exceptions import ConnectionLost, QueueFull, TransportClosed

T = TypeVar("T")


class Ticket:
    """One call's place in the outage queues: when it must have its link (set when first admitted)."""

    __slots__ = ("deadline",)

    def __init__(self) -> None:
        self.deadline: float | None = None


class OutageQueue(Generic[T]):
    """The requests waiting for a link (``waiting_for``: what they wait for, in a timed-out one's error)."""

    def __init__(self, options: QueueOptions, clock: Clock, *, waiting_for: str = "still reconnecting") -> None:
        self.options = options
        self._clock = clock
        self._waiting_for = waiting_for
        self._waiters: collections.deque[tuple[asyncio.Future[T], str]] = collections.deque()

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, method: str, *, ticket: Ticket | None = None) -> T:
        """Wait for :meth:`release`, at most ``max_age`` from the call's first wait (``ticket``:
        the call's, if it may wait more than once). Raises as the module rules say, or what
        :meth:`fail` hands out."""
        options = self.options
        if not options.enabled:
            raise ConnectionLost(method, may_have_executed=False)
        ticket = ticket or Ticket()
        deadline = ticket.deadline
        if deadline is None:  # first admission
            if len(self._waiters) >= options.max_size:
                raise QueueFull(f"{method}: {len(self._waiters)} requests are already waiting for the connection")
            deadline = ticket.deadline = self._clock.monotonic() + options.max_age
        waiter: tuple[asyncio.Future[T], str] = (asyncio.get_running_loop().create_future(), method)
        self._waiters.append(waiter)
        try:
            with move_on_at(self._clock, deadline):
                return await waiter[0]
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
        cause = TransportClosed(f"{self._waiting_for} after {options.max_age:g}s")
        raise ConnectionLost(method, may_have_executed=False, cause=cause)

    def release(self, value: T) -> None:
        """Every waiting request goes on, with ``value``."""
        while self._waiters:
            future, _ = self._waiters.popleft()
            if not future.done():
                future.set_result(value)

    def fail(self, error: Callable[[str], BaseException]) -> None:
        """Every waiting request fails, with ``error(method)``."""
        while self._waiters:
            future, method = self._waiters.popleft()
            if not future.done():
                future.set_exception(error(method))
