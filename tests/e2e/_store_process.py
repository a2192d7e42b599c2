"""A client process for the store's end-to-end test: ``python -m tests.e2e._store_process MODE URL STORE``.

Modes (one JSON object on stdout, then exit):

- ``create COUNT``: open COUNT sessions (one turn each) with the store, print their ids.
- ``recover``: connect with the store, print each recovery outcome and the handles' transcripts,
  run one more turn in every recovered session, and print what the store holds afterwards.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from acp_client import AcpClient, Callbacks, RecoveryOutcome, RetryPolicy
from acp_client.store import SqliteSessionStore


async def main(mode: str, url: str, path: str, *args: str) -> dict[str, Any]:
    outcomes: list[RecoveryOutcome] = []
    record = outcomes.append
    callbacks = Callbacks(on_resume=record, on_replay=record, on_new_session=record, on_recovery_failed=record)
    retry = RetryPolicy(initial_delay=0.05, max_delay=0.2, max_attempts=20, jitter=False)
    with SqliteSessionStore(path) as store:
        async with AcpClient(url, session_store=store, callbacks=callbacks, retry=retry) as client:
            if mode == "create":
                ids = []
                for index in range(int(args[0])):
                    handle = await client.new_session(f"/work/project-{index}")
                    await handle.prompt(f"hello {index}")
                    ids.append(handle.session_id)
                return {"ids": ids, "state": client.state.state.value}
            result: dict[str, Any] = {
                "state": client.state.state.value,
                "outcomes": [
                    {
                        "path": outcome.path.value,
                        "probe": outcome.probe.value,
                        "previous": outcome.previous_session_id,
                        "session": outcome.session_id,
                    }
                    for outcome in outcomes
                ],
                "transcripts": {handle.session_id: handle.transcript.text() for handle in client.sessions},
            }
            for handle in client.sessions:
                await handle.prompt("after the restart")
        stored = store.load(client.session_store_key or "")
        result["stored"] = [
            {"id": item.session_id, "cwd": item.cwd, "previous": list(item.previous_session_ids)} for item in stored
        ]
        return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:]))))
