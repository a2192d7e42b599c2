"""Faults beyond a plain cut, against the reference agent on real transports.

Mid-turn drops, refusal windows (proxy resets and server 503s), half-open links (WebSocket ping
timeout, SSE idle timeout), an agent without the status capability, callbacks running before
queued requests, and cookies surviving reconnects.
"""

from __future__ import annotations

import asyncio
import time

import attrs
import pytest

from acp_client import AcpClient, ConnectionLost, RecoveryOutcome, RecoveryPath, State, Timeouts
from acp_client.state import Probe
from acp_client.testing import ReferenceServer
from tests._support import FAST_RETRY, eventually
from tests.e2e._support import Journal, Recorder, RecordingAgent, text_of
from tests.e2e.conftest import Target
from tests.peers.reference import FaultProxyFactory

HTTP_AND_WS = ("ws", "h2c")


def _chunks(recorder: Recorder) -> int:
    return sum(1 for event in recorder.events if event.update.kind == "agent_message_chunk" and not event.replay)


# -- a drop in the middle of a turn ------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_drop_mid_turn_interrupts_and_never_resends(target: Target, version: int) -> None:
    recorder = Recorder()
    async with target.client(recorder, protocol_version=version) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        turn = asyncio.ensure_future(handle.prompt("/slow"))
        await eventually(lambda: _chunks(recorder) >= 2, what="the /slow turn streaming")
        assert handle.turn_running

        await target.proxy.cut()
        with pytest.raises(ConnectionLost) as lost:
            await asyncio.wait_for(turn, 10)
        assert lost.value.may_have_executed
        assert lost.value.method == "session/prompt"
        outcome = await recorder.outcome()

        assert len(recorder.interrupted) == 1
        interrupted = recorder.interrupted[0]
        assert interrupted.session_id == session.session_id
        assert text_of(interrupted.prompt) == "/slow"
        assert interrupted.may_have_executed
        assert outcome.path is RecoveryPath.RESUME and outcome.probe is Probe.ACTIVE
        assert not handle.turn_running
        if version == 2:
            # The snapshot tells the app what happened to the turn: the WebSocket server saw the
            # link die and stopped it; an HTTP connection outlives its TCP links, so it runs on.
            assert outcome.state is not None
            assert outcome.state.state == ("idle" if target.transport == "ws" else "running")
        # A round trip on the new link, then: the interrupted prompt was never sent again.
        await client.list_sessions()
        assert target.agent.count("session/prompt") == 1
        # The app cancels whatever may still run, and the session works again.
        await handle.cancel()
        await eventually(lambda: target.agent.sessions[session.session_id].state == "idle", what="an idle session")
        assert target.agent.count("session/prompt") == 1
        assert (await handle.prompt("after the drop")).stop_reason == "end_turn"
        assert target.agent.count("session/prompt") == 2
        assert handle.transcript.text().endswith("user: after the drop\nagent: echo: after the drop")


# -- refusal windows ----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_refusal_window_then_success(target: Target) -> None:
    recorder = Recorder()
    async with target.client(recorder) as client:
        session = await client.new_session("/work/project")
        await target.proxy.refuse(60)
        await target.proxy.cut()
        # The window closes once three attempts were refused (a count, not a time: load-proof).
        await eventually(lambda: target.proxy.refused_connections >= 3, what="three refused attempts")
        await target.proxy.refuse(0)
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.RESUME
        attempts = [state.attempt for state in recorder.states if state.state is State.RECONNECTING]
        # Every attempt is published once, numbered 1, 2, 3...; states never repeat back to back.
        assert len(attempts) >= 3, [str(s) for s in recorder.states]
        assert attempts == list(range(1, len(attempts) + 1))
        recorder.assert_no_repeated_states()
        assert recorder.kinds()[:2] == [State.CONNECTING, State.CONNECTED]
        assert recorder.kinds()[-2:] == [State.RECOVERING, State.CONNECTED]
        assert set(recorder.kinds()[2:-2]) == {State.RECONNECTING}
        assert (await client.session(session.session_id).prompt("still here")).stop_reason == "end_turn"


@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_server_503_retry_after_is_honoured(target: Target) -> None:
    recorder = Recorder()
    async with target.client(recorder) as client:
        await client.new_session("/work/project")
        since = len(target.server.requests)
        target.server.refuse_connections(0.3)
        await target.proxy.cut()
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.RESUME
        refused = [record for record in target.server.requests[since:] if record.status == 503]
        assert refused, "the server never refused an attempt"
        # Retry-After (1 s, the server's minimum) stretched the wait after the 503.
        waits = [state.retry_in for state in recorder.states if state.state is State.RECONNECTING]
        assert any(wait is not None and wait >= 1.0 for wait in waits), waits
        recorder.assert_no_repeated_states()


