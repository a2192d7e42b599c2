"""Smoke tests of the TypeScript SDK 2.4.0 peer, spoken to with raw ``websockets`` and ``httpx``.

They pin the wire behaviour our client depends on (and that the recovery tests drive through the
fixture): the recorded transcripts replay exactly over WebSocket, the Streamable HTTP routing
(which POST needs ``Acp-Session-Id``, which SSE stream carries which answer), the status codes,
and the drop / restart / evict controls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from tests.peers.typescript_sdk import TypeScriptSdkPeer, start_peer

TRANSCRIPTS = Path(__file__).parent / "ts_agent" / "transcripts"  # copies of /work/shared/transcripts
TIMEOUT = 10.0
CWD = "/home/user/project"
SESSION_ID = re.compile(r"sess_[0-9a-f]{12}")
MESSAGE_ID = re.compile(r"msg_[0-9a-f]{12}")


def initialize_params(version: int) -> dict[str, Any]:
    if version == 1:
        return {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "smoke", "version": "0"}}
    return {"protocolVersion": version, "info": {"name": "smoke", "version": "0"}, "capabilities": {}}


def text_of(update: dict[str, Any]) -> str:
    content = update["content"]
    blocks = content if isinstance(content, list) else [content]
    return "".join(block["text"] for block in blocks)


# ---------------------------------------------------------------------------------------------
# WebSocket helpers


class WsRpc:
    """A bare JSON-RPC peer over one WebSocket: sends requests, collects what arrives before each answer."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 0

    async def recv(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), TIMEOUT))
        return message

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def call(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Send a request; return its response and the messages that arrived before it."""
        request_id = self.next_id
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        before: list[dict[str, Any]] = []
        while True:
            message = await self.recv()
            if message.get("id") == request_id and "method" not in message:
                return message, before
            before.append(message)

    async def updates_until(self, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Read ``session/update`` notifications until ``done(update)`` holds; return their updates."""
        updates: list[dict[str, Any]] = []
        while True:
            message = await self.recv()
            assert message["method"] == "session/update", message
            updates.append(message["params"]["update"])
            if done(updates[-1]):
                return updates


@contextlib.asynccontextmanager
async def ws_session(url: str, version: int) -> AsyncIterator[tuple[WsRpc, dict[str, Any]]]:
    async with websockets.connect(url, open_timeout=TIMEOUT) as ws:
        rpc = WsRpc(ws)
        response, before = await rpc.call("initialize", initialize_params(version))
        assert before == []
        yield rpc, response["result"]


def is_idle(update: dict[str, Any]) -> bool:
    return bool(update["sessionUpdate"] == "state_update" and update["state"] == "idle")


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
# WebSocket smoke tests


async def test_ws_v1_lifecycle(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with websockets.connect(typescript_sdk_peer.ws_url, open_timeout=TIMEOUT) as ws:
        assert ws.response is not None
        assert ws.response.headers.get("Acp-Connection-Id")
        rpc = WsRpc(ws)
        init, _ = await rpc.call("initialize", initialize_params(1))
        caps = init["result"]["agentCapabilities"]
        assert init["result"]["protocolVersion"] == 1
        assert caps["loadSession"] is True
        assert caps["sessionCapabilities"] == {"resume": {}, "close": {}, "list": {}, "status": {}}

        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"] == {"status": "open"}

        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "one two three"}]}
        answer, updates = await rpc.call("session/prompt", prompt)
        assert answer["result"] == {"stopReason": "end_turn"}
        assert [u["params"]["update"]["sessionUpdate"] for u in updates] == ["agent_message_chunk"] * 3
        assert "".join(text_of(u["params"]["update"]) for u in updates) == "echo: one two three "

        listed, _ = await rpc.call("session/list", {})
        assert session_id in [s["sessionId"] for s in listed["result"]["sessions"]]
        unknown, _ = await rpc.call("session/status", {"sessionId": "sess_nope"})
        assert unknown["error"]["code"] == -32002
        assert unknown["error"]["data"] == {"sessionId": "sess_nope"}
        closed, _ = await rpc.call("session/close", {"sessionId": session_id})
        assert closed["result"] == {}
        assert typescript_sdk_peer.sessions()[session_id]["status"] == "saved"


