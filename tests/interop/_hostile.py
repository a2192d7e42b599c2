"""The hostile peers of the ``test_hostile_agents*.py`` tests and their helpers.

Three real peers, written here (and in ``hostile_stdio_agent.py``), speak one tiny test protocol: they
answer ``initialize`` like an ACP v1 agent, and the test method ``_hostile`` as its params say --
write the frames in ``before`` first (``$ID`` in a frame is replaced by the request's id), then answer
``{"echo": tag}`` (unless ``answer`` is false). So each test puts arbitrary bytes on the wire between
a request and its good answer:

- ``ws``: a ``websockets`` server (a frame is a text message; ``{"binary": b64}`` a binary one),
- ``http``: a hypercorn ASGI app speaking Streamable HTTP (a frame is an SSE ``data:`` event on the
  connection stream; ``{"sse": text}`` / ``{"sse_b64": b64}`` raw stream bytes; ``{"end": true}`` ends
  the stream; ``status`` / ``content_type`` / ``body`` in the params shape the answer to the POST),
- ``stdio``: a child process (a frame is a stdout line; ``{"raw": latin-1 text}`` raw bytes; ``exit``
  makes it exit mid-request).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from acp_client import AcpClient, AcpError, Timeouts

T = TypeVar("T")

TIMEOUT = 10.0
STDIO_AGENT = Path(__file__).with_name("hostile_stdio_agent.py")

Message = dict[str, Any]


async def bounded(awaitable: Awaitable[T], timeout: float, what: str) -> T:
    """Like :func:`within`, but a hang fails with a message saying what hung."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError as exc:
        if isinstance(exc, AcpError):  # RequestTimeout is a TimeoutError too: the awaitable's own
            raise
        raise AssertionError(f"{what} was still waiting after {timeout:g}s") from None


def fill(frame: str, request_id: Any) -> str:
    return frame.replace("$ID", json.dumps(request_id))


def answer(request_id: Any, params: Message) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"echo": params.get("tag")}}


INIT_RESULT = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "hostile", "version": "0"}}


# --------------------------------------------------------------------------------------------------
# The WebSocket peer


class HostileWsAgent:
    """A ``websockets`` server speaking the test protocol; ``received`` keeps every client message."""

    def __init__(self, *, silent_initialize: bool = False, refuse_status: int | None = None) -> None:
        self.silent_initialize = silent_initialize
        self.refuse_status = refuse_status
        self.received: list[Any] = []
        self._server: Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/acp"

    async def start(self) -> HostileWsAgent:
        self._server = await serve(self._handle, "127.0.0.1", 0, process_request=self._process_request)
        self.port = next(iter(self._server.sockets)).getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if self.refuse_status is not None:
            return connection.respond(self.refuse_status, "refused by the hostile agent\n")
        return None

    async def _handle(self, connection: ServerConnection) -> None:
        async for data in connection:
            message = json.loads(data)
            self.received.append(message)
            if not isinstance(message, dict) or "method" not in message or "id" not in message:
                continue
            request_id, method = message["id"], message["method"]
            params = message.get("params") or {}
            if method == "initialize":
                if not self.silent_initialize:
                    await connection.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": INIT_RESULT}))
            elif method == "_hostile":
                for frame in params.get("before", []):
                    if isinstance(frame, dict) and "binary" in frame:
                        await connection.send(base64.b64decode(frame["binary"]))
                    elif isinstance(frame, dict) and "close" in frame:
                        await connection.close(frame["close"], "closed by the hostile agent")
                        return
                    else:
                        await connection.send(fill(frame, request_id))
                if params.get("answer", True):
                    await connection.send(json.dumps(answer(request_id, params)))


# --------------------------------------------------------------------------------------------------
# The Streamable HTTP peer (the Python SDK's dialect, reduced to what the tests need)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_END = b""  # queued on a connection stream: end it


