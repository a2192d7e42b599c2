"""Smoke tests of the TypeScript SDK 2.4.0 peer, spoken to with raw ``websockets`` and ``httpx``.

They pin the wire behaviour our client depends on (and that the recovery tests drive through the
fixture): the recorded transcripts replay exactly over WebSocket (here, with the fixture's own
tests), the Streamable HTTP routing (``test_typescript_sdk_peer_http.py``), and the WebSocket
lifecycle with the drop / restart / evict controls (``test_typescript_sdk_peer_ws.py``).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from tests.peers._ts_wire import MESSAGE_ID, SESSION_ID, TIMEOUT, TRANSCRIPTS
from tests.peers.typescript_sdk import TypeScriptSdkPeer, start_peer

# ---------------------------------------------------------------------------------------------
# Transcript replay: the agent must produce the recorded wire behaviour (ids aside)


class IdMatcher:
    """Matches recorded messages against live ones, mapping recorded session/message ids to live ones."""

    def __init__(self) -> None:
        self.recorded_to_live: dict[str, str] = {}

    def live_sessions(self) -> list[str]:
        return [live for recorded, live in self.recorded_to_live.items() if recorded.startswith("sess_")]

    def translate(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: self.translate(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.translate(item) for item in value]
        if isinstance(value, str):
            return self.recorded_to_live.get(value, value)
        return value

    def match(self, recorded: Any, live: Any, path: str = "$") -> None:
        if isinstance(recorded, dict):
            assert isinstance(live, dict), f"{path}: expected an object, got {live!r}"
            assert recorded.keys() == live.keys(), f"{path}: keys {sorted(live)} != recorded {sorted(recorded)}"
            for key in recorded:
                self.match(recorded[key], live[key], f"{path}.{key}")
        elif isinstance(recorded, list):
            assert isinstance(live, list) and len(live) == len(recorded), f"{path}: {live!r} != {recorded!r}"
            for index, (want, got) in enumerate(zip(recorded, live, strict=True)):
                self.match(want, got, f"{path}[{index}]")
        elif isinstance(recorded, str) and (pattern := _id_pattern(recorded)) is not None:
            assert isinstance(live, str) and pattern.fullmatch(live), f"{path}: {live!r} is not an id like {recorded!r}"
            known = self.recorded_to_live.setdefault(recorded, live)
            assert known == live, f"{path}: {recorded!r} was {known!r} before, now {live!r}"
            assert list(self.recorded_to_live.values()).count(live) == 1, f"{path}: {live!r} stands for two ids"
        else:
            assert recorded == live, f"{path}: {live!r} != recorded {recorded!r}"


def _id_pattern(value: str) -> re.Pattern[str] | None:
    for pattern in (SESSION_ID, MESSAGE_ID):
        if pattern.fullmatch(value):
            return pattern
    return None


@pytest.mark.parametrize("name", ["typescript-sdk-2.4.0-v1-ws.jsonl", "typescript-sdk-2.4.0-v2-ws.jsonl"])
async def test_replays_recorded_transcript(typescript_sdk_peer: TypeScriptSdkPeer, name: str) -> None:
    entries = [json.loads(line) for line in (TRANSCRIPTS / name).read_text().splitlines() if line.strip()]
    matcher = IdMatcher()
    ws: ClientConnection | None = None
    conn = None
    compared = 0
    try:
        for entry in entries:
            if "note" in entry:
                if ws is not None:
                    await ws.close()
                    ws, conn = None, None
                if "restart" in entry["note"]:
                    typescript_sdk_peer.restart()
                if "evicts" in entry["note"]:
                    for session_id in matcher.live_sessions():
                        typescript_sdk_peer.evict(session_id)
                continue
            if entry["conn"] != conn:
                if ws is not None:
                    await ws.close()
                ws = await websockets.connect(typescript_sdk_peer.ws_url, open_timeout=TIMEOUT)
                conn = entry["conn"]
            assert ws is not None
            if entry["dir"] == "c2a":
                await ws.send(json.dumps(matcher.translate(entry["msg"])))
            else:
                live = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                matcher.match(entry["msg"], live)
                compared += 1
    finally:
        if ws is not None:
            await ws.close()
    assert compared == sum(1 for entry in entries if entry.get("dir") == "a2c")
    assert len(matcher.live_sessions()) == 1


# ---------------------------------------------------------------------------------------------
# The fixture itself


def test_fixture_urls_and_controls(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    assert typescript_sdk_peer.ws_url.startswith("ws://127.0.0.1:")
    assert typescript_sdk_peer.ws_url.endswith("/acp")
    assert typescript_sdk_peer.http_url == typescript_sdk_peer.ws_url.replace("ws://", "http://")
    assert typescript_sdk_peer.ws_url_v2 == typescript_sdk_peer.ws_url
    assert typescript_sdk_peer.http_url_v2 == typescript_sdk_peer.http_url
    assert typescript_sdk_peer.process.poll() is None
    stats = typescript_sdk_peer.stats()
    assert set(stats) >= {"sessions", "restarts", "liveSockets", "chunkDelayMs"}
    typescript_sdk_peer.evict("sess_unknown")  # harmless


def test_start_peer_fails_with_node_stderr(tmp_path: Path) -> None:
    broken = tmp_path / "broken.mjs"
    broken.write_text('process.stderr.write("boom: cannot start\\n"); process.exit(3);\n')
    with pytest.raises(pytest.fail.Exception, match=r"(?s)exit code 3.*boom: cannot start"):
        start_peer(broken, tmp_path / "stderr.log")


def test_controls_fail_with_node_stderr_once_the_agent_died(tmp_path: Path) -> None:
    fake = tmp_path / "fake.mjs"
    fake.write_text(
        'process.stdout.write(JSON.stringify({event: "ready", port: 1, controlPort: 1}) + "\\n");\n'
        'process.stderr.write("dying now\\n");\n'
        'process.stdin.on("end", () => process.exit(7)); process.stdin.resume();\n'
    )
    peer = start_peer(fake, tmp_path / "stderr.log")
    try:
        assert peer.process.stdin is not None
        peer.process.stdin.close()
        assert peer.process.wait(TIMEOUT) == 7
        with pytest.raises(pytest.fail.Exception, match=r"(?s)exited with code 7.*dying now"):
            peer.drop()
    finally:
        peer.stop()
