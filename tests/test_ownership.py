"""Ownership of stored sessions (a shared store), seen through AcpClient over memory transports on a
fake clock: the default owner, renewals, adoption (automatic, by callback, by ``adopt()``), fencing,
lost leases and release. The store measures leases on the same fake clock: no real sleeps."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

from acp_client import (
    AcpClient,
    Callbacks,
    ConfigurationError,
    OwnershipLost,
    RecoveryOutcome,
    SessionNotTracked,
    SessionOwnershipLost,
    SessionStoreError,
)
from acp_client.store import SqliteSessionStore, StoredSession
from acp_client.testing import FakeClock, ReferenceAgent

from ._harness import FAST_RETRY, HarnessConnector
from ._support import eventually

KEY = "memory://reference-agent"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
LEASE = 9.0  # renewed every 3 s of fake time


class FlakyStore(SqliteSessionStore):
    """A shared store whose renewals can be made to fail (the database unreachable)."""

    failing = False
    renewals = 0

    def renew(self, *args: Any, **kwargs: Any) -> Any:
        self.renewals += 1
        if self.failing:
            raise SessionStoreError("database unreachable", path=self.path)
        return super().renew(*args, **kwargs)


class Node:
    """One client (a replica) over the shared agent and store, recording what it is told."""

    def __init__(self, world: World, **kwargs: Any) -> None:
        self.connector = HarnessConnector(world.agent)
        self.outcomes: list[RecoveryOutcome] = []
        self.lost: list[OwnershipLost] = []
        record = self.outcomes.append
        callbacks = Callbacks(
            on_resume=record, on_replay=record, on_new_session=record, on_ownership_lost=self.lost.append
        )
        callbacks = attrs.evolve(callbacks, **kwargs.pop("callbacks", {}))
        kwargs.setdefault("lease_duration", LEASE)
        self.client = AcpClient(
            self.connector,
            session_store=world.store,
            session_store_key=KEY,
            clock=world.clock,
            retry=FAST_RETRY,
            callbacks=callbacks,
            **kwargs,
        )

    async def close(self) -> None:
        await self.client.aclose()
        await self.connector.aclose()


class World:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock()
        self.agent = ReferenceAgent(clock=self.clock)
        self.store = FlakyStore(tmp_path / "shared.db", clock=self.now)
        self.nodes: list[Node] = []

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.clock.monotonic())

    def node(self, **kwargs: Any) -> Node:
        node = Node(self, **kwargs)
        self.nodes.append(node)
        return node

    def lease(self, session_id: str) -> Any:
        return self.store.lease(KEY, session_id)

    async def steps(self, count: int, seconds: float = LEASE / 3) -> None:
        """Move fake time on by ``count`` renewal-sized steps, a quarter second at a time, letting the
        store work each moment starts finish (a round trip through every client's store thread)
        before time moves again; each step sees at least one renewal while a client runs."""
        for _ in range(count):
            before, end = self.store.renewals, self.clock.monotonic() + seconds
            for _ in range(400):
                if self.clock.monotonic() >= end and (not self.nodes or self.store.renewals > before):
                    break
                await self.clock.advance(0.25)
                await self.idle()
            else:
                raise AssertionError("no renewal in a renewal interval of fake time")

    async def idle(self) -> None:
        """Let the store work a renewal started run to its end (one more job on each worker)."""
        for node in self.nodes:
            if node.client.state.state.value != "closed":
                await node.client.adoptable_sessions()
        await self.clock.settle()


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    world = World(tmp_path)
    yield world
    for node in world.nodes:
        await node.close()
    world.store.close()


async def dead_owner_session(world: World, owner: str = "crashed:1:dead") -> str:
    """A session whose owner died mid-way: created and used, its lease left behind (never released)."""
    node = world.node(owner=owner)
    await node.client.connect()
    handle = await node.client.new_session("/work/crashed")
    await handle.prompt("before the crash")
    session_id = handle.session_id
    await node.close()
    world.nodes.remove(node)
    world.store.claim(KEY, [session_id], owner, duration=LEASE)  # as it was before the crash
    return session_id


# -- options --------------------------------------------------------------------------------------


def test_the_default_owner_is_host_pid_and_a_random_suffix(tmp_path: Path) -> None:
    import os
    import socket

    with SqliteSessionStore(tmp_path / "s.db") as store:
        one = AcpClient("ws://h/acp", session_store=store)
        two = AcpClient("ws://h/acp", session_store=store)
        assert one.owner is not None and two.owner is not None
        host, pid, suffix = one.owner.rsplit(":", 2)
        assert (host, pid) == (socket.gethostname(), str(os.getpid())) and len(suffix) == 8
        assert one.owner != two.owner
        assert AcpClient("ws://h/acp", session_store=store, owner="replica-a").owner == "replica-a"
        assert AcpClient("ws://h/acp").owner is None


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("owner", ""),
        ("owner", "a\nb"),
        ("owner", 3),
        ("lease_duration", float("nan")),
        ("lease_duration", float("inf")),
        ("lease_duration", True),
        ("lease_duration", 0),
        ("auto_adopt", 1),
    ],
)
def test_ownership_options_are_checked(tmp_path: Path, option: str, value: Any) -> None:
    with SqliteSessionStore(tmp_path / "s.db") as store, pytest.raises(ConfigurationError, match=option):
        AcpClient("ws://h/acp", session_store=store, **{option: value})


def test_an_owner_needs_a_store_with_ownership() -> None:
    class Plain:  # the records half of the protocol only
        def load(self, endpoint: str) -> list[StoredSession]:
            return []

        def get(self, endpoint: str, session_id: str) -> None: ...
        def save(self, session: StoredSession) -> None: ...
        def delete(self, endpoint: str, session_id: str) -> bool:  # type: ignore[empty-body]
            ...

        def rename(self, *args: Any, **kwargs: Any) -> None: ...
        def touch(self, *args: Any, **kwargs: Any) -> bool:  # type: ignore[empty-body]
            ...

        def save_transcript(self, *args: Any) -> bool:  # type: ignore[empty-body]
            ...

        def load_transcript(self, *args: Any) -> tuple[dict[str, Any], ...]:  # type: ignore[empty-body]
            ...

    with pytest.raises(ConfigurationError, match="SharedSessionStore"):
        AcpClient("ws://h/acp", session_store=Plain(), owner="a")  # type: ignore[arg-type]
    assert AcpClient("ws://h/acp", session_store=Plain()).owner is None  # type: ignore[arg-type]


# -- owning, renewing, releasing ----------------------------------------------------------------


async def test_a_new_session_is_owned_renewed_while_the_client_runs_and_released_on_close(world: World) -> None:
    node = world.node(owner="replica-a")
    await node.client.connect()
    handle = await node.client.new_session("/work/a")
    await handle.prompt("hello")
    sid = handle.session_id
    await eventually(lambda: world.lease(sid) is not None)
    first = world.lease(sid)
    assert (first.owner, first.token) == ("replica-a", 1)
    assert node.client.owned_sessions() == [sid]
    await world.steps(4)  # 12 s of fake time, past the 9 s lease: renewed all along
    lease = world.lease(sid)
    assert (lease.owner, lease.token) == ("replica-a", 1) and lease.expires_at > world.now()
    assert world.store.adoptable(KEY) == []
    await node.close()
    released = world.lease(sid)
    assert (released.owner, released.token) == (None, 1)
    assert [record.session_id for record in world.store.adoptable(KEY)] == [sid]


async def test_a_new_session_is_returned_only_once_its_owned_record_is_written(world: World) -> None:
    # A replica killed the moment new_session() returned must leave that session behind for
    # another to adopt: the record's save_owned has run by then (issue 21: on PostgreSQL it was
    # still queued behind the other writes, and the session was lost with the process).
    entered, gate = threading.Event(), threading.Event()
    save_owned = world.store.save_owned

    def slow_save_owned(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        gate.wait(10)
        return save_owned(*args, **kwargs)

    world.store.save_owned = slow_save_owned  # type: ignore[method-assign]
    node = world.node(owner="replica-a")
    await node.client.connect()
    opening = asyncio.ensure_future(node.client.new_session("/work/a"))
    try:
        await eventually(entered.is_set, what="save_owned started on the store thread")
        await world.clock.settle()
        assert not opening.done()  # the record is not written yet: no handle
    finally:
        gate.set()
    handle = await opening
    lease = world.lease(handle.session_id)
    assert lease is not None and (lease.owner, lease.token) == ("replica-a", 1)
    assert node.client.owned_sessions() == [handle.session_id]


async def test_a_named_owner_takes_its_sessions_back_after_a_restart(world: World) -> None:
    sid = await dead_owner_session(world, owner="replica-a")
    token = world.lease(sid).token
    node = world.node(owner="replica-a")
    await node.client.connect()  # within the old lease: its own, so it is recovered at once
    assert [outcome.previous_session_id for outcome in node.outcomes] == [sid]
    assert world.lease(sid).token == token  # the same owner: the token did not move
    assert node.client.session(sid).transcript.text().startswith("user: before the crash")


async def test_a_live_owners_sessions_are_left_alone_on_connect(world: World) -> None:
    sid = await dead_owner_session(world)
    node = world.node()
    await node.client.connect()
    assert node.outcomes == [] and node.client.sessions == []
    assert world.lease(sid).owner == "crashed:1:dead"


# -- adoption -------------------------------------------------------------------------------------


async def test_a_dead_owners_sessions_are_adopted_once_its_lease_runs_out(world: World) -> None:
    sid = await dead_owner_session(world)
    node = world.node(owner="replica-b")
    await node.client.connect()
    assert node.client.sessions == []
    await world.steps(4)  # the 9 s lease runs out; the next scan adopts
    await eventually(lambda: len(node.outcomes) == 1, what="the adoption's recovery")
    (outcome,) = node.outcomes
    assert outcome.previous_session_id == sid
    assert any("adopted from crashed:1:dead" in note for note in outcome.notes)
    lease = world.lease(sid)
    assert lease.owner == "replica-b" and lease.token > 1
    assert node.client.owned_sessions() == [sid]
    handle = node.client.session(sid)
    assert handle.transcript.text().startswith("user: before the crash")  # the stored conversation
    await handle.prompt("after the adoption")
    await world.steps(3)
    assert len(node.outcomes) == 1  # recovered exactly once


async def test_connect_adopts_what_nobody_holds(world: World) -> None:
    sid = await dead_owner_session(world)
    world.store.release(KEY, "crashed:1:dead")  # a clean close
    node = world.node()
    await node.client.connect()
    assert [outcome.previous_session_id for outcome in node.outcomes] == [sid]


async def test_decide_adoption_leaves_a_session_and_adopt_takes_it(world: World) -> None:
    sid = await dead_owner_session(world)
    asked: list[StoredSession] = []

    def decide(record: StoredSession) -> bool:
        asked.append(record)
        return False

    node = world.node(callbacks={"decide_adoption": decide})
    await node.client.connect()
    await world.steps(4)
    assert [record.session_id for record in asked][:1] == [sid]
    assert asked[0].lease is not None and asked[0].lease.owner == "crashed:1:dead"
    assert node.outcomes == [] and world.lease(sid).owner == "crashed:1:dead"
    assert [record.session_id for record in await node.client.adoptable_sessions()] == [sid]
    (handle,) = await node.client.adopt([sid])
    assert handle.session_id == sid
    await eventually(lambda: len(node.outcomes) == 1)
    assert world.lease(sid).owner == node.client.owner


async def test_auto_adopt_off_adopts_only_on_request(world: World) -> None:
    sid = await dead_owner_session(world)
    world.store.release(KEY, "crashed:1:dead")
    node = world.node(auto_adopt=False)
    await node.client.connect()
    await world.steps(2)
    assert node.client.sessions == []
    assert await node.client.adopt(["not-stored"]) == []
    (handle,) = await node.client.adopt([sid])
    assert [outcome.previous_session_id for outcome in node.outcomes] == [sid]
    await handle.prompt("mine now")


async def test_two_live_clients_never_both_adopt_a_session(world: World) -> None:
    sid = await dead_owner_session(world)
    nodes = [world.node(owner=f"replica-{name}") for name in "bc"]
    for node in nodes:
        await node.client.connect()
    await world.steps(5)
    await eventually(lambda: sum(len(node.outcomes) for node in nodes) == 1)
    await world.steps(3)
    owners = [node for node in nodes if sid in node.client.owned_sessions()]
    assert len(owners) == 1 and sum(len(node.outcomes) for node in nodes) == 1


async def test_adopt_needs_a_shared_store(world: World) -> None:
    client = AcpClient(HarnessConnector(world.agent), clock=world.clock, retry=FAST_RETRY)
    with pytest.raises(ConfigurationError, match="shared session store"):
        await client.adopt(["x"])


# -- losing a session -----------------------------------------------------------------------------


async def test_a_session_taken_over_is_lost_at_the_next_renewal_and_never_overwritten(world: World) -> None:
    node = world.node(owner="replica-a")
    await node.client.connect()
    handle = await node.client.new_session("/work/a")
    await handle.prompt("hello")
    sid = handle.session_id
    await eventually(lambda: world.lease(sid) is not None)
    world.store.release(KEY, "replica-a")  # as if its lease had run out...
    world.store.claim(KEY, [sid], "replica-z", duration=100)  # ...and another replica adopted it
    world.store.save(attrs.evolve(world.store.get(KEY, sid), title="z's"))
    await world.steps(1)
    await eventually(lambda: node.lost, what="the app told")
    (lost,) = node.lost
    assert (lost.session_id, lost.owner) == (sid, "replica-a")
    with pytest.raises(SessionNotTracked):
        node.client.session(sid)
    assert node.client.owned_sessions() == []
    await world.steps(2)
    assert len(node.lost) == 1  # told once
    stored = world.store.get(KEY, sid)
    assert stored is not None and stored.title == "z's" and stored.lease is not None
    assert stored.lease.owner == "replica-z" and stored.lease.token == 2
    await node.close()
    assert world.lease(sid).owner == "replica-z"  # closing released nothing of another's


async def test_a_fenced_write_loses_the_session_at_once(world: World, caplog: pytest.LogCaptureFixture) -> None:
    node = world.node(owner="replica-a")
    await node.client.connect()
    handle = await node.client.new_session("/work/a")
    sid = handle.session_id
    await eventually(lambda: world.lease(sid) is not None)
    world.store.release(KEY, "replica-a")
    world.store.claim(KEY, [sid], "replica-z", duration=100)
    before = world.store.get(KEY, sid)
    with pytest.raises(SessionOwnershipLost) as raised:  # the touch is fenced out: lost while it ran
        await handle.prompt("a write the store refuses")
    assert raised.value.holder == "replica-z" and isinstance(raised.value, SessionNotTracked)
    await eventually(lambda: node.lost, what="the app told")
    assert node.lost[0].holder == "replica-z"
    assert world.store.get(KEY, sid).last_used_at == before.last_used_at  # nothing overwritten
    assert world.store.load_transcript(KEY, sid) == ()
    warnings = [r for r in caplog.records if "lost session" in r.getMessage()]
    assert len(warnings) == 1  # logged once


async def test_renewals_that_keep_failing_lose_the_sessions_when_the_lease_runs_out(world: World) -> None:
    node = world.node(owner="replica-a")
    await node.client.connect()
    handle = await node.client.new_session("/work/a")
    sid = handle.session_id
    await eventually(lambda: world.lease(sid) is not None)
    world.store.failing = True
    calls = world.store.renewals
    await world.steps(1)  # the first failure: retried sooner than the next renewal
    assert node.lost == []
    await world.steps(6, seconds=1.0)
    assert world.store.renewals - calls >= 4  # retried
    await eventually(lambda: node.lost, what="the app told")
    assert node.lost[0].session_id == sid and "ran out" in node.lost[0].reason
    world.store.failing = False
    with pytest.raises(SessionNotTracked):
        node.client.session(sid)


async def test_a_client_without_a_shared_store_keeps_working_as_before(world: World, tmp_path: Path) -> None:
    node = world.node()
    await node.client.connect()
    handle = await node.client.new_session("/work/a")
    await handle.prompt("hello")
    await node.close()
    world.nodes.remove(node)
    again = world.node()
    await again.client.connect()  # released on close: adopted at once, as the store recovered it before
    assert [outcome.previous_session_id for outcome in again.outcomes] == [handle.session_id]


def test_the_sync_facade_takes_the_same_options(tmp_path: Path) -> None:
    from acp_client.sync import SyncAcpClient

    with SqliteSessionStore(tmp_path / "s.db") as store:
        client = SyncAcpClient("ws://h/acp", session_store=store, owner="replica-s", lease_duration=5, auto_adopt=False)
        assert client.owner == "replica-s" and client.client.owner == "replica-s"
        for option, value in (("lease_duration", float("nan")), ("owner", ""), ("auto_adopt", "yes")):
            with pytest.raises(ConfigurationError, match=option):
                SyncAcpClient("ws://h/acp", session_store=store, **{option: value})


# -- no send without a live lease ------------------------------------------------------------------


async def owned_session(world: World, node: Node) -> Any:
    await node.client.connect()
    handle = await node.client.new_session("/work/a")
    await handle.prompt("hello")
    await eventually(lambda: world.lease(handle.session_id) is not None)
    return handle


async def test_a_send_with_the_lease_too_close_to_its_end_is_refused_when_renewing_fails(world: World) -> None:
    node = world.node(owner="replica-a")
    handle = await owned_session(world, node)
    world.store.failing = True  # the store cannot be reached: renewals fail
    await world.clock.advance(LEASE * 0.8)  # past the lease's safety margin, not past the lease
    prompts = len(node.connector.messages("session/prompt"))
    with pytest.raises(SessionOwnershipLost, match="could not be renewed"):
        await handle.prompt("not sent")
    assert len(node.connector.messages("session/prompt")) == prompts  # nothing reached the agent
    assert node.lost == []  # possibly lost, not known lost: still tracked
    world.store.failing = False
    result = await handle.prompt("sent once the lease is renewed")  # the check renews first
    assert result.stop_reason == "end_turn"
    assert len(node.connector.messages("session/prompt")) == prompts + 1


async def test_a_stale_owner_waking_past_its_lease_sends_nothing_and_is_told(world: World) -> None:
    # A process stopped (SIGSTOP) past its lease: no renewal ran; another replica adopted meanwhile.
    node = world.node(owner="replica-a")
    handle = await owned_session(world, node)
    sid = handle.session_id
    world.store.failing = True  # (the renewal task runs on the fake clock: it must not renew here)
    await world.clock.advance(LEASE * 0.8)  # past the safety margin on its own clock
    expired = world.now() + timedelta(seconds=LEASE)
    assert world.store.claim(KEY, [sid], "replica-z", duration=100, now=expired)  # adopted elsewhere
    world.store.failing = False
    prompts = len(node.connector.messages("session/prompt"))
    with pytest.raises(SessionOwnershipLost) as raised:
        await handle.prompt("from a stale owner")
    assert len(node.connector.messages("session/prompt")) == prompts  # never sent
    assert raised.value.session_id == sid
    (lost,) = node.lost
    assert lost.session_id == sid and node.client.owned_sessions() == []
    with pytest.raises(SessionNotTracked):
        node.client.session(sid)


async def test_a_turn_running_when_the_session_is_lost_fails_and_is_never_reported_ended(world: World) -> None:
    node = world.node(owner="replica-a")
    handle = await owned_session(world, node)
    sid = handle.session_id
    turn = asyncio.ensure_future(handle.prompt("/slow"))
    await eventually(lambda: len(node.connector.messages("session/prompt")) == 2, what="the slow prompt sent")
    world.store.release(KEY, "replica-a")
    world.store.claim(KEY, [sid], "replica-z", duration=100)
    await world.steps(1)  # the next renewal finds it gone
    with pytest.raises(SessionOwnershipLost):
        await turn
    assert [item.session_id for item in node.lost] == [sid]


async def test_a_session_is_listed_as_owned_only_once_the_client_tracks_it(world: World) -> None:
    sid = await dead_owner_session(world)
    world.store.release(KEY, "crashed:1:dead")
    node = world.node(owner="replica-b", auto_adopt=False)
    await node.client.connect()
    entered, gate = threading.Event(), threading.Event()
    load_transcript = world.store.load_transcript

    def slow_load_transcript(*args: Any) -> Any:  # read after the claim, before the session is tracked
        entered.set()
        gate.wait(10)
        return load_transcript(*args)

    world.store.load_transcript = slow_load_transcript  # type: ignore[method-assign]
    adopting = asyncio.ensure_future(node.client.adopt([sid]))
    try:
        await eventually(entered.is_set, what="the adoption's claim made")
        assert world.lease(sid).owner == "replica-b"  # claimed in the store...
        assert node.client.owned_sessions() == []  # ...but not the client's to use yet
        with pytest.raises(SessionNotTracked):
            node.client.session(sid)
    finally:
        gate.set()
    (handle,) = await adopting
    assert node.client.owned_sessions() == [sid] and node.client.session(sid).session_id == handle.session_id


async def test_a_reconnect_after_the_lease_lapsed_recovers_nothing_another_client_adopted(world: World) -> None:
    node = world.node(owner="replica-a")
    handle = await owned_session(world, node)
    sid = handle.session_id
    world.store.failing = True
    await world.clock.advance(LEASE * 0.8)  # past the safety margin on its own clock
    assert world.store.claim(KEY, [sid], "replica-z", duration=100, now=world.now() + timedelta(seconds=LEASE))
    world.store.failing = False
    sent = len(node.connector.sent())
    node.connector.drop()  # the reconnect's recovery checks the lease before its probe and resume

    async def reconnected() -> bool:  # fake time moves on, and the store's thread finishes its work
        await world.clock.advance(0.05)
        await world.idle()
        return bool(node.lost) and node.client.state.state.value == "connected"

    await eventually(reconnected, what="reconnected, and the app told the session is lost")
    after = [message.get("params", {}).get("sessionId") for message in node.connector.sent()[sent:]]
    assert sid not in after  # no status, resume or load for a session another client holds
    assert node.lost[0].session_id == sid and node.client.sessions == []
