"""Raw ACP clients for testing the reference agent: plain dicts over a memory transport, a
``websockets`` socket, or ``httpx`` + SSE. Deliberately not our client (it is tested against
these servers elsewhere)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx

from acp_client.exceptions import TransportClosed
from acp_client.testing.reference_agent import ReferenceAgent
from acp_client.transports.memory import MemoryTransport, memory_pair

TIMEOUT = 5.0

Handler = Callable[[dict[str, Any]], Any]


def is_response(message: dict[str, Any], request_id: Any) -> bool:
    return "method" not in message and message.get("id") == request_id


def updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``update`` objects of the ``session/update`` notifications in ``messages``."""
    return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


def chunk_text(messages: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates(messages) if u.get("sessionUpdate") == "agent_message_chunk")


class Peer:
    """A client speaking raw JSON-RPC. Subclasses provide ``_send``; received messages are appended
    to :attr:`messages` (in arrival order) by a reader task.

    Agent→client requests whose method is in :attr:`handlers` are answered automatically
    (a handler returns the result, or raises ``RpcAnswer`` to answer an error).
    """

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.handlers: dict[str, Handler] = {}
        self._ids = itertools.count()
        self._changed = asyncio.Event()
        self.closed = False

    async def _send(self, message: dict[str, Any], *, session_id: str | None = None) -> None:
        raise NotImplementedError

    def _received(self, message: Any) -> None:
        assert isinstance(message, dict), message
        self.messages.append(message)
        self._changed.set()
        method = message.get("method")
        if method is not None and "id" in message and method in self.handlers:
            asyncio.get_running_loop().create_task(self._answer(message))

    async def _answer(self, request: dict[str, Any]) -> None:
        params = request.get("params") or {}
        try:
            result = self.handlers[request["method"]](params)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        except RpcAnswer as answer:
            reply = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": answer.code, "message": answer.text}}
        await self._send(reply, session_id=params.get("sessionId"))

    def _closed(self) -> None:
        self.closed = True
        self._changed.set()

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], *, start: int = 0, timeout: float = TIMEOUT
    ) -> dict[str, Any]:
        """The first message from index ``start`` on that matches ``predicate`` (waiting for it)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for message in self.messages[start:]:
                if predicate(message):
                    return message
            if self.closed:
                raise AssertionError("the link closed while waiting")
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"no matching message within {timeout}s; got {self.messages[start:]!r}")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
        timeout: float = TIMEOUT,
    ) -> dict[str, Any]:
        """Send a request; returns its response message (``result`` or ``error``)."""
        request_id = next(self._ids)
        await self.send_request(request_id, method, params, session_id=session_id)
        return await self.wait_for(lambda m: is_response(m, request_id), timeout=timeout)

    async def send_request(
        self, request_id: Any, method: str, params: dict[str, Any] | None = None, *, session_id: str | None = None
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message, session_id=session_id)

    def next_id(self) -> int:
        return next(self._ids)

    async def notify(self, method: str, params: dict[str, Any], *, session_id: str | None = None) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params}, session_id=session_id)

    async def result(self, method: str, params: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        """Send a request and return its ``result`` (fails on an error answer)."""
        response = await self.request(method, params, **kwargs)
        assert "result" in response, response
        result = response["result"]
        assert isinstance(result, dict)
        return result

    async def initialize(self, version: int = 1) -> dict[str, Any]:
        return await self.result("initialize", {"protocolVersion": version, "clientCapabilities": {}})

    async def new_session(self, cwd: str = "/work/project") -> str:
        result = await self.result("session/new", {"cwd": cwd, "mcpServers": []})
        return str(result["sessionId"])

    async def prompt(self, session_id: str, text: str, **kwargs: Any) -> dict[str, Any]:
        return await self.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
            session_id=session_id,
            **kwargs,
        )


class RpcAnswer(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


class MemoryPeer(Peer):
    """A raw client connected to ``agent`` over an in-memory transport pair."""

    def __init__(self, agent: ReferenceAgent) -> None:
        super().__init__()
        self.client_side, self.agent_side = memory_pair()
        self._serve = asyncio.get_running_loop().create_task(agent.serve(self.agent_side))
        self._reader = asyncio.get_running_loop().create_task(self._read(self.client_side))

    async def _read(self, transport: MemoryTransport) -> None:
        try:
            while True:
                self._received(await transport.receive())
        except TransportClosed:
            self._closed()

    async def _send(self, message: dict[str, Any], *, session_id: str | None = None) -> None:
        await self.client_side.send(message)

    def send_raw(self, frame: str) -> None:
        self.client_side.send_raw(frame)

    async def aclose(self) -> None:
        await self.client_side.aclose()
        await asyncio.wait_for(self._serve, TIMEOUT)
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


class WsPeer(Peer):
    """A raw client over a ``websockets`` connection."""

    def __init__(self, websocket: Any) -> None:
        super().__init__()
        self.ws = websocket
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                self._received(json.loads(frame))
        except Exception:
            pass
        finally:
            self._closed()

    async def _send(self, message: dict[str, Any], *, session_id: str | None = None) -> None:
        await self.ws.send(json.dumps(message))

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


class SseStream:
    """One open SSE GET: its messages go to the peer; comments are counted here."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.status: int | None = None
        self.comments: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.ended = asyncio.Event()
        self.opened = asyncio.Event()
        self.error: BaseException | None = None
        self.task: asyncio.Task[None] | None = None


