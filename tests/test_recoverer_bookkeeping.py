"""Recovery cut off midway (issue 12 items 1-2, issue 8 item 1): what a recovery already did is
reported, a replay cut off by a drop is replayed again, every hop is in the notes."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest

from acp_client import ConnectionLost, RecoveryPath, RetryPolicy, State, Timeouts
from acp_client._codec._jsonrpc import Message
from acp_client._sessions._table import SessionTable
from acp_client.state import Continuity, Probe
from acp_client.testing import inside
from acp_client.types import Session, TextContent, UserMessageChunk

from ._harness import FLAVOURS, Harness, SwallowAnswer


class Cut:
    """Swallow the answers to ``method`` for ``victim`` and drop the link once ``winner``'s answer
    to it arrived (so the winner's step is done while the victim's is pending)."""

    def __init__(self, h: Harness, method: str, winner: str, victim: str) -> None:
        self.h, self.method, self.winner, self.victim = h, method, winner, victim
        self.ids: dict[Any, str] = {}
        self.answered = asyncio.Event()
        self.active = True
        h.connector.on_send = self._sent
        h.connector.rewrite = self._received

    def _sent(self, message: Message) -> None:
        if isinstance(message, dict) and message.get("method") == self.method:
            params = message.get("params") or {}
            self.ids[message["id"]] = params.get("sessionId") or params.get("cwd")

    def _received(self, message: Message) -> Message | None:
        if not self.active or not isinstance(message, dict) or "method" in message:
            return message
        owner = self.ids.get(message.get("id"))
        if owner == self.victim:
            return None
        if owner == self.winner:
            self.answered.set()
        return message

    async def cut(self) -> None:
        await self.h.clock.run(self.answered.wait(), limit=60.0)
        await self.h.clock.settle()
        self.active = False
        self.h.connector.drop()
        await self.h.until_connected()


def paths_of(h: Harness, previous: str) -> list[RecoveryPath]:
    return [o.path for o in h.outcomes if o.previous_session_id == previous]


async def test_a_replay_finished_before_a_sibling_was_cut_off_is_reported_as_a_replay() -> None:
    async with Harness(client_kwargs={"recovery_concurrency": 2}) as h:
        a = await h.client.new_session("/a")
        b = await h.client.new_session("/b")
        await h.clock.run(a.prompt("one"))
        await h.clock.run(b.prompt("two"))
        before_b = b.transcript.text()
        cut = Cut(h, "session/load", a.session_id, b.session_id)
        h.agent.lose_memory()
        h.connector.drop()
        await cut.cut()
        # A's replay finished before the cut; the next recovery resumed it: ONE report, a replay
        # (the replayed updates reached the app), covering both recoveries' steps.
        assert paths_of(h, a.session_id) == [RecoveryPath.REPLAY]
        replay = next(o for o in h.outcomes if o.previous_session_id == a.session_id)
        assert replay.replayed_updates > 0
        assert [step for step, _ in replay.steps].count("session/load") == 1
        assert [step for step, _ in replay.steps][-1] == "session/resume"
        assert any("cut that recovery off" in note for note in replay.notes)
        assert replay in h.client.recovery_outcomes
        # B's load was cut off: its transcript is what it was, and the next recovery replays it
        # again (the agent holds it now: the probe says active) and says so.
        assert b.transcript.text() == before_b == "user: two\nagent: echo: two"
        b_outcome = [o for o in h.outcomes if o.previous_session_id == b.session_id]
        assert [o.path for o in b_outcome] == [RecoveryPath.REPLAY]
        assert b_outcome[0].notes[0] == "the last replay was cut off: replaying again"
        assert not inside(h.client).table.require(b.session_id).replay_cut_off
        assert a.transcript.text() == "user: one\nagent: echo: one"


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_resume_finished_before_a_sibling_was_cut_off_is_reported(flavour: str) -> None:
    """A drop during a recovery round does not lose what the round finished: the session resumed
    before the drop gets its callback (once, folded with the next round's resume), with one
    endpoint and in a pool."""
    async with Harness(pool=flavour == "pool", client_kwargs={"recovery_concurrency": 2}) as h:
        a = await h.client.new_session("/a")
        b = await h.client.new_session("/b")
        cut = Cut(h, "session/resume", a.session_id, b.session_id)
        h.connector.drop()
        await cut.cut()
        assert paths_of(h, a.session_id) == [RecoveryPath.RESUME]
        assert paths_of(h, b.session_id) == [RecoveryPath.RESUME]
        resumed = next(o for o in h.outcomes if o.previous_session_id == a.session_id)
        assert [step for step, _ in resumed.steps] == ["session/resume", "session/resume"]
        assert any("cut that recovery off" in note for note in resumed.notes)
        assert resumed in h.client.recovery_outcomes


async def test_a_replacement_made_before_a_sibling_was_cut_off_is_reported_once_in_order() -> None:
    async with Harness(client_kwargs={"recovery_concurrency": 2}) as h:
        a = await h.client.new_session("/a")
        b = await h.client.new_session("/b")
        old_a = a.session_id
        h.agent.evict(old_a)
        h.agent.lose_memory()
        cut = Cut(h, "session/new", "/a", b.session_id)
        # B replays (load), A is replaced (new): swallow B's load answer instead.
        cut.method = "session/load"
        news: list[str] = []

        def sent(message: Message) -> None:
            if isinstance(message, dict) and message.get("method") == "session/new":
                news.append(message["id"])
            cut._sent(message)

        def received(message: Message) -> Message | None:
            if isinstance(message, dict) and message.get("id") in news and cut.active:
                cut.answered.set()
            return cut._received(message)

        h.connector.on_send, h.connector.rewrite = sent, received
        h.connector.drop()
        await cut.cut()
        new_id = a.session_id
        assert new_id != old_a
        # One report for A: the replacement (old id -> new id), which the next recovery's resume
        # of the new id is folded into; the app learns the id change exactly once.
        first = [o for o in h.outcomes if o.previous_session_id == old_a]
        assert [(o.path, o.session_id) for o in first] == [(RecoveryPath.NEW_SESSION, new_id)]
        assert [step for step, _ in first[0].steps][-1] == "session/resume"
        assert [o for o in h.outcomes if o.previous_session_id == new_id] == []
        assert len(news) == 1  # not replaced twice


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_every_hop_is_in_the_notes(flavour: str) -> None:
    async with Harness(pool=flavour == "pool", advertise_status=False) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("hello"))

        def refuse_resume(message: Message) -> Message | None:
            if isinstance(message, dict) and message.get("id") in resumes:
                return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "nope"}}
            return message

        resumes: set[Any] = set()

        def sent(message: Message) -> None:
            if isinstance(message, dict) and message.get("method") == "session/resume":
                resumes.add(message["id"])

        h.connector.on_send, h.connector.rewrite = sent, refuse_resume
        h.agent.lose_memory()
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY
        assert [s for s, _ in outcome.steps] == ["session/resume", "session/load"]
        assert outcome.notes[-1].startswith("session/resume refused: ")
        assert outcome.notes[-1].endswith("trying session/load")
        assert session.transcript.text() == "user: hello\nagent: echo: hello"


# -- a replay cut off by a drop (issue 12 item 2) ----------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_replay_cut_off_in_recovery_keeps_the_history_and_replays_again(flavour: str, version: int) -> None:
    async with Harness(pool=flavour == "pool", protocol_version=version) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        await h.clock.run(session.prompt("two"))
        before = session.transcript.text()
        swallow = SwallowAnswer(h, "session/load" if version == 1 else "session/resume")
        h.agent.lose_memory()
        h.connector.drop()
        await h.clock.settle()
        await h.clock.run(swallow.seen.wait(), limit=60.0)
        await h.clock.settle()
        assert inside(h.client).table.require(session.session_id).replaying
        swallow.active = False
        h.connector.drop()
        await h.until_connected()
        assert session.transcript.text() == before
        [outcome] = h.outcomes
        assert outcome.path is RecoveryPath.REPLAY and outcome.probe is Probe.ACTIVE
        assert outcome.notes[0] == "the last replay was cut off: replaying again"
        assert not inside(h.client).table.require(session.session_id).replay_cut_off
        await h.clock.run(session.prompt("three"))
        assert session.transcript.text().count("echo: one") == 1
        assert session.transcript.text().endswith("user: three\nagent: echo: three")


def test_a_window_only_lingering_after_its_answer_is_complete() -> None:
    table = SessionTable()
    tracked = table.track(Session(session_id="s", cwd="/w"), cwd="/w")
    tracked.transcript.add_user_prompt((TextContent(text="old"),))
    table.open_window(tracked, replay=True)
    table.receive("s", UserMessageChunk(content=TextContent(text="new")))

    class Timer:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    timer = tracked.window_timer = Timer()
    table.dropped(ConnectionLost("x", may_have_executed=False))
    assert timer.cancelled and not tracked.replay_cut_off
    # A replay never deletes what the client held; the unanswered text it brought is the agent's.
    assert tracked.transcript.text() == "user: old\nuser [inserted]: new"
    # Without the answer, the same drop keeps the old history and flags the session.
    table.open_window(tracked, replay=True)
    table.receive("s", UserMessageChunk(content=TextContent(text="newer")))
    table.dropped(ConnectionLost("x", may_have_executed=False))
    assert tracked.replay_cut_off and tracked.transcript.text() == "user: old\nuser [inserted]: new"


# -- session/new answering the old id (issue 8 item 6) -----------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_new_session_with_the_same_id_is_reported_and_keeps_the_transcript(flavour: str) -> None:
    async with Harness(pool=flavour == "pool") as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        before, old = session.transcript.text(), session.session_id
        news: set[Any] = set()

        def sent(message: Message) -> None:
            if isinstance(message, dict) and message.get("method") == "session/new":
                news.add(message["id"])

        def received(message: Message) -> Message | None:
            if isinstance(message, dict) and message.get("id") in news and "result" in message:
                return {"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": old}}
            return message

        h.connector.on_send, h.connector.rewrite = sent, received
        h.agent.evict(old)
        outcome = await h.drop_and_recover()
        # The agent's own copy may hold the session under that id: nothing shows either way.
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.continuity is Continuity.UNVERIFIED
        assert outcome.session_id == outcome.previous_session_id == old == session.session_id
        assert "session/new returned the same session id: transcript kept, continuity unverified" in outcome.notes
        assert session.transcript.text() == before


async def test_what_a_cut_off_recovery_finished_is_reported_when_the_client_then_gives_up() -> None:
    policy = RetryPolicy(initial_delay=1.0, jitter=False, max_attempts=3, suspend_after=None)
    async with Harness(client_kwargs={"recovery_concurrency": 2}, retry=policy) as h:
        a = await h.client.new_session("/a")
        b = await h.client.new_session("/b")
        cut = Cut(h, "session/load", a.session_id, b.session_id)
        h.agent.lose_memory()
        h.connector.drop()
        await h.clock.run(cut.answered.wait(), limit=60.0)
        await h.clock.settle()
        h.connector.refuse(None)
        h.connector.drop()
        await h.clock.run(_failed(h), limit=600.0)
        assert [(o.previous_session_id, o.path) for o in h.outcomes] == [(a.session_id, RecoveryPath.REPLAY)]
        assert h.log.index("outcome:replay") < h.log.index("state:failed")


async def _failed(h: Harness) -> None:
    async for state in h.client.state_changes():
        if state.state is State.FAILED:
            return


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_timed_out_step_counts_as_a_refusal(flavour: str) -> None:
    async with Harness(
        pool=flavour == "pool", advertise_status=False, client_kwargs={"timeouts": Timeouts(request=5.0)}
    ) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("hello"))
        SwallowAnswer(h, "session/resume")
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY
        assert [(s, r.split(":")[0]) for s, r in outcome.steps] == [("session/resume", "error"), ("session/load", "ok")]
        assert outcome.notes[-1].startswith("session/resume refused: ")
        assert outcome.notes[-1].endswith("trying session/load")
        assert session.transcript.text() == "user: hello\nagent: echo: hello"


def _outcome(path: RecoveryPath, previous: str, current: str | None, **extra: Any) -> Any:
    from acp_client import RecoveryOutcome

    return RecoveryOutcome(
        path=path,
        planned=path,
        previous_session_id=previous,
        session_id=current,
        continuity=Continuity.KEPT if path in (RecoveryPath.RESUME, RecoveryPath.REPLAY) else Continuity.LOST,
        probe=Probe.ACTIVE,
        **extra,
    )


def test_merging_keeps_the_stronger_path_and_every_id_change() -> None:
    """Soak finding: a session got two callbacks in one recovery (the cut-off recovery's outcome,
    then the fresh one). Folded: one report, unless both recoveries renamed the session."""
    from acp_client._recovery._recoverer import merge_outcomes

    replay = _outcome(RecoveryPath.REPLAY, "a", "a", replayed_updates=3, steps=(("session/load", "ok"),))
    resume = _outcome(RecoveryPath.RESUME, "a", "a", steps=(("session/resume", "ok"),))
    merged = merge_outcomes(replay, resume)
    assert merged is not None and merged.path is RecoveryPath.REPLAY and merged.replayed_updates == 3
    assert merged.steps == (("session/load", "ok"), ("session/resume", "ok"))
    assert merged.continuity is Continuity.KEPT
    renamed = _outcome(RecoveryPath.NEW_SESSION, "a", "b")
    merged = merge_outcomes(renamed, _outcome(RecoveryPath.RESUME, "b", "b"))
    assert merged is not None and (merged.previous_session_id, merged.session_id) == ("a", "b")
    assert merged.path is RecoveryPath.NEW_SESSION and merged.continuity is Continuity.LOST
    assert merge_outcomes(renamed, _outcome(RecoveryPath.NEW_SESSION, "b", "c")) is None
    abandoned = merge_outcomes(resume, _outcome(RecoveryPath.ABANDON, "a", None))
    assert abandoned is not None and abandoned.path is RecoveryPath.ABANDON


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        (Continuity.KEPT, Continuity.KEPT, Continuity.KEPT),
        (Continuity.KEPT, Continuity.UNVERIFIED, Continuity.UNVERIFIED),
        (Continuity.UNVERIFIED, Continuity.KEPT, Continuity.UNVERIFIED),
        (Continuity.UNVERIFIED, Continuity.LOST, Continuity.LOST),
        (Continuity.LOST, Continuity.KEPT, Continuity.LOST),
        (Continuity.LOST, Continuity.UNVERIFIED, Continuity.LOST),
    ],
)
def test_merging_claims_the_weaker_continuity(first: Continuity, second: Continuity, merged: Continuity) -> None:
    """Two recoveries reported as one claim no more than the weaker of them: LOST < UNVERIFIED < KEPT."""
    from acp_client._recovery._recoverer import merge_outcomes

    earlier = attrs.evolve(_outcome(RecoveryPath.REPLAY, "a", "a"), continuity=first)
    later = attrs.evolve(_outcome(RecoveryPath.RESUME, "a", "a"), continuity=second)
    result = merge_outcomes(earlier, later)
    assert result is not None and result.continuity is merged
    assert bool(result.continuity) is (merged is Continuity.KEPT)
