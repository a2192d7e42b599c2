"""``examples/router.py --store``: two router replicas behind HAProxy share one store (issue 21 item 5).

::

    AcpClient ──► HAProxy ──┬──► router replica a ──┬──► agent-a (ReferenceServer)
                 (cookie)   └──► router replica b ──┴──► agent-b  (one agent-side store)
                                  └─ one session store (SQLite file or PostgreSQL) ─┘

The replicas are real subprocesses sharing the session homes and their leases in the store. The
client is mid-conversation when the replica serving it is killed with SIGKILL; the client
reconnects through HAProxy to the other replica, which takes the session over once the dead
replica's lease expires and sends it to the instance that holds it: the next prompt succeeds and
the transcript has every turn exactly once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from acp_client import AcpClient, Callbacks, State
from acp_client.pool import Endpoint
from acp_client.store import SharedSessionStore, SqliteSessionStore, StoredSession
from acp_client.testing import ReferenceAgent, ReferenceServer, SessionStore
from tests._support import FAST_RETRY, eventually
from tests.examples._chat_support import EXAMPLES, _env
from tests.peers.haproxy import HaproxyFactory

ROUTER = EXAMPLES / "router.py"
sys.path.insert(0, str(EXAMPLES))
from router_instances import Instance  # noqa: E402
from router_store import NotOwner, StoreHomes, open_store, store_key  # noqa: E402

LEASE = 1.5


async def start_replica(name: str, urls: list[str], store: str, log: Path) -> tuple[asyncio.subprocess.Process, int]:
    with log.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROUTER),
            *urls,
            "--port",
            "0",
            "--probe-timeout",
            "1",
            "--store",
            store,
            "--owner",
            f"router-{name}",
            "--lease",
            str(LEASE),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=_env(),
        )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    assert line.startswith("READY "), (line, log.read_text())
    return process, int(line.split()[1].rsplit(":", 1)[1].split("/")[0])


@pytest_asyncio.fixture
async def agents(tmp_path: Path) -> AsyncIterator[list[ReferenceServer]]:
    shared = SessionStore(tmp_path / "agent-store")
    servers = [ReferenceServer(ReferenceAgent(name=f"agent-{name}", store=shared)) for name in "ab"]
    for server in servers:
        await server.start()
    yield servers
    for server in servers:
        await server.aclose()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "routers.db")
    return str(request.getfixturevalue("postgres_database").url)


def serving(client: AcpClient, url: str) -> str:
    """``a`` or ``b``: the replica HAProxy's affinity cookie names."""
    header = client.cookies.header_for(url) or ""
    values = dict(part.strip().split("=", 1) for part in header.split(";") if "=" in part)
    return values["SERVERID"]


async def test_the_conversation_continues_through_the_other_replica_when_one_is_killed(
    agents: list[ReferenceServer], haproxy: HaproxyFactory, store_url: str, tmp_path: Path
) -> None:
    urls = [server.ws_url for server in agents]
    replicas: dict[str, asyncio.subprocess.Process] = {}
    ports = {}
    try:
        for name in "ab":
            replicas[name], ports[name] = await start_replica(name, urls, store_url, tmp_path / f"router-{name}.log")
        lb = await haproxy(ports)
        url = lb.url("ws")
        states: list[State] = []
        callbacks = Callbacks(on_state_change=lambda state: states.append(state.state))
        async with AcpClient(url, retry=FAST_RETRY, callbacks=callbacks) as client:
            handle = await client.new_session("/work/project")
            session_id = handle.session_id
            assert (await handle.prompt("first")).stop_reason == "end_turn"
            assert (await handle.prompt("second")).stop_reason == "end_turn"
            victim = serving(client, url)
            other = "b" if victim == "a" else "a"
            store: SharedSessionStore = await asyncio.to_thread(open_store, store_url)
            key = store_key(urls)
            stored = store.get(key, session_id)
            assert stored is not None and stored.lease is not None
            assert stored.lease.owner == f"router-{victim}"  # the replica serving the client acts for it
            home = stored.extra["home"]
            assert home in urls

            seen = len(states)
            os.kill(replicas[victim].pid, signal.SIGKILL)  # mid-conversation, between turns
            await replicas[victim].wait()
            # The editor hears of it (HAProxy closes its connection) before it types the next prompt; a
            # prompt written in between could be lost with the dead replica, and the client could not tell
            # whether it ran (it is then never sent again: "may have executed").
            await eventually(lambda: State.RECONNECTING in states[seen:], timeout=10, what="the drop heard")

            answer = await asyncio.wait_for(handle.prompt("third"), 30)
            assert answer.stop_reason == "end_turn"
            assert serving(client, url) == other
            assert handle.session_id == session_id  # resumed on its instance, not a new session
            after = store.get(key, session_id)
            assert after is not None and after.lease is not None
            assert after.lease.owner == f"router-{other}"
            assert after.lease.token > stored.lease.token  # taken over: the fence moved on
            assert after.extra["home"] == home
            text = handle.transcript.text()
            for prompt in ("first", "second", "third"):
                assert text.count(f"user: {prompt}") == 1, text
                assert text.count(f"echo: {prompt}") == 1, text
            assert (await handle.prompt("fourth")).stop_reason == "end_turn"
        # The client is gone: the surviving replica gives the lease up (another could take it at once).
        await eventually(lambda: _unowned(store, key, session_id), timeout=10)
        store.close()
    finally:
        for process in replicas.values():
            if process.returncode is None:
                process.kill()
                await process.wait()


def _unowned(store: Any, key: str, session_id: str) -> bool:
    record = store.get(key, session_id)
    return record is not None and record.lease is not None and record.lease.owner is None


