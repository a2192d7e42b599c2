"""The helpers every test folder shares (one copy each): waiting with a deadline, and a fast retry
policy for tests on real loopback links.

Waits poll a condition against a deadline, never a fixed sleep, and fail with a message saying what
was awaited. Tests on the memory transport + :class:`~acp_client.testing.FakeClock` need none of
this: they run the clock instead (``tests/_harness.py``). To see what a client sent, wrap its
connector in :class:`acp_client.testing.RecordingConnector`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from acp_client import RetryPolicy
from acp_client.sync import EventLoopThread
from acp_client.testing import FakeClock, ReferenceAgent, ReferenceServer

__all__ = ["DEADLINE", "FAST_RETRY", "eventually", "eventually_blocking", "within"]

T = TypeVar("T")

#: The default deadline of one wait, in seconds: generous (a wait normally takes milliseconds; a
#: loaded 2-core machine running the whole suite is slower), since only a hang ever reaches it.
DEADLINE = 15.0

#: Reconnect at once and often on loopback, give up after 20 s, no jitter (tests stay repeatable).
#: Real agents that take seconds to start use ``attrs.evolve(FAST_RETRY, max_elapsed=...)``.
FAST_RETRY = RetryPolicy(initial_delay=0.05, max_delay=0.2, jitter=False, max_elapsed=20)

#: How often a condition is polled, in seconds.
_POLL = 0.01


def _described(what: str | Callable[[], str]) -> str:
    return what() if callable(what) else what


async def within(awaitable: Awaitable[T], timeout: float = DEADLINE) -> T:
    """Await with a deadline, so a hang fails the test instead of stalling the run."""
    return await asyncio.wait_for(awaitable, timeout)


async def eventually(
    check: Callable[[], Any],
    timeout: float = DEADLINE,
    *,
    what: str | Callable[[], str] = "condition",
    clock: FakeClock | None = None,
    step: float = 0.5,
    every: float = _POLL,
) -> Any:
    """Poll ``check`` (a function, or a coroutine function) until it returns something truthy, and
    return that; fail after ``timeout`` seconds.

    Args:
        check: The condition; its result may be awaitable.
        timeout: Seconds before the wait fails (of ``clock``'s time when given).
        what: Names the awaited condition in the failure message (a callable is evaluated then, so
            it can say what was seen instead).
        clock: A fake clock to run instead of waiting (tests on memory transports): settled first,
            then advanced ``step`` seconds at a time between checks.
        step: Fake seconds between two checks.
        every: Real seconds between two checks (without ``clock``): more for a costly check,
            such as one that runs a command.

    Raises:
        AssertionError: The condition did not hold in time.
    """
    if clock is not None:
        end = clock.monotonic() + timeout
        await clock.settle()
        while True:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            if clock.monotonic() >= end:
                raise AssertionError(f"not reached in {timeout:g}s of fake time: {_described(what)}")
            await clock.advance(step)
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {_described(what)}")
        await asyncio.sleep(every)


def eventually_blocking(
    check: Callable[[], T | None], timeout: float = DEADLINE, *, what: str | Callable[[], str] = "condition"
) -> T:
    """:func:`eventually` for a plain thread with no event loop (the ``acp_client.sync`` tests).

    Raises:
        AssertionError: The condition did not hold in time.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {_described(what)}")
        time.sleep(_POLL)


@contextlib.contextmanager
def agent_on_its_own_loop(
    timeout: float = DEADLINE,
) -> Iterator[tuple[EventLoopThread, ReferenceAgent, ReferenceServer]]:
    """A reference agent served from a loop thread of its own (for tests of the blocking facade,
    whose client runs its own loop): ``(that loop, the agent, its server)``."""
    loop = EventLoopThread(name="agent-side")
    loop.start()
    agent = ReferenceAgent()

    async def start() -> ReferenceServer:
        server = ReferenceServer(agent)
        await server.start()
        return server

    server = loop.run(start(), timeout=timeout)
    try:
        yield loop, agent, server
    finally:
        loop.run(server.aclose(), timeout=timeout)
        loop.close()
