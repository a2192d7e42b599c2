"""The engine's links (``acp_client._link._links``): rules the one-link core and the pool share, each
tested over a single endpoint and over a pool of two (issue 16 item 9)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from acp_client import (
    AcpClient,
    Callbacks,
    ClientClosed,
    ConnectionLost,
    ConnectionState,
    QueueFull,
    QueueOptions,
    RecoveryPath,
    RetryPolicy,
    State,
)
from acp_client.location import Endpoint
from acp_client.pool import Pool
from acp_client.store import SqliteSessionStore
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent, SessionStore, inside
from tests._harness import FAST_RETRY, FLAVOURS, VERSIONS, Harness, SwallowAnswer, assert_legal, first_candidate


def never_connected(flavour: str, clock: FakeClock) -> AcpClient:
    agent = ReferenceAgent(clock=clock)
    if flavour == "single":
        return AcpClient(MemoryConnector(agent), clock=clock)
    other = ReferenceAgent(clock=clock, name="agent-b")
    endpoints = [Endpoint("a", connector=MemoryConnector(agent)), Endpoint("b", connector=MemoryConnector(other))]
    return AcpClient(Pool(endpoints), clock=clock)


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_client_never_connected_fails_at_once(flavour: str) -> None:
    """Not a 60 s wait ending in "still reconnecting": ``ClientClosed`` saying what to do, at
    once (no fake time passes), for every kind of call."""
    clock = FakeClock()
    client = never_connected(flavour, clock)
    start = clock.monotonic()
    for call in (
        lambda: client.request("_ext/ping"),
        lambda: client.new_session("/tmp"),
        client.list_sessions,
        lambda: client.notify("_ext/ping"),
    ):
        with pytest.raises(ClientClosed, match=r"call connect\(\) first"):
            await asyncio.wait_for(call(), 1.0)
    assert clock.monotonic() == start
    await client.aclose()


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_restored_client_starts_without_passing_through_reconnecting(flavour: str, tmp_path: Path) -> None:
    """With a store, ``connect()`` goes ``connecting → recovering → connected``: never
    ``reconnecting`` (what an app shows as "connection lost"), and every transition legal."""
    clock = FakeClock()
    shared = SessionStore()  # both instances see the session, as agents on one storage do
    agents = [ReferenceAgent(clock=clock, store=shared), ReferenceAgent(clock=clock, name="agent-b", store=shared)]
    connectors = [MemoryConnector(agent) for agent in agents]
    endpoint: object = (
        connectors[0]
        if flavour == "single"
        else Pool(
            [Endpoint("a", connector=connectors[0]), Endpoint("b", connector=connectors[1])], placement=first_candidate
        )
    )
    with SqliteSessionStore(tmp_path / "sessions.db") as store:
        options = {"session_store": store, "session_store_key": "k", "clock": clock, "retry": FAST_RETRY}
        async with AcpClient(connectors[0], **options) as first:  # type: ignore[arg-type]
            session = await first.new_session("/tmp")
            await clock.run(session.prompt("hello"))
        states: list[State] = []
        recovered: list[RecoveryPath] = []
        callbacks = Callbacks(
            on_state_change=lambda state: states.append(state.state),
            on_resume=lambda outcome: recovered.append(outcome.path),
            on_replay=lambda outcome: recovered.append(outcome.path),
            on_new_session=lambda outcome: recovered.append(outcome.path),
        )
        async with AcpClient(endpoint, callbacks=callbacks, **options) as second:  # type: ignore[arg-type]
            await clock.settle()
            assert second.state.state is State.CONNECTED
            assert [h.session_id for h in second.sessions] == [session.session_id]
    assert states[:3] == [State.CONNECTING, State.RECOVERING, State.CONNECTED], states
    assert State.RECONNECTING not in states and State.SUSPENDED not in states
    assert len(recovered) == 1  # the restored session, recovered before connected
    for connector in connectors:
        await connector.aclose()


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_an_app_initiated_load_cut_off_is_replayed_by_the_next_recovery(flavour: str) -> None:
    """One drop rule for every link: a ``session/load`` the app made, cut off mid-replay, is
    reported cut off (the transcript keeps the history it had) and the next recovery replays it."""
    async with Harness(pool=flavour == "pool") as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        before = session.transcript.text()
        swallow = SwallowAnswer(h, "session/load")
        await h.drop_and_recover()  # the next link is the one that swallows
        loading = asyncio.ensure_future(h.client.load_session(session.session_id, "/a"))
        await h.clock.run(swallow.seen.wait(), limit=60.0)
        await h.clock.settle()
        swallow.active = False
        h.connector.drop()
        with pytest.raises(ConnectionLost):
            await loading
        assert inside(h.client).table.require(session.session_id).replay_cut_off
        assert session.transcript.text() == before
        await h.until_connected()
        outcome = h.outcomes[-1]
        assert outcome.path is RecoveryPath.REPLAY
        assert session.transcript.text() == before
        assert_legal(h)


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_the_outage_queue_holds_max_size_and_max_age(flavour: str) -> None:
    """One outage queue: during an outage ``max_size`` calls for a session wait, one more fails
    at once with ``QueueFull``, and a waiting one fails after ``max_age`` (fake) seconds."""
    queue = QueueOptions(max_size=2, max_age=30.0)
    async with Harness(pool=flavour == "pool", client_kwargs={"queue": queue}) as h:
        session = await h.client.new_session("/a")
        h.connector.refuse(None)
        h.connector.drop()
        await h.clock.settle()
        waiting = [asyncio.ensure_future(session.session_status()) for _ in range(2)]
        await h.clock.settle()
        assert not any(task.done() for task in waiting)
        with pytest.raises(QueueFull):
            await session.session_status()
        await h.clock.advance(30.0)
        for task in waiting:
            with pytest.raises(ConnectionLost) as info:
                await task
            assert not info.value.may_have_executed
        h.connector.accept()
        await h.until_connected()
        assert (await h.clock.run(session.session_status())).session_id == session.session_id


class Boom(Exception):
    pass


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_crashed_link_fails_its_turns_with_that_cause(flavour: str, version: int) -> None:
    """One crash hook for every link: a link whose own task dies of a bug fails the turns of the
    sessions on it with that cause at once (nothing hangs: v1's pending prompt request and v2's
    running turn alike), with one endpoint and in a pool."""
    async with Harness(pool=flavour == "pool", protocol_version=version) as h:
        session = await h.client.new_session("/work")
        turn = asyncio.ensure_future(session.prompt("/slow"))
        await h.clock.advance(1.0)
        assert session.turn_running
        await h.client.new_session("/work")
        inside(h.client).crash(Boom("bug in a supervisor task"))
        with pytest.raises((ConnectionLost, ClientClosed)) as caught:
            await h.clock.run(turn, limit=60)
        error = caught.value
        cause = error.cause if isinstance(error, ConnectionLost) else error.__cause__
        assert isinstance(cause, Boom), error
        assert not session.turn_running


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_clean_start_goes_connecting_then_connected(flavour: str) -> None:
    """No store: ``connect()`` goes ``connecting → connected`` and nothing else, with one endpoint
    and with several."""
    async with Harness(pool=flavour == "pool") as h:
        await h.clock.settle()
        assert [state.state for state in h.states] == [State.CONNECTING, State.CONNECTED]


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_an_outage_moves_through_the_same_legal_states(flavour: str) -> None:
    """One state machine: a drop, two refused reconnects, then a recovery go through the same
    states with one endpoint and in a pool (no state the core does not know, none repeated, every
    transition legal)."""
    async with Harness(pool=flavour == "pool") as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        h.connector.refuse(2)
        h.connector.drop()
        await h.until_connected()
        assert [str(state) for state in h.states] == [
            "connecting",
            "connected",
            "reconnecting(attempt=1, retry_in=0.00s)",
            "reconnecting(attempt=2, retry_in=1.00s)",
            "reconnecting(attempt=3, retry_in=2.00s)",
            "recovering",
            "connected",
        ]
        assert h.connector.refused == 2
        assert [outcome.path for outcome in h.outcomes] == [RecoveryPath.RESUME]
        assert_legal(h)


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_replay_cut_off_during_recovery_is_replayed_again(flavour: str) -> None:
    """One drop rule for every link, recovery's own replay too: the agent restarted (the session
    is stored, not in memory), the link drops in the middle of the replay, and the next recovery
    replays it again; the transcript holds the history once."""
    async with Harness(pool=flavour == "pool") as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        before = session.transcript.text()
        h.agent.lose_memory()
        swallow = SwallowAnswer(h, "session/load")  # the replay streams; its answer never comes
        h.connector.drop()
        await h.clock.run(swallow.seen.wait(), limit=60.0)
        await h.clock.settle()
        assert h.client.state.state is State.RECOVERING
        swallow.active = False
        h.connector.drop()  # cut off mid-replay
        await h.until_connected()
        assert [outcome.path for outcome in h.outcomes] == [RecoveryPath.REPLAY]
        assert session.transcript.text() == before
        assert (await h.clock.run(session.prompt("two"))).stop_reason == "end_turn"
        assert_legal(h)


def on_instance(name: str) -> object:
    """A placement that puts every new session on instance ``name``."""
    return lambda candidates, sessions: next(c for c in candidates if c.name == name)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("flavour", "where"), [("single", "a"), ("pool", "a"), ("pool", "b")])
async def test_every_link_has_the_crash_hook(flavour: str, where: str, version: int) -> None:
    """The crash hook is on every link, not only the first: the link a session lives on crashes,
    and that session's turn fails with the cause at once (nothing hangs)."""
    async with Harness(pool=flavour == "pool", placement=on_instance(where), protocol_version=version) as h:
        session = await h.client.new_session("/work")
        assert h.client.session(session.session_id).endpoint == (where if flavour == "pool" else None)
        link = await inside(h.client).links.link_for(inside(h.client).table.require(session.session_id), "x")
        turn = asyncio.ensure_future(session.prompt("/slow"))
        await h.clock.advance(1.0)
        assert session.turn_running
        inside(h.client).crash(Boom("bug in a link"), link=link)
        with pytest.raises((ConnectionLost, ClientClosed)) as caught:
            await h.clock.run(turn, limit=60)
        error = caught.value
        cause = error.cause if isinstance(error, ConnectionLost) else error.__cause__
        assert isinstance(cause, Boom), error
        assert not session.turn_running


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_one_state_machine_with_real_numbers_when_a_link_gives_up(flavour: str) -> None:
    """One state machine: while every instance is down, the client shows the link's own
    ``reconnecting`` states (attempt and delay from the retry policy); when that link gives up,
    one endpoint fails, and a pool is ``suspended`` with the failovers that found no instance as
    the attempt and the time until the next as ``retry_in`` — never invented numbers — until an
    instance takes the session. Every transition is legal."""
    policy = RetryPolicy(initial_delay=1.0, max_delay=8.0, jitter=False, max_attempts=3, suspend_after=None)
    async with Harness(pool=flavour == "pool", retry=policy) as h:
        session = await h.client.new_session("/a")
        for connector in (h.connector, h.other):
            if connector is not None:
                connector.refuse(None)
        h.connector.drop()
        await h.clock.advance(30.0)
        reconnecting = [s for s in h.states if s.state is State.RECONNECTING]
        assert [s.attempt for s in reconnecting] == [1, 2, 3]
        assert [s.retry_in for s in reconnecting] == [policy.delay(n) for n in (1, 2, 3)]
        if flavour == "single":
            assert h.client.state.state is State.FAILED
            assert_legal(h)
            return
        delay = 3600.0  # the harness pool's failover_delay
        assert h.client.state == ConnectionState(State.SUSPENDED, attempt=1, retry_in=delay)
        await h.clock.advance(delay)
        assert h.client.state == ConnectionState(State.SUSPENDED, attempt=2, retry_in=delay)
        assert h.other is not None
        h.other.accept()  # b answers: the next failover moves the session there
        await h.clock.advance(delay)
        await h.until_connected()
        assert session.endpoint == "b"
        assert_legal(h)
        shown = [(s.state, s.attempt) for s in h.states if s.state in (State.SUSPENDED, State.RECOVERING)]
        assert shown == [
            (State.RECOVERING, None),
            (State.SUSPENDED, 1),
            (State.RECOVERING, None),
            (State.SUSPENDED, 2),
            (State.RECOVERING, None),
        ], shown