async def test_a_replica_acts_only_under_the_lease_and_a_stale_one_is_fenced_out(tmp_path: Path) -> None:
    endpoints = Endpoint.many(["ws://127.0.0.1:9001/acp", "ws://127.0.0.1:9002/acp"])
    path = tmp_path / "routers.db"
    with SqliteSessionStore(path) as store_a, SqliteSessionStore(path) as store_b:
        a = StoreHomes(endpoints, store_a, owner="router-a", lease=30, claim_wait=0)
        b = StoreHomes(endpoints, store_b, owner="router-b", lease=30, claim_wait=0)
        lost: list[str] = []
        a.on_lost = lost.append
        await a.settle("sess-1", endpoints[1], "/work", new=True)
        a.use("sess-1")
        stale = a.held["sess-1"]
        assert await b.home("sess-1") == endpoints[1]  # the home is shared through the store
        with pytest.raises(NotOwner, match="held by router-a"):
            await b.acquire("sess-1")  # a's lease is live: b may not act for it
        await a.unuse(["sess-1"])  # the last editor using it on a is gone: released
        await b.acquire("sess-1")  # taken at once, no waiting for an expiry
        await b.settle("sess-1", endpoints[0], "/work", new=False)
        # a comes back believing it still holds the session (paused past the hand-over): fenced out.
        stale.until = float("inf")
        a.held["sess-1"] = stale
        with pytest.raises(NotOwner):
            await a.settle("sess-1", endpoints[1], "/work", new=False)
        assert lost == ["sess-1"] and "sess-1" not in a.held
        record = store_b.get(b.key, "sess-1")
        assert record is not None and record.extra["home"] == endpoints[0].url  # b's write stands
        assert record.lease is not None and record.lease.token > stale.fence.token
        await a.aclose()
        await b.aclose()


async def test_a_replica_whose_lease_ran_out_and_was_taken_forgets_the_session(tmp_path: Path) -> None:
    endpoints = Endpoint.many(["ws://127.0.0.1:9001/acp"])
    path = tmp_path / "routers.db"
    with SqliteSessionStore(path) as store_a, SqliteSessionStore(path) as store_b:
        a = StoreHomes(endpoints, store_a, owner="router-a", lease=0.3, claim_wait=0)
        b = StoreHomes(endpoints, store_b, owner="router-b", lease=30, claim_wait=0)
        lost: list[str] = []
        a.on_lost = lost.append
        await a.settle("sess-1", endpoints[0], "/work", new=True)  # a is paused: it renews nothing

        async def b_takes_it() -> bool:
            try:
                await b.acquire("sess-1")
            except NotOwner:
                return False
            return True

        await eventually(b_takes_it, timeout=10, what="b adopts the session once a's lease expired")
        await a.start()  # a runs again: its renewal comes back without the session
        await eventually(lambda: lost == ["sess-1"], timeout=10, what="a forgets the session")
        assert "sess-1" not in a.held
        await a.aclose()
        await b.aclose()


async def test_with_the_store_down_a_replica_keeps_what_it_holds_and_takes_nothing(tmp_path: Path) -> None:
    endpoints = Endpoint.many(["ws://127.0.0.1:9001/acp"])
    store = SqliteSessionStore(tmp_path / "routers.db")
    homes = StoreHomes(endpoints, store, owner="router-a", lease=30, claim_wait=0)
    await homes.settle("held", endpoints[0], "/work", new=True)
    store.save(StoredSession(endpoint=homes.key, session_id="other", cwd="/work", extra={"home": endpoints[0].url}))
    store.close()  # the database is gone
    await homes.acquire("held")  # its lease is still ours: it goes on acting for it
    assert await homes.home("held") == endpoints[0]
    with pytest.raises(NotOwner, match="unavailable"):
        await homes.acquire("other")  # never takes a session it cannot claim
    with pytest.raises(NotOwner, match="unavailable"):
        await homes.settle("new", endpoints[0], "/work", new=True)  # nor homes one it cannot store


async def test_a_home_another_replica_still_hears_is_not_given_up(tmp_path: Path) -> None:
    endpoints = Endpoint.many(["ws://127.0.0.1:9001/acp"])
    path = tmp_path / "routers.db"
    with SqliteSessionStore(path) as store_a, SqliteSessionStore(path) as store_b:
        a = StoreHomes(endpoints, store_a, owner="router-a", lease=30, claim_wait=0)
        b = StoreHomes(endpoints, store_b, owner="router-b", lease=30, claim_wait=0)
        a.liveness_ttl = b.liveness_ttl = 0.5
        silent = Instance(endpoints[0])  # b has had no answer from it for a long time
        silent.silent_since = time.monotonic() - 60
        assert not await b.heard_elsewhere(endpoints[0])
        assert silent.gone(1.0, heard_elsewhere=False) is not None  # no one hears it: gone
        await a.heard(endpoints[0])  # a hears it: its liveness record is renewed in the store
        assert await b.heard_elsewhere(endpoints[0])
        assert silent.gone(1.0, heard_elsewhere=True) is None  # b does not give it up
        # a stops hearing it: the record expires, and only then is it gone for b too.
        await eventually(lambda: _not_heard(b, endpoints[0]), timeout=10, what="the liveness record to expire")
        silent.refused = True
        assert silent.gone(1.0, heard_elsewhere=True) == "its connection is refused"  # proof beats the record


async def _not_heard(homes: StoreHomes, endpoint: Endpoint) -> bool:
    return not await homes.heard_elsewhere(endpoint)
