"""Recovery over stdio: the agent process dies, the client respawns it and replays the session.

The reference agent runs as a subprocess with a store directory (``reference_agent_command``),
so the respawned process knows the earlier sessions but has none in memory: ``session/status``
answers ``inactive`` and the client replays (v1 ``session/load``, v2 ``session/resume`` with
``replayFrom``).
"""

from __future__ import annotations

import os
import signal

import pytest

from acp_client import AcpClient, RecoveryPath, State
from acp_client.state import Continuity, Probe
from acp_client.testing import RecordingConnector
from acp_client.transports.stdio import StdioConnector
from tests._support import FAST_RETRY, eventually
from tests.e2e._support import Recorder


@pytest.mark.parametrize("version", [1, 2])
async def test_killed_agent_is_respawned_and_replayed(reference_agent_command: list[str], version: int) -> None:
    wire = RecordingConnector(StdioConnector(reference_agent_command))
    recorder = Recorder()
    async with AcpClient(wire, protocol_version=version, retry=FAST_RETRY, callbacks=recorder.callbacks()) as client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("hello there")
        await handle.prompt("second")
        first_pid = wire.transports[0].info.pid
        assert first_pid is not None
        live_events = len(recorder.events)

        os.kill(first_pid, signal.SIGKILL)
        outcome = await recorder.outcome()

        assert len(wire.transports) == 2
        second_pid = wire.transports[1].info.pid
        assert second_pid is not None and second_pid != first_pid
        assert outcome.path is RecoveryPath.REPLAY
        assert outcome.probe is Probe.INACTIVE
        assert outcome.session_id == outcome.previous_session_id == session.session_id
        assert recorder.by_callback["replay"] == [outcome]
        if version == 1:
            assert outcome.steps == (("session/load", "ok"),)
            assert wire.sent_methods(1) == ["initialize", "session/status", "session/load"]
        else:
            assert outcome.steps == (("session/resume+replayFrom", "ok"),)
            assert wire.sent_methods(1) == ["initialize", "session/status", "session/resume"]
        assert State.RECONNECTING in recorder.kinds()
        expected = "user: hello there\nagent: echo: hello there\nuser: second\nagent: echo: second"
        await eventually(lambda: handle.transcript.text() == expected, what=f"transcript {expected!r}")
        replayed = recorder.events[live_events:]
        assert replayed and all(event.replay for event in replayed)
        assert (await handle.prompt("third")).stop_reason == "end_turn"
        assert handle.transcript.text() == f"{expected}\nuser: third\nagent: echo: third"
        assert len(wire.messages("session/prompt")) == 3


@pytest.mark.parametrize("version", [1, 2])
async def test_a_resume_by_a_respawned_agent_is_unverified_whatever_it_says(
    reference_agent_command: list[str], version: int
) -> None:
    """The respawned process claims the session is ``active`` (``status-active-after-restart``: as
    if it held it in memory), so the client resumes; but the client started that process after the
    one that held the session died: nothing of the session can be in its memory. Continuity is
    reported unverified, with the reason, never kept."""
    command = [*reference_agent_command, "--fault", "status-active-after-restart"]
    wire = RecordingConnector(StdioConnector(command))
    recorder = Recorder()
    async with AcpClient(wire, protocol_version=version, retry=FAST_RETRY, callbacks=recorder.callbacks()) as client:
        handle = await client.new_session("/work/project")
        await handle.prompt("hello there")
        first = wire.transports[0].info
        assert first.pid is not None and first.agent_process is not None

        os.kill(first.pid, signal.SIGKILL)
        outcome = await recorder.outcome()

        second = wire.transports[1].info
        assert second.agent_process is not None and second.agent_process != first.agent_process
        assert outcome.path is RecoveryPath.RESUME and outcome.probe is Probe.ACTIVE
        assert outcome.continuity is Continuity.UNVERIFIED and not outcome.continuity
        [note] = [note for note in outcome.notes if note.startswith("continuity unverified")]
        assert "the agent process was restarted" in note
        assert second.agent_process in note and first.agent_process in note
        assert recorder.by_callback["resume"] == [outcome]  # told through the same callback
        # The conversation goes on in the new process, its transcript whole.
        assert (await handle.prompt("second")).stop_reason == "end_turn"
        assert handle.transcript.text().startswith("user: hello there\nagent: echo: hello there\nuser: second")
