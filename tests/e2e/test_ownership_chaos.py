"""Ownership under process-level chaos: replicas as real processes (``tests/e2e/_chaos_replica.py``)
sharing one store (an SQLite file, or the throwaway PostgreSQL server) in front of the reference agent,
prompting in a loop while a seeded schedule kills one (SIGKILL) and starts a replacement, lets another
kill itself the moment a ``prompt()`` returned, stops a third (SIGSTOP) for 2.5 leases and wakes it, and
(PostgreSQL) restarts the database. Then, for every session:

- no prompt reached the agent from an owner after another owner's prompt had reached it (a stale owner
  never acts once the session was adopted: the lease is checked before each send);
- every turn whose ``prompt()`` returned is in the stored conversation exactly once (durable before
  acknowledged), whoever adopted the session afterwards and across the database restart;
- a dead replica's sessions were adopted within the lease plus a renewal interval (with room for a
  loaded machine).

A CI-sized budget by default (one round per store); ``-m soak`` with ``ACP_SOAK_SECONDS`` runs more
rounds, ``ACP_SOAK_SEED`` replays a schedule. On a failure the replicas' logs are printed."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acp_client.testing import ReferenceServer
from tests._support import eventually
from tests.e2e._owner_process import open_store
from tests.e2e._support import RecordingAgent

ROOT = Path(__file__).resolve().parents[2]
KEY = "chaos"
LEASE = 3.0
#: The documented adoption bound (the lease, then one renewal interval), plus room for a loaded machine.
ADOPTION_BOUND = LEASE + LEASE / 3 + 3.0
ROUNDS = max(1, int(float(os.environ.get("ACP_SOAK_SECONDS", "0")) // 40))


class Replica:
    def __init__(self, process: asyncio.subprocess.Process, owner: str, log: Path) -> None:
        self.process, self.owner, self.log = process, owner, log
        self.lines: list[dict[str, Any]] = []
        #: Stopped (SIGSTOP): its leases are left to run out.
        self.paused = False
        self.ready: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while raw := await self.process.stdout.readline():
            line: dict[str, Any] = json.loads(raw)
            self.lines.append(line)
            if "ready" in line and not self.ready.done():
                self.ready.set_result(line["ready"])

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    def said(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if kind in line]


class Chaos:
    """One round: the agent, the store, the replicas, and what each of them acknowledged."""

    def __init__(self, url: str, store: str, logs: Path) -> None:
        self.url, self.store, self.logs = url, store, logs
        self.acks = logs / "acks.jsonl"
        self.replicas: list[Replica] = []

    async def start(self, owner: str, *extra: str) -> Replica:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        log = self.logs / f"{owner}.log"
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.e2e._chaos_replica", self.url, self.store, owner, str(LEASE),
                str(self.acks), *extra,
                cwd=ROOT, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            )  # fmt: skip
        replica = Replica(process, owner, log)
        self.replicas.append(replica)
        return replica

    def acknowledged(self) -> list[dict[str, Any]]:
        if not self.acks.exists():
            return []
        return [json.loads(line) for line in self.acks.read_text().splitlines() if line.strip()]

    def held_by_the_living(self) -> bool:
        """Every stored session is held by a live replica, its lease running."""
        living = {replica.owner for replica in self.replicas if replica.alive and not replica.paused}
        with open_store(self.store) as store:
            records = store.load(KEY)
        now = time.time()
        return bool(records) and all(
            record.lease is not None and record.lease.owner in living and record.lease.expires_at.timestamp() > now
            for record in records
        )

    async def adopted_within_bound(self, what: str) -> float:
        started = time.monotonic()
        await eventually(self.held_by_the_living, ADOPTION_BOUND, what=f"{what}: sessions adopted", every=0.1)
        return time.monotonic() - started

    async def stop(self) -> None:
        for replica in self.replicas:
            if replica.alive:
                assert replica.process.stdin is not None
                replica.process.stdin.close()
        for replica in self.replicas:
            await asyncio.wait_for(replica.process.wait(), 60)
            await replica.reader

    def dump(self) -> None:
        for replica in self.replicas:
            print(
                f"---- {replica.owner} (exit {replica.process.returncode}) {replica.lines}\n{replica.log.read_text()}"
            )
        with open_store(self.store) as store:
            for record in store.load(KEY):
                print(f"stored {record.session_id} lease {record.lease}")

    async def kill_all(self) -> None:
        for replica in self.replicas:
            if replica.alive:
                replica.process.kill()
                await replica.process.wait()


def prompts_by_session(agent: RecordingAgent) -> dict[str, list[str]]:
    """Each session's prompt texts, in the order they reached the agent."""
    found: dict[str, list[str]] = {}
    for params in agent.params_of("session/prompt"):
        found.setdefault(params["sessionId"], []).append(params["prompt"][0]["text"])
    return found


def check_no_stale_owner_acted(agent: RecordingAgent) -> None:
    for session_id, texts in prompts_by_session(agent).items():
        owners: list[str] = []
        for text in texts:
            owner = text.split("|")[0]
            if not owners or owners[-1] != owner:
                owners.append(owner)
        assert len(owners) == len(set(owners)), f"session {session_id}: a stale owner acted again: {owners}"


