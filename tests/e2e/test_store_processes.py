"""Sessions that outlive the process: one process creates sessions against the reference agent
(WebSocket, on loopback) with a session store and exits; a second process with the same store
recovers them, on each path.

The reference server runs in the test's process, so the test can restart the agent or make it
lose a session between the two client processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_client.testing import ReferenceServer
from tests.e2e._support import RecordingAgent

ROOT = Path(__file__).resolve().parents[2]


async def _run(*args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.e2e._store_process",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("fault", ["none", "restart", "evict"])
async def test_a_second_process_recovers_the_stored_sessions(tmp_path: Path, fault: str) -> None:
    agent = RecordingAgent()
    store = str(tmp_path / "sessions.db")
    async with ReferenceServer(agent) as server:
        created = await _run("create", server.ws_url, store, "2")
        first, second = created["ids"]
        assert created["state"] == "connected"
        if fault == "restart":  # the agent process restarted: both sessions are saved, not in memory
            agent.lose_memory()
        elif fault == "evict":  # the agent lost one of them
            agent.evict(second)

        result = await _run("recover", server.ws_url, store)

    assert result["state"] == "connected"
    paths = {outcome["previous"]: outcome["path"] for outcome in result["outcomes"]}
    stored = {item["id"]: item for item in result["stored"]}
    if fault == "none":  # the agent still has them in memory
        assert paths == {first: "resume", second: "resume"}
        assert set(stored) == {first, second}
        assert {outcome["probe"] for outcome in result["outcomes"]} == {"active"}
    elif fault == "restart":
        assert paths == {first: "replay", second: "replay"}
        assert {outcome["probe"] for outcome in result["outcomes"]} == {"inactive"}
        assert result["transcripts"][first] == "user: hello 0\nagent: echo: hello 0"
        assert result["transcripts"][second] == "user: hello 1\nagent: echo: hello 1"
        assert set(stored) == {first, second}
    else:
        assert paths == {first: "resume", second: "new_session"}
        renamed = next(o["session"] for o in result["outcomes"] if o["previous"] == second)
        assert renamed not in (first, second)
        # The store was updated: the lost session lives on under its new id, same cwd.
        assert set(stored) == {first, renamed}
        assert stored[renamed]["previous"] == [second]
        assert stored[renamed]["cwd"] == "/work/project-1"
    # Every recovered session took a turn in the second process; the first uses of the
    # recovered sessions went through the agent with the recovered ids.
    prompted = {params["sessionId"] for params in agent.params_of("session/prompt")}
    assert set(stored) <= prompted
