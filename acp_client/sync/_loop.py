"""The loop in a thread: :class:`EventLoopThread`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

from .._util._logging import get_logger
from ..clock import SystemClock, move_on_after
from ..exceptions import ClientClosed, LoopThreadError, RequestTimeout

logger = get_logger("acp_client.sync")

T = TypeVar("T")

#: How much longer than its timeout a blocking call waits for the loop to report the expiry
#: itself, before giving up on a loop that does not answer at all.
_GRACE = 5.0
#: How long :meth:`EventLoopThread.close` waits for the thread to end.
_JOIN_TIMEOUT = 10.0


async def _bounded(awaitable: Awaitable[T], timeout: float | None, method: str) -> T:
    """Await ``awaitable``; after ``timeout`` real seconds cancel it and raise ``RequestTimeout``."""
    if timeout is None:
        return await awaitable
    with move_on_after(SystemClock(), timeout):
        return await awaitable
    raise RequestTimeout(method, timeout)


def close_awaitable(awaitable: Awaitable[Any]) -> None:
    if inspect.iscoroutine(awaitable):
        awaitable.close()


class EventLoopThread:
    """An asyncio event loop running in a daemon thread of its own.

    ::

        with EventLoopThread(name="agent") as loop:
            server = loop.run(start_server(), timeout=10)
            future = loop.submit(server.serve_forever())     # a concurrent.futures.Future
    """

    def __init__(self, *, name: str = "acp-client-loop") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._stopped = False
        self._outstanding: set[concurrent.futures.Future[Any]] = set()

    def __repr__(self) -> str:
        return f"<EventLoopThread {self.name} running={self.running}>"

    def __enter__(self) -> EventLoopThread:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def thread(self) -> threading.Thread | None:
        """The loop's thread (``None`` before :meth:`start`)."""
        return self._thread

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop (``None`` before :meth:`start`). Touch it only from its own thread or
        through ``call_soon_threadsafe``."""
        return self._loop

    @property
    def running(self) -> bool:
        """Whether the loop is running and accepts work."""
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._stopped

    def in_loop_thread(self) -> bool:
        """Whether the caller runs on the loop's thread."""
        # Compare the thread objects, not ``get_ident()`` with ``thread.ident``: an ended thread
        # keeps its ident, and the OS hands it to the next thread it starts (a host thread that
        # calls close() just after another close() joined the loop thread would be taken for the
        # loop thread). ``thread.is_alive()`` is no guard either: it can read True while another
        # thread is inside ``join()``.
        thread = self._thread
        return thread is not None and threading.current_thread() is thread

    def start(self) -> None:
        """Start the thread and its loop (idempotent).

        Raises:
            ClientClosed: The loop was stopped already (a stopped loop does not restart).
        """
        with self._lock:
            if self._stopped:
                raise ClientClosed(f"the event loop thread {self.name!r} was stopped")
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
                self._thread.start()
        self._ready.wait()  # a caller racing the first one waits for the loop too

    def close(self, *, join_timeout: float | None = _JOIN_TIMEOUT) -> None:
        """Cancel every task still on the loop, stop it, and join the thread (idempotent). Pending
        futures of :meth:`submit` end cancelled; blocking :meth:`run` calls raise ``ClientClosed``.

        Raises:
            LoopThreadError: Called from the loop thread (it cannot join itself).
        """
        if self.in_loop_thread():
            raise LoopThreadError("EventLoopThread.close() was called from its own loop thread")
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is None:
            return
        self._ready.wait()  # a start() in progress: its loop exists once ready (else it would never stop)
        loop = self._loop
        assert loop is not None
        with contextlib.suppress(RuntimeError):  # already closed
            loop.call_soon_threadsafe(loop.stop)
        thread.join(join_timeout)
        if thread.is_alive():
            logger.warning("event loop thread %r did not end within %ss", self.name, join_timeout)
        with self._lock:
            outstanding = list(self._outstanding)
        for future in outstanding:
            future.cancel()

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            try:
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            except Exception:
                logger.exception("event loop thread %r did not shut down cleanly", self.name)
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def submit(
        self, awaitable: Awaitable[T], *, timeout: float | None = None, method: str = "call"
    ) -> concurrent.futures.Future[T]:
        """Schedule ``awaitable`` on the loop from any thread (the loop thread included); after
        ``timeout`` seconds it is cancelled and the future fails with
        :class:`~acp_client.exceptions.RequestTimeout` (named ``method``). Cancelling the future
        cancels the work on the loop.

        Raises:
            ClientClosed: The loop is not running.
        """
        loop = self._loop
        if loop is None or not self.running:
            close_awaitable(awaitable)
            raise ClientClosed(f"the event loop thread {self.name!r} is not running")
        wrapper = _bounded(awaitable, timeout, method)
        try:
            future = asyncio.run_coroutine_threadsafe(wrapper, loop)
        except RuntimeError as exc:  # closed between the check and the call
            wrapper.close()
            close_awaitable(awaitable)
            raise ClientClosed(f"the event loop thread {self.name!r} is not running") from exc
        with self._lock:
            self._outstanding.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._outstanding.discard(future)

    def run(self, awaitable: Awaitable[T], *, timeout: float | None = None, method: str = "call") -> T:
        """Run ``awaitable`` on the loop and block until it ends (``timeout``: as for :meth:`submit`).

        Raises:
            RequestTimeout: It did not end within ``timeout`` (it was cancelled).
            LoopThreadError: Called from the loop thread itself.
            ClientClosed: The loop is not running, or was stopped meanwhile.
            Exception: Whatever the awaitable raised, unchanged.
        """
        if self.in_loop_thread():
            close_awaitable(awaitable)
            raise LoopThreadError(
                f"{method}: a blocking call was made on the event loop thread {self.name!r}; "
                "it would deadlock (await the async API there instead)"
            )
        future = self.submit(awaitable, timeout=timeout, method=method)
        return self.wait(future, timeout=timeout, method=method)

    def wait(self, future: concurrent.futures.Future[T], *, timeout: float | None = None, method: str = "call") -> T:
        """Block until a future from :meth:`submit` ends (``timeout``: as given to :meth:`submit`;
        the wait allows the loop a few seconds more to report the expiry itself).

        Raises:
            RequestTimeout: Still not done after that (the future is cancelled).
            LoopThreadError: Called from the loop thread itself.
            ClientClosed: The loop was stopped before the work ended.
        """
        if self.in_loop_thread() and not future.done():
            raise LoopThreadError(f"{method}: waiting on the event loop thread {self.name!r} would deadlock")
        limit = None if timeout is None else timeout + _GRACE
        try:
            done, _ = concurrent.futures.wait([future], timeout=limit)
        except BaseException:  # KeyboardInterrupt in the host: do not leave the work running
            future.cancel()
            raise
        if not done:
            future.cancel()
            raise RequestTimeout(method, timeout or 0.0)
        if future.cancelled():
            raise ClientClosed(f"{method}: cancelled (the client was closed, or the future was cancelled)")
        return future.result()
