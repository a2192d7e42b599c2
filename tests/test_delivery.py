"""Event delivery: one policy for every app callback — logged with its stack when it raises,
never fatal to the client's tasks; awaitables awaited in event order."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from acp_client import Callbacks, ConnectionState, State, UpdateEvent
from acp_client._codec._jsonrpc import Message
from acp_client._util._delivery import Dispatcher, Feed, call_app
from acp_client.testing import inside
from tests._harness import Harness
from tests._support import eventually


async def drop_and_recover(h: Harness) -> None:
    """Drop the link and run the fake clock until the client recovered (reading the client itself:
    these tests replace the harness's own callbacks)."""
    before = len(h.client.recovery_outcomes)
    h.connector.drop()
    for _ in range(100):
        await h.clock.advance(0.5)
        if len(h.client.recovery_outcomes) > before and h.client.state.state is State.CONNECTED:
            return
    raise AssertionError(f"not recovered: {h.client.state}")


async def test_call_app_returns_sync_and_async_results() -> None:
    async def answer(value: int) -> int:
        return value + 1

    assert await call_app(lambda value: value * 2, 21, what="x") == 42
    assert await call_app(answer, 41, what="x") == 42
    assert await call_app(None, 1, what="x") is None


async def test_call_app_logs_a_raising_callback_with_its_stack(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise ValueError("app bug")

    with caplog.at_level(logging.ERROR, logger="acp_client.callbacks"):
        assert await call_app(broken, what="on_resume") is None
    (record,) = caplog.records
    assert "on_resume" in record.getMessage() and record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)


async def test_call_app_lets_cancellation_through() -> None:
    async def cancelled() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await call_app(cancelled, what="x")


@pytest.mark.parametrize("one", [False, True], ids=["deliver", "deliver_one"])
async def test_the_dispatcher_runs_sync_inline_and_awaits_async_in_order(
    caplog: pytest.LogCaptureFixture, one: bool
) -> None:
    dispatcher = Dispatcher()
    seen: list[str] = []

    def deliver(callback: Any, tag: str) -> None:  # deliver_one: the hot path for updates, same rules
        if one:
            dispatcher.deliver_one(callback, tag, "on_update")
        else:
            dispatcher.deliver(callback, tag, what="on_update")

    async def slow(tag: str) -> None:
        await asyncio.sleep(0.01 if tag == "a" else 0)
        seen.append(tag)

    def broken(tag: str) -> None:
        raise RuntimeError(tag)

    async def broken_async(tag: str) -> None:
        raise RuntimeError(tag)

    with caplog.at_level(logging.ERROR, logger="acp_client.callbacks"):
        deliver(slow, "a")
        deliver(broken, "sync")
        deliver(broken_async, "async")
        deliver(slow, "b")
        deliver(seen.append, "inline")
        assert seen == ["inline"]
        await eventually(lambda: len(seen) == 3, what=lambda: f"three deliveries, saw {seen}")
    assert seen == ["inline", "a", "b"]  # "a" first although it sleeps longer
    assert [r.exc_info[1].args for r in caplog.records if r.exc_info] == [("sync",), ("async",)]
    await dispatcher.aclose()
    deliver(slow, "late")  # after close: dropped, never run (nothing was scheduled: the loop has nothing to run)
    assert not [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    assert "late" not in seen


async def test_callbacks_that_raise_never_stop_the_client(caplog: pytest.LogCaptureFixture) -> None:
    # Before: on_protocol_error and on_notification were called without protection, so one
    # raising killed the connection's reader.
    calls: list[str] = []

    def broken(*args: Any) -> None:
        calls.append(type(args[0]).__name__)
        raise RuntimeError("app bug")

    async def broken_async(*args: Any) -> None:
        raise RuntimeError("async app bug")

    def broken_state(state: ConnectionState) -> None:
        h.record_state(state)  # the harness's own bookkeeping, then the app bug
        broken(state)

    callbacks = Callbacks(
        on_state_change=broken_state,
        on_update=broken_async,
        on_protocol_error=broken,
        on_notification=broken,
        on_resume=broken,
    )
    rewritten = 0

    def rewrite(message: Message) -> Message | None:
        # Turn the first two updates the agent sends into another notification and an answer to
        # a request nobody made (a protocol error).
        nonlocal rewritten
        if isinstance(message, dict) and message.get("method") == "session/update" and rewritten < 2:
            rewritten += 1
            if rewritten == 1:
                return {"jsonrpc": "2.0", "method": "x/other", "params": {}}
            return {"jsonrpc": "2.0", "id": 999, "result": None}
        return message

    h = Harness(client_kwargs={"callbacks": callbacks})
    h.connector.rewrite = rewrite
    with caplog.at_level(logging.ERROR, logger="acp_client.callbacks"):
        async with h:
            session = await h.client.new_session("/work")
            await h.clock.run(session.prompt("hello"))
            await h.clock.settle()
            assert rewritten == 2
            await drop_and_recover(h)
            assert (await h.clock.run(session.prompt("still fine"))).stop_reason == "end_turn"
            assert h.client.state.state is State.CONNECTED
    assert {"ConnectionState", "RecoveryOutcome", "str", "UnexpectedResponse"} <= set(calls)
    assert any(r.exc_info for r in caplog.records)


async def test_async_state_callbacks_see_states_in_order() -> None:
    seen: list[State] = []

    async def on_state(state: ConnectionState) -> None:
        h.record_state(state)
        await asyncio.sleep(0)
        seen.append(state.state)

    h = Harness(client_kwargs={"callbacks": Callbacks(on_state_change=on_state)})
    async with h:
        await h.client.new_session("/work")
        await drop_and_recover(h)
        await h.clock.settle()
    assert seen[:3] == [State.CONNECTING, State.CONNECTED, State.RECONNECTING]
    assert seen[seen.index(State.RECOVERING) + 1] is State.CONNECTED


async def test_update_listeners_sync_and_async_see_every_event() -> None:
    sync_seen: list[UpdateEvent] = []
    async_seen: list[UpdateEvent] = []

    async def listener(event: UpdateEvent) -> None:
        async_seen.append(event)

    async with Harness() as h:
        remove = h.client.add_update_listener(sync_seen.append)
        h.client.add_update_listener(listener)
        session = await h.client.new_session("/work")
        await h.clock.run(session.prompt("hello"))
        await h.clock.settle()
        remove()
    assert sync_seen and [e.update for e in async_seen] == [e.update for e in sync_seen]


async def test_a_feed_hands_over_pushes_in_order_and_wakes_its_waiting_consumer() -> None:
    feed: Feed[int] = Feed()
    feed.push(1)
    await feed.wait()  # something is there: returns at once
    waiting = asyncio.ensure_future(feed.wait())
    feed.items.popleft()
    await asyncio.sleep(0)
    assert not waiting.done()
    feed.push(2)
    feed.push(3)
    await waiting
    assert list(feed.items) == [2, 3]


async def test_a_cancelled_wait_leaves_the_feed_usable() -> None:
    feed: Feed[int] = Feed()
    waiting = asyncio.ensure_future(feed.wait())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    feed.push(1)  # no waiter left to wake: just queued
    await asyncio.wait_for(feed.wait(), 1)
    assert list(feed.items) == [1]


async def test_session_updates_iterates_until_the_session_is_gone() -> None:
    async with Harness() as h:
        created = await h.client.new_session("/work")
        handle = h.client.session(created.session_id)
        seen: list[UpdateEvent] = []

        async def consume() -> None:
            async for event in handle.updates():
                seen.append(event)

        consumer = asyncio.ensure_future(consume())
        await asyncio.sleep(0)  # subscribed before the prompt goes out
        await h.clock.run(handle.prompt("hello"))
        await h.clock.settle()
        assert [e.update for e in seen] == [e.update for e in h.updates] and seen
        tracked = inside(h.client).table.require(created.session_id)
        inside(h.client).table.untrack(created.session_id)  # the iterator ends, and unsubscribes
        await asyncio.wait_for(consumer, 5)
        assert inside(h.client).table.get(created.session_id) is None and not tracked.subscribers
