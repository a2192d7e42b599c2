"""Raw clients of the TypeScript SDK peer's smoke tests: a JSON-RPC caller over ``websockets``, and a
Streamable HTTP one over ``httpx`` that follows the SSE streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import websockets
from websockets.asyncio.client import ClientConnection

TRANSCRIPTS = Path(__file__).parent / "ts_agent" / "transcripts"  # recorded from the TypeScript SDK's agent
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
