"""Harder recovery situations against the reference agent on real transports.

Several sessions recovering on different paths in one reconnect, a second drop while recovering
(with the app's decision hook in play), an agent→client request cut off by a drop, fail-fast
mode, and a long outage that suspends the client before it recovers.
"""

from __future__ import annotations

import asyncio

import pytest

from acp_client import (
    ClientHandlers,
    ClientSuspended,
    ConnectionLost,
    QueueOptions,
    RecoveryContext,
    RecoveryPath,
    RetryPolicy,
    State,
)
from acp_client.state import Probe
from acp_client.types import RequestPermissionRequest, SelectedPermissionOutcome
from tests._support import eventually
from tests.e2e._support import Recorder
from tests.e2e.conftest import Target

HTTP_AND_WS = ("ws", "h2c")


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_sessions_recover_on_different_paths_in_one_reconnect(target: Target, version: int) -> None:
    recorder = Recorder()
    async with target.client(recorder, protocol_version=version) as client:
        stored = client.session((await client.new_session("/work/stored")).session_id)
        evicted = client.session((await client.new_session("/work/evicted")).session_id)
        await stored.prompt("kept on disk")
        await evicted.prompt("forgotten")
        target.agent.lose_memory()  # stored and evicted are now only in the store (the link stays up)
        live = client.session((await client.new_session("/work/live")).session_id)
        await live.prompt("in memory")
        evicted_id = evicted.session_id
        target.agent.evict(evicted_id)

        await target.proxy.cut()
        await recorder.outcome(3)

        paths = {outcome.previous_session_id: outcome.path for outcome in recorder.outcomes}
        assert paths == {
            stored.session_id: RecoveryPath.REPLAY,
            evicted_id: RecoveryPath.NEW_SESSION,
            live.session_id: RecoveryPath.RESUME,
        }
        assert [len(recorder.by_callback[k]) for k in ("resume", "replay", "new_session")] == [1, 1, 1]
        assert target.agent.count("session/status") == 3
        assert evicted.session_id != evicted_id
        assert target.agent.params_of("session/new")[-1]["cwd"] == "/work/evicted"
        # All three work at once afterwards, each with its own history.
        results = await asyncio.gather(stored.prompt("a"), evicted.prompt("b"), live.prompt("c"))
        assert [result.stop_reason for result in results] == ["end_turn"] * 3
        await eventually(
            lambda: (
                stored.transcript.text() == "user: kept on disk\nagent: echo: kept on disk\nuser: a\nagent: echo: a"
            ),
            what=lambda: f"the stored session's transcript, got {stored.transcript.text()!r}",
        )
        assert evicted.transcript.segments[-1].text() == "user: b\nagent: echo: b"  # the new session holds only b
        assert live.transcript.text() == "user: in memory\nagent: echo: in memory\nuser: c\nagent: echo: c"


@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_drop_while_recovering_starts_over_and_reports_once(target: Target) -> None:
    recorder = Recorder()
    contexts: list[RecoveryContext] = []
    hold = asyncio.Event()

    async def decide(context: RecoveryContext) -> None:
        contexts.append(context)
        if len(contexts) == 1:
            await hold.wait()  # the app thinks; meanwhile the new link dies

    async with target.client(recorder, decide_recovery=decide) as client:
        session = await client.new_session("/work/project")
        await target.proxy.cut()
        await eventually(lambda: contexts, what="the decision hook")
        assert client.state.state is State.RECOVERING
        assert contexts[0].probe is Probe.ACTIVE and contexts[0].proposed is RecoveryPath.RESUME
        assert contexts[0].capabilities == {"status": True, "resume": True, "load": True}

        await target.proxy.cut()
        hold.set()
        outcome = await recorder.outcome()

        assert len(contexts) == 2
        assert recorder.outcomes == [outcome]
        assert outcome.path is RecoveryPath.RESUME
        assert target.agent.count("session/status") == 2
        kinds = recorder.kinds()
        assert kinds[:3] == [State.CONNECTING, State.CONNECTED, State.RECONNECTING]
        assert kinds[-2:] == [State.RECOVERING, State.CONNECTED]
        assert kinds.count(State.RECOVERING) == 2
        recorder.assert_no_repeated_states()
        assert (await client.session(session.session_id).prompt("still here")).stop_reason == "end_turn"


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_pending_permission_request_is_cancelled_by_a_drop(target: Target, version: int) -> None:
    asked: list[RequestPermissionRequest] = []
    cancelled = asyncio.Event()

    async def permission(request: RequestPermissionRequest) -> SelectedPermissionOutcome:
        asked.append(request)
        try:
            await asyncio.Event().wait()  # the user never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    recorder = Recorder()
    handlers = ClientHandlers(permission=permission)
    async with target.client(recorder, protocol_version=version, handlers=handlers) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        turn = asyncio.ensure_future(handle.prompt("/permission"))
        await eventually(lambda: asked, what="the permission request")
        assert asked[0].session_id == session.session_id

        await target.proxy.cut()
        await asyncio.wait_for(cancelled.wait(), 10)  # the app's handler is told it is moot
        with pytest.raises(ConnectionLost):
            await asyncio.wait_for(turn, 10)
        outcome = await recorder.outcome()
        assert outcome.path is RecoveryPath.RESUME
        assert len(recorder.interrupted) == 1
        assert len(asked) == 1  # nothing re-asked the user


@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_fail_fast_mode_refuses_requests_during_the_outage(target: Target) -> None:
    recorder = Recorder()
    async with target.client(recorder, queue=QueueOptions(enabled=False)) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await target.proxy.refuse(60)
        await target.proxy.cut()
        await eventually(lambda: client.state.state is State.RECONNECTING, what="the outage")

        with pytest.raises(ConnectionLost) as lost:
            await handle.prompt("now")
        assert not lost.value.may_have_executed
        assert not handle.turn_running

        await target.proxy.refuse(0)
        client.notify_network_available()
        await recorder.outcome()
        assert (await handle.prompt("later")).stop_reason == "end_turn"
        assert target.agent.count("session/prompt") == 1


@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_long_outage_suspends_then_recovers(target: Target) -> None:
    policy = RetryPolicy(initial_delay=0.05, max_delay=0.2, max_elapsed=20, suspend_after=0.4, suspended_delay=0.1)
    recorder = Recorder()
    async with target.client(recorder, retry=policy) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await target.proxy.refuse(60)
        await target.proxy.cut()
        await eventually(lambda: client.state.state is State.RECONNECTING, what="the outage")
        queued = asyncio.ensure_future(handle.session_status())

        await eventually(lambda: client.state.state is State.SUSPENDED, what="the suspension")
        with pytest.raises(ClientSuspended):
            await asyncio.wait_for(queued, 10)  # what waited in the queue is failed, not kept forever
        with pytest.raises(ClientSuspended):
            await handle.prompt("while suspended")  # and new requests fail fast
        await eventually(
            lambda: sum(1 for s in recorder.states if s.state is State.SUSPENDED) >= 2,
            what="retries to go on while suspended",
        )

        await target.proxy.refuse(0)
        outcome = await recorder.outcome()
        assert outcome.path is RecoveryPath.RESUME
        kinds = recorder.kinds()
        assert kinds[-2:] == [State.RECOVERING, State.CONNECTED]
        # Once suspended, every further attempt is a suspended state until the recovery.
        assert set(kinds[kinds.index(State.SUSPENDED) : -2]) == {State.SUSPENDED}
        recorder.assert_no_repeated_states()
        assert (await handle.prompt("back")).stop_reason == "end_turn"
        assert target.agent.count("session/prompt") == 1
