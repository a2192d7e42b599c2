"""The supervisor over the in-memory transport, driven by a fake clock (issue 3): the dead link closed,
requests queued during an outage, backoff, suspension, giving up, the state-change stream."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from acp_client import (
    Callbacks,
    ClientClosed,
    ClientSuspended,
    ConnectionLost,
    QueueFull,
    QueueOptions,
    RecoveryPath,
    RetryPolicy,
    State,
)
from acp_client.state import Probe
from acp_client.testing import inside
from tests._harness import FAST_RETRY, VERSIONS, Harness, assert_legal


@pytest.mark.parametrize("retry", [FAST_RETRY, None])
async def test_the_dead_link_is_closed_after_a_drop(retry: RetryPolicy | None) -> None:
    # Its transport may still hold resources: a stdio agent that closed stdout but lives on, an
    # HTTP client's pooled sockets. Nothing else ever closes it (reconnecting off: not even aclose).
    h = Harness(retry=retry)
    closed: list[object] = []
    connect = h.connector.connect

    async def recording_connect() -> Any:
        transport = await connect()
        close = transport.aclose

        async def aclose() -> None:
            closed.append(transport)
            await close()

        transport.aclose = aclose  # type: ignore[method-assign]
        return transport

    h.connector.connect = recording_connect  # type: ignore[method-assign]
    async with h:
        await h.client.new_session("/work")
        h.connector.drop()
        await h.clock.settle()
        if retry is not None:
            await h.until_connected()
        assert closed == h.connector.transports[:1]


async def test_status_close_and_cancel_queued_during_an_outage_use_the_recovered_session_id() -> None:
    async with Harness(protocol_version=1) as h:
        session = (await h.client.new_session("/work")).record
        h.connector.refuse()
        h.connector.drop()
        h.agent.evict(session.session_id)  # recovery will make a new session
        await h.clock.settle()
        status = asyncio.ensure_future(h.client.session_status(session.session_id))
        cancel = asyncio.ensure_future(h.client.cancel(session.session_id))
        close = asyncio.ensure_future(h.client.close_session(session.session_id))
        await h.clock.settle()
        h.connector.accept()
        await h.until_connected()
        await h.clock.run(asyncio.gather(cancel, close))
        new_id = h.outcomes[-1].session_id
        assert new_id != session.session_id
        probed = await status
        assert probed.session_id == new_id and probed.status is Probe.ACTIVE
        sent = [m for m in h.connector.transports[-1].sent if m.get("method") in ("session/cancel", "session/close")]
        assert [m["params"]["sessionId"] for m in sent] == [new_id, new_id]
        assert h.client.sessions == []


async def test_closing_the_client_from_a_recovery_callback_leaves_no_live_link() -> None:
    async with Harness(protocol_version=1) as h:

        async def give_up(outcome: Any) -> None:
            await h.client.aclose()

        h.set_callbacks(on_resume=give_up)
        await h.client.new_session("/work")
        h.connector.drop()
        await h.clock.settle()
        assert h.client.state.state is State.CLOSED
        assert inside(h.client).supervisor.connection is None
        assert h.connector.live_links == 0


async def test_callbacks_run_before_queued_requests_are_sent() -> None:
    async with Harness(protocol_version=1) as h:
        session = await h.client.new_session("/work")

        async def on_resume(outcome: Any) -> None:
            h.log.append("callback-start")
            await h.clock.sleep(5.0)  # an app callback that takes a while
            h.log.append("callback-end")

        h.set_callbacks(on_resume=on_resume)
        h.connector.drop()
        await h.clock.settle()
        assert h.client.state.state is not State.CONNECTED
        queued = asyncio.ensure_future(h.client.list_sessions())
        status = asyncio.ensure_future(h.client.session_status(session.session_id))
        await h.clock.settle()
        await h.until_connected()
        page = await h.clock.run(queued)
        await h.clock.run(status)
        assert session.session_id in [s.session_id for s in page.sessions]
        assert h.log.index("callback-end") < h.log.index("state:connected", h.log.index("callback-start"))
        later = [m.get("method") for m in h.connector.transports[-1].sent if isinstance(m, dict)]
        # probe + resume first, then the queued requests, in the order they were made.
        assert later[:3] == ["initialize", "session/status", "session/resume"]
        assert later[3:] == ["session/list", "session/status"]


async def test_queue_limits_and_fail_fast() -> None:
    async with Harness(client_kwargs={"queue": QueueOptions(max_size=1, max_age=30.0)}) as h:
        h.connector.refuse(None)
        h.connector.drop()
        await h.clock.settle()
        first = asyncio.ensure_future(h.client.list_sessions())
        await h.clock.settle()
        with pytest.raises(QueueFull):
            await h.client.list_sessions()
        await h.clock.advance(30.0)
        with pytest.raises(ConnectionLost) as info:
            await first
        assert not info.value.may_have_executed
    async with Harness(client_kwargs={"queue": QueueOptions(enabled=False)}) as h:
        h.connector.refuse(None)
        h.connector.drop()
        await h.clock.settle()
        with pytest.raises(ConnectionLost) as info:
            await h.client.list_sessions()
        assert not info.value.may_have_executed


async def test_status_and_list_are_retried_transparently() -> None:
    async with Harness(protocol_version=1) as h:
        session = await h.client.new_session("/work")
        h.agent.stall(True)
        status = asyncio.ensure_future(h.client.session_status(session.session_id))
        listing = asyncio.ensure_future(h.client.list_sessions())
        await h.clock.settle()
        h.agent.stall(False)
        h.connector.drop()
        record = await h.clock.run(status)
        page = await h.clock.run(listing)
        assert record.status is Probe.ACTIVE
        assert [s.session_id for s in page.sessions] == [session.session_id]


@pytest.mark.parametrize("version", VERSIONS)
async def test_prompt_interrupted_by_a_drop_is_reported_and_never_resent(version: int) -> None:
    async with Harness(protocol_version=version, chunk_delay=1.0, chunks_per_prompt=10) as h:
        session = (await h.client.new_session("/work")).record
        handle = h.client.session(session.session_id)
        turn = asyncio.ensure_future(handle.prompt("a long answer please"))
        await h.clock.advance(3.5)
        assert not turn.done()
        h.connector.drop()
        with pytest.raises(ConnectionLost) as info:
            await h.clock.run(turn)
        assert info.value.may_have_executed
        assert [t.session_id for t in h.interrupted] == [session.session_id]
        assert h.interrupted[0].prompt[0].text == "a long answer please"
        await h.until_connected()
        await h.clock.advance(60.0)
        assert h.connector.sent_methods().count("session/prompt") == 1
        # The session is usable again.
        result = await h.clock.run(handle.prompt("short"))
        assert result.stop_reason == "end_turn"


async def test_every_pending_request_resolves_once_when_the_link_dies() -> None:
    async with Harness(retry=None) as h:
        session = await h.client.new_session("/work")
        h.agent.stall(True)
        calls = [asyncio.ensure_future(h.client.session(session.session_id).prompt(f"p{i}")) for i in range(1)]
        calls += [asyncio.ensure_future(h.client.request("_custom/echo", {"i": i})) for i in range(3)]
        await h.clock.settle()
        h.connector.drop()
        for call in calls:
            with pytest.raises(ConnectionLost):
                await h.clock.run(call)
        assert h.client.state.state is State.FAILED
        with pytest.raises(ClientClosed):
            await h.client.list_sessions()


async def test_refusals_then_success_with_backoff_on_the_clock() -> None:
    async with Harness() as h:
        await h.client.new_session("/work")
        h.connector.refuse(3)
        start = h.clock.monotonic()
        h.connector.drop()
        await h.until_connected()
        attempts = [s for s in h.states if s.state is State.RECONNECTING]
        assert [(s.attempt, s.retry_in) for s in attempts] == [(1, 0.0), (2, 1.0), (3, 2.0), (4, 4.0)]
        assert h.clock.monotonic() - start == 7.0
        assert_legal(h)


async def test_notify_network_available_skips_the_wait() -> None:
    async with Harness(retry=RetryPolicy(initial_delay=100.0, max_delay=100.0, jitter=False, suspend_after=None)) as h:
        await h.client.new_session("/work")
        h.connector.refuse(1)
        h.connector.drop()
        await h.clock.settle()
        await h.clock.advance(1.0)  # attempt 1 failed; now waiting 100 s
        assert h.client.state.state is State.RECONNECTING and h.client.state.retry_in == 100.0
        h.client.notify_network_available()
        await h.clock.settle()
        assert h.client.state.state is State.CONNECTED
        assert h.clock.monotonic() == 1.0


async def test_backoff_resets_only_after_a_stable_connection() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=64.0, jitter=False, reset_after=30.0, suspend_after=None)
    async with Harness(retry=policy) as h:
        await h.client.new_session("/work")
        h.connector.refuse(2)
        await h.drop_and_recover()  # attempts 1 (0 s), 2 (1 s), 3 (2 s)
        h.states.clear()
        await h.drop_and_recover()  # up only briefly: attempt 1 of this outage, the backoff continues (4 s)
        assert [(s.attempt, s.retry_in) for s in h.states if s.state is State.RECONNECTING] == [(1, 4.0)]
        await h.clock.advance(31.0)
        h.states.clear()
        await h.drop_and_recover()  # stayed up 31 s: back to attempt 1, immediate
        assert [(s.attempt, s.retry_in) for s in h.states if s.state is State.RECONNECTING] == [(1, 0.0)]


async def test_suspended_then_recovers() -> None:
    policy = RetryPolicy(initial_delay=10.0, max_delay=10.0, jitter=False, suspend_after=30.0, suspended_delay=60.0)
    async with Harness(retry=policy) as h:
        await h.client.new_session("/work")
        h.connector.refuse(None)
        h.connector.drop()
        await h.clock.settle()
        queued = asyncio.ensure_future(h.client.list_sessions())
        await h.clock.advance(31.0)
        assert h.client.state.state is State.SUSPENDED
        with pytest.raises(ClientSuspended):
            await queued
        with pytest.raises(ClientSuspended):
            await h.client.list_sessions()
        waits = [s.retry_in for s in h.states if s.state is State.SUSPENDED]
        await h.clock.advance(60.0)
        assert 60.0 in [s.retry_in for s in h.states if s.state is State.SUSPENDED]
        h.connector.accept()
        await h.until_connected()
        assert h.outcomes[-1].path is RecoveryPath.RESUME
        assert waits
        assert_legal(h)


async def test_suspend_deadline_passing_during_a_recovery_does_not_strand_the_client() -> None:
    # The suspend timer fires while a (slow) recovery is running on a live link: when the
    # recovery succeeds the client must be connected and serving requests again.
    policy = RetryPolicy(initial_delay=1.0, max_delay=1.0, jitter=False, suspend_after=5.0)

    async def slow_on_resume(outcome: Any) -> None:
        await h.clock.sleep(10.0)

    async with Harness(retry=policy, client_kwargs={"callbacks": Callbacks(on_resume=slow_on_resume)}) as h:
        await h.client.new_session("/work")
        h.connector.drop()
        await h.until_connected(limit=60.0)
        assert h.client.state.state is State.CONNECTED
        assert (await h.clock.run(h.client.list_sessions())).sessions
        assert_legal(h)


async def test_suspend_deadline_passed_during_a_recovery_that_then_drops_suspends() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=1.0, jitter=False, suspend_after=5.0, suspended_delay=60.0)

    async def on_resume(outcome: Any) -> None:
        await h.clock.sleep(7.0)  # past the suspend deadline, on a live link...
        h.connector.refuse(None)
        h.connector.drop()  # ...which then drops before the recovery is over
        await h.clock.sleep(0.5)

    async with Harness(retry=policy, client_kwargs={"callbacks": Callbacks(on_resume=on_resume)}) as h:
        await h.client.new_session("/work")
        h.connector.drop()
        await h.clock.advance(8.0)
        assert h.client.state.state is State.SUSPENDED
        with pytest.raises(ClientSuspended):
            await h.client.list_sessions()
        h.set_callbacks(on_resume=None)
        h.connector.accept()
        await h.until_connected()
        assert_legal(h)


async def test_exhausted_policy_fails_everything() -> None:
    async with Harness(retry=RetryPolicy(initial_delay=1.0, jitter=False, max_attempts=3, suspend_after=None)) as h:
        await h.client.new_session("/work")
        h.connector.refuse(None)
        h.connector.drop()
        await h.clock.settle()
        queued = asyncio.ensure_future(h.client.list_sessions())
        await h.clock.advance(10.0)
        assert h.client.state.state is State.FAILED
        with pytest.raises(ClientClosed):
            await queued
        assert h.connector.refused == 3


async def test_reconnects_are_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="acp_client.reconnect")
    async with Harness() as h:
        await h.client.new_session("/work")
        h.connector.refuse(1)
        h.connector.drop("cable unplugged")
        await h.until_connected()
    messages = [
        r.getMessage() for r in caplog.records if r.name == "acp_client.reconnect" and r.levelno == logging.INFO
    ]
    assert any("cable unplugged" in m and "in 0.00s" in m and "attempt 1" in m for m in messages)
    assert any("attempt 2" in m and "in 1.00s" in m and "refused" in m for m in messages)


async def test_state_change_stream() -> None:
    async with Harness() as h:
        seen: list[State] = []

        async def watch() -> None:
            async for state in h.client.state_changes():
                seen.append(state.state)
                if state.state is State.CLOSED:
                    return

        watcher = asyncio.ensure_future(watch())
        await h.clock.settle()
        await h.client.new_session("/work")
        await h.drop_and_recover()
        await h.client.aclose()
        await asyncio.wait_for(watcher, 5)
        assert seen == [State.RECONNECTING, State.RECOVERING, State.CONNECTED, State.CLOSED]


async def test_failed_first_connect_raises_and_fails() -> None:
    h = Harness()
    h.connector.refuse(None)
    with pytest.raises(Exception, match="refused"):
        await h.client.connect()
    assert h.client.state.state is State.FAILED
