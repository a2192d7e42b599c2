"""The reference agent's ``escapes`` and ``escape-ids`` faults: a hostile agent for the tests of
every place that shows agent text to a person."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from acp_client.testing.reference_agent import ESCAPES, ReferenceAgent

from ._raw import chunk_text, since, updates

SEQUENCES = ("\x1b]52;", "\x1b]0;", "\x1b]2;", "\x1b]8;;file://", "\x1b[2J", "\x1b[H", "\x1bP", "\x9b", "\u202e")


def test_escapes_holds_every_sequence() -> None:
    for sequence in (*SEQUENCES, "\u2066", "\u2069", "\u200e", "\u200f", "\u061c", "\x07", "\x00", "\n"):
        assert sequence in ESCAPES, repr(sequence)


@pytest.mark.parametrize("version", [1, 2])
async def test_every_agent_controlled_text_carries_the_escapes(connect: Any, version: int) -> None:
    agent = ReferenceAgent(faults=["escapes"])
    peer = await connect(version, agent)
    created = await peer.result("session/new", {"cwd": "/work/project", "mcpServers": []})
    session_id = created["sessionId"]
    assert all(ESCAPES in text for mode in created["modes"]["availableModes"] for text in (mode["name"],))
    asked: list[dict[str, Any]] = []

    def choose(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow"}}

    peer.handlers["session/request_permission"] = choose
    start = len(peer.messages)
    await peer.prompt(session_id, "/permission")
    if version == 2:
        await peer.wait_for(lambda m: m.get("params", {}).get("update", {}).get("stopReason") is not None, start=start)
    received = updates(since(peer, start))
    kinds = {update["sessionUpdate"]: update for update in received}
    assert ESCAPES in chunk_text(since(peer, start))
    thought = kinds["agent_thought"]["content"][0] if version == 2 else kinds["agent_thought_chunk"]["content"]
    assert ESCAPES in thought["text"]
    assert ESCAPES in kinds["tool_call_update" if version == 2 else "tool_call"]["title"]
    entries = kinds["plan_update"]["plan"]["entries"] if version == 2 else kinds["plan"]["entries"]
    assert ESCAPES in entries[0]["content"]
    assert ESCAPES in kinds["session_info_update"]["title"]
    assert kinds["current_mode_update"]["currentModeId"] == "hostile"
    permission = asked[0]
    title = permission["title"] if version == 2 else permission["toolCall"]["title"]
    assert ESCAPES in title
    assert all(ESCAPES in option["name"] for option in permission["options"])
    failed = await peer.prompt(session_id, "/fail")
    assert ESCAPES in failed["error"]["message"]
    listed = await peer.result("session/list", {})
    assert ESCAPES in listed["sessions"][0]["title"]


async def test_escape_ids_puts_the_escapes_into_session_ids(connect: Any) -> None:
    peer = await connect(1, ReferenceAgent(faults=["escape-ids"]))
    session_id = await peer.new_session()
    assert session_id.endswith(ESCAPES)
    status = await peer.result("session/status", {"sessionId": session_id})
    assert status["status"] == "active"


async def test_without_the_fault_the_text_is_plain(connect: Any) -> None:
    peer = await connect(1)
    created = await peer.result("session/new", {"cwd": "/work/project", "mcpServers": []})
    assert "modes" not in created
    start = len(peer.messages)
    await peer.prompt(created["sessionId"], "hello")
    assert chunk_text(since(peer, start)) == "echo: hello"


def test_stderr_carries_the_escapes_over_stdio() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio", "--fault", "escapes"],
        input=b"",
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert ESCAPES.encode() in done.stderr
