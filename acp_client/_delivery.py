"""Event delivery: the one way the client calls the app's callbacks.

The policy, the same for every callback (``on_*``, ``decide_recovery``, ``refresh_credentials``,
update listeners):

* A plain function runs inline, on the event loop, when the event happens.
* A callback that returns an awaitable (an ``async def``) gets it awaited:

  - for *events* (state changes, updates, protocol errors, other notifications) on one dispatcher
    task per client, in the order the events happened — the client never waits for the app;
  - for *questions* and *recovery reports* (``decide_recovery``, ``on_resume`` ...,
    ``on_turn_interrupted``, ``refresh_credentials``) by the client itself, which needs the
    answer, or promises the app hears of a recovery before queued requests are released.

* A callback that raises is logged at ERROR with its stack trace (logger ``acp_client.callbacks``)
  and otherwise ignored: an app bug never kills one of the client's tasks and never changes what
  the client does next (a question that raised counts as "no answer"). Cancellation propagates.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Dispatcher", "call_app"]

logger = logging.getLogger("acp_client.callbacks")


def _failed(what: str, callback: object) -> None:
    logger.exception("app callback %s (%r) raised; ignored", what, callback)


async def call_app(callback: Callable[..., Any] | None, *args: Any, what: str) -> Any:
    """Call ``callback(*args)``, awaiting what it returns if it is awaitable.

    Returns:
        Its result, or ``None`` when there is no callback or it raised (logged, see above).
    """
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
        """Call ``callback(*args)`` now; if it returns an awaitable, queue it for the dispatcher
        task (awaited in order). Never raises for the callback's sake."""
        if callback is None:
            return
        try:
            result = callback(*args)
        except Exception:
            _failed(what, callback)
            return
        if inspect.isawaitable(result):
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
