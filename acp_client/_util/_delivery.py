"""Event delivery: the one way the client calls the app's callbacks (``on_*``, ``decide_recovery``,
``refresh_credentials``, update listeners), and :class:`Feed`, the queue behind ``updates()``.

* A plain function runs inline, on the event loop, when the event happens.
* An awaitable a callback returns is awaited: for *events* (state changes, updates, protocol
  errors, other notifications) on one dispatcher task per client, in order, so the client never
  waits for the app; for *questions* and *recovery reports* (``decide_recovery``, ``on_resume``...,
  ``refresh_credentials``) by the client itself, which needs the answer, or promises the app hears
  of a recovery before queued requests are released.
* A callback that raises is logged at ERROR (logger ``acp_client.callbacks``) and otherwise
  ignored (a question that raised counts as "no answer"). Cancellation propagates.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from ._logging import get_logger

logger = get_logger("acp_client.callbacks")

T = TypeVar("T")


def _failed(what: str, callback: object) -> None:
    logger.exception("app callback %s (%r) raised; ignored", what, callback)


async def call_app(callback: Callable[..., Any] | None, *args: Any, what: str) -> Any:
    """``callback(*args)``, awaited if awaitable; ``None`` without a callback or when it raised."""
    if callback is None:
        return None
    try:
        result = callback(*args)
        if inspect.isawaitable(result):
            result = await result
    except asyncio.CancelledError:
        raise
    except Exception:
        _failed(what, callback)
        return None
    return result


class Dispatcher:
    """Delivers events to callbacks without making the caller wait (see the module docstring)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[str, Callable[..., Any], Awaitable[Any]]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def deliver(self, callback: Callable[..., Any] | None, *args: Any, what: str) -> None:
        """Call ``callback(*args)`` now; an awaitable it returns is queued for the dispatcher task."""
        if callback is None:
            return
        try:
            result = callback(*args)
        except Exception:
            _failed(what, callback)
            return
        if result is not None and inspect.isawaitable(result):  # None: the common case, checked first
            self._enqueue(what, callback, result)

    def deliver_one(self, callback: Callable[[Any], Any], arg: Any, what: str) -> None:
        """:meth:`deliver` for a callback of one argument (the hot path: one call per update)."""
        try:
            result = callback(arg)
        except Exception:
            _failed(what, callback)
            return
        if result is not None and inspect.isawaitable(result):
            self._enqueue(what, callback, result)

    def _enqueue(self, what: str, callback: Callable[..., Any], awaitable: Awaitable[Any]) -> None:
        if self._closed:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            logger.debug("client closed: %s not delivered", what)
            return
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(self._run(self._queue), name="acp-callbacks")
        self._queue.put_nowait((what, callback, awaitable))

    async def _run(self, queue: asyncio.Queue[tuple[str, Callable[..., Any], Awaitable[Any]]]) -> None:
        while True:
            what, callback, awaitable = await queue.get()
            try:
                await awaitable
            except asyncio.CancelledError:
                raise
            except Exception:
                _failed(what, callback)

    async def aclose(self) -> None:
        """Stop delivering: awaitables still queued are dropped (closed, never run)."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        queue, self._queue = self._queue, None
        while queue is not None and not queue.empty():
            _, _, awaitable = queue.get_nowait()
            if inspect.iscoroutine(awaitable):
                awaitable.close()


class Feed(Generic[T]):
    """An unbounded queue from plain functions to one async consumer (an ``updates()`` iterator):
    the consumer takes from :attr:`items` and awaits :meth:`wait` only when it is empty, so a burst
    costs an append and a pop per item (an :class:`asyncio.Queue` also counts tasks and wakes
    putters on every item)."""

    __slots__ = ("_waiter", "items")

    def __init__(self) -> None:
        self.items: collections.deque[T] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def push(self, item: T) -> None:
        self.items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        if self.items:
            return
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None
