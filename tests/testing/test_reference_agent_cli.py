"""The reference agent as a real subprocess: ``--stdio`` (with a store surviving a respawn) and ``--serve``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
import websockets

from ._raw import TIMEOUT, Peer, WsPeer, updates

SPAWN_TIMEOUT = 20.0


class StdioPeer(Peer):
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        super().__init__()
        self.process = process
        self.bad_lines: list[bytes] = []
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            while True:
                line = await self.process.stdout.readline()
                if not line:
                    break
                try:
                    self._received(json.loads(line))
                except ValueError:
                    self.bad_lines.append(line)
        finally:
            self._closed()

    async def _send(self, message: dict[str, Any], *, session_id: str | None = None) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def finish(self) -> int:
        """Close stdin and wait for the agent to exit; returns its exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = await asyncio.wait_for(self.process.wait(), SPAWN_TIMEOUT)
        await asyncio.wait_for(self._reader, TIMEOUT)
        return code


@pytest_asyncio.fixture
async def spawn() -> AsyncIterator[Any]:
    processes: list[asyncio.subprocess.Process] = []

    async def run(argv: list[str], **kwargs: Any) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            **kwargs,
        )
        processes.append(process)
        return process

    yield run
    for process in processes:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


async def test_stdio_store_survives_a_respawn(reference_agent_command: list[str], spawn: Any) -> None:
    first = StdioPeer(await spawn(reference_agent_command))
    result = await first.initialize(1)
    assert result["agentCapabilities"]["loadSession"] is True
    session_id = await first.new_session("/home/user/project")
    start = len(first.messages)
    assert (await first.prompt(session_id, "hello there"))["result"]["stopReason"] == "end_turn"
    assert [u["content"]["text"] for u in updates(first.messages[start:])] == ["echo: ", "hello ", "there"]
    assert await first.finish() == 0
    assert first.bad_lines == []

    second = StdioPeer(await spawn(reference_agent_command))
    await second.initialize(1)
    assert await second.result("session/status", {"sessionId": session_id}) == {"status": "inactive"}
    start = len(second.messages)
    response = await second.request(
        "session/load", {"sessionId": session_id, "cwd": "/home/user/project", "mcpServers": []}
    )
    assert response["result"] == {"sessionId": session_id}
    assert [(u["sessionUpdate"], u["content"]["text"]) for u in updates(second.messages[start:])] == [
        ("user_message_chunk", "hello there"),
        ("agent_message_chunk", "echo: hello there"),
    ]
    assert (await second.result("session/status", {"sessionId": session_id}))["status"] == "active"
    unknown = await second.request("session/status", {"sessionId": "sess_missing"})
    assert unknown["error"]["code"] == -32002
    assert await second.finish() == 0


async def test_stdio_flags(spawn: Any) -> None:
    argv = [
        sys.executable,
        "-m",
        "acp_client.testing.reference_agent",
        "--stdio",
        "--no-status",
        "--no-load",
        "--vocabulary",
        "sdk",
        "--chunks",
        "2",
        "--name",
        "flagged",
    ]
    peer = StdioPeer(await spawn(argv))
    result = await peer.initialize(1)
    assert result["agentInfo"]["name"] == "flagged"
    assert "loadSession" not in result["agentCapabilities"]
    assert "status" not in result["agentCapabilities"]["sessionCapabilities"]
    session_id = await peer.new_session()
    start = len(peer.messages)
    await peer.prompt(session_id, "one two three")
    assert len(updates(peer.messages[start:])) == 2
    assert (await peer.request("session/status", {"sessionId": session_id}))["error"]["code"] == -32601
    # a bad line is answered, not fatal
    assert peer.process.stdin is not None
    peer.process.stdin.write(b"this is not json\n")
    error = await peer.wait_for(lambda m: m.get("error", {}).get("code") == -32700)
    assert error["id"] is None
    assert await peer.finish() == 0


async def test_serve_prints_urls_and_serves(spawn: Any) -> None:
    argv = [sys.executable, "-m", "acp_client.testing.reference_agent", "--serve", "--vocabulary", "sdk"]
    process = await spawn(argv)
    assert process.stdout is not None
    ws_line = (await asyncio.wait_for(process.stdout.readline(), SPAWN_TIMEOUT)).decode()
    http_line = (await asyncio.wait_for(process.stdout.readline(), SPAWN_TIMEOUT)).decode()
    assert ws_line.startswith("ws:   ws://127.0.0.1:") and ws_line.rstrip().endswith("/acp")
    assert http_line.startswith("http: http://127.0.0.1:")
    url = ws_line.split()[1]
    peer = WsPeer(await websockets.connect(url, open_timeout=TIMEOUT))
    try:
        await peer.initialize(2)
        session_id = await peer.new_session()
        assert await peer.result("session/status", {"sessionId": session_id}) == {
            "status": "open",
            "state": {"state": "idle"},
        }
    finally:
        await peer.aclose()
    process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), SPAWN_TIMEOUT) == 0


async def test_serve_instances_sharing_one_store(spawn: Any, tmp_path: Any) -> None:
    """Two ``--serve`` processes with one ``--store DIR``: a session saved by one is ``inactive``
    on the other, which can load it with its history (what a pool or a load balancer needs)."""
    store = str(tmp_path / "shared-store")
    urls = []
    for name in ("agent-a", "agent-b"):
        argv = [sys.executable, "-m", "acp_client.testing.reference_agent", "--serve", "--store", store, "--name", name]
        process = await spawn(argv)
        assert process.stdout is not None
        urls.append((await asyncio.wait_for(process.stdout.readline(), SPAWN_TIMEOUT)).decode().split()[1])
        await asyncio.wait_for(process.stdout.readline(), SPAWN_TIMEOUT)
    a = WsPeer(await websockets.connect(urls[0], open_timeout=TIMEOUT))
    b = WsPeer(await websockets.connect(urls[1], open_timeout=TIMEOUT))
    try:
        assert (await a.initialize(1))["agentInfo"]["name"] == "agent-a"
        assert (await b.initialize(1))["agentInfo"]["name"] == "agent-b"
        session_id = await a.new_session()
        await a.prompt(session_id, "shared history")
        assert await a.result("session/status", {"sessionId": session_id}) == {"status": "active"}
        assert await b.result("session/status", {"sessionId": session_id}) == {"status": "inactive"}
        start = len(b.messages)
        loaded = await b.request("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
        assert loaded["result"] == {"sessionId": session_id}
        assert [u["content"]["text"] for u in updates(b.messages[start:])] == ["shared history", "echo: shared history"]
        unknown = await b.request("session/status", {"sessionId": "sess_nowhere"})
        assert unknown["error"]["code"] == -32002
    finally:
        await a.aclose()
        await b.aclose()
