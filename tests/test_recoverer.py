"""Recovery over the in-memory transport, driven by a fake clock (issue 3): the resume, replay and
new-session paths, the probe, degraded answers, the decision hook, recovery callbacks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_client import AcpClient, Callbacks, RecoveryFailed, RecoveryPath, State
from acp_client._recovery import _recoverer
from acp_client.state import Continuity, Probe
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent
from tests._harness import FAST_RETRY, VERSIONS, Harness, assert_legal


@pytest.mark.parametrize("version", VERSIONS)
async def test_resume_path(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        session = (await h.client.new_session("/work")).record
        handle = h.client.session(session.session_id)
        await h.clock.run(handle.prompt("hello"))
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME and outcome.planned is RecoveryPath.RESUME
        assert outcome.probe is Probe.ACTIVE and outcome.raw_status == "active"
        # A resume the agent said it kept in memory (active), over a link that cannot name the
        # agent process (as a network link): continuity is kept.
        assert outcome.continuity is Continuity.KEPT
        assert outcome.session_id == outcome.previous_session_id == session.session_id
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
        h.agent.lose_memory()
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.probe is Probe.INACTIVE
        assert outcome.continuity is Continuity.KEPT and outcome.session_id == session.session_id
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
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.probe is Probe.UNKNOWN
        assert outcome.continuity is Continuity.LOST
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
        # Resumed, but nothing showed the agent kept the session in memory.
        assert outcome.continuity is Continuity.UNVERIFIED and not outcome.continuity
        assert any(
            note.startswith("continuity unverified: the agent offers no session/status") for note in outcome.notes
        )
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
        assert record.status is Probe.ACTIVE and record.raw_status == "open"
        h.agent.lose_memory()
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


async def test_sessions_recover_with_bounded_concurrency() -> None:
    async with Harness(client_kwargs={"recovery_concurrency": 2}) as h:
        ids = [(await h.client.new_session(f"/w{i}")).session_id for i in range(5)]
        h.agent.lose_memory()
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


class _Gate:
    """A connector whose links hold back recovery requests (probe, resume, load, new) until the test
    lets them through, one by one: how many the client has sent at once is then exact."""

    METHODS = frozenset({"session/status", "session/resume", "session/load", "session/new"})

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.holding = False
        self.held: list[tuple[Any, dict[str, Any]]] = []
        self.peak = 0
        self._changed = asyncio.Event()

    @property
    def target(self) -> str:
        return str(self.inner.target)

    async def connect(self) -> Any:
        link = await self.inner.connect()
        gate = self

        class Held:
            @property
            def info(self) -> Any:
                return link.info

            async def send(self, message: Any) -> None:
                if gate.holding and isinstance(message, dict) and message.get("method") in gate.METHODS:
                    gate.held.append((link, message))
                    gate.peak = max(gate.peak, len(gate.held))
                    gate._changed.set()
                    return
                await link.send(message)

            def receive(self) -> Any:
                return link.receive()

            async def aclose(self) -> None:
                await link.aclose()

        return Held()

    async def until_held(self, count: int) -> None:
        while len(self.held) < count:
            self._changed.clear()
            await self._changed.wait()

    async def release_one(self) -> None:
        link, message = self.held.pop(0)
        await link.send(message)


async def test_recovery_never_sends_the_agent_more_than_recovery_concurrency_requests_at_once() -> None:
    clock = FakeClock()
    memory = MemoryConnector(ReferenceAgent(clock=clock))
    gate = _Gate(memory)
    outcomes: list[Any] = []
    client = AcpClient(
        gate, clock=clock, retry=FAST_RETRY, recovery_concurrency=3, callbacks=Callbacks(on_resume=outcomes.append)
    )
    async with client:
        ids = [(await client.new_session(f"/w{i}")).session_id for i in range(12)]
        gate.holding = True
        memory.drop()
        await clock.run(gate.until_held(3))
        await clock.settle()
        assert len(gate.held) == 3  # three probes out, nothing answered: the other nine wait
        assert {message["method"] for _, message in gate.held} == {"session/status"}
        released = 0
        while len(outcomes) < len(ids):
            assert gate.held, "recovery stalled with nothing held"
            await gate.release_one()
            released += 1
            await clock.settle()
            assert len(gate.held) <= 3
        assert released == 2 * len(ids)  # a probe and a resume each, never more than three at once
        assert gate.peak == 3
        assert sorted(outcome.session_id for outcome in outcomes) == sorted(ids)
        assert {outcome.path for outcome in outcomes} == {RecoveryPath.RESUME}
        await clock.settle()
        assert client.state.state is State.CONNECTED