# -- half-open links ----------------------------------------------------------------------------------


async def test_websocket_blackhole_detected_by_ping_then_recovers(
    reference_server: ReferenceServer, reference_agent: RecordingAgent, fault_proxy: FaultProxyFactory
) -> None:
    proxy = await fault_proxy(reference_server)
    recorder = Recorder()
    interval = timeout = 0.3
    client = AcpClient(
        proxy.url(reference_server.ws_url),
        retry=FAST_RETRY,
        timeouts=Timeouts(connect=1.0),
        transport_options={"ping_interval": interval, "ping_timeout": timeout, "open_timeout": 1.0},
        callbacks=recorder.callbacks(),
    )
    async with client:
        session = await client.new_session("/work/project")
        await client.session(session.session_id).prompt("hello")
        blackholed_at = time.monotonic()
        await proxy.blackhole()
        try:
            await eventually(lambda: client.state.state is State.RECONNECTING, what="the drop to be detected")
            detected = next(t for t, s in recorder.state_times if s.state is State.RECONNECTING) - blackholed_at
            assert detected <= interval + timeout + 1.0, f"half-open link detected after {detected:.2f}s"
            # While the link stays black, attempts fail too (the handshake times out).
            await eventually(
                lambda: any(s.state is State.RECONNECTING and (s.attempt or 0) >= 2 for s in recorder.states),
                what="a second reconnect attempt",
            )
            assert not recorder.outcomes
        finally:
            await proxy.blackhole(False)
        outcome = await recorder.outcome()
        assert outcome.path is RecoveryPath.RESUME
        assert (await client.session(session.session_id).prompt("back")).stop_reason == "end_turn"
        recorder.assert_no_repeated_states()
        assert reference_agent.count("session/prompt") == 2


async def test_sse_idle_timeout_detects_a_silent_link(
    reference_agent: RecordingAgent, fault_proxy: FaultProxyFactory
) -> None:
    keepalive, idle = 0.1, 0.8
    async with ReferenceServer(reference_agent, keepalive_interval=keepalive) as server:
        proxy = await fault_proxy(server)
        recorder = Recorder()
        client = AcpClient(
            proxy.url(server.http_url),
            retry=FAST_RETRY,
            timeouts=Timeouts(connect=1.0),
            transport_options={"http2": True, "sse_idle_timeout": idle, "connect_timeout": 1.0},
            callbacks=recorder.callbacks(),
        )
        async with client:
            session = await client.new_session("/work/project")
            await client.session(session.session_id).prompt("hello")
            # Keepalives (every 0.1 s) keep an idle link alive well past the idle timeout.
            await asyncio.sleep(2.5 * idle)
            assert recorder.kinds() == [State.CONNECTING, State.CONNECTED]

            blackholed_at = time.monotonic()
            await proxy.blackhole()
            try:
                await eventually(lambda: client.state.state is State.RECONNECTING, what="the drop to be detected")
                detected = next(t for t, s in recorder.state_times if s.state is State.RECONNECTING) - blackholed_at
                assert detected <= idle + 1.0, f"silent SSE link detected after {detected:.2f}s"
            finally:
                await proxy.blackhole(False)
            outcome = await recorder.outcome()
            assert outcome.path is RecoveryPath.RESUME
            assert (await client.session(session.session_id).prompt("back")).stop_reason == "end_turn"
            recorder.assert_no_repeated_states()


# -- an agent without session/status ------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_agent_without_status_capability_falls_back(target: Target, version: int) -> None:
    target.agent.advertise_status = False
    recorder = Recorder()
    async with target.client(recorder, protocol_version=version) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("hello")

        def check_fallback(outcome: RecoveryOutcome) -> None:
            assert outcome.probe is Probe.NOT_PROBED
            assert outcome.planned is RecoveryPath.RESUME
            assert outcome.raw_status is None
            assert any("status not advertised" in note for note in outcome.notes), outcome.notes

        # A network cut: resume (not probed) works, the agent still has the session.
        await target.proxy.cut()
        first = await recorder.outcome(1)
        check_fallback(first)
        assert first.path is RecoveryPath.RESUME
        assert first.steps == (("session/resume", "ok"),)

        # An agent restart: resume still works (the agent loads it from its store, no history).
        target.agent.lose_memory()
        await target.proxy.cut()
        second = await recorder.outcome(2)
        check_fallback(second)
        assert second.path is RecoveryPath.RESUME
        assert handle.session_id == session.session_id

        # An eviction: resume answers -32002, then a new session.
        target.agent.evict(session.session_id)
        await target.proxy.cut()
        third = await recorder.outcome(3)
        check_fallback(third)
        assert third.path is RecoveryPath.NEW_SESSION
        assert third.steps == (("session/resume", "not_found"), ("session/new", "ok"))
        assert handle.session_id == third.session_id != session.session_id
        assert (await handle.prompt("again")).stop_reason == "end_turn"

        # Never a probe: the agent did not advertise it.
        assert target.agent.count("session/status") == 0
        assert target.agent.count("session/resume") == 3
        assert [len(recorder.by_callback[k]) for k in ("resume", "new_session", "replay")] == [2, 1, 0]


