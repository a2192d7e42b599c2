"""Background tasks: every one the client starts goes through its owner's :class:`TaskSet`, which
keeps it referenced until it ends. One that dies of a bug (expected failures are handled inside the
task) is logged and handed to the owner's ``on_crash``, which fails what the owner holds so that
nothing waits forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._logging import get_logger

logger = get_logger("acp_client")

T = TypeVar("T")


class TaskSet:
    """The background tasks of ``owner`` (named in the log); ``on_crash`` is told what one died of."""

    def __init__(self, owner: str, on_crash: Callable[[BaseException], None]) -> None:
        self._owner = owner
        self._on_crash = on_crash
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, work: Awaitable[T], *, name: str | None = None) -> asyncio.Future[T]:
        """Run ``work`` in the background (a coroutine, or a future to keep and watch)."""
        task: asyncio.Future[T] = asyncio.ensure_future(work)
        if name is not None and isinstance(task, asyncio.Task):
            task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is None:
            return
        name = task.get_name() if isinstance(task, asyncio.Task) else "a task"
        logger.critical("%s of %s crashed", name, self._owner, exc_info=error)
        self._on_crash(error)

    def cancel(self) -> list[asyncio.Future[Any]]:
        """Cancel every task but the caller's own; returns them."""
        current = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not current]
        for task in tasks:
            task.cancel()
        return tasks

    async def aclose(self) -> None:
        """Cancel every task but the caller's own, and wait for them to end."""
        tasks = self.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
