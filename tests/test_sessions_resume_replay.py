"""Agents that replay the whole history during a plain ``session/resume`` (issue 8 item 2): the
first message update of the resume decides, the rest is replay (flagged, de-duplicated), and a
recovery that replayed is reported as a replay."""

from __future__ import annotations

from typing import Any

import pytest

from acp_client import RecoveryPath
from acp_client.testing.reference_agent import AgentConnection

from ._harness import Harness


async def _replaying_resume(self: Any, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
    """A ``session/resume`` that replays the whole history first (as load does), as some real agents do."""
    live = self._load_for_attach(params)
    await self._replay(live, request_id)
    live.attached.add(self)
    return {"sessionId": live.session_id}


@pytest.fixture
def replaying_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AgentConnection, "_session_resume", _replaying_resume)


@pytest.mark.usefixtures("replaying_agent")
@pytest.mark.parametrize("version", [1, 2])
async def test_a_resume_that_replays_is_detected_and_reported_as_a_replay(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        await h.clock.run(session.prompt("two"))
        before = session.transcript.text()
        live = len(h.updates)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.planned is RecoveryPath.RESUME
        assert outcome.steps == (("session/resume", "ok"),)
        assert "the agent replayed history during session/resume" in outcome.notes
        assert h.log[-2:] == ["outcome:replay", "state:connected"]
        replayed = [event for event in h.updates[live:] if event.update.kind.endswith(("_chunk", "_message"))]
        assert replayed and all(event.replay for event in replayed)
        assert outcome.replayed_updates == len(replayed)
        assert session.transcript.text() == before
        await h.clock.run(session.prompt("three"))
        assert session.transcript.text() == before + "\nuser: three\nagent: echo: three"
        assert not h.updates[-1].replay


async def test_a_resume_that_does_not_replay_stays_a_resume() -> None:
    async with Harness() as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME
        assert not any("replayed" in note for note in outcome.notes)


@pytest.mark.usefixtures("replaying_agent")
async def test_the_switch_off_never_treats_a_resume_as_replay() -> None:
    async with Harness(client_kwargs={"replays_on_resume": False}) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        live = len(h.updates)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME
        assert not any(event.replay for event in h.updates[live:])


@pytest.mark.usefixtures("replaying_agent")
async def test_the_switch_on_treats_a_resume_as_replay_even_when_it_differs() -> None:
    async with Harness(client_kwargs={"replays_on_resume": True}) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        # The client's view starts differently from the agent's history: detection alone would
        # not see a repeat, the switch says it is one.
        session.transcript.messages[0].blocks = []
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY
        assert session.transcript.text() == "user: one\nagent: echo: one"


@pytest.mark.usefixtures("replaying_agent")
async def test_an_app_initiated_resume_that_replays_is_flagged_and_deduplicated() -> None:
    async with Harness() as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        before = session.transcript.text()
        live = len(h.updates)
        handle = await h.client.resume_session(session.session_id, "/a")
        assert handle == session
        messages = [event for event in h.updates[live:] if event.update.kind.endswith("_chunk")]
        assert messages and all(event.replay for event in messages)
        assert session.transcript.text() == before
