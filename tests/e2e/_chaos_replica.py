"""A replica for the ownership chaos test:
``python -m tests.e2e._chaos_replica URL STORE OWNER LEASE ACKS [--open N] [--die-after K]``
(STORE: an SQLite file or a ``postgresql://`` URL).

It connects with the shared store under OWNER (LEASE-second leases, the store key ``chaos``), opens N
sessions, prints ``{"ready": [ids]}``, then prompts every session it holds in turn, each prompt's text
``OWNER|SEQ``, until its stdin closes. Each turn whose ``prompt()`` returned is appended to the file ACKS
(one JSON line: session, text, ``stored``) before the next prompt; with ``--die-after K`` it kills
itself (SIGKILL) the moment the K-th acknowledgement is written. What the client tells it is printed as
one JSON line each (``adopted``, ``lost``, ``refused``: a prompt that raised). Its log goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any

from acp_client import (
    AcpClient,
    AcpError,
    Callbacks,
    OwnershipLost,
    RecoveryOutcome,
    RetryPolicy,
    SessionStoreError,
)
from tests.e2e._owner_process import open_store

KEY = "chaos"


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    for name in ("url", "store", "owner", "lease", "acks"):
        parser.add_argument(name)
    parser.add_argument("--open", type=int, default=1)
    parser.add_argument("--die-after", type=int, default=0)
    args = parser.parse_args(argv)
    owner = args.owner
    style = f"%(asctime)s {owner} %(name)s %(levelname)s %(message)s"
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=style)

    def outcome(item: RecoveryOutcome) -> None:
        if any(note.startswith("adopted") for note in item.notes):
            say(adopted=item.previous_session_id, session=item.session_id, path=item.path.value, owner=owner)

    def lost(item: OwnershipLost) -> None:
        say(lost=item.session_id, holder=item.holder, reason=item.reason, owner=owner)

    def store_error(error: SessionStoreError) -> None:
        say(store_error=str(error), owner=owner)

    callbacks = Callbacks(
        on_resume=outcome, on_replay=outcome, on_new_session=outcome, on_ownership_lost=lost, on_store_error=store_error
    )
    retry = RetryPolicy(initial_delay=0.05, max_delay=0.2, jitter=False)
    loop = asyncio.get_running_loop()
    closed = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: closed.done() or (not sys.stdin.readline() and closed.set_result(None)))
    acks, acknowledged = open(args.acks, "a", encoding="utf-8"), 0  # noqa: SIM115 (open for the whole run)
    with open_store(args.store) as store:
        async with AcpClient(
            args.url,
            session_store=store,
            session_store_key=KEY,
            owner=owner,
            lease_duration=float(args.lease),
            callbacks=callbacks,
            retry=retry,
        ) as client:
            ids = [(await client.new_session(f"/work/{owner}-{index}")).session_id for index in range(args.open)]
            say(ready=ids, owner=owner)
            seq = 0
            while not closed.done():
                for handle in client.sessions:
                    if closed.done() or handle.turn_running:
                        continue
                    seq += 1
                    text = f"{owner}|{seq}"
                    try:
                        result = await handle.prompt(text)
                    except AcpError as exc:
                        say(refused=text, session=handle.session_id, error=f"{type(exc).__name__}: {exc}", owner=owner)
                        continue
                    # The turn is acknowledged: from here on it must be in the store, whatever happens.
                    acks.write(json.dumps({"session": handle.session_id, "text": text, "stored": result.stored}) + "\n")
                    acks.flush()
                    acknowledged += 1
                    if acknowledged == args.die_after:
                        os.kill(os.getpid(), signal.SIGKILL)
                await asyncio.sleep(0.01)
            say(done=owner, owned=client.owned_sessions())
    acks.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
