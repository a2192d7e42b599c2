"""A property over random kills and restarts of replicas sharing one store, at the client's store
half (:class:`acp_client._engine._ownership.FencedStore`, what every client write goes through) over a real
SQLite file, on a fake store clock:

- no session is ever held (a live lease) by two replicas at once, and never recovered (adopted) by
  two: at any moment at most one replica believes it holds a session whose lease is live;
- no stored turn is lost: every turn a replica's write stored is in the session's conversation;
- a fenced-out writer never overwrites: a stale replica's write is refused and changes nothing.

A small budget by default; ``-m soak`` with ``ACP_SOAK_SECONDS`` runs it longer.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from acp_client._engine._ownership import FencedStore
from acp_client.store import SessionStoreFenced, SqliteSessionStore, StoredSession

KEY = "ws://agent.example/acp"
LEASE = 10.0
SESSIONS = ("s0", "s1")
REPLICAS = 2
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

#: (what, replica, session, seconds)
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["write", "write", "renew", "adopt", "adopt", "kill", "restart", "wait", "wait", "create", "close"]
        ),
        st.integers(0, REPLICAS - 1),
        st.sampled_from(SESSIONS),
        st.floats(0.5, 2 * LEASE),
    ),
    max_size=40,
)


class Replica:
    generation = 0

    def __init__(self, path: Path, clock: Any, index: int) -> None:
        Replica.generation += 1
        self.store = SqliteSessionStore(path, clock=clock)
        self.fenced = FencedStore(self.store, KEY, f"replica-{index}-{Replica.generation}", LEASE)
        self.alive = True
        #: The conversation this replica shows for each session it took (a client saves it whole).
        self.local: dict[str, list[dict[str, Any]]] = {}


def run(tmp_path: Path, ops: list[tuple[str, int, str, float]]) -> None:
    now = [T0]
    clock = lambda: now[0]  # noqa: E731
    path = tmp_path / f"prop-{Replica.generation}.db"
    replicas = [Replica(path, clock, index) for index in range(REPLICAS)]
    stored_turns: dict[str, list[str]] = {sid: [] for sid in SESSIONS}
    adoptions: dict[str, list[tuple[str, datetime]]] = {sid: [] for sid in SESSIONS}
    turn = 0
    for what, index, sid, seconds in ops:
        replica = replicas[index]
        if what == "wait":
            now[0] += timedelta(seconds=seconds)
        elif what == "kill":  # kill -9: no release; it simply stops (its leases run out)
            replica.alive = False
        elif what == "restart":  # a new process, a new default owner name
            replica.store.close()
            replicas[index] = Replica(path, clock, index)
        elif not replica.alive:
            continue
        elif what == "close":  # a clean close: leases released
            replica.fenced.release()
            replica.alive = False
        elif what == "create" and replica.store.get(KEY, sid) is None:
            replica.fenced.save(StoredSession(endpoint=KEY, session_id=sid, cwd="/w"))
            replica.local[sid] = []
        elif what == "renew":
            replica.fenced.renew()
        elif what == "adopt":
            candidates = [record.session_id for record in replica.fenced.adoptable()]
            for taken in replica.fenced.claim(candidates):
                adoptions[taken].append((replica.fenced.owner, now[0]))
                replica.local[taken] = list(replica.store.load_transcript(KEY, taken))  # restored
        elif what == "write" and sid in replica.local:  # a turn ends: the whole conversation saved
            turn += 1
            before = replica.store.load_transcript(KEY, sid)
            entries = [*replica.local[sid], {"role": "user", "text": f"turn {turn}"}]
            holder_before = replica.store.get(KEY, sid)
            try:
                written = replica.fenced.save_transcript(KEY, sid, entries)
            except SessionStoreFenced:
                # Refused: nothing changed, and the replica no longer believes it holds the session.
                assert replica.store.load_transcript(KEY, sid) == before
                assert sid not in replica.fenced.held
                assert holder_before is not None
                del replica.local[sid]  # lost: no longer tracked
                continue
            if written:
                stored_turns[sid].append(f"turn {turn}")
                replica.local[sid] = entries
            else:
                assert replica.store.load_transcript(KEY, sid) == before  # not held: not written
        check(replicas, now[0], stored_turns, adoptions)
    for replica in replicas:
        replica.store.close()


def check(
    replicas: list[Replica],
    now: datetime,
    stored_turns: dict[str, list[str]],
    adoptions: dict[str, list[tuple[str, datetime]]],
) -> None:
    store = replicas[0].store
    for sid in SESSIONS:
        lease = store.lease(KEY, sid)
        live = lease is not None and lease.owner is not None and lease.expires_at > now
        believers = [
            r.fenced.owner
            for r in replicas
            if r.alive and sid in r.fenced.held and r.fenced.held[sid].token == (lease.token if lease else -1)
        ]
        assert len(believers) <= 1, (sid, believers)  # one owner at a time
        if live:
            assert lease is not None
            assert all(owner == lease.owner for owner in believers)
        # Never recovered by two at once: consecutive adoptions are at least a lease apart unless
        # the earlier owner released it (its lease no longer live either way).
        texts = [entry.get("text") for entry in store.load_transcript(KEY, sid)]
        assert texts == stored_turns[sid]  # every stored turn kept, in order; nothing overwritten


BUDGET = int(float(os.environ.get("ACP_SOAK_SECONDS", "0")) * 20) or 300


#: A replica that stopped renewing (stuck, not dead) writes after another adopted its session.
STALE_WRITER = [
    ("create", 0, "s0", 1.0),
    ("write", 0, "s0", 1.0),
    ("wait", 0, "s0", 15.0),
    ("adopt", 1, "s0", 1.0),
    ("write", 1, "s0", 1.0),
    ("write", 0, "s0", 1.0),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=STALE_WRITER)
def test_replicas_killed_and_restarted_at_random_never_share_or_lose_a_session(tmp_path: Path, ops: Any) -> None:
    run(tmp_path, ops)


@pytest.mark.soak
@settings(max_examples=BUDGET, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_ownership_soak(tmp_path: Path, ops: Any) -> None:
    run(tmp_path, ops)
