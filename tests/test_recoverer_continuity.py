"""Honest continuity (issue 17 item 3): a load or replay after which the agent provably lacks the
history is not reported as continuity; and the session does not stay stuck on the id the agent
lost. The reference agent imitates pydantic-acp 1.10.0 and isaac-acp 0.4.0 here: ``session/load``
of a session it lost answers success and replays nothing; a prompt then fails with -32602 naming
the session."""

from __future__ import annotations

import attrs

from acp_client import RecoveryPath, RpcError
from acp_client.transcript import SegmentStart, TurnStatus

from ._harness import Harness


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
        assert not outcome.continuity  # ...but provably lacks the history
        assert any("replayed nothing for a session with 2 turn(s)" in note for note in outcome.notes)
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
        h.agent.restart()
        record = h.agent.store.load(session.session_id)
        assert record is not None
        h.agent.store.save(attrs.evolve(record, history=()))  # stored, but its history is gone
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.steps == (("session/resume+replayFrom", "ok"),)
        assert not outcome.continuity
        assert session.transcript.text() == "user: one\nagent: echo: one"


async def test_a_replay_that_lacks_completed_turns_is_not_continuity() -> None:
    async with Harness(advertise_status=False, advertise_resume=False) as h:
        session = await h.client.new_session("/a")
        for text in ("one", "two", "three", "four", "five"):
            await h.clock.run(session.prompt(text))
        h.agent.restart()
        record = h.agent.store.load(session.session_id)
        assert record is not None
        h.agent.store.save(attrs.evolve(record, history=record.history[:2]))  # it kept only the first turn
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and not outcome.continuity
        assert any("lacks 4 of the 5 completed turn(s) the client holds (first: 'two')" in n for n in outcome.notes)
        assert session.transcript.last_replay is not None
        assert session.transcript.last_replay.missing_turns == ("two", "three", "four", "five")
        assert session.transcript.turns == 5


async def test_a_full_replay_is_continuity() -> None:
    async with Harness(advertise_status=False, advertise_resume=False) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        h.agent.restart()
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity
        assert session.transcript.last_replay is not None and session.transcript.last_replay.replayed_turns == 1


async def test_a_replay_that_contradicts_the_conversation_deletes_nothing_and_says_so() -> None:
    """The agent's history says something else under the same message ids: the client's copy wins,
    and the outcome's notes carry the discrepancy."""
    async with Harness(protocol_version=2) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        before = session.transcript.text()
        h.agent.restart()
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
