"""A client facing several instances: placement, homes, recovery at home, failover (issue 11 item 1).

Three reference agents over memory connectors, on a fake clock. Each agent has its own store; a
test copies a session's record into the stores of the instances that should know it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from acp_client import AcpClient, Callbacks, RecoveryOutcome, RecoveryPath, State
from acp_client.exceptions import ConnectError
from acp_client.pool import Endpoint, Pool, Probe
from acp_client.state import LEGAL_TRANSITIONS
from acp_client.testing import FakeClock
from tests._farm import FAULTS, NAMES, Farm, Recorder, apply_fault, check_one_copy_each, pooled
from tests._harness import FAST_RETRY
from tests._support import eventually

# -- placement and homes --------------------------------------------------------------------------------


async def test_new_sessions_are_placed_round_robin_and_calls_go_home(farm: Farm) -> None:
    client = pooled(farm, Recorder())
    async with client:
        handles = [await client.new_session("/tmp") for _ in range(4)]
        assert [h.endpoint for h in handles] == ["a", "b", "c", "a"]
        for handle in handles:
            await handle.prompt("hi")
        for handle in handles:
            assert farm.agents[handle.endpoint or ""].sessions[handle.session_id].in_memory
        prompts = {n: [m for m in c.sent if m["method"] == "session/prompt"] for n, c in farm.connectors.items()}
        assert {n: len(p) for n, p in prompts.items()} == {"a": 2, "b": 1, "c": 1}
        assert client.state.state is State.CONNECTED
        assert client.endpoints == tuple(farm.endpoints)


async def test_fewest_sessions_and_an_app_function(farm: Farm) -> None:
    async with pooled(farm, Recorder(), placement="fewest_sessions") as client:
        first = await client.new_session("/tmp")
        placed = first.endpoint
        client.forget_session(first.session_id)
        assert first.endpoint is None  # no longer tracked: it lives nowhere the client knows
        second = await client.new_session("/tmp")
        assert (placed, second.endpoint) == ("a", "a")  # a holds none again: fewest

    def last(candidates: Sequence[Endpoint], sessions: Mapping[Endpoint, int]) -> Endpoint:
        return candidates[-1]

    async with pooled(farm, Recorder(), placement=last) as client:
        assert (await client.new_session("/tmp")).endpoint == "c"


async def test_an_unreachable_instance_is_skipped_when_placing(farm: Farm) -> None:
    farm.connectors["b"].refuse()
    async with pooled(farm, Recorder()) as client:
        placed = [(await client.new_session("/tmp")).endpoint for _ in range(3)]
    assert "b" not in placed


async def test_the_first_instance_down_at_connect(farm: Farm) -> None:
    farm.connectors["a"].refuse()
    recorder = Recorder()
    async with pooled(farm, recorder) as client:
        assert client.state.state is State.CONNECTED
        handle = await client.new_session("/tmp")
        assert handle.endpoint in ("b", "c")
        assert client.agent_info is not None and client.agent_info.name != "agent-a"
    recorder.check_states()
    farm.connectors["b"].refuse()
    farm.connectors["c"].refuse()
    with pytest.raises(ConnectError):
        await pooled(farm, Recorder()).connect()


async def test_a_drop_reconnects_home_and_resumes_there(farm: Farm) -> None:
    recorder = Recorder()
    async with pooled(farm, recorder) as client:
        handle = await client.new_session("/tmp")
        await client.new_session("/tmp")  # on b: its link is not touched
        farm.connectors["a"].drop()
        await eventually(lambda: recorder.outcomes, 120.0, clock=farm.clock)
        [outcome] = recorder.outcomes
        assert (outcome.path, outcome.endpoint) == (RecoveryPath.RESUME, "a")
        assert recorder.contexts[0].endpoint == "a"
        assert (await handle.prompt("again")).stop_reason == "end_turn"
        assert farm.attaches_of(handle.session_id) == ["a"]
        assert client.state.state is State.CONNECTED
    recorder.check_states()
    assert [s.state for s in recorder.states][-1] is State.CLOSED


async def test_home_unreachable_past_the_failover_delay_moves_the_session(farm: Farm) -> None:
    recorder = Recorder()
    async with pooled(farm, recorder, failover_delay=5.0) as client:
        handle = await client.new_session("/tmp")
        await handle.prompt("hello")
        old = handle.session_id
        farm.share(old, "b")
        farm.connectors["a"].refuse()
        farm.connectors["a"].drop()
        await farm.clock.advance(4.0)
        assert recorder.outcomes == [] and handle.endpoint == "a"  # not before the delay
        await eventually(lambda: recorder.outcomes, 120.0, clock=farm.clock)
        [outcome] = recorder.outcomes
        assert (outcome.path, outcome.endpoint, outcome.session_id) == (RecoveryPath.REPLAY, "b", old)
        assert any("moved from a" in note for note in outcome.notes)
        assert handle.endpoint == "b"
        await handle.prompt("after the move")
        assert [m for m in farm.connectors["b"].sent if m["method"] == "session/prompt"]
        assert farm.agents["a"].sessions[old].in_memory  # a was away: it still holds its copy
        farm.connectors["a"].accept()  # the home comes back: nothing goes there for this session
        await farm.clock.advance(30.0)
        assert farm.attaches_of(old) == ["b"]
        assert farm.violations == []
        assert not farm.agents["a"].sessions[old].in_memory  # closed once a was back
        assert [m["params"]["sessionId"] for m in farm.connectors["a"].sent if m["method"] == "session/close"] == [old]
        assert farm.agents["b"].sessions[old].in_memory and handle.endpoint == "b"
    recorder.check_states()


async def test_a_copy_left_behind_is_closed_before_the_session_is_resumed_again(farm: Farm) -> None:
    """The session moved a → b while a was away; b drops and reconnects at once, while the
    client's link to a is still backing off: a answers again, so its copy is closed before the
    resume at b."""
    recorder = Recorder()
    async with pooled(farm, recorder, failover_delay=3.0) as client:
        handle = await client.new_session("/tmp")
        old = handle.session_id
        farm.share(old, "b")
        farm.connectors["a"].refuse()
        farm.connectors["a"].drop()
        await eventually(lambda: handle.endpoint == "b", 120.0, clock=farm.clock)
        farm.connectors["a"].accept()  # a answers now; the client's link to a waits out its backoff
        farm.connectors["b"].drop()
        await eventually(lambda: len(recorder.outcomes) == 2, 120.0, clock=farm.clock)
        paths = [(o.path, o.endpoint) for o in recorder.outcomes]
        assert paths == [(RecoveryPath.REPLAY, "b"), (RecoveryPath.RESUME, "b")]
        assert farm.violations == []  # a's copy was closed before the resume at b
        assert not farm.agents["a"].sessions[old].in_memory and farm.agents["b"].sessions[old].in_memory
    recorder.check_states()


async def test_a_prompt_made_while_the_home_is_away_goes_to_the_new_home(farm: Farm) -> None:
    recorder = Recorder()
    async with pooled(farm, recorder, failover_delay=5.0) as client:
        handle = await client.new_session("/tmp")
        await handle.prompt("hello")
        farm.share(handle.session_id, "c")
        farm.connectors["a"].refuse()
        farm.connectors["a"].drop()
        await farm.clock.advance(1.0)
        result = await farm.clock.run(handle.prompt("while away"))
        assert result.stop_reason == "end_turn"
        assert handle.endpoint == "c"
        assert [m["params"]["sessionId"] for m in farm.connectors["c"].sent if m["method"] == "session/prompt"] == [
            handle.session_id
        ]
        assert len([m for m in farm.connectors["a"].sent if m["method"] == "session/prompt"]) == 1  # "hello" only


async def test_unknown_at_home_asks_every_instance(farm: Farm) -> None:
    recorder = Recorder()
    async with pooled(farm, recorder) as client:
        handle = await client.new_session("/tmp")
        await handle.prompt("hello")
        old = handle.session_id
        farm.share(old, "c")
        farm.agents["a"].evict(old)
        farm.connectors["a"].drop()
        await eventually(lambda: recorder.outcomes, 120.0, clock=farm.clock)
        [outcome] = recorder.outcomes
        assert (outcome.path, outcome.endpoint) == (RecoveryPath.REPLAY, "c")
        assert farm.attaches_of(old) == ["c"]


async def test_client_locate_reports_every_instance(farm: Farm) -> None:
    async with pooled(farm, Recorder()) as client:
        handle = await client.new_session("/tmp")
        farm.connectors["c"].refuse()
        farm.share(handle.session_id, "b")
        location = await client.locate(handle.session_id)
    assert [a.probe for a in location.answers] == [Probe.ACTIVE, Probe.INACTIVE, Probe.UNREACHABLE]


# -- every combination of answers ---------------------------------------------------------------------

HOME = ("active", "inactive", "unknown", "unreachable")
OTHER = ("active", "inactive", "unknown", "unreachable")


def _combinations() -> list[tuple[str, str, str]]:
    combos = []
    for home, b, c in itertools.product(HOME, OTHER, OTHER):
        if [home, b, c].count("active") > 1:
            continue  # a session is in memory on one instance at most
        combos.append((home, b, c))
    return combos


def expected(home: str, b: str, c: str) -> tuple[str, set[str]] | None:
    """(path, possible endpoints) by the rule in docs/many-instances.md; ``None``: nothing reachable."""
    answers = {"a": home, "b": b, "c": c}
    for presence, path in (("active", "resume"), ("inactive", "replay")):
        found = [n for n in ("a", "b", "c") if answers[n] == presence]  # the home first
        if found:
            return path, {found[0]}
    reachable = {n for n, p in answers.items() if p == "unknown"}
    return ("new_session", reachable) if reachable else None


async def arrange(farm: Farm, session_id: str, home: str, b: str, c: str) -> None:
    """Put the world in the given state; the client's link to a is then cut."""
    farm.watching = False
    for name, presence in (("b", b), ("c", c)):
        if presence in ("active", "inactive", "unreachable"):
            farm.share(session_id, name)
        if presence == "active":  # another client has it open there
            side = AcpClient(farm.connectors[name], retry=None)
            async with side:
                await side.load_session(session_id, "/tmp")
        if presence == "unreachable":
            farm.connectors[name].refuse()
    if home == "inactive":
        farm.agents["a"].lose_memory()
    elif home == "unknown":
        farm.agents["a"].evict(session_id)
    elif home == "unreachable":
        farm.connectors["a"].refuse()
    farm.watching = True
    farm.connectors["a"].drop()