@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_v1_agent_with_load_only_replays_without_duplicates(target: Target) -> None:
    target.agent.advertise_status = False
    target.agent.advertise_resume = False
    recorder = Recorder()
    async with target.client(recorder, protocol_version=1) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("hello")
        await target.proxy.cut()
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.REPLAY
        assert outcome.probe is Probe.NOT_PROBED
        assert outcome.steps == (("session/load", "ok"),)
        assert outcome.replayed_updates > 0
        # The agent still had the session: its whole history came again, de-duplicated.
        expected = "user: hello\nagent: echo: hello"
        await eventually(lambda: handle.transcript.text() == expected, what=f"transcript {expected!r}")
        assert (await handle.prompt("more")).stop_reason == "end_turn"
        assert handle.transcript.text() == f"{expected}\nuser: more\nagent: echo: more"
        assert target.agent.count("session/status") == 0
        assert target.agent.count("session/resume") == 0


# -- callbacks before queued requests -----------------------------------------------------------------


@pytest.mark.parametrize("transport", HTTP_AND_WS)
async def test_callbacks_run_before_queued_requests_are_sent(target: Target) -> None:
    journal = Journal()
    target.agent.journal = journal
    recorder = Recorder(journal)
    callbacks = recorder.callbacks()
    record_resume = callbacks.on_resume
    assert record_resume is not None

    async def on_resume(outcome: RecoveryOutcome) -> None:
        journal.add("on_resume start")
        await asyncio.sleep(0.2)  # a slow app callback: queued requests must still wait for it
        record_resume(outcome)
        journal.add("on_resume end")

    callbacks = attrs.evolve(callbacks, on_resume=on_resume)
    client = AcpClient(
        target.url, retry=FAST_RETRY, transport_options=target.options, tls=target.tls, callbacks=callbacks
    )
    async with client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await target.proxy.refuse(60)
        await target.proxy.cut()
        await eventually(lambda: client.state.state is State.RECONNECTING, what="the outage")
        queued_prompt = asyncio.ensure_future(handle.prompt("sent during the outage"))
        queued_status = asyncio.ensure_future(handle.session_status())
        await eventually(lambda: target.proxy.refused_connections >= 1, what="a refused attempt")
        assert not queued_prompt.done() and not queued_status.done()

        await target.proxy.refuse(0)
        client.notify_network_available()
        assert (await asyncio.wait_for(queued_prompt, 10)).stop_reason == "end_turn"
        await asyncio.wait_for(queued_status, 10)

    entries = journal.entries
    last_resume = max(i for i, entry in enumerate(entries) if entry == "agent <- session/resume")
    prompt_at = entries.index("agent <- session/prompt")
    # The recovery's own calls, then the app's callback to its end, then the queued requests.
    assert last_resume < entries.index("on_resume start") < entries.index("on_resume end") < prompt_at
    probes = [i for i, entry in enumerate(entries) if entry == "agent <- session/status"]
    assert len(probes) == 2 and probes[0] < last_resume < entries.index("on_resume end") < probes[1]


# -- cookies across reconnects ------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ("ws", "h2c", "h2-tls", "wss"))
async def test_affinity_cookie_is_sent_back_after_reconnect(target: Target) -> None:
    recorder = Recorder()
    cookie = f"acp_affinity={target.server.instance_id}"
    async with target.client(recorder) as client:
        await client.new_session("/work/project")
        first = target.server.requests[0]
        assert first.header("cookie") is None  # nothing to send before the server set it
        since = len(target.server.requests)

        await target.proxy.cut()
        await recorder.outcome()
        await client.list_sessions()

    after = [record for record in target.server.requests[since:] if record.status != 503]
    assert after, "no request reached the server after the reconnect"
    # The reconnect's first request (WebSocket handshake or initialize POST) and all later ones.
    for record in after:
        assert cookie in (record.header("cookie") or "").split("; "), (record.method, record.headers)
    if target.transport in ("ws", "wss"):
        assert after[0].transport == "websocket"
    else:  # the old link may still try to reopen its session stream (a GET) before it gives up
        posts = [record for record in after if record.method == "POST"]
        assert posts and posts[0].http_version == "2"
