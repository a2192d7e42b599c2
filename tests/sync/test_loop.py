"""``EventLoopThread`` on its own: start, close, and their races."""

from __future__ import annotations

import asyncio
import threading
import types

import pytest

import acp_client.sync
from acp_client import ClientClosed, RequestTimeout
from acp_client.sync import EventLoopThread, LoopThreadError
from tests._support import eventually_blocking
from tests.sync._support import DEADLINE, _never, on_a_thread_with_the_ident_of


def test_event_loop_thread_on_its_own() -> None:
    loop = EventLoopThread(name="standalone")
    with pytest.raises(ClientClosed):
        loop.submit(_never())  # not started
    with loop:
        assert loop.running and loop.thread is not None and loop.thread.name == "standalone"

        async def add(a: int, b: int) -> int:
            return a + b

        assert loop.run(add(1, 2)) == 3
        with pytest.raises(RequestTimeout):
            loop.run(_never(), timeout=0.05)
        pending = loop.submit(_never())

        async def nested() -> int:
            return loop.run(add(1, 1))

        with pytest.raises(LoopThreadError):
            loop.run(nested())
    assert not loop.running and pending.cancelled()
    with pytest.raises(ClientClosed):
        loop.wait(pending)
    with pytest.raises(ClientClosed):
        loop.start()
    with pytest.raises(ClientClosed):
        loop.submit(_never())


def hold_loop_creation(monkeypatch: pytest.MonkeyPatch, loop_thread: EventLoopThread) -> threading.Event:
    """Make ``loop_thread``'s start hold its event loop's creation until the returned event is set;
    it is set when this (the main) thread next releases the loop thread's lock, so a second
    caller can race the start. Set it yourself to let the start go on."""
    released = threading.Event()
    real_new_event_loop = asyncio.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        released.wait(DEADLINE)
        return real_new_event_loop()

    class SignallingLock:
        def __init__(self) -> None:
            self._inner = threading.Lock()

        def __enter__(self) -> None:
            self._inner.acquire()

        def __exit__(self, *exc: object) -> None:
            self._inner.release()
            if threading.current_thread() is threading.main_thread():
                released.set()

    patched = types.SimpleNamespace(**{**vars(asyncio), "new_event_loop": new_event_loop})
    monkeypatch.setattr(acp_client.sync._loop, "asyncio", patched)
    monkeypatch.setattr(loop_thread, "_lock", SignallingLock())
    return released


def test_a_concurrent_start_returns_only_once_the_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # start() is idempotent and safe from any thread: a second caller racing the first must not
    # get back before the loop exists (its next run() would raise ClientClosed).
    loop_thread = EventLoopThread(name="racing-start")
    second_caller_inside = hold_loop_creation(monkeypatch, loop_thread)  # until the second start() ran
    first = threading.Thread(target=loop_thread.start)
    first.start()
    eventually_blocking(lambda: loop_thread.thread is not None, what="the first start() to create the thread")
    try:
        loop_thread.start()  # the second caller (this thread)
        assert loop_thread.running and loop_thread.loop is not None

        async def answer() -> int:
            return 42

        assert loop_thread.run(answer(), timeout=DEADLINE) == 42
    finally:
        second_caller_inside.set()
        first.join(DEADLINE)
        loop_thread.close()


def test_stop_during_start_ends_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # close() racing a start() whose thread exists but whose loop is not set up yet must still end
    # that thread (it used to return at once, and the loop then ran forever: a leaked thread).
    loop_thread = EventLoopThread(name="stopped-while-starting")
    stop_called = hold_loop_creation(monkeypatch, loop_thread)  # until close() has looked
    starter = threading.Thread(target=loop_thread.start)
    starter.start()
    eventually_blocking(lambda: loop_thread.thread is not None, what="start() to create the thread")
    thread = loop_thread.thread
    assert thread is not None
    try:
        loop_thread.close(join_timeout=DEADLINE)
        thread.join(2.0)
        assert not thread.is_alive(), "the loop thread outlived close()"
        assert not loop_thread.running
    finally:
        stop_called.set()
        starter.join(DEADLINE)
        loop = loop_thread.loop
        if thread.is_alive() and loop is not None:  # do not leak it into the next tests
            loop.call_soon_threadsafe(loop.stop)
            thread.join(DEADLINE)


def test_a_thread_with_the_ended_loop_threads_ident_is_not_the_loop_thread() -> None:
    # The OS gives an ended thread's ident to the next thread it starts: a host thread started
    # after close() must not be taken for the loop thread (close() from it raised LoopThreadError).
    loop_thread = EventLoopThread(name="recycled")
    with loop_thread:
        pass
    ended = loop_thread.thread
    assert ended is not None and not ended.is_alive()
    assert on_a_thread_with_the_ident_of(ended, loop_thread.in_loop_thread) is False
    assert on_a_thread_with_the_ident_of(ended, loop_thread.close) is None  # idempotent, from any thread
    with pytest.raises(ClientClosed):  # not LoopThreadError
        on_a_thread_with_the_ident_of(ended, lambda: loop_thread.run(_never()))
