"""Continuity from evidence (docs/conversation.md): a recovery claims the agent kept the conversation
(``Continuity.KEPT``) only when the evidence shows it, ``LOST`` when it shows the opposite, and
``UNVERIFIED`` otherwise; and the session does not stay stuck on an id the agent lost.

The reference agent imitates pydantic-acp 1.10.0 and isaac-acp 0.4.0 here: ``session/load`` of a
session it lost answers success and replays nothing; a prompt then fails with -32602 naming the
session. The memory links of the harness cannot name the agent process (as network links); the
respawned stdio agent is in ``tests/e2e/test_stdio_recovery.py``."""

from __future__ import annotations

import attrs
import pytest

from acp_client import Callbacks, RecoveryPath, RpcError
from acp_client.state import Continuity, Probe
from acp_client.transcript import SegmentStart, TurnStatus

from ._harness import FLAVOURS, VERSIONS, Harness


def pydantic_like(h: Harness) -> None:
    h.agent.faults = h.agent.faults | {"load-unknown-ok"}
    h.agent.not_found_error = lambda sid: RpcError.from_error(-32602, "Invalid params", {"sessionId": sid})


async def test_a_replay_of_nothing_for_a_session_with_turns_is_not_continuity() -> None:
    async with Harness(advertise_status=False, advertise_resume=False) as h:
        pydantic_like(h)
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        await h.clock.run(session.prompt("two"))
        before = session.transcript.text()
        h.agent.evict(session.session_id)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY  # the agent said yes...
        assert outcome.continuity is Continuity.LOST  # ...but provably lacks the history
        assert any(
            note.startswith("continuity lost: ") and "replayed nothing for a session with 2 turn(s)" in note
            for note in outcome.notes
        )
        assert h.log[-2] == "outcome:replay"  # told through the same callback
        assert session.transcript.text() == before  # and the client kept the conversation
        # The next prompt hears "not found" (-32602 naming the session): recovered again, as
        # unknown, and the prompt (never run) is sent once on the new session: the caller gets its answer.
        assert (await h.clock.run(session.prompt("three"))).stop_reason == "end_turn"
        again = h.outcomes[-1]
        assert again.path is RecoveryPath.NEW_SESSION and again.lost_turns == 2
        assert (await h.clock.run(session.prompt("four"))).stop_reason == "end_turn"
        lost, current = session.transcript.segments
        assert lost.lost and current.began is SegmentStart.NEW_AFTER_LOSS
        assert [(m.text, m.status) for m in lost.messages if m.role == "user"] == [
            ("one", TurnStatus.COMPLETE),
            ("two", TurnStatus.COMPLETE),
        ]
        assert current.messages and [(m.text, m.status) for m in current.messages if m.role == "user"] == [
            ("three", TurnStatus.COMPLETE),
            ("four", TurnStatus.COMPLETE),
        ]


async def test_a_v2_replay_of_nothing_is_not_continuity() -> None:
    async with Harness(protocol_version=2) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        h.agent.lose_memory()
        record = h.agent.store.load(session.session_id)
        assert record is not None
        h.agent.store.save(attrs.evolve(record, history=()))  # stored, but its history is gone
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.steps == (("session/resume+replayFrom", "ok"),)
        assert outcome.continuity is Continuity.LOST
        assert session.transcript.text() == "user: one\nagent: echo: one"


async def test_a_replay_missing_completed_turns_is_lost_and_says_so() -> None:
    """The agent's store kept only the first of five completed turns: the replay lacks turns the
    agent answered ``end_turn`` to, so the agent provably lacks them: lost, with the reason."""
    async with Harness(advertise_status=False, advertise_resume=False) as h:
        session = await h.client.new_session("/a")
        for text in ("one", "two", "three", "four", "five"):
            await h.clock.run(session.prompt(text))
        h.agent.lose_memory()
        record = h.agent.store.load(session.session_id)
        assert record is not None
        h.agent.store.save(attrs.evolve(record, history=record.history[:2]))  # it kept only the first turn
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity is Continuity.LOST
        assert not outcome.continuity
        [why] = [note for note in outcome.notes if note.startswith("continuity lost: ")]
        assert why == "continuity lost: the replay lacks 4 of the 5 completed turn(s) the client holds (first: 'two')"
        assert session.transcript.last_replay is not None
        assert session.transcript.last_replay.missing_turns == ("two", "three", "four", "five")
        assert session.transcript.turns == 5


