"""The client's side of a :class:`~acp_client.store.base.SessionStore`: async calls, one worker thread.

A store is blocking I/O; the client must never run it on the event loop. :class:`StoreBridge` runs every call on one
dedicated worker thread, so calls execute in the order the client issued them (two saves of one session can never land
in the wrong order, as they could on several threads), and a write is not lost when the task that issued it is
cancelled.

Errors: :meth:`StoreBridge.load` raises (a client cannot start from a store it cannot read — the app must hear of it).
Writes never raise into the client's flow: a ``SessionStoreError`` is logged and handed to ``on_error``; the session
itself carries on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from .._util._logging import get_logger
from ..exceptions import SessionStoreError, SessionStoreFenced
from .base import SessionStore, StoredSession

logger = get_logger(__name__)

T = TypeVar("T")


def write_turn(
    store: Any, endpoint: str, session_id: str, entries: Sequence[Mapping[str, Any]], *, when: datetime, **fence: Any
) -> bool:
    """The end of a turn: ``store.save_turn`` (the last use and the conversation in one step), or, for a store without
    it, ``touch`` and then ``save_transcript``; whether the session is stored."""
    save_turn = getattr(store, "save_turn", None)
    if callable(save_turn):
        return bool(save_turn(endpoint, session_id, entries, when=when, **fence))
    store.touch(endpoint, session_id, when=when, **fence)
    return bool(store.save_transcript(endpoint, session_id, entries, **fence))


class StoreBridge:
    """One endpoint's view of a store, for the client (see the module docstring).

    The writes queue the call and return a future the caller may await (for the result) or drop (fire and forget); they
    must be called on the event loop's thread. Their futures never fail with a store error: on ``SessionStoreError``
    they resolve to ``None`` / ``False``. Every call is scoped to ``endpoint``; the bridge never closes ``store`` (the
    app owns it).
    """

    def __init__(self, store: SessionStore, endpoint: str) -> None:
        self.store = store
        self.endpoint = endpoint
        #: Called on the event loop with each ``SessionStoreError`` a write raised (settable).
        self.on_error: Callable[[SessionStoreError], Any] | None = None
        #: Called on the event loop after each call that went through (settable): what a store error left unwritten is
        #: written again then.
        self.on_success: Callable[[], Any] | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="acp-session-store")
        self._pending: set[asyncio.Future[Any]] = set()
        self._closed = False

    def _submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        if self._closed:
            raise SessionStoreError("the client's store bridge is closed", path=str(getattr(self.store, "path", "")))
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        future.add_done_callback(self._succeeded)
        return future

    def _succeeded(self, future: asyncio.Future[Any]) -> None:
        if self.on_success is None or future.cancelled() or future.exception() is not None:
            return
        try:
            self.on_success()
        except Exception:
            logger.exception("the session store success callback raised")

    def _write(self, default: T, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """Queue a write; the returned future resolves to its result, or ``default`` on a store error."""
        inner = self._submit(fn, *args, **kwargs)
        outer: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def done(future: asyncio.Future[T]) -> None:
            error = None if future.cancelled() else future.exception()
            if isinstance(error, SessionStoreError):
                if not isinstance(error, SessionStoreFenced):  # the owner's handler logs those, once
                    logger.warning("session store %s (%s): %s", fn.__name__, self.endpoint, error)
                if self.on_error is not None:
                    try:
                        self.on_error(error)
                    except Exception:
                        logger.exception("the session store error callback raised")
            if outer.done():
                return
            if future.cancelled():
                outer.cancel()
            elif isinstance(error, SessionStoreError):
                outer.set_result(default)
            elif error is not None:
                outer.set_exception(error)
            else:
                outer.set_result(future.result())

        inner.add_done_callback(done)
        return outer

    # -- reads (raise) ----------------------------------------------------------------------------

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` on the worker thread, in order with the queued calls; raises what it raises."""
        return await asyncio.shield(self._submit(fn, *args, **kwargs))

    async def load(self) -> list[StoredSession]:
        """The endpoint's stored sessions, most recently used first."""
        return await self.run(self.store.load, self.endpoint)

    async def load_each(
        self, session_ids: Sequence[str], decode: Callable[[Sequence[Mapping[str, Any]], str], T]
    ) -> dict[str, T]:
        """Each session's stored transcript, decoded by ``decode(entries, session_id)``, in one job on the worker thread
        (sessions without one are left out): restoring a thousand sessions costs one thread hop, not a thousand. Raises
        what the store or ``decode`` raises."""

        def load() -> dict[str, T]:
            found: dict[str, T] = {}
            for session_id in session_ids:
                entries = self.store.load_transcript(self.endpoint, session_id)
                if entries:
                    found[session_id] = decode(entries, session_id)
            return found

        return await self.run(load)

    # -- writes (never raise a store error) ------------------------------------------------------

    def _check(self, record: StoredSession) -> None:
        """Refuse a record of another endpoint (``ValueError``: a client bug)."""
        if record.endpoint != self.endpoint:
            raise ValueError(f"record of endpoint {record.endpoint!r} saved through {self.endpoint!r}")

    def save(self, session: StoredSession) -> asyncio.Future[None]:
        """Queue ``store.save(session)``."""
        self._check(session)
        return self._write(None, self.store.save, session)

    def delete(self, session_id: str) -> asyncio.Future[bool]:
        """Queue ``store.delete``; resolves to whether it was stored."""
        return self._write(False, self.store.delete, self.endpoint, session_id)

    def rename(self, old_session_id: str, new_session_id: str) -> asyncio.Future[StoredSession | None]:
        """Queue ``store.rename``; resolves to the renamed record (``None``: not stored, or failed)."""
        return self._write(None, self.store.rename, self.endpoint, old_session_id, new_session_id)

    def touch(self, session_id: str, *, when: datetime | None = None) -> asyncio.Future[bool]:
        """Queue ``store.touch``; resolves to whether the session is stored."""
        return self._write(False, self.store.touch, self.endpoint, session_id, when=when)

    def save_transcript(self, session_id: str, entries: Sequence[Mapping[str, Any]]) -> asyncio.Future[bool]:
        """Queue ``store.save_transcript``; resolves to whether the session is stored."""
        return self._write(False, self.store.save_transcript, self.endpoint, session_id, entries)

    def save_turn(
        self, session_id: str, record: StoredSession | None, entries: Sequence[Mapping[str, Any]] | None, when: datetime
    ) -> asyncio.Future[bool | None]:
        """Queue the end of a turn as one job: ``record`` (a title the agent gave), then the last use ``when`` and the
        whole conversation ``entries`` in one step (:func:`write_turn`: one statement on PostgreSQL). Resolves to
        ``True`` once written, ``False`` when the store does not hold the session (nothing written), ``None`` on a store
        error (told to ``on_error``, after the store's own retries)."""
        if record is not None:
            self._check(record)

        def save_turn() -> bool:
            if record is not None:
                self.store.save(record)
            if entries is not None:
                return write_turn(self.store, self.endpoint, session_id, entries, when=when)
            return True

        return self._write(None, save_turn)

    async def flush(self) -> None:
        """Wait until every queued call has run."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def aclose(self) -> None:
        """Run what is queued, then stop the worker thread (the store itself stays open)."""
        if self._closed:
            return
        try:
            await asyncio.shield(self.flush())
        finally:
            self._closed = True
            self._executor.shutdown(wait=False)
