"""Reconnect and recovery over the in-memory transport, driven by a fake clock (issue 3)."""

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
    Probe,
    QueueFull,
    QueueOptions,
    RecoveryFailed,
    RecoveryPath,
    RetryPolicy,
    SessionStatus,
    State,
    _recoverer,
)
from acp_client.state import LEGAL_TRANSITIONS

from ._harness import FAST_RETRY, Harness

VERSIONS = [1, 2]


def assert_legal(h: Harness) -> None:
    previous = State.CONNECTING
    last = None
    for state in h.states:
        assert state != last, f"state repeated: {state}"
        if last is not None:
            assert state.state in LEGAL_TRANSITIONS[previous], f"{previous} -> {state}"
        previous, last = state.state, state


@pytest.mark.parametrize("version", VERSIONS)
async def test_resume_path(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        session = (await h.client.new_session("/work")).record
        handle = h.client.session(session.session_id)
        await h.clock.run(handle.prompt("hello"))
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME and outcome.planned is RecoveryPath.RESUME
        assert outcome.probe is Probe.ACTIVE and outcome.raw_status == "active"
        assert outcome.continuity and outcome.session_id == outcome.previous_session_id == session.session_id
        assert outcome.steps == (("session/resume", "ok"),)
        if version == 2:
            assert outcome.state is not None and outcome.state.state == "idle"
        else:
            assert outcome.state is None
        result = await h.clock.run(handle.prompt("again"))
        assert result.stop_reason == "end_turn"
        assert [m.text for m in handle.transcript.messages] == ["hello", "echo: hello", "again", "echo: again"]
        assert [s.state for s in h.states] == [
            State.CONNECTING,
            State.CONNECTED,
            State.RECONNECTING,
            State.RECOVERING,
            State.CONNECTED,
        ]
        assert_legal(h)


@pytest.mark.parametrize("version", VERSIONS)
async def test_replay_path_marks_replay_and_rebuilds_without_duplicates(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        session = (await h.client.new_session("/work")).record
        handle = h.client.session(session.session_id)
        await h.clock.run(handle.prompt("one"))
        await h.clock.run(handle.prompt("two"))
        before = [(m.role, m.text) for m in handle.transcript.messages]
        live_updates = len(h.updates)
        h.agent.restart()
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.probe is Probe.INACTIVE
        assert outcome.continuity and outcome.session_id == session.session_id
        expected_step = "session/load" if version == 1 else "session/resume+replayFrom"
        assert outcome.steps == ((expected_step, "ok"),)
        replayed = h.updates[live_updates:]
        assert replayed and all(event.replay for event in replayed)
        assert outcome.replayed_updates == len(replayed)
        assert [(m.role, m.text) for m in handle.transcript.messages] == before
        await h.clock.run(handle.prompt("three"))
        assert [m.text for m in handle.transcript.messages][-2:] == ["three", "echo: three"]
        assert not h.updates[-1].replay
        sent = h.connector.sent_methods()
        assert sent.count("session/load" if version == 1 else "session/resume") == 1


@pytest.mark.parametrize("version", VERSIONS)
async def test_new_session_path(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        # The record at creation (a Session value); the handle would follow the renamed session.
        session = (await h.client.new_session("/work", additional_directories=["/extra"])).record
        handle = h.client.session(session.session_id)
        await h.clock.run(handle.prompt("hello"))
        h.agent.evict(session.session_id)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.probe is Probe.NOT_FOUND
        assert not outcome.continuity
        assert outcome.previous_session_id == session.session_id != outcome.session_id
        assert handle.session_id == outcome.session_id
        assert h.client.session(session.session_id).session_id == outcome.session_id  # old id still resolves
        news = [m for m in h.connector.sent() if m.get("method") == "session/new"]
        assert news[-1]["params"]["cwd"] == "/work"
        assert news[-1]["params"].get("additionalDirectories") == ["/extra"]
        assert len(handle.transcript) == 0
        await h.clock.run(handle.prompt("fresh"))
        assert handle.transcript.text().endswith("echo: fresh")


@pytest.mark.parametrize("version", VERSIONS)
async def test_without_status_capability_no_probe_is_sent(version: int) -> None:
    async with Harness(protocol_version=version, advertise_status=False) as h:
        session = await h.client.new_session("/work")
        outcome = await h.drop_and_recover()
        assert outcome.probe is Probe.NOT_PROBED and outcome.path is RecoveryPath.RESUME
        assert "session/status" not in h.connector.sent_methods()
        assert outcome.notes and "fallback" in outcome.notes[0]
        # Fallback: resume fails with -32002 -> new session.
        h.agent.evict(session.session_id)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.NEW_SESSION
        assert outcome.steps == (("session/resume", "not_found"), ("session/new", "ok"))
        assert "session/status" not in h.connector.sent_methods()


async def test_v1_no_resume_no_status_falls_back_to_load() -> None:
    async with Harness(protocol_version=1, advertise_status=False, advertise_resume=False) as h:
        await h.client.new_session("/work")
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.steps == (("session/load", "ok"),)
        assert "session/resume" not in h.connector.sent_methods()


async def test_active_without_resume_degrades_to_load_and_says_so() -> None:
    async with Harness(protocol_version=1, advertise_resume=False) as h:
        await h.client.new_session("/work")
        outcome = await h.drop_and_recover()
        assert outcome.planned is RecoveryPath.RESUME and outcome.path is RecoveryPath.REPLAY
        assert any("session/load" in note for note in outcome.notes)
        assert "session/resume" not in h.connector.sent_methods()


async def test_minus_32002_from_a_later_step_lands_on_a_new_session() -> None:
    async with Harness(protocol_version=1) as h:
        session = (await h.client.new_session("/work")).record

        def evict_after_probe(context: Any) -> None:
            h.agent.evict(context.session_id)  # the snapshot said active; it is gone by the next call

        h.set_callbacks(decide_recovery=evict_after_probe)
        outcome = await h.drop_and_recover()
        assert outcome.probe is Probe.ACTIVE
        assert outcome.steps == (("session/resume", "not_found"), ("session/new", "ok"))
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.session_id != session.session_id


async def test_unknown_status_value_is_handled_like_inactive() -> None:
    async with Harness(protocol_version=1) as h:
        await h.client.new_session("/work")
        h.agent._status_word = lambda in_memory: "hibernating"  # type: ignore[method-assign]
        outcome = await h.drop_and_recover()
        assert outcome.probe is Probe.INACTIVE and outcome.raw_status == "hibernating"
        assert outcome.path is RecoveryPath.REPLAY


async def test_sdk_vocabulary_open_saved() -> None:
    async with Harness(protocol_version=2, status_vocabulary="sdk") as h:
        session = await h.client.new_session("/work")
        record = await h.client.session_status(session.session_id)
        assert record.status is SessionStatus.ACTIVE and record.raw_status == "open"
        h.agent.restart()
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.raw_status == "saved"


@pytest.mark.parametrize("state", [None, "garbage", {"nope": 1}, {"state": 7}])
async def test_v2_missing_or_malformed_state_is_not_read_as_idle(state: Any) -> None:
    async with Harness(protocol_version=2) as h:
        await h.client.new_session("/work")

        def strip_state(message: Any) -> Any:
            result = message.get("result") if isinstance(message, dict) else None
            if isinstance(result, dict) and "status" in result and "state" in result:
                if state is None:
                    del result["state"]
                else:
                    result["state"] = state
            return message

        h.connector.rewrite = strip_state
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME
        assert outcome.state is None


async def test_decision_hook_overrides_and_abandons() -> None:
    async with Harness(protocol_version=1) as h:
        first = (await h.client.new_session("/a")).record
        second = (await h.client.new_session("/b")).record
        seen: list[Any] = []

        def decide(context: Any) -> RecoveryPath | None:
            seen.append(context)
            if context.session_id == first.session_id:
                return RecoveryPath.NEW_SESSION
            if context.session_id == second.session_id:
                return RecoveryPath.ABANDON
            return None

        h.set_callbacks(decide_recovery=decide)
        h.connector.drop()
        await h.until_connected()
        by_prev = {o.previous_session_id: o for o in h.outcomes}
        assert by_prev[first.session_id].path is RecoveryPath.NEW_SESSION
        assert by_prev[first.session_id].planned is RecoveryPath.NEW_SESSION
        assert by_prev[second.session_id].path is RecoveryPath.ABANDON
        assert by_prev[second.session_id].session_id is None
        assert {c.proposed for c in seen[:2]} == {RecoveryPath.RESUME}
        assert all(c.capabilities == {"status": True, "resume": True, "load": True} for c in seen)
        assert h.client.session(second.session_id).abandoned
        assert len(h.client.sessions) == 1
        # An abandoned session is not recovered again.
        h.connector.drop()
        await h.until_connected()
        assert [o.previous_session_id for o in h.outcomes[2:]] == [h.client.sessions[0].session_id]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_prompt_queued_for_a_session_recovery_abandons_fails_unsent(version: int) -> None:
    async with Harness(
        protocol_version=version,
        client_kwargs={"callbacks": Callbacks(decide_recovery=lambda context: RecoveryPath.ABANDON)},
    ) as h:
        session = await h.client.new_session("/work")
        h.connector.refuse()
        h.connector.drop()
        await h.clock.settle()
        queued = asyncio.ensure_future(h.client.prompt(session.session_id, "hello"))
        await h.clock.settle()
        assert not queued.done()
        h.connector.accept()
        await h.until_connected()
        with pytest.raises(RecoveryFailed):
            await h.clock.run(queued)
        with pytest.raises(RecoveryFailed):  # and so does a prompt made after the recovery
            await h.client.session(session.session_id).prompt("again")
        assert h.connector.sent_methods().count("session/prompt") == 0  # never sent unattached


async def test_recovery_outcomes_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # A long-lived client on a flaky network must not keep every outcome (and the error and
    # traceback each may hold) forever.
    monkeypatch.setattr(_recoverer, "MAX_OUTCOMES", 3)
    async with Harness(protocol_version=1) as h:
        await h.client.new_session("/work")
        for _ in range(5):
            await h.drop_and_recover()
        assert h.client.recovery_outcomes == h.outcomes[-3:]


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
        assert probed.session_id == new_id and probed.status is SessionStatus.ACTIVE
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
        assert h.client._supervisor.connection is None
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
        assert record.status is SessionStatus.ACTIVE
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
        await h.drop_and_recover()  # up only briefly: backoff continues at attempt 4
        assert [s.attempt for s in h.states if s.state is State.RECONNECTING] == [4]
        assert h.states[0].retry_in == 4.0
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


async def test_sessions_recover_with_bounded_concurrency() -> None:
    async with Harness(client_kwargs={"recovery_concurrency": 2}) as h:
        ids = [(await h.client.new_session(f"/w{i}")).session_id for i in range(5)]
        h.agent.restart()
        h.connector.drop()
        await h.until_connected()
        assert sorted(o.previous_session_id for o in h.outcomes) == sorted(ids)
        assert {o.path for o in h.outcomes} == {RecoveryPath.REPLAY}


async def test_session_closed_by_app_is_not_recovered() -> None:
    async with Harness() as h:
        kept = await h.client.new_session("/a")
        gone = await h.client.new_session("/b")
        await h.client.close_session(gone.session_id)
        await h.drop_and_recover()
        assert [o.previous_session_id for o in h.outcomes] == [kept.session_id]


async def test_failed_first_connect_raises_and_fails() -> None:
    h = Harness()
    h.connector.refuse(None)
    with pytest.raises(Exception, match="refused"):
        await h.client.connect()
    assert h.client.state.state is State.FAILED


_ = FAST_RETRY


async def test_a_recovery_callback_may_await_requests() -> None:
    """A callback's own requests go to the recovering connection instead of waiting for the
    recovery that is waiting for the callback."""
    async with Harness() as h:
        session = await h.client.new_session("/work")
        h.agent.evict(session.session_id)
        seen: list[Any] = []

        async def on_new_session(outcome: Any) -> None:
            page = await h.client.list_sessions()
            seen.append([s.session_id for s in page.sessions])
            seen.append((await h.client.prompt(outcome.session_id, "catch up")).stop_reason)

        h.set_callbacks(on_new_session=on_new_session)
        h.connector.drop()
        await h.until_connected(limit=30.0)
        assert seen == [[h.client.sessions[0].session_id], "end_turn"]
        assert h.clock.monotonic() < 30.0
