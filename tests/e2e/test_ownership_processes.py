"""Replicas as real processes sharing one store (an SQLite file, or a real PostgreSQL database) in
front of the reference agent: one is killed (SIGKILL) while it prompts; within its lease time another
replica adopts and recovers each of its sessions, exactly once, and no session is ever owned by two.

Each replica logs to a file (``ACP_OWNER_LOGDIR`` picks the directory, ``ACP_OWNER_DEBUG=1`` logs at DEBUG); on a
failure the test prints every log, the replicas' thread and task stacks and the stored leases."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_client.store import endpoint_key
from acp_client.testing import ReferenceServer
from tests._support import eventually
from tests.e2e._owner_process import open_store
from tests.e2e._support import RecordingAgent

ROOT = Path(__file__).resolve().parents[2]


class Replica:
    def __init__(self, process: asyncio.subprocess.Process, owner: str, log: Path) -> None:
        self.process = process
        self.owner = owner
        self.log = log
        self.lines: list[dict[str, Any]] = []

    async def next_line(self, timeout: float = 60.0) -> dict[str, Any]:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        assert raw, f"{self.owner} exited: {self.log.read_text()}"
        line: dict[str, Any] = json.loads(raw)
        self.lines.append(line)
        return line


async def start(url: str, store: str, owner: str, count: int, logs: Path) -> Replica:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log = logs / f"{owner}.log"
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.e2e._owner_process", url, store, owner, str(count),
            cwd=ROOT, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
        )  # fmt: skip
    return Replica(process, owner, log)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_killed_replicas_sessions_are_adopted_once_within_the_lease(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        store_path = request.getfixturevalue("postgres_database").url
    else:
        store_path = str(tmp_path / "shared.db")
    open_store(store_path).close()  # created once, before the replicas race to open it
    logs = Path(os.environ.get("ACP_OWNER_LOGDIR") or tmp_path) / backend
    logs.mkdir(parents=True, exist_ok=True)
    replicas: list[Replica] = []
    try:
        async with ReferenceServer(RecordingAgent()) as server:
            key = endpoint_key(server.ws_url)
            replicas = [await start(server.ws_url, store_path, f"replica-{name}", 2, logs) for name in "abc"]
            ready = {replica.owner: (await replica.next_line())["ready"] for replica in replicas}
            victim, survivors = replicas[0], replicas[1:]
            victim.process.send_signal(signal.SIGKILL)  # mid-conversation: it prompts in a loop
            await victim.process.wait()
            loop = asyncio.get_running_loop()
            killed_at = loop.time()
            wanted = set(ready["replica-a"])
            adopted: dict[str, list[str]] = {}

            async def watch(replica: Replica) -> None:
                while True:
                    line = await replica.next_line()
                    if "adopted" in line:
                        adopted.setdefault(line["adopted"], []).append(replica.owner)

            watchers = [asyncio.ensure_future(watch(replica)) for replica in survivors]
            try:
                await eventually(lambda: set(adopted) >= wanted, 20, what=lambda: f"adopted in time: {adopted}")
                took = loop.time() - killed_at
                await asyncio.sleep(1.5)  # a further lease: nobody adopts a second time
            finally:
                for watcher in watchers:
                    watcher.cancel()
            assert set(adopted) == wanted and all(len(owners) == 1 for owners in adopted.values()), adopted
            assert took < 5.0  # one lease (1 s) plus a renewal scan, with room for a loaded machine
            for replica in survivors:  # stop both at once
                assert replica.process.stdin is not None
                replica.process.stdin.close()
            owned: list[set[str]] = []
            for replica in survivors:
                out, _ = await asyncio.wait_for(replica.process.communicate(), 30)
                assert replica.process.returncode == 0, replica.log.read_text()
                done = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
                owned.append(set(next(line["owned"] for line in done if "done" in line)))
            assert not owned[0] & owned[1]  # never one session owned by two replicas
    except BaseException:  # show what each replica was doing, and what the store holds
        for replica in replicas:
            if replica.process.returncode is None:
                replica.process.send_signal(signal.SIGUSR2)
                replica.process.send_signal(signal.SIGUSR1)
        await asyncio.sleep(0.5)
        with open_store(store_path) as store:
            for endpoint in store.endpoints():
                for record in store.load(endpoint):
                    print(f"stored {record.session_id} lease {record.lease} last used {record.last_used_at}")
        for replica in replicas:
            print(f"---- {replica.owner} (stdout {replica.lines})\n{replica.log.read_text()}")
            if replica.process.returncode is None:
                replica.process.kill()
                await replica.process.wait()
        raise
    with open_store(store_path) as store:
        for sid in wanted:
            record = store.get(key, sid)
            assert record is not None
            lease = record.lease
            assert lease is not None and lease.owner is None and lease.token >= 2  # adopted, then released
