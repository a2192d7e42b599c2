"""``examples/router.py`` under the faults that could put one session on two instances.

Three reference agents run as processes sharing one store directory (so a session one saved is
``inactive`` on the others), the router runs in this process, editors are ``AcpClient``s, and a
status poller asks every instance about the session the whole time: no round may find it
``active`` on two instances, except between a given-up home waking up and the router closing
its stale copy — that window is measured and printed. The paused-home cases run with the
router's homes in memory, in SQLite, and in PostgreSQL (a shared store: the instances' liveness
records live there too).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from acp_client import AcpClient, Callbacks, State
from acp_client.state import Probe
from tests._support import FAST_RETRY, eventually
from tests.examples._router_support import AgentProcess, Poller, Router, agents, routing

PROBE_TIMEOUT = 0.5
SWEEP = 0.2
POLL_EVERY = 0.05


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    if request.param == "memory":
        return None
    if request.param == "sqlite":
        return str(tmp_path / "routers.db")
    return str(request.getfixturevalue("postgres_database").url)


def silent_for(router: Router, agent: AgentProcess, seconds: float) -> bool:
    """Whether the router has had no answer from ``agent`` for ``seconds`` (it noticed the pause)."""
    instance = router.instances[agent.url]
    return instance.silent_since is not None and time.monotonic() - instance.silent_since >= seconds


async def home_of(router: Router, session_id: str) -> str | None:
    home = await router.home_of(session_id)
    return None if home is None else home.url


async def test_a_paused_home_is_waited_for_and_keeps_its_session(tmp_path: Path, store: str | None) -> None:
    async with (
        agents(tmp_path) as (a, b, c),
        routing([a.url, b.url, c.url], store=store, probe_timeout=PROBE_TIMEOUT, home_wait=10.0, sweep=SWEEP) as (
            router,
            url,
        ),
    ):
        poller = Poller([a, b, c])
        async with poller.running(POLL_EVERY), AcpClient(url, retry=None) as first:
            session = await first.new_session("/work")
            sid = session.session_id
            poller.sessions.add(sid)
            assert await home_of(router, sid) == a.url  # round robin: the first instance
            await session.prompt("one")
            a.pause()  # between turns, longer than the probe timeout
            paused_at = poller.rounds
            async with AcpClient(url, retry=None) as second:
                loading = asyncio.ensure_future(second.load_session(sid, "/work"))
                await eventually(
                    lambda: silent_for(router, a, 3 * PROBE_TIMEOUT), what="the router to miss a's answers"
                )
                assert not loading.done()  # the router waits for the home; it does not load it elsewhere
                a.resume()
                loaded = await asyncio.wait_for(loading, 30)
                assert (await loaded.prompt("two")).stop_reason == "end_turn"
                assert await home_of(router, sid) == a.url  # never moved
        assert poller.rounds > paused_at and poller.doubles == [], poller.doubles
        assert router.instances.closed_copies == []
        assert a.history(sid).count("two") == 1, a.history(sid)


async def test_a_home_silent_past_the_wait_moves_and_its_copy_is_closed_when_it_wakes(
    tmp_path: Path, store: str | None
) -> None:
    home_wait = 1.5
    async with (
        agents(tmp_path) as (a, b, c),
        routing([a.url, b.url, c.url], store=store, probe_timeout=PROBE_TIMEOUT, home_wait=home_wait, sweep=SWEEP) as (
            router,
            url,
        ),
    ):
        poller = Poller([a, b, c])
        async with poller.running(POLL_EVERY), AcpClient(url, retry=None) as first:
            session = await first.new_session("/work")
            sid = session.session_id
            poller.sessions.add(sid)
            await session.prompt("one")
            a.pause()
            states: list[State] = []
            callbacks = Callbacks(on_state_change=lambda state: states.append(state.state))
            async with AcpClient(url, retry=FAST_RETRY, callbacks=callbacks) as second:
                started = time.monotonic()
                loaded = await asyncio.wait_for(second.load_session(sid, "/work"), 30)
                waited = time.monotonic() - started
                assert waited >= home_wait, waited  # not moved before the home was silent that long
                moved_to = await home_of(router, sid)
                assert moved_to in (b.url, c.url)
                # The editor still attached at the old home is let go: it would reattach where the session is now.
                await eventually(lambda: first.state.state is not State.CONNECTED, what="the first editor let go")
                assert (await loaded.prompt("two")).stop_reason == "end_turn"
                a.resume()  # the given-up home wakes with the session still in memory
                await eventually(lambda: router.instances.closed_copies, what="the stale copy on a to be closed")
                ((closed_sid, closed_on, closing),) = router.instances.closed_copies
                assert closed_sid == sid and closed_on == a.url
                # The new home dies: the stale copy is no more, so nothing older than the store comes back.
                new_home = b if moved_to == b.url else c
                await new_home.kill()
                await eventually(lambda: State.RECONNECTING in states, what="the editor to hear of the drop")
                assert (await asyncio.wait_for(loaded.prompt("three"), 30)).stop_reason == "end_turn"
                outcome = second.recovery_outcomes[-1]
                assert outcome.session_id == sid and outcome.path.value == "replay", outcome
                text = loaded.transcript.text()
                for prompt in ("one", "two", "three"):
                    assert text.count(f"user: {prompt}") == 1, text
        longest = poller.longest_double(POLL_EVERY)
        bound = SWEEP + PROBE_TIMEOUT
        print(
            f"\nstale copy: seen active on two instances for at most {longest:.3f} s by the poller; closed "
            f"{closing:.3f} s after the router's probe of its instance began (bound: sweep + probe = {bound:g} s)"
        )
        assert longest <= bound + 2 * poller.timeout, (longest, poller.doubles)
        history = " ".join(a.history(sid))
        for prompt in ("one", "two", "three"):
            assert prompt in history, history  # no turn lost from the store


async def test_a_restarted_home_takes_its_session_back(tmp_path: Path) -> None:
    async with (
        agents(tmp_path) as (a, b, c),
        routing([a.url, b.url, c.url], probe_timeout=PROBE_TIMEOUT, home_wait=10.0, sweep=SWEEP) as (router, url),
    ):
        poller = Poller([a, b, c])
        async with poller.running(POLL_EVERY):
            async with AcpClient(url, retry=None) as first:
                session = await first.new_session("/work")
                sid = session.session_id
                poller.sessions.add(sid)
                await session.prompt("one")
                assert (await first.session_status(sid)).status is Probe.ACTIVE  # the router's probe links are up
            connects = router.instances[a.url].connects
            assert connects == 1
            await a.restart()  # same port, a new process: the session is no longer in its memory
            async with AcpClient(url, retry=None) as second:
                loaded = await second.load_session(sid, "/work")
                assert (await loaded.prompt("two")).stop_reason == "end_turn"
                assert "user: one" in loaded.transcript.text()
        assert await home_of(router, sid) == a.url  # it answered again: the session stayed home
        assert router.instances[a.url].connects == connects + 1  # its probe link, reopened once
        assert poller.doubles == []


async def test_session_new_never_picks_a_dead_or_paused_instance(tmp_path: Path) -> None:
    async with (
        agents(tmp_path) as (a, b, c),
        routing([a.url, b.url, c.url], probe_timeout=PROBE_TIMEOUT, home_wait=10.0, sweep=SWEEP) as (router, url),
    ):
        await b.kill()
        async with AcpClient(url, retry=None) as editor:
            sessions = [await editor.new_session("/work") for _ in range(6)]
            homes = [await home_of(router, s.session_id) for s in sessions]
        assert b.url not in homes and set(homes) == {a.url, c.url}, homes
        c.pause()  # alive but not answering: left out as well, once it fails to answer in time
        async with AcpClient(url, retry=None) as editor:
            sessions = [await editor.new_session("/work") for _ in range(4)]
            homes = [await home_of(router, s.session_id) for s in sessions]
        assert set(homes) == {a.url}, homes


async def test_an_instance_death_touches_only_the_editors_with_sessions_there(tmp_path: Path) -> None:
    async with (
        agents(tmp_path) as (a, b, c),
        routing([a.url, b.url, c.url], probe_timeout=PROBE_TIMEOUT, home_wait=10.0, sweep=SWEEP) as (router, url),
    ):
        states: dict[str, list[State]] = {"on-a": [], "on-b": []}

        def watch(name: str) -> Callbacks:
            return Callbacks(on_state_change=lambda state: states[name].append(state.state))

        async with (
            AcpClient(url, retry=FAST_RETRY, callbacks=watch("on-a")) as on_a,
            AcpClient(url, retry=FAST_RETRY, callbacks=watch("on-b")) as on_b,
        ):
            at_a = await on_a.new_session("/work")
            at_b = await on_b.new_session("/work")
            assert await home_of(router, at_a.session_id) == a.url
            assert await home_of(router, at_b.session_id) == b.url
            await at_b.prompt("before")
            await a.kill()  # the first instance: it answered the first initialize
            await eventually(lambda: State.RECONNECTING in states["on-a"], what="the editor on a to reconnect")
            assert (await at_a.prompt("after")).stop_reason == "end_turn"  # recovered elsewhere (replay)
            assert (await at_b.prompt("after")).stop_reason == "end_turn"
            assert State.RECONNECTING not in states["on-b"], states["on-b"]  # never touched


async def test_a_move_waits_for_an_instance_that_can_take_the_session(tmp_path: Path) -> None:
    async with (
        agents(tmp_path) as (a, b, c),
        routing([a.url, b.url, c.url], probe_timeout=PROBE_TIMEOUT, home_wait=10.0, sweep=SWEEP) as (router, url),
    ):
        async with AcpClient(url, retry=None) as first:
            session = await first.new_session("/work")
            sid = session.session_id
            await session.prompt("one")
        await a.kill()  # the home is gone (refused) ...
        b.pause()  # ... and the instances that could take the session over are only slow
        c.pause()
        async with AcpClient(url, retry=None) as second:
            loading = asyncio.ensure_future(second.load_session(sid, "/work"))
            await eventually(lambda: silent_for(router, b, 3 * PROBE_TIMEOUT), what="the router to miss b's answers")
            assert not loading.done()  # not "unknown" (the editor would start afresh): the router waits
            b.resume()
            loaded = await asyncio.wait_for(loading, 30)
            assert (await loaded.prompt("two")).stop_reason == "end_turn"
            assert "user: one" in loaded.transcript.text()
        assert await home_of(router, sid) == b.url