async def test_ws_v2_lifecycle(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with ws_session(typescript_sdk_peer.ws_url_v2, 2) as (rpc, init):
        assert init["protocolVersion"] == 2
        assert init["capabilities"] == {"session": {"status": {}}}
        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"] == {"status": "open", "state": {"state": "idle"}}

        answer, before = await rpc.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi you"}]}
        )
        assert before == []  # the answer comes first
        message_id = answer["result"]["messageId"]
        updates = await rpc.updates_until(is_idle)
        assert [u["sessionUpdate"] for u in updates] == [
            "user_message",
            "state_update",
            *["agent_message_chunk"] * 3,
            "state_update",
        ]
        assert updates[0]["messageId"] == message_id
        assert updates[1]["state"] == "running"
        assert len({u["messageId"] for u in updates[2:5]}) == 1
        assert "".join(text_of(u) for u in updates[2:5]) == "echo: hi you "
        assert updates[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}


@pytest.mark.parametrize("version", [1, 2])
async def test_ws_restart_then_replay(typescript_sdk_peer: TypeScriptSdkPeer, version: int) -> None:
    async with ws_session(typescript_sdk_peer.ws_url, version) as (rpc, _):
        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        await rpc.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "remember"}]})
        if version == 2:
            await rpc.updates_until(is_idle)
        typescript_sdk_peer.restart()
        with pytest.raises(websockets.ConnectionClosedError):
            await rpc.recv()
    assert typescript_sdk_peer.sessions()[session_id]["status"] == "saved"

    async with ws_session(typescript_sdk_peer.ws_url, version) as (rpc, _):
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"] == {"status": "saved"}
        params = {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
        if version == 1:
            answer, replay = await rpc.call("session/load", params)
            kinds = ["user_message_chunk", "agent_message_chunk"]
        else:
            answer, replay = await rpc.call("session/resume", {**params, "replayFrom": {"type": "start"}})
            kinds = ["user_message", "agent_message", "state_update"]
        assert answer["result"] == {"sessionId": session_id}
        updates = [m["params"]["update"] for m in replay]
        assert [u["sessionUpdate"] for u in updates] == kinds
        assert [text_of(u) for u in updates[:2]] == ["remember", "echo: remember"]
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"]["status"] == "open"


@pytest.mark.parametrize("version", [1, 2])
async def test_ws_evict_gives_not_found(typescript_sdk_peer: TypeScriptSdkPeer, version: int) -> None:
    async with ws_session(typescript_sdk_peer.ws_url, version) as (rpc, _):
        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        typescript_sdk_peer.evict(session_id)
        assert session_id not in typescript_sdk_peer.sessions()
        for method, params in [
            ("session/status", {"sessionId": session_id}),
            ("session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []}),
            ("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}),
        ]:
            answer, _ = await rpc.call(method, params)
            assert answer["error"] == {
                "code": -32002,
                "message": "Resource not found",
                "data": {"sessionId": session_id},
            }, method


async def test_ws_drop_keeps_sessions_open(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        typescript_sdk_peer.drop()
        with pytest.raises(websockets.ConnectionClosedError) as info:
            await rpc.recv()
        assert info.value.rcvd is None  # abrupt: no close frame
    async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"] == {"status": "open"}
        resumed, _ = await rpc.call("session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
        assert resumed["result"] == {"sessionId": session_id}
        answer, updates = await rpc.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "again"}]}
        )
        assert answer["result"] == {"stopReason": "end_turn"}
        assert len(updates) == 3


async def test_ws_v2_drop_mid_turn_then_resume_sees_rest(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    typescript_sdk_peer.hold_turns()
    try:
        async with ws_session(typescript_sdk_peer.ws_url_v2, 2) as (rpc, _):
            new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
            session_id = new["result"]["sessionId"]
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow turn"}]}
            await rpc.call("session/prompt", prompt)
            first = await rpc.updates_until(lambda u: u["sessionUpdate"] == "state_update")
            assert [u["sessionUpdate"] for u in first] == ["user_message", "state_update"]
            assert first[-1]["state"] == "running"
            typescript_sdk_peer.drop()
            with pytest.raises(websockets.ConnectionClosedError):
                await rpc.recv()
        async with ws_session(typescript_sdk_peer.ws_url_v2, 2) as (rpc, _):
            status, _ = await rpc.call("session/status", {"sessionId": session_id})
            assert status["result"] == {"status": "open", "state": {"state": "running"}}
            answer, before = await rpc.call("session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
            assert answer["result"] == {"sessionId": session_id}
            assert [m["params"]["update"] for m in before] == [{"sessionUpdate": "state_update", "state": "running"}]
            typescript_sdk_peer.release_turns()
            rest = await rpc.updates_until(is_idle)
            assert [u["sessionUpdate"] for u in rest] == [*["agent_message_chunk"] * 3, "state_update"]
            assert "".join(text_of(u) for u in rest[:3]) == "echo: slow turn "
            assert rest[-1]["stopReason"] == "end_turn"
    finally:
        typescript_sdk_peer.release_turns()


async def test_ws_v1_drop_mid_turn_streams_rest_to_resumed_connection(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    typescript_sdk_peer.hold_turns()
    try:
        async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
            new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
            session_id = new["result"]["sessionId"]
            await rpc.send(
                {
                    "jsonrpc": "2.0",
                    "id": 99,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "cut off"}]},
                }
            )
            await poll(lambda: typescript_sdk_peer.sessions()[session_id]["running"])
            typescript_sdk_peer.drop()
            with pytest.raises(websockets.ConnectionClosedError):
                await rpc.recv()
        async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
            resumed, _ = await rpc.call("session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
            assert resumed["result"] == {"sessionId": session_id}
            typescript_sdk_peer.release_turns()
            # The chunks follow the session to the new connection; the prompt's answer was lost with the old one.
            chunks = [await rpc.recv() for _ in range(3)]
            assert "".join(text_of(m["params"]["update"]) for m in chunks) == "echo: cut off "
            await poll(lambda: typescript_sdk_peer.sessions()[session_id]["turns"] == 1)
            answer, before = await rpc.call("session/status", {"sessionId": session_id})
            assert (answer["result"], before) == ({"status": "open"}, [])
    finally:
        typescript_sdk_peer.release_turns()


async def poll(condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Wait until ``condition()`` holds, checking every 10 ms, failing after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_ws_binary_and_malformed_frames(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
        await rpc.ws.send(b"\x00\x01 binary frames are ignored")
        await rpc.ws.send("not json")
        parse_error = await rpc.recv()
        assert parse_error["id"] is None
        assert parse_error["error"]["code"] == -32700
        await rpc.send([{"jsonrpc": "2.0", "id": 99, "method": "session/list", "params": {}}])  # type: ignore[arg-type]
        batch = await rpc.recv()
        assert batch["id"] is None
        assert batch["error"]["code"] == -32600
        listed, _ = await rpc.call("session/list", {})
        assert "sessions" in listed["result"]


# ---------------------------------------------------------------------------------------------
# Streamable HTTP helpers


class SseStream:
    """One ``GET`` SSE stream read in a background task; ``next()`` yields its JSON-RPC messages."""

    def __init__(self, client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
        self.messages: asyncio.Queue[dict[str, Any] | BaseException | None] = asyncio.Queue()
        self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.http_version = ""
        self._task = asyncio.create_task(self._run(client, url, {"Accept": "text/event-stream", **headers}))

    async def _run(self, client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
        try:
            async with client.stream("GET", url, headers=headers, timeout=httpx.Timeout(TIMEOUT, read=None)) as resp:
                self.http_version = resp.http_version
                self.status.set_result(resp.status_code)
                data: list[str] = []
                async for line in resp.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[6:] if line.startswith("data: ") else line[5:])
                    elif line == "" and data:
                        self.messages.put_nowait(json.loads("\n".join(data)))
                        data = []
            self.messages.put_nowait(None)
        except (httpx.HTTPError, OSError) as exc:
            if not self.status.done():
                self.status.set_exception(exc)
            self.messages.put_nowait(exc)

    async def opened(self) -> int:
        return await asyncio.wait_for(asyncio.shield(self.status), TIMEOUT)

    async def next(self) -> dict[str, Any]:
        item = await asyncio.wait_for(self.messages.get(), TIMEOUT)
        assert isinstance(item, dict), f"stream ended: {item!r}"
        return item

    async def end(self) -> BaseException | None:
        """Wait for the stream to end; return the error that ended it, or None if it ended cleanly."""
        while True:
            item = await asyncio.wait_for(self.messages.get(), TIMEOUT)
            if not isinstance(item, dict):
                return item

    async def until_response(self, request_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        before: list[dict[str, Any]] = []
        while True:
            message = await self.next()
            if message.get("id") == request_id and "method" not in message:
                return message, before
            before.append(message)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class HttpAcp:
    """A bare Streamable HTTP ACP client: POSTs and SSE streams, nothing hidden."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self.connection_id = ""
        self.next_id = 0
        self.streams: list[SseStream] = []

    async def initialize(self, version: int) -> dict[str, Any]:
        response = await self.client.post(self.url, json=self.request("initialize", initialize_params(version)))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/json")
        self.connection_id = response.headers["Acp-Connection-Id"]
        body: dict[str, Any] = response.json()
        return body

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    async def post(self, message: Any, session_id: str | None = None) -> httpx.Response:
        headers = {"Acp-Connection-Id": self.connection_id}
        if session_id is not None:
            headers["Acp-Session-Id"] = session_id
        return await self.client.post(self.url, json=message, headers=headers)

    async def open_stream(self, session_id: str | None = None) -> SseStream:
        headers = {"Acp-Connection-Id": self.connection_id}
        if session_id is not None:
            headers["Acp-Session-Id"] = session_id
        stream = SseStream(self.client, self.url, headers)
        self.streams.append(stream)
        assert await stream.opened() == 200
        return stream

    async def call(
        self, stream: SseStream, method: str, params: dict[str, Any], session_id: str | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        message = self.request(method, params)
        response = await self.post(message, session_id)
        assert response.status_code == 202, (response.status_code, response.text)
        assert response.content == b""
        return await stream.until_response(message["id"])

    async def close(self) -> None:
        for stream in self.streams:
            await stream.close()


@contextlib.asynccontextmanager
async def http_peer(url: str) -> AsyncIterator[HttpAcp]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        acp = HttpAcp(client, url)
        try:
            yield acp
        finally:
            await acp.close()


# ---------------------------------------------------------------------------------------------
# Streamable HTTP smoke tests


async def test_http_v1_routing_and_lifecycle(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with http_peer(typescript_sdk_peer.http_url) as acp:
        init = await acp.initialize(1)
        assert init["result"]["agentCapabilities"]["sessionCapabilities"]["status"] == {}
        conn = await acp.open_stream()
        assert conn.http_version == "HTTP/1.1"

        # session/new: no session header; answered on the connection stream.
        new, _ = await acp.call(conn, "session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]

        # Anything whose params carry a sessionId needs Acp-Session-Id (400 without it) ...
        missing = await acp.post(acp.request("session/status", {"sessionId": session_id}))
        assert (missing.status_code, missing.text) == (400, "Missing Acp-Session-Id")
        mismatched = await acp.post(acp.request("session/status", {"sessionId": session_id}), "sess_other")
        assert (mismatched.status_code, mismatched.text) == (400, "Mismatched Acp-Session-Id")
        # ... and is answered on that session's stream, which buffers until it is opened.
        status_request = acp.request("session/status", {"sessionId": session_id})
        assert (await acp.post(status_request, session_id)).status_code == 202
        session = await acp.open_stream(session_id)
        status, _ = await session.until_response(status_request["id"])
        assert status["result"] == {"status": "open"}

        answer, updates = await acp.call(
            session,
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "a b"}]},
            session_id,
        )
        assert answer["result"] == {"stopReason": "end_turn"}
        assert "".join(text_of(u["params"]["update"]) for u in updates) == "echo: a b "

        # session/list (no sessionId in params) stays connection-scoped.
        listed, _ = await acp.call(conn, "session/list", {})
        assert session_id in [s["sessionId"] for s in listed["result"]["sessions"]]
        # An unknown session's stream opens fine (no 404); the -32002 answer comes on it.
        nope = await acp.open_stream("sess_nope")
        unknown, _ = await acp.call(nope, "session/status", {"sessionId": "sess_nope"}, "sess_nope")
        assert unknown["error"] == {"code": -32002, "message": "Resource not found", "data": {"sessionId": "sess_nope"}}

        # Restart: the old connection id is gone, streams end.
        typescript_sdk_peer.restart()
        assert isinstance(await conn.end(), httpx.HTTPError)
        gone = await acp.post(acp.request("session/list", {}))
        assert (gone.status_code, gone.text) == (404, "Unknown Acp-Connection-Id")

    async with http_peer(typescript_sdk_peer.http_url) as acp:
        await acp.initialize(1)
        conn = await acp.open_stream()
        session = await acp.open_stream(session_id)
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "saved"}
        # session/load: needs the session header; replay on the session stream, answer on the connection stream.
        load = acp.request("session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
        loaded_post = await acp.post(load, session_id)
        assert loaded_post.status_code == 202
        loaded, before = await conn.until_response(load["id"])
        assert before == []
        assert loaded["result"] == {"sessionId": session_id}
        replay = [await session.next(), await session.next()]
        assert [m["params"]["update"]["sessionUpdate"] for m in replay] == ["user_message_chunk", "agent_message_chunk"]
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "open"}

        typescript_sdk_peer.evict(session_id)
        evicted, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert evicted["error"]["data"] == {"sessionId": session_id}


async def test_http_v2_routing_and_lifecycle(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with http_peer(typescript_sdk_peer.http_url_v2) as acp:
        init = await acp.initialize(2)
        assert init["result"]["capabilities"] == {"session": {"status": {}}}
        conn = await acp.open_stream()
        new, _ = await acp.call(conn, "session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        session = await acp.open_stream(session_id)
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "open", "state": {"state": "idle"}}

        answer, before = await acp.call(
            session,
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "x y"}]},
            session_id,
        )
        assert before == []
        assert MESSAGE_ID.fullmatch(answer["result"]["messageId"])
        updates: list[dict[str, Any]] = []
        while not updates or not is_idle(updates[-1]):
            updates.append((await session.next())["params"]["update"])
        assert [u["sessionUpdate"] for u in updates] == [
            "user_message",
            "state_update",
            *["agent_message_chunk"] * 3,
            "state_update",
        ]
        typescript_sdk_peer.restart()

    async with http_peer(typescript_sdk_peer.http_url_v2) as acp:
        await acp.initialize(2)
        session = await acp.open_stream(session_id)
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "saved"}
        missing = await acp.post(
            acp.request("session/resume", {"sessionId": session_id, "cwd": CWD, "replayFrom": {"type": "start"}})
        )
        assert missing.status_code == 400
        # session/resume: replay, then state_update, then the answer: all on the session stream.
        resumed, replay = await acp.call(
            session,
            "session/resume",
            {"sessionId": session_id, "cwd": CWD, "mcpServers": [], "replayFrom": {"type": "start"}},
            session_id,
        )
        assert resumed["result"] == {"sessionId": session_id}
        assert [m["params"]["update"]["sessionUpdate"] for m in replay] == [
            "user_message",
            "agent_message",
            "state_update",
        ]
        assert text_of(replay[1]["params"]["update"]) == "echo: x y"


async def test_http_status_codes(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    url = typescript_sdk_peer.http_url
    async with http_peer(url) as acp:
        client = acp.client
        bad_type = await client.post(url, content=b"{}", headers={"Content-Type": "text/plain"})
        assert bad_type.status_code == 415
        not_json = await client.post(url, content=b"{", headers={"Content-Type": "application/json"})
        assert (not_json.status_code, not_json.text) == (400, "Invalid JSON")
        no_conn = await client.post(url, json=acp.request("session/list", {}))
        assert (no_conn.status_code, no_conn.text) == (400, "Missing Acp-Connection-Id")
        unknown = await client.post(url, json=acp.request("session/list", {}), headers={"Acp-Connection-Id": "nope"})
        assert (unknown.status_code, unknown.text) == (404, "Unknown Acp-Connection-Id")
        batch = await client.post(url, json=[acp.request("session/list", {})])
        assert batch.status_code == 400
        assert batch.json()["error"]["code"] == -32600
        assert batch.json()["id"] is None
        wrong_path = await client.post(url.replace("/acp", "/other"), json=acp.request("initialize", {}))
        assert wrong_path.status_code == 404
        put = await client.put(url, json={})
        assert put.status_code == 405

        await acp.initialize(1)
        headers = {"Acp-Connection-Id": acp.connection_id}
        again = await acp.post(acp.request("initialize", initialize_params(1)))
        assert (again.status_code, again.text) == (400, "Initialize not allowed on existing connection")
        not_acceptable = await client.get(url, headers={**headers, "Accept": "application/json"})
        assert not_acceptable.status_code == 406
        missing_conn_get = await client.get(url, headers={"Accept": "text/event-stream"})
        assert missing_conn_get.status_code == 400
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess_x"}}
        assert (await acp.post(cancel)).status_code == 400  # notifications too need the session header
        assert (await acp.post(cancel, "sess_x")).status_code == 202
        stream = await acp.open_stream()
        second = await client.get(url, headers={**headers, "Accept": "text/event-stream"})
        assert (second.status_code, second.text) == (409, "Outbound stream already has an active receiver")
        deleted = await client.delete(url, headers=headers)
        assert deleted.status_code == 202
        assert await stream.end() is None  # DELETE ends the streams cleanly
        deleted_again = await client.delete(url, headers=headers)
        assert deleted_again.status_code == 404


async def test_http_is_http11_only_on_cleartext(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with httpx.AsyncClient(http1=False, http2=True, timeout=TIMEOUT) as client:
        with pytest.raises(httpx.HTTPError):
            await client.post(typescript_sdk_peer.http_url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize"})


async def test_http_drop_ends_streams_but_keeps_connection(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with http_peer(typescript_sdk_peer.http_url) as acp:
        await acp.initialize(1)
        conn = await acp.open_stream()
        new, _ = await acp.call(conn, "session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        session = await acp.open_stream(session_id)
        typescript_sdk_peer.drop()
        assert isinstance(await conn.end(), httpx.HTTPError)
        assert isinstance(await session.end(), httpx.HTTPError)
        # A network drop leaves the server's ACP connection: the same id still works.
        conn = await acp.open_stream()
        session = await acp.open_stream(session_id)
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "open"}
        listed, _ = await acp.call(conn, "session/list", {})
        assert session_id in [s["sessionId"] for s in listed["result"]["sessions"]]


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
