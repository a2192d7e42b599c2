"""``benchmarks/store.py``'s takeover section: after an owner dies, how long until another has its sessions.

Owner ``a`` stores ``sessions`` sessions (record and a conversation of a few turns each) under its
lease of ``lease`` seconds, renews once, and dies (it stops renewing, releasing nothing: a
``kill -9``). Owner ``b``, on its own connection to the same store, does what a live client or
router replica does: it polls ``adoptable()`` every ``poll`` seconds; once the leases have expired
it claims every adoptable session in one ``claim()`` and recovers each one from the store (its
record and its conversation: what a client shows before it probes the agent). Measured from the
death:

* ``expiry`` — until the first ``adoptable()`` that lists them all (the lease left, plus up to one
  poll);
* ``claim`` — the one bulk ``claim()`` (every fencing token bumped);
* ``recover`` — reading every adopted session's record and conversation;
* ``takeover`` — the total. The part beyond the lease is the store's own cost.

The probe and resume over the wire that follow are the usual recovery, measured by
``benchmarks/recovery.py``. PostgreSQL is a throwaway server (``acp_client.testing.postgres``,
``fsync`` off); both columns are wall time in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import fmt_ms, median, table

from acp_client.store import PostgresSessionStore, SqliteSessionStore, StoredSession
from acp_client.testing.postgres import TemporaryPostgres

KEY = "router:pool:ws://a.example/acp ws://b.example/acp"
_CONVERSATION = [
    {"format": 2, "dropped": 0},
    {"segment": "s", "began": "created", "lost": False},
    *({"role": "user" if i % 2 == 0 else "agent", "text": "x" * 200, "messageId": f"m{i}"} for i in range(6)),
]


def one_takeover(
    open_store: Callable[[], Any], sessions: int, lease: float, poll: float, round_: int
) -> dict[str, float]:
    """One owner's death and its takeover; the phases in seconds."""
    key = f"{KEY} round-{round_}"
    with open_store() as owner_a, open_store() as owner_b:
        for index in range(sessions):
            record = StoredSession(endpoint=key, session_id=f"s-{index:05d}", cwd="/work", extra={"home": "ws://a"})
            owner_a.save_owned(record, "a", duration=lease)
            owner_a.save_transcript(key, record.session_id, _CONVERSATION)
        owner_a.renew(key, "a", duration=lease)
        died = time.perf_counter()  # a stops renewing here
        while True:
            adoptable = owner_b.adoptable(key)
            if len(adoptable) == sessions:
                break
            time.sleep(poll)
        expired = time.perf_counter()
        leases = owner_b.claim(key, [record.session_id for record in adoptable], "b", duration=lease)
        claimed = time.perf_counter()
        assert len(leases) == sessions, f"b claimed {len(leases)} of {sessions}"
        for lease_ in leases:
            assert owner_b.get(key, lease_.session_id) is not None
            owner_b.load_transcript(key, lease_.session_id)
        recovered = time.perf_counter()
    return {
        "expiry": expired - died,
        "claim": claimed - expired,
        "recover": recovered - claimed,
        "takeover": recovered - died,
    }


def takeover(directory: Path, *, sessions: int, lease: float, poll: float, rounds: int) -> None:
    """Print the takeover table (both stores, the same deaths)."""
    results: dict[str, list[dict[str, float]]] = {}
    with TemporaryPostgres() as server:
        dsn = server.dsn(server.create_database("takeover"))
        openers: dict[str, Callable[[], Any]] = {
            "SQLite": lambda: SqliteSessionStore(directory / "takeover.db"),
            "PostgreSQL": lambda: PostgresSessionStore(dsn),
        }
        for kind, opener in openers.items():
            results[kind] = [one_takeover(opener, sessions, lease, poll, index) for index in range(rounds)]
    phases = ["expiry", "claim", "recover", "takeover"]
    medians = {
        kind: {phase: median([run[phase] for run in runs]) for phase in phases} for kind, runs in results.items()
    }
    rows = [[f"{phase} ms (median)", *(fmt_ms(medians[kind][phase]) for kind in results)] for phase in phases]
    rows.append(
        ["beyond the lease, ms", *(fmt_ms(medians[kind]["takeover"] - lease) for kind in results)],
    )
    print(
        f"Takeover after an owner dies: {sessions:,} sessions, lease {lease:g} s, adoptable() polled every "
        f"{poll * 1000:.0f} ms, {rounds} deaths per store"
    )
    print(table(["phase", *results], rows))
