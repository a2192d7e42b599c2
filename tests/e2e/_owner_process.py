"""A replica for the ownership end-to-end test: ``python -m tests.e2e._owner_process URL STORE OWNER COUNT``
(STORE: an SQLite file or a ``postgresql://`` URL).

It connects with the shared store under OWNER (short leases), opens COUNT sessions (one turn each),
prints ``{"ready": [ids]}``, then keeps prompting its sessions (so a kill lands mid-turn) and prints
``{"adopted": id, "path": ..., "previous": ...}`` for each session it adopts, until its stdin closes.
Every line is one JSON object, flushed at once. Its log goes to stderr (INFO; DEBUG with ``ACP_OWNER_DEBUG=1``);
SIGUSR1 dumps its threads' stacks there, SIGUSR2 its asyncio tasks' (the test does both when it fails).
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import logging
import os
import signal
import sys
from typing import Any

from acp_client import AcpClient, Callbacks, RecoveryOutcome, RetryPolicy
from acp_client.store import SqliteSessionStore

LEASE = 1.0


def open_store(where: str) -> Any:
    """The shared store: a ``postgresql://`` URL, else an SQLite file."""
    if where.startswith("postgresql://"):
        from acp_client.store.postgres import PostgresSessionStore

        return PostgresSessionStore(where)
    return SqliteSessionStore(where, busy_timeout=30.0)


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def dump_tasks() -> None:
    """Every asyncio task's stack, to stderr (SIGUSR2; SIGUSR1 dumps the threads' stacks)."""
    for task in asyncio.all_tasks():
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


async def main(url: str, path: str, owner: str, count: str) -> None:
    adopted: list[str] = []
    level = logging.DEBUG if os.environ.get("ACP_OWNER_DEBUG") else logging.INFO
    style = f"%(asctime)s {owner} %(name)s %(levelname)s %(message)s"
    logging.basicConfig(stream=sys.stderr, level=level, format=style)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, dump_tasks)

    def outcome(item: RecoveryOutcome) -> None:
        if any(note.startswith("adopted") for note in item.notes):
            adopted.append(item.session_id or "")
            say(adopted=item.previous_session_id, path=item.path.value, session=item.session_id, owner=owner)

    callbacks = Callbacks(on_resume=outcome, on_replay=outcome, on_new_session=outcome)
    retry = RetryPolicy(initial_delay=0.05, max_delay=0.2, jitter=False)
    loop = asyncio.get_running_loop()
    closed = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: closed.done() or (not sys.stdin.readline() and closed.set_result(None)))
    with open_store(path) as store:
        async with AcpClient(
            url, session_store=store, owner=owner, lease_duration=LEASE, callbacks=callbacks, retry=retry
        ) as client:
            ids = []
            for index in range(int(count)):
                handle = await client.new_session(f"/work/{owner}-{index}")
                await handle.prompt(f"hello {index}")
                ids.append(handle.session_id)
            say(ready=ids, owner=owner)
            turn = 0
            while not closed.done():
                for handle in client.sessions:
                    if not handle.turn_running:
                        turn += 1
                        await handle.prompt(f"turn {turn}")
                await asyncio.sleep(0.02)
            say(done=owner, owned=client.owned_sessions())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