class HttpPeer(Peer):
    """A raw Streamable HTTP client: POSTs, SSE streams read by background tasks."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        super().__init__()
        self.client = client
        self.url = url
        self.connection_id: str | None = None
        self.streams: list[SseStream] = []
        self.last_post: httpx.Response | None = None

    def headers(self, session_id: str | None = None, **extra: str) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.connection_id is not None:
            headers["acp-connection-id"] = self.connection_id
        if session_id is not None:
            headers["acp-session-id"] = session_id
        headers.update(extra)
        return headers

    async def initialize(self, version: int = 1) -> dict[str, Any]:
        message = {
            "jsonrpc": "2.0",
            "id": self.next_id(),
            "method": "initialize",
            "params": {"protocolVersion": version, "clientCapabilities": {}},
        }
        response = await self.client.post(self.url, content=json.dumps(message), headers=self.headers())
        assert response.status_code == 200, (response.status_code, response.text)
        self.last_post = response
        self.connection_id = response.headers["acp-connection-id"]
        body = response.json()
        assert body["id"] == message["id"]
        result = body["result"]
        assert isinstance(result, dict)
        return result

    async def _send(self, message: dict[str, Any], *, session_id: str | None = None) -> None:
        response = await self.client.post(self.url, content=json.dumps(message), headers=self.headers(session_id))
        self.last_post = response
        assert response.status_code == 202, (response.status_code, response.text)

    async def open_stream(self, session_id: str | None = None) -> SseStream:
        """Open an SSE GET; returns once the server answered 200 (the listener is registered)."""
        stream = SseStream(f"session {session_id}" if session_id else "connection")
        headers = {"accept": "text/event-stream", "acp-connection-id": self.connection_id or ""}
        if session_id is not None:
            headers["acp-session-id"] = session_id

        async def run() -> None:
            try:
                async with self.client.stream("GET", self.url, headers=headers, timeout=None) as response:
                    stream.status = response.status_code
                    stream.opened.set()
                    if response.status_code != 200:
                        return
                    data: list[str] = []
                    async for line in response.aiter_lines():
                        if line.startswith(":"):
                            stream.comments.append(line)
                        elif line.startswith("data:"):
                            data.append(line[5:].lstrip(" "))
                        elif line == "" and data:
                            message = json.loads("\n".join(data))
                            data = []
                            stream.messages.append(message)
                            self._received(message)
            except Exception as exc:
                stream.error = exc
            finally:
                stream.opened.set()
                stream.ended.set()

        stream.task = asyncio.get_running_loop().create_task(run())
        await asyncio.wait_for(stream.opened.wait(), TIMEOUT)
        self.streams.append(stream)
        return stream

    async def aclose(self) -> None:
        for stream in self.streams:
            if stream.task is not None:
                stream.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await stream.task


def since(peer: Peer, start: int) -> list[dict[str, Any]]:
    """What ``peer`` received from its ``start``-th message on."""
    return peer.messages[start:]