def check_every_acknowledged_turn_stored_once(chaos: Chaos) -> int:
    acks = chaos.acknowledged()
    with open_store(chaos.store) as store:
        current = {record.session_id: record.session_id for record in store.load(KEY)}
        for record in store.load(KEY):
            current.update(dict.fromkeys(record.previous_session_ids, record.session_id))
        conversations = {sid: store.load_transcript(KEY, sid) for sid in set(current.values())}
    for ack in acks:
        assert ack["stored"] is True, ack  # the store was reachable within its retries all along
        entries = conversations.get(current.get(ack["session"], ""), ())
        users = [entry for entry in entries if entry.get("role") == "user" and entry.get("text") == ack["text"]]
        assert len(users) == 1, f"acknowledged turn {ack} stored {len(users)} times"
    return len(acks)


async def one_round(chaos: Chaos, rng: random.Random, restart_database: Any) -> None:
    a, b, c = [await chaos.start(f"r{name}-{rng.randrange(10**6)}", "--open", "2") for name in "abc"]
    # b kills itself the moment one of its prompt() calls returned (its acknowledgement just written).
    b_exit = rng.randint(4, 8)
    await chaos.start(f"rb-x-{rng.randrange(10**6)}", "--open", "1", "--die-after", str(b_exit))
    for replica in chaos.replicas:
        await asyncio.wait_for(asyncio.shield(replica.ready), 60)
    await eventually(lambda: len(chaos.acknowledged()) >= 12, 30, what="turns acknowledged", every=0.05)

    victim = rng.choice([a, b])
    victim.process.send_signal(signal.SIGKILL)  # mid-conversation: it prompts in a loop
    await victim.process.wait()
    await chaos.start(f"rd-{rng.randrange(10**6)}", "--open", "0")  # the replacement
    await chaos.adopted_within_bound("after a SIGKILL")

    # c stops (a long GC, a frozen VM) for 2.5 leases: the others adopt its sessions meanwhile.
    c.process.send_signal(signal.SIGSTOP)
    c.paused, stopped = True, time.monotonic()
    await chaos.adopted_within_bound("while one replica is stopped")
    if restart_database is not None:
        await asyncio.to_thread(restart_database)  # every connection cut; the data stays
    await asyncio.sleep(max(0.0, 2.5 * LEASE - (time.monotonic() - stopped)))  # the scenario: a stop this long
    c.process.send_signal(signal.SIGCONT)
    c.paused = False
    await eventually(lambda: c.said("lost"), 30, what="the woken replica told it lost its sessions")
    # Another kills itself right after a prompt() returned, and is not replaced.
    quitter = await chaos.start(f"rx-{rng.randrange(10**6)}", "--open", "1", "--die-after", str(rng.randint(3, 6)))
    await asyncio.wait_for(quitter.process.wait(), 60)
    await chaos.adopted_within_bound("after a replica killed itself")
    await eventually(
        lambda: len(chaos.acknowledged()) >= 12 + 10, 30, what="turns acknowledged after the chaos", every=0.05
    )
    await chaos.adopted_within_bound("after the stopped replica woke")


@pytest.mark.soak
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_ownership_holds_under_kill_stop_and_a_database_restart(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    seed = int(os.environ.get("ACP_SOAK_SEED") or random.randrange(2**32))
    print(f"chaos seed {seed} (ACP_SOAK_SEED={seed} replays it)")
    rng = random.Random(seed)
    restart_database = None
    for index in range(ROUNDS):
        if backend == "postgres":
            database = request.getfixturevalue("postgres_database")
            store_path, restart_database = database.url, database.server.restart
            if index:
                store_path = database.server.url(database.server.create_database())
        else:
            store_path = str(tmp_path / f"shared-{index}.db")
        open_store(store_path).close()  # created once, before the replicas race to open it
        logs = tmp_path / f"{backend}-{index}"
        logs.mkdir()
        agent = RecordingAgent(chunk_delay=0.01)
        async with ReferenceServer(agent) as server:
            chaos = Chaos(server.ws_url, store_path, logs)
            try:
                await one_round(chaos, rng, restart_database)
                await chaos.stop()
                for replica in chaos.replicas:
                    if replica.process.returncode != -signal.SIGKILL:
                        assert replica.process.returncode == 0, replica.log.read_text()
                check_no_stale_owner_acted(agent)
                acknowledged = check_every_acknowledged_turn_stored_once(chaos)
                assert acknowledged >= 22
                woke = next(replica for replica in chaos.replicas if replica.owner.startswith("rc-"))
                taken = {line["lost"] for line in woke.said("lost")}
                others = {
                    sid
                    for sid, texts in prompts_by_session(agent).items()
                    if any(not text.startswith("rc-") for text in texts)
                }
                assert taken & others, "the stopped replica's sessions went on elsewhere"
            except BaseException:
                print(f"chaos seed {seed}")
                await chaos.kill_all()
                chaos.dump()
                raise