@pytest.mark.parametrize(("home", "b", "c"), _combinations())
async def test_every_combination_across_three_instances(farm: Farm, home: str, b: str, c: str) -> None:
    recorder = Recorder()
    async with pooled(farm, recorder) as client:
        handle = await client.new_session("/tmp")
        await handle.prompt("hello")
        old = handle.session_id
        await arrange(farm, old, home, b, c)
        want = expected(home, b, c)
        if want is None:
            await farm.clock.advance(60.0)
            assert recorder.outcomes == [] and farm.attaches == []
            assert handle.endpoint == "a" and client.state.state is not State.CONNECTED
            return
        await eventually(lambda: recorder.outcomes, 120.0, clock=farm.clock)
        [outcome] = recorder.outcomes
        path, where = want
        assert outcome.path.value == path and outcome.endpoint in where, (outcome, farm.attaches)
        assert handle.endpoint == outcome.endpoint
        attaches = farm.attaches_of(old)
        assert len(set(attaches)) <= 1 and set(attaches) <= {outcome.endpoint}
        assert farm.violations == []
        if path != "new_session":
            assert outcome.session_id == old
        recorder.check_states()
        assert (await handle.prompt("next")).stop_reason == "end_turn"


# -- the property ---------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# Found by this property: b's session failed over to a while b was away, b came back still holding it, and a
# fan-out saw it active on both — the copy on b is closed before the resume on a.
@example(
    script=[("drop", "a"), ("drop", "a"), ("drop", "a"), ("refuse", "b"), ("share", "a"), ("drop", "a")], sessions=2
)
# Also found by it: the fan-out's answers went stale while the target's link reconnected (b came back meanwhile,
# holding the session) — the instances are asked again first.
@example(
    script=[("drop", "a"), ("drop", "a"), ("drop", "a"), ("share", "a"), ("refuse", "b"), ("drop", "a")], sessions=2
)
# And: a session moved b → a while b was away; a dropped and resumed it at home while b, back, still held it —
# the copy left behind on b is closed first (and in any case once the client's link to b is back).
@example(
    script=[("drop", "a")] * 4 + [("refuse", "b"), ("share", "a"), ("refuse", "a"), ("refuse", "c"), ("drop", "a")],
    sessions=2,
)
@given(
    script=st.lists(st.tuples(FAULTS, st.sampled_from(NAMES)), min_size=1, max_size=12),
    sessions=st.integers(min_value=1, max_value=3),
)
async def test_no_session_is_ever_loaded_or_resumed_on_two_instances(
    script: list[tuple[str, str]], sessions: int
) -> None:
    farm = Farm(FakeClock())
    recorder = Recorder()
    try:
        async with pooled(farm, recorder, failover_delay=3.0) as client:
            handles = [await client.new_session("/tmp") for _ in range(sessions)]
            for fault, name in script:
                await apply_fault(farm, client, handles, fault, name)
                await farm.clock.advance(2.0)
            for connector in farm.connectors.values():
                connector.accept()
            await farm.clock.advance(120.0)
            assert farm.violations == []
            check_one_copy_each(farm, [handle.session_id for handle in handles])
            recorder.check_states()
            for outcome in recorder.outcomes:  # one instance per recovery
                attached = {step for step, _ in outcome.steps if step in ("load", "resume", "resume_replay")}
                assert outcome.endpoint in NAMES or outcome.path is RecoveryPath.ABANDON, attached
    finally:
        await farm.aclose()


