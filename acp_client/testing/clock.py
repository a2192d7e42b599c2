"""A fake clock for deterministic tests of the retry policy, the connection and the supervisor.

Time only moves when the test says so, so a 60-second outage with exponential backoff runs in
milliseconds and every run takes the same path::

    clock = FakeClock()
    client = AcpClient(connector, clock=clock, retry=RetryPolicy(...))
    await clock.advance(5.0)                       # fire everything due in the next 5 s
    result = await clock.run(client.list_sessions())  # run a call, jumping over idle waits

Pass the same clock to everything under test (``AcpClient(clock=...)``, ``RetryPolicy`` sleeps,
the in-memory reference agent). Only waits that go through the clock are faked: code that calls
``asyncio.sleep`` directly still waits for real. The client's time limits are deadline scopes
(:func:`acp_client.clock.move_on_after`) whose timers live here, so each expires exactly when
the test moves time past it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["FakeClock"]

T = TypeVar("T")

#: Real seconds :meth:`FakeClock.run` waits for outside work before reporting a deadlock.
_REAL_GRACE = 2.0


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A :class:`~acp_client.clock.Clock` whose time moves only on :meth:`advance` / :meth:`run`.

    Args:
        start: The initial value of :meth:`monotonic`.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> _FakeTimer:
        timer = _FakeTimer(self._now + max(0.0, delay), callback)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        timer = self.call_later(seconds, wake)
        try:
            await future
        finally:
            timer.cancel()

    @property
    def pending_timers(self) -> int:
        """How many timers are scheduled and not cancelled."""
        return sum(1 for _, _, timer in self._timers if not timer.cancelled)

    def next_deadline(self) -> float | None:
        """When the earliest live timer fires, or ``None``."""
        self._drop_cancelled()
        return self._timers[0][0] if self._timers else None

    async def settle(self, max_iterations: int = 10_000) -> None:
        """Let every runnable task run until the event loop has nothing ready (time stays still)."""
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        # Done after 3 turns in a row with nothing ready; a loop that hides its ready queue gets 50 turns.
        needed = 3 if ready is not None else 50
        quiet = 0
        for _ in range(max_iterations):
            await asyncio.sleep(0)
            quiet = quiet + 1 if ready is None or not ready else 0
            if quiet >= needed:
                return

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing due timers in order and letting tasks react."""
        if seconds < 0:
            raise ValueError("time cannot go backwards")
        target = self._now + seconds
        await self.settle()
        while (due := self.next_deadline()) is not None and due <= target:
            self._fire_next()
            await self.settle()
        self._now = target
        await self.settle()

    async def jump(self) -> bool:
        """Move time to the next live timer and fire it; ``False`` when none is scheduled."""
        await self.settle()
        if self.next_deadline() is None:
            return False
        self._fire_next()
        await self.settle()
        return True

    async def run(self, awaitable: Awaitable[T], *, limit: float = 3600.0) -> T:
        """Run ``awaitable`` to completion, jumping time forward whenever everything is idle.

        Args:
            awaitable: What to run (a coroutine or future).
            limit: Fail if more than this much fake time would pass.

        Raises:
            TimeoutError: Nothing is scheduled but the awaitable is still waiting (a deadlock), or
                ``limit`` fake seconds passed.
        """
        task = asyncio.ensure_future(awaitable)
        deadline = self._now + limit
        try:
            while True:
                await self.settle()
                if task.done():
                    return task.result()
                due = self.next_deadline()
                if due is None:
                    # Nothing on the fake clock: give work outside the loop (a worker thread,
                    # real I/O) a moment of real time before calling it a deadlock.
                    if not await self._wait_real(task, _REAL_GRACE):
                        raise TimeoutError("the awaitable is blocked and no timer is scheduled")
                    continue
                if due > deadline:
                    raise TimeoutError(f"still waiting after {limit:g} fake seconds")
                self._fire_next()
        finally:
            if not task.done():
                task.cancel()

    async def _wait_real(self, task: asyncio.Future[Any], seconds: float) -> bool:
        """Wait up to ``seconds`` of real time for ``task`` to finish or a timer to appear."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end:
            await asyncio.sleep(0.001)
            if task.done() or self.next_deadline() is not None:
                return True
        return False

    def _drop_cancelled(self) -> None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)

    def _fire_next(self) -> None:
        when, _, timer = heapq.heappop(self._timers)
        self._now = max(self._now, when)
        if not timer.cancelled:
            timer.cancelled = True
            timer.callback()