async def test_a_full_replay_is_continuity() -> None:
    async with Harness(advertise_status=False, advertise_resume=False) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        h.agent.lose_memory()
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity is Continuity.KEPT
        assert not any(note.startswith("continuity") for note in outcome.notes)
        assert session.transcript.last_replay is not None and session.transcript.last_replay.replayed_turns == 1


async def test_a_replay_that_contradicts_the_conversation_deletes_nothing_and_says_so() -> None:
    """The agent's history says something else under the same message ids: the client's copy wins,
    and the outcome's notes carry the discrepancy."""
    async with Harness(protocol_version=2) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        before = session.transcript.text()
        h.agent.lose_memory()
        record = h.agent.store.load(session.session_id)
        assert record is not None
        rewritten = tuple(
            attrs.evolve(entry, content=({"type": "text", "text": "something else"},))
            if entry.role == "agent"
            else entry
            for entry in record.history
        )
        h.agent.store.save(attrs.evolve(record, history=rewritten))
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY
        assert session.transcript.text() == before
        assert any("contradicted 1 stored message(s): the stored copy was kept" in note for note in outcome.notes)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("version", VERSIONS)
async def test_a_resume_the_agent_said_it_kept_in_memory_is_kept(flavour: str, version: int) -> None:
    """The link dropped, the agent did not: ``session/status`` says ``active`` (in memory), and
    nothing shows the agent process is a new one (a network-like link names none)."""
    async with Harness(protocol_version=version, pool=flavour == "pool") as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        outcome = await h.drop_and_recover()
        assert (outcome.path, outcome.probe) == (RecoveryPath.RESUME, Probe.ACTIVE)
        assert outcome.continuity is Continuity.KEPT and outcome.continuity
        assert not any(note.startswith("continuity") for note in outcome.notes)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("version", VERSIONS)
async def test_a_resume_without_a_probe_is_unverified(flavour: str, version: int) -> None:
    """An agent without ``session/status`` resumes the session; it never said it kept it in
    memory (it may have rebuilt it from disk without the last turn): unverified, and why."""
    async with Harness(protocol_version=version, pool=flavour == "pool", advertise_status=False) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        outcome = await h.drop_and_recover()
        assert (outcome.path, outcome.probe) == (RecoveryPath.RESUME, Probe.NOT_PROBED)
        assert outcome.continuity is Continuity.UNVERIFIED and not outcome.continuity
        assert (
            "continuity unverified: the agent offers no session/status, so it never said it kept the session in memory"
            in outcome.notes
        )


async def test_a_resume_after_the_agent_said_inactive_is_unverified() -> None:
    """The agent said the session was not in memory, and the app's hook chose a resume anyway
    (v1 without load, the agent rebuilds it from its own store): unverified."""
    choose_resume = Callbacks(decide_recovery=lambda context: RecoveryPath.RESUME)
    async with Harness(client_kwargs={"callbacks": choose_resume}) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        h.agent.lose_memory()
        outcome = await h.drop_and_recover()
        assert (outcome.path, outcome.probe) == (RecoveryPath.RESUME, Probe.INACTIVE)
        assert outcome.continuity is Continuity.UNVERIFIED
        assert "continuity unverified: session/status said the session was not in memory" in outcome.notes


async def test_a_new_session_is_lost() -> None:
    async with Harness() as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        h.agent.evict(session.session_id)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.continuity is Continuity.LOST


async def test_without_transcripts_a_replay_is_unverified() -> None:
    """A client that keeps no transcript has nothing to check the replay against."""
    async with Harness(advertise_status=False, advertise_resume=False, client_kwargs={"keep_transcripts": False}) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        h.agent.lose_memory()
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity is Continuity.UNVERIFIED
        assert "continuity unverified: no transcript is kept to check the replay against" in outcome.notes