async def test_a_recovery_callback_may_prompt_at_home_and_after_a_move(farm: Farm) -> None:
    results: list[tuple[str | None, str | None]] = []
    client: AcpClient | None = None

    async def prompt_now(outcome: RecoveryOutcome) -> None:
        assert client is not None and outcome.session_id is not None
        result = await client.prompt(outcome.session_id, "from the callback")
        results.append((outcome.endpoint, result.stop_reason))

    callbacks = Callbacks(on_resume=prompt_now, on_replay=prompt_now)
    client = AcpClient(
        Pool(farm.endpoints, failover_delay=5.0), retry=FAST_RETRY, clock=farm.clock, callbacks=callbacks
    )
    async with client:
        handle = await client.new_session("/tmp")
        await client.new_session("/tmp")  # on b
        farm.connectors["a"].drop()  # back at home: resume, the callback prompts over the recovering link
        await eventually(lambda: len(results) == 1, 120.0, clock=farm.clock)
        farm.share(handle.session_id, "c")
        farm.connectors["a"].refuse()
        farm.connectors["a"].drop()  # a stays away: the session moves to c (replay), the callback prompts there
        await eventually(lambda: len(results) == 2, 120.0, clock=farm.clock)
    assert results == [("a", "end_turn"), ("c", "end_turn")]


