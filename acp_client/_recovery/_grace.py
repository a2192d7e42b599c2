"""Many delays of one length on one timer: the replay windows an unordered transport keeps open.

On Streamable HTTP every session a recovery resumes or replays keeps its window open for
``REPLAY_GRACE`` seconds after the answer: 10,000 sessions were 10,000 event-loop timers, each
making every other dearer to schedule. Delays of one length end in the order they began, so they
wait in a queue and one clock timer at a time runs at the earliest end.
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from collections.abc import Callable
from typing import Final

import attrs

from .._util._logging import get_logger
from ..clock import Clock, TimerHandle

logger = get_logger("acp_client.client")

#: How early an end may be taken as due (a loop runs a timer up to its clock resolution early).
_SLACK: Final = 1e-6


@attrs.define(eq=False)
class _Delay:
    """One delay in a queue; cancelling it keeps its callback from running."""

    due: float
    callback: Callable[[], None] | None

    def cancel(self) -> None:
        self.callback = None


class _Queue:
    """The delays of one length on one clock, in the order they end."""

    def __init__(self, clock: Clock, seconds: float, on_empty: Callable[[], object]) -> None:
        self._clock = clock
        self._seconds = seconds
        self._on_empty = on_empty
        self._delays: collections.deque[_Delay] = collections.deque()
        self._timer: TimerHandle | None = None

    def add(self, callback: Callable[[], None]) -> _Delay:
        delay = _Delay(self._clock.monotonic() + self._seconds, callback)
        self._delays.append(delay)
        if self._timer is None:
            self._timer = self._clock.call_later(self._seconds, self._run)
        return delay

    def _run(self) -> None:
        self._timer = None
        delays, now = self._delays, self._clock.monotonic() + _SLACK
        while delays and (delays[0].callback is None or delays[0].due <= now):  # a cancelled one: not waited for
            callback = delays.popleft().callback
            if callback is not None:
                try:
                    callback()
                except Exception:
                    logger.exception("a replay window's end raised")
        if not delays:
            self._on_empty()  # forgotten until the next delay: a clock of a closed client is not kept
        elif self._timer is None:
            # A shade early (the check above takes it as due): rounding must never make it late.
            wait = max(0.0, delays[0].due - self._clock.monotonic() - _SLACK / 2)
            self._timer = self._clock.call_later(wait, self._run)


#: The queues of each running event loop (a clock may serve clients on several loops), by clock and length.
_QUEUES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Clock, float], _Queue]] = (
    weakref.WeakKeyDictionary()
)


def after(clock: Clock, seconds: float, callback: Callable[[], None]) -> TimerHandle:
    """``clock.call_later(seconds, callback)`` (from a running event loop), on a timer shared by every
    delay of that length on that clock and loop."""
    queues = _QUEUES.setdefault(asyncio.get_running_loop(), {})
    key = (clock, seconds)
    queue = queues.get(key)
    if queue is None:
        queue = queues[key] = _Queue(clock, seconds, lambda: queues.pop(key, None))
    return queue.add(callback)
