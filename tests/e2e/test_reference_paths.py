"""The three recovery paths against the reference agent, through a fault proxy, on real transports.

Each test opens a session, runs a turn, injects one fault, and checks the whole recovery: the
probe, the wire calls on the new connection, the callback, the handle, the transcript, and that
the session works afterwards. Transports: WebSocket (plain and TLS), Streamable HTTP over HTTP/2
prior knowledge (h2c), over HTTP/1.1, and over TLS with HTTP/2 chosen by ALPN. Protocol versions 1
and 2.
"""

from __future__ import annotations

import pytest

from acp_client import RecoveryPath, State
from acp_client.state import Continuity, Probe
from tests._support import eventually
from tests.e2e._support import Recorder
from tests.e2e.conftest import TRANSPORTS, Target

pytestmark = [pytest.mark.parametrize("version", [1, 2]), pytest.mark.parametrize("transport", TRANSPORTS)]

FIRST = "user: hello there\nagent: echo: hello there"


def _new_connection_methods(target: Target, before: list[str]) -> list[str]:
    """The methods received on the connection(s) opened after ``before`` (connection ids)."""
    fresh = [cid for cid in target.agent.connection_ids() if cid not in before]
    assert len(fresh) == 1, f"expected one new agent connection after the fault, got {fresh}"
    return target.agent.methods(fresh[0])


def _assert_http_version(target: Target) -> None:
    if target.http_version is None:
        return
    versions = {record.http_version for record in target.http_requests()}
    assert versions == {target.http_version}, versions


async def test_resume_after_network_cut(target: Target, version: int) -> None:
    recorder = Recorder()
    async with target.client(recorder, protocol_version=version) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        assert (await handle.prompt("hello there")).stop_reason == "end_turn"
        before = target.agent.connection_ids()

        await target.proxy.cut()
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.RESUME
        assert outcome.planned is RecoveryPath.RESUME
        assert outcome.probe is Probe.ACTIVE
        assert outcome.raw_status == "active"
        assert outcome.previous_session_id == outcome.session_id == session.session_id
        assert outcome.continuity is Continuity.KEPT  # the agent said active; a network link names no process
        assert outcome.steps == (("session/resume", "ok"),)
        assert recorder.by_callback["resume"] == [outcome]
        assert not recorder.by_callback["replay"] and not recorder.by_callback["new_session"]
        methods = _new_connection_methods(target, before)
        assert methods == ["initialize", "session/status", "session/resume"]
        resume = target.agent.params_of("session/resume")[-1]
        assert resume["sessionId"] == session.session_id
        assert "replayFrom" not in resume
        if version == 2:
            assert outcome.state is not None and outcome.state.state == "idle"
        # Nothing replayed: the transcript is as before, and the session works on the new link.
        assert not any(event.replay for event in recorder.events)
        assert handle.transcript.text() == FIRST
        assert (await handle.prompt("again")).stop_reason == "end_turn"
        assert handle.transcript.text() == f"{FIRST}\nuser: again\nagent: echo: again"
        assert target.agent.sessions[session.session_id].history_length == 4
        assert recorder.kinds() == [
            State.CONNECTING,
            State.CONNECTED,
            State.RECONNECTING,
            State.RECOVERING,
            State.CONNECTED,
        ]
        _assert_http_version(target)


async def test_replay_after_agent_restart(target: Target, version: int) -> None:
    recorder = Recorder()
    async with target.client(recorder, protocol_version=version) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("hello there")
        await handle.prompt("second")
        before = target.agent.connection_ids()
        live_events = len(recorder.events)

        target.agent.lose_memory()
        await target.proxy.cut()
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.REPLAY
        assert outcome.probe is Probe.INACTIVE
        assert outcome.raw_status == "inactive"
        assert outcome.session_id == outcome.previous_session_id == session.session_id
        assert outcome.continuity is Continuity.KEPT  # every completed turn came back
        assert recorder.by_callback["replay"] == [outcome]
        methods = _new_connection_methods(target, before)
        if version == 1:
            assert outcome.steps == (("session/load", "ok"),)
            assert methods == ["initialize", "session/status", "session/load"]
        else:
            assert outcome.steps == (("session/resume+replayFrom", "ok"),)
            assert methods == ["initialize", "session/status", "session/resume"]
            assert target.agent.params_of("session/resume")[-1]["replayFrom"] == {"type": "start"}
        expected = f"{FIRST}\nuser: second\nagent: echo: second"
        # The replayed history is marked as replay, rebuilds the transcript without duplicates.
        await eventually(lambda: handle.transcript.text() == expected, what=f"transcript {expected!r}")
        replayed = recorder.events[live_events:]
        assert replayed and all(event.replay for event in replayed)
        assert outcome.replayed_updates == len(replayed)
        assert (await handle.prompt("third")).stop_reason == "end_turn"
        assert handle.transcript.text() == f"{expected}\nuser: third\nagent: echo: third"
        assert not any(event.replay for event in recorder.events[live_events + len(replayed) :])
        _assert_http_version(target)


async def test_new_session_after_eviction(target: Target, version: int) -> None:
    recorder = Recorder()
    async with target.client(recorder, protocol_version=version) as client:
        session = await client.new_session("/work/project")
        old_id = session.session_id
        handle = client.session(old_id)
        await handle.prompt("hello there")
        before = target.agent.connection_ids()

        target.agent.evict(old_id)
        await target.proxy.cut()
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.NEW_SESSION
        assert outcome.probe is Probe.UNKNOWN
        assert outcome.continuity is Continuity.LOST
        assert outcome.previous_session_id == old_id
        assert outcome.session_id is not None and outcome.session_id != old_id
        assert outcome.steps == (("session/new", "ok"),)
        assert recorder.by_callback["new_session"] == [outcome]
        assert _new_connection_methods(target, before) == ["initialize", "session/status", "session/new"]
        assert target.agent.params_of("session/new")[-1]["cwd"] == "/work/project"
        # The handle (and a lookup by the old id) follows the new session.
        assert handle.session_id == outcome.session_id
        assert client.session(old_id).session_id == outcome.session_id
        lost = "user: hello there\nagent: echo: hello there\n--- the agent lost the conversation above; it goes on in"
        assert handle.transcript.segments[-1].text() == ""  # the new session holds nothing yet
        assert handle.transcript.text().startswith(lost)  # the user's conversation is still whole
        assert (await handle.prompt("fresh start")).stop_reason == "end_turn"
        assert handle.transcript.segments[-1].text() == "user: fresh start\nagent: echo: fresh start"
        assert handle.transcript.text().endswith(
            f"({outcome.session_id}) ---\nuser: fresh start\nagent: echo: fresh start"
        )
        assert target.agent.params_of("session/prompt")[-1]["sessionId"] == outcome.session_id
        assert target.agent.sessions[outcome.session_id].history_length == 2
        assert old_id not in target.agent.sessions
        _assert_http_version(target)