async def test_a_home_that_drops_again_while_recovering_still_fails_over(farm: Farm) -> None:
    recorder = Recorder()
    async with pooled(farm, recorder, failover_delay=5.0) as client:
        handle = await client.new_session("/tmp")
        farm.share(handle.session_id, "b")
        farm.connectors["a"].flaky = True  # a reconnects, then drops at every probe
        farm.connectors["a"].drop()
        await eventually(lambda: recorder.outcomes, 60.0, clock=farm.clock)
        [outcome] = recorder.outcomes
        assert (outcome.path, outcome.endpoint) == (RecoveryPath.REPLAY, "b")
        assert farm.connectors["a"].connects > 2  # it did come back, more than once
    recorder.check_states()


async def test_the_client_follows_the_link_it_shows_back_instead_of_jumping(farm: Farm) -> None:
    """One state machine: a link the client shows as ``reconnecting`` keeps mattering when its
    last session is forgotten, so the client follows that link's own sequence back
    (``reconnecting → recovering → connected``) instead of jumping to ``connected`` through an
    invented ``recovering``."""

    def last(candidates: Sequence[Endpoint], sessions: Mapping[Endpoint, int]) -> Endpoint:
        return candidates[-1]

    recorder = Recorder()
    async with pooled(farm, recorder, placement=last, failover_delay=3600.0) as client:
        handle = await client.new_session("/tmp")
        assert handle.endpoint == "c"
        farm.connectors["c"].refuse(None)
        farm.connectors["c"].drop()
        await farm.clock.advance(5.0)
        assert client.state.state is State.RECONNECTING
        client.forget_session(handle.session_id)
        await farm.clock.advance(1.0)
        assert client.state.state is State.RECONNECTING  # c is still down: not "connected" yet
        farm.connectors["c"].accept()
        await farm.clock.advance(60.0)
        assert client.state.state is State.CONNECTED
    after = [state.state for state in recorder.states]
    dropped = after.index(State.RECONNECTING)
    tail = [s for s in after[dropped:] if s is not State.RECONNECTING]
    assert tail[:2] == [State.RECOVERING, State.CONNECTED], after
    for old, new in itertools.pairwise(after):
        assert new in LEGAL_TRANSITIONS[old], (old, new)