class HostileHttpAgent:
    """An ASGI app: ``POST initialize`` answers 200 + ``Acp-Connection-Id``; every later POST answers 202
    (or what its params say) and its frames and answer go onto the connection's SSE stream.

    Knobs for the initialize step: ``init_status`` / ``init_content_type`` / ``init_body`` (the initialize
    answer), ``no_connection_id``, ``hang_initialize``, ``get_status`` / ``get_content_type`` (the
    connection stream's GET).
    """

    def __init__(self) -> None:
        self.streams: dict[str, asyncio.Queue[bytes]] = {}
        self.received: list[Any] = []
        self.init_status = 200
        self.init_content_type = "application/json"
        self.init_body: bytes | None = None
        self.no_connection_id = False
        self.hang_initialize = False
        self.get_status = 200
        self.get_content_type = "text/event-stream"
        self._ids = itertools.count(1)
        self._never = asyncio.Event()
        self._hung = asyncio.Event()

    def release_hung_posts(self) -> None:
        """Let POSTs held by ``{"hang": true}`` answer (202, nothing on the stream)."""
        self._hung.set()

    def shut_down(self) -> None:
        """End every stream and release every held request (before the server stops)."""
        self._hung.set()
        self._never.set()
        for stream in self.streams.values():
            stream.put_nowait(_END)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        if scope["method"] == "POST":
            body = b""
            while True:
                event = await receive()
                body += event.get("body", b"")
                if not event.get("more_body"):
                    break
            await self._post(headers, body, send)
        elif scope["method"] == "GET":
            await self._get(headers, receive, send)
        else:  # DELETE
            stream = self.streams.pop(headers.get("acp-connection-id", ""), None)
            if stream is not None:
                stream.put_nowait(_END)
            await self._reply(send, 202)

    @staticmethod
    async def _reply(
        send: Send, status: int, body: bytes = b"", content_type: str = "application/json", extra: Any = ()
    ) -> None:
        headers = [(b"content-type", content_type.encode()), *extra]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _post(self, headers: dict[str, str], body: bytes, send: Send) -> None:
        message = json.loads(body)
        self.received.append(message)
        if isinstance(message, dict) and message.get("method") == "initialize":
            if self.hang_initialize:
                await self._never.wait()
            connection_id = f"conn-{next(self._ids)}"
            self.streams[connection_id] = asyncio.Queue()
            reply = self.init_body
            if reply is None:
                reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": INIT_RESULT}).encode()
            extra = [] if self.no_connection_id else [(b"acp-connection-id", connection_id.encode())]
            await self._reply(send, self.init_status, reply, self.init_content_type, extra)
            return
        stream = self.streams.get(headers.get("acp-connection-id", ""))
        if stream is None:
            await self._reply(send, 404, b'{"error": "Unknown connection id"}')
            return
        if not isinstance(message, dict) or message.get("method") != "_hostile":
            await self._reply(send, 202)
            return
        params = message.get("params") or {}
        request_id = message["id"]
        if params.get("hang"):
            await self._hung.wait()
            await self._reply(send, 202)
            return
        if "status" in params:  # shape the POST's own answer
            body_out = params.get("body", "").replace("$ANSWER", json.dumps(answer(request_id, params)))
            extra = [(b"retry-after", str(params["retry_after"]).encode())] if "retry_after" in params else []
            await self._reply(
                send, params["status"], body_out.encode(), params.get("content_type", "application/json"), extra
            )
            if params.get("then_answer_on_stream"):
                stream.put_nowait(_event(json.dumps(answer(request_id, params))))
            return
        await self._reply(send, 202)
        for frame in params.get("before", []):
            if isinstance(frame, dict) and "sse" in frame:
                stream.put_nowait(frame["sse"].encode())
            elif isinstance(frame, dict) and "sse_b64" in frame:
                stream.put_nowait(base64.b64decode(frame["sse_b64"]))
            elif isinstance(frame, dict) and "end" in frame:
                stream.put_nowait(_END)
            else:
                stream.put_nowait(_event(fill(frame, request_id)))
        if params.get("answer", True):
            stream.put_nowait(_event(json.dumps(answer(request_id, params))))

    async def _get(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        stream = self.streams.get(headers.get("acp-connection-id", ""))
        if stream is None or headers.get("acp-session-id"):
            await self._reply(send, 404, b'{"error": "Unknown connection id"}')
            return
        if self.get_status != 200:
            await self._reply(send, self.get_status, b"no stream for you")
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", self.get_content_type.encode()), (b"cache-control", b"no-cache")],
            }
        )
        await send({"type": "http.response.body", "body": b": hello\n\n", "more_body": True})
        disconnected = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            while True:
                item = asyncio.ensure_future(stream.get())
                done, _ = await asyncio.wait({item, disconnected}, return_when=asyncio.FIRST_COMPLETED)
                if item not in done:
                    item.cancel()
                    return
                data = item.result()
                if data == _END:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
                await send({"type": "http.response.body", "body": data, "more_body": True})
        finally:
            disconnected.cancel()


def _event(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


# --------------------------------------------------------------------------------------------------
# Fixtures


class Peer:
    """One hostile peer as the tests see it: where to connect and what it received."""

    def __init__(self, kind: str, endpoint: str, received: Callable[[], list[Any]]) -> None:
        self.kind = kind
        self.endpoint = endpoint
        self._received = received

    def received(self) -> list[Any]:
        return self._received()

    def replies(self) -> list[Message]:
        """The client's responses (to agent requests, or error answers to broken frames)."""
        out: list[Message] = []
        for message in self.received():
            for member in message if isinstance(message, list) else [message]:
                if isinstance(member, dict) and "method" not in member:
                    out.append(member)
        return out

    def client(self, **kwargs: Any) -> AcpClient:
        kwargs.setdefault("retry", None)
        kwargs.setdefault("timeouts", Timeouts(request=TIMEOUT, connect=TIMEOUT))
        return AcpClient(self.endpoint, **kwargs)


def stdio_endpoint(log: Path, *flags: str) -> str:
    return "stdio:" + shlex.join([sys.executable, str(STDIO_AGENT), "--log", str(log), *flags])


def read_log(log: Path) -> list[Any]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
