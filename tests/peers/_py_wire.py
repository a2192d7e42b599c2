"""Raw clients of the Python SDK peer's smoke tests: JSON-RPC over a message link (WebSocket, stdio) and
over Streamable HTTP (``httpx``, following the SSE streams)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection

from tests.peers.python_sdk import PythonSdkPeer

TIMEOUT = 10.0
CWD = "/home/user/project"

Message = dict[str, Any]
Make = Callable[..., PythonSdkPeer]


# -- JSON-RPC over a message link (WebSocket, stdio) ----------------------------------------------------


class Link:
    """Whole JSON-RPC messages over one link; ``call`` waits for the answer and keeps what came before."""

    def __init__(self, send: Callable[[str], Awaitable[None]], recv: Callable[[], Awaitable[str]]) -> None:
        self._send = send
        self._recv = recv
        self._next_id = 0

    async def send(self, message: Message) -> None:
        await self._send(json.dumps(message))

    async def recv(self) -> Message:
        message: Message = json.loads(await asyncio.wait_for(self._recv(), TIMEOUT))
        return message

    async def notify(self, method: str, params: Message) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def call(
        self,
        method: str,
        params: Message | None = None,
        *,
        on_request: Callable[[Message], Message] | None = None,
        on_message: Callable[[Message], Awaitable[None]] | None = None,
    ) -> tuple[Message, list[Message]]:
        """Send a request; return (its response, the other messages received meanwhile, in order).

        ``on_request`` answers agent->client requests (its return value is the ``result``);
        ``on_message`` is awaited for each other message as it arrives.
        """
        request_id = self._next_id
        self._next_id += 1
        request: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = params
        await self.send(request)
        seen: list[Message] = []
        while True:
            message = await self.recv()
            if message.get("id") == request_id and "method" not in message:
                return message, seen
            seen.append(message)
            if "method" in message and "id" in message and on_request is not None:
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": on_request(message)})
            if on_message is not None:
                await on_message(message)


def ws_link(ws: ClientConnection) -> Link:
    async def recv() -> str:
        data = await ws.recv()
        assert isinstance(data, str), "the SDK sends text frames"
        return data

    return Link(ws.send, recv)


async def initialize(link: Link, protocol_version: int = 1) -> Message:
    response, seen = await link.call("initialize", {"protocolVersion": protocol_version, "clientCapabilities": {}})
    assert seen == []
    result: Message = response["result"]
    return result


async def new_session(link: Link, cwd: str = CWD) -> str:
    response, _ = await link.call("session/new", {"cwd": cwd, "mcpServers": []})
    session_id: str = response["result"]["sessionId"]
    return session_id


def prompt_params(session_id: str, text: str) -> Message:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def updates(messages: list[Message], kind: str | None = None) -> list[Message]:
    found = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
    return [u for u in found if kind is None or u["sessionUpdate"] == kind]


def texts(messages: list[Message], kind: str = "agent_message_chunk") -> list[str]:
    return [u["content"]["text"] for u in updates(messages, kind)]


async def echo_turn(link: Link, session_id: str, text: str) -> None:
    response, seen = await link.call("session/prompt", prompt_params(session_id, text))
    assert response["result"] == {"stopReason": "end_turn"}
    assert len(texts(seen)) == 3
    assert "".join(texts(seen)) == f"echo: {text}"


def assert_capabilities(result: Message) -> None:
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert set(caps["sessionCapabilities"]) == {"list", "resume", "close"}  # no "status"
    assert result["agentInfo"]["name"] == "acp-python-sdk-peer"


# -- Streamable HTTP helpers ---------------------------------------------------------------------------


class SseStream:
    """The ``data:`` messages of one SSE response, read in the background."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._pump()) if response.status_code == 200 else None

    async def _pump(self) -> None:
        async for line in self.response.aiter_lines():
            if line.startswith("data:"):
                await self._queue.put(json.loads(line[5:]))

    async def next(self) -> Message:
        return await asyncio.wait_for(self._queue.get(), TIMEOUT)

    async def until_response(self, request_id: int) -> tuple[Message, list[Message]]:
        seen: list[Message] = []
        while True:
            message = await self.next()
            if message.get("id") == request_id and "method" not in message:
                return message, seen
            seen.append(message)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await self._task


class HttpAcp:
    """One ACP connection over Streamable HTTP, spoken by hand."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self.connection_id = ""

    def headers(self, session_id: str | None = None) -> dict[str, str]:
        headers = {"Acp-Connection-Id": self.connection_id} if self.connection_id else {}
        if session_id is not None:
            headers["Acp-Session-Id"] = session_id
        return headers

    async def initialize(self) -> httpx.Response:
        response = await self.client.post(
            self.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        assert response.status_code == 200, response.text
        self.connection_id = response.headers["Acp-Connection-Id"]
        return response

    async def post(self, message: Message, session_id: str | None = None) -> httpx.Response:
        return await self.client.post(self.url, json=message, headers=self.headers(session_id))

    async def request(self, request_id: int, method: str, params: Message, session_id: str | None = None) -> int:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await self.post(message, session_id)
        return response.status_code

    @contextlib.asynccontextmanager
    async def stream(self, session_id: str | None = None) -> AsyncIterator[SseStream]:
        headers = {"Accept": "text/event-stream", **self.headers(session_id)}
        async with self.client.stream("GET", self.url, headers=headers) as response:
            stream = SseStream(response)
            try:
                yield stream
            finally:
                await stream.close()

    async def delete(self) -> int:
        response = await self.client.delete(self.url, headers=self.headers())
        return response.status_code


async def http_echo_flow(client: httpx.AsyncClient, url: str, expected_version: str) -> None:
    """initialize, session/new, one prompt; checks where each answer arrives and the HTTP version."""
    acp = HttpAcp(client, url)
    init = await acp.initialize()
    assert init.http_version == expected_version
    assert_capabilities(init.json()["result"])
    try:
        async with acp.stream() as conn_stream:
            assert conn_stream.response.http_version == expected_version
            assert await acp.request(1, "session/new", {"cwd": CWD, "mcpServers": []}) == 202
            created, _ = await conn_stream.until_response(1)
            session_id = created["result"]["sessionId"]
            async with acp.stream(session_id) as session_stream:
                assert session_stream.response.status_code == 200
                status = await acp.request(2, "session/prompt", prompt_params(session_id, "over http"), session_id)
                assert status == 202
                answer, seen = await session_stream.until_response(2)
                assert answer["result"] == {"stopReason": "end_turn"}
                assert "".join(texts(seen)) == "echo: over http"
                assert len(texts(seen)) == 3
    finally:
        assert await acp.delete() == 202
