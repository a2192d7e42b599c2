"""The clock seam, and the one way the client waits with a time limit.

Every wait in the client goes through a :class:`Clock`, so tests run a long outage in milliseconds
with :class:`acp_client.testing.FakeClock`. A time limit is a :class:`Deadline`, a scope on the
model of trio's cancel scopes::

    with move_on_after(clock, 5.0) as scope:
        answer = await conn.request("session/list")
    if scope.expired:
        ...  # five seconds passed: the request was cancelled, we carry on without it

    with fail_after(clock, 5.0):                 # the same, but raises TimeoutError at the end
        await conn.request("session/list")

The deadline is a timer on the clock, so with a ``FakeClock`` a scope expires exactly when the test
moves time past it, never in real time.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "Deadline", "SystemClock", "TimerHandle", "fail_after", "fail_at", "move_on_after", "move_on_at"]


@runtime_checkable
class TimerHandle(Protocol):
    """A scheduled callback that can be cancelled."""

    def cancel(self) -> None: ...


@runtime_checkable
class Clock(Protocol):
    """Monotonic time, sleeping, and timers."""

    def monotonic(self) -> float:
        """Seconds on a monotonic scale (only differences are meaningful)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds``."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once, ``delay`` seconds from now, on the running event loop."""
        ...


class SystemClock:
    """The real clock: :func:`time.monotonic` and the running asyncio loop."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)


class Deadline:
    """A scope that cancels the code inside it once a point in time on a clock has passed.

    Build one with :func:`move_on_after`, :func:`move_on_at`, :func:`fail_after` or
    :func:`fail_at`, and enter it once with ``with`` in the task that does the waiting.

    * When the deadline passes while the body runs, the task is cancelled where it waits; the
      scope catches that one cancellation when it exits, and :attr:`expired` is ``True``. A
      ``fail_*`` scope then raises (``TimeoutError`` unless told otherwise); a ``move_on_*`` one
      lets the code after the block run. A deadline already passed on entry cancels the body at
      its first wait.
    * A cancellation that is not this scope's own (from outside, or an enclosing scope expiring)
      propagates untouched, even when this scope expired at the same moment.
    * A body that finishes, or catches the cancellation and returns, keeps its result (the scope
      still reports :attr:`expired`).
    * :attr:`deadline` may be moved (later or earlier) until the scope has expired.

    Attributes:
        clock: The clock the deadline is measured on.
    """

    __slots__ = ("_cancelling", "_deadline", "_entered", "_error", "_expired", "_handle", "_task", "clock")

    def __init__(self, clock: Clock, deadline: float | None, *, error: Callable[[], BaseException] | None) -> None:
        _check_point(deadline)
        self.clock = clock
        self._deadline = deadline
        self._error = error
        self._expired = False
        self._entered = False
        self._task: asyncio.Task[object] | None = None
        self._handle: TimerHandle | asyncio.Handle | None = None
        self._cancelling = 0

    def __repr__(self) -> str:
        return f"<Deadline at {self._deadline!r} expired={self._expired}>"

    @property
    def deadline(self) -> float | None:
        """When the scope expires, on :attr:`clock`'s ``monotonic()`` scale (``None``: never)."""
        return self._deadline

    @deadline.setter
    def deadline(self, when: float | None) -> None:
        _check_point(when)
        if self._expired:
            raise RuntimeError("a Deadline that has expired cannot be moved")
        self._deadline = when
        if self._task is not None:
            self._schedule()

    @property
    def expired(self) -> bool:
        """Whether the deadline passed while the body ran (its task was cancelled for it)."""
        return self._expired

    def remaining(self) -> float | None:
        """Seconds left before the deadline (zero once passed; ``None``: no deadline)."""
        if self._deadline is None or math.isinf(self._deadline):
            return None
        return max(0.0, self._deadline - self.clock.monotonic())

    def __enter__(self) -> Deadline:
        if self._entered:
            raise RuntimeError("a Deadline is entered only once")
        self._entered = True
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a Deadline needs a running asyncio task")
        self._task = task
        if sys.version_info >= (3, 11):
            self._cancelling = task.cancelling()
        self._schedule()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        self._unschedule()
        task, self._task = self._task, None
        if not self._expired:
            return False
        ours = True
        if sys.version_info >= (3, 11) and task is not None:
            # Our expiry asked for one cancellation: take it back, and catch the CancelledError
            # only if no other cancellation was asked for meanwhile.
            ours = task.uncancel() <= self._cancelling
        if exc_type is None or not issubclass(exc_type, asyncio.CancelledError) or not ours:
            return False
        if self._error is not None:
            raise self._error() from exc
        return True

    def _schedule(self) -> None:
        self._unschedule()
        when = self._deadline
        if when is None or math.isinf(when):
            return
        delay = when - self.clock.monotonic()
        if delay <= 0:
            # Already due: cancel at the first wait, whatever the clock (a fake one would not move).
            self._handle = asyncio.get_running_loop().call_soon(self._expire)
        else:
            self._handle = self.clock.call_later(delay, self._expire)

    def _unschedule(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _expire(self) -> None:
        self._handle = None
        task = self._task
        if task is None or self._expired or task.done():
            return
        self._expired = True
        task.cancel()


def _check_point(value: float | None) -> None:
    if value is None or (type(value) is float and not math.isnan(value)):  # the usual case, quickly
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"a deadline is a number of seconds or None, not {value!r}")


def _after(clock: Clock, seconds: float | None) -> float | None:
    _check_point(seconds)
    return None if seconds is None else clock.monotonic() + seconds


def move_on_at(clock: Clock, deadline: float | None) -> Deadline:
    """A scope cancelled at ``deadline`` (``clock.monotonic()`` scale; ``None``: never); the code
    after it runs (check :attr:`Deadline.expired`)."""
    return Deadline(clock, deadline, error=None)


def move_on_after(clock: Clock, seconds: float | None) -> Deadline:
    """A scope cancelled ``seconds`` from now (``None``: never); the code after it runs.

    Raises:
        ValueError: ``seconds`` is not a number (NaN included) or ``None``.
    """
    return Deadline(clock, _after(clock, seconds), error=None)


def fail_at(clock: Clock, deadline: float | None, *, error: Callable[[], BaseException] | None = None) -> Deadline:
    """A scope cancelled at ``deadline`` that then raises ``error()`` (default: ``TimeoutError``)."""
    return Deadline(clock, deadline, error=error or TimeoutError)


def fail_after(clock: Clock, seconds: float | None, *, error: Callable[[], BaseException] | None = None) -> Deadline:
    """A scope cancelled ``seconds`` from now (``None``: never) that then raises ``error()``
    (default: ``TimeoutError``), chained to the cancellation it caught.

    Raises:
        ValueError: ``seconds`` is not a number (NaN included) or ``None``.
    """
    return Deadline(clock, _after(clock, seconds), error=error or TimeoutError)
