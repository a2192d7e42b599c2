"""Loopback HTTP servers for the Streamable HTTP transport tests.

* :class:`Hypercorn`: serves any ASGI app in-process on a free loopback port (HTTP/1.1, h2c prior
  knowledge, or TLS with ALPN from a ``trustme`` certificate).
* :class:`FakeAcpServer`: an ASGI app speaking ACP Streamable HTTP in either dialect of the
  official servers (``"python"``: SDK 0.12.1; ``"typescript"``: SDK 2.4.0), with a scripted agent,
  a log of every request, and knobs to misbehave on demand: a ``hook`` that may answer any request
  itself, raw bytes pushed onto a stream, streams ended or left silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import attrs
from hypercorn.asyncio import serve
from hypercorn.config import Config

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_SCOPED = frozenset(
    {"session/prompt", "session/cancel", "session/set_mode", "session/set_config_option", "session/close"}
)


class Hypercorn:
    """Serve an ASGI app with hypercorn on ``127.0.0.1`` and a free port, in the running loop.

    Args:
        app: The ASGI app.
        certfile: A PEM file with the server's key and certificate chain: serve TLS.
        alpn: The ALPN protocols offered with TLS.
    """

    def __init__(self, app: App, *, certfile: str | None = None, alpn: tuple[str, ...] = ("h2", "http/1.1")) -> None:
        self.app = app
        self._certfile = certfile
        self._alpn = alpn
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self._certfile else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/acp"

    def url_for(self, path: str = "/acp", *, scheme: str | None = None, host: str = "127.0.0.1") -> str:
        return f"{scheme or self.scheme}://{host}:{self.port}{path}"

    async def start(self) -> Hypercorn:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)  # connections made before hypercorn accepts wait in the backlog
        self.port = sock.getsockname()[1]
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]  # hypercorn owns the socket from here on
        config.accesslog = None
        config.graceful_timeout = 0.2
        config.keep_alive_timeout = 30
        if self._certfile:
            config.certfile = self._certfile
            config.keyfile = self._certfile
            config.alpn_protocols = list(self._alpn)
        self._task = asyncio.get_running_loop().create_task(
            serve(self.app, config, shutdown_trigger=self._stop.wait)  # type: ignore[arg-type]
        )
        return self

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task


# --------------------------------------------------------------------------------------------
# A scripted ACP Streamable HTTP server


@attrs.define
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    message: Any = None

    @property
    def rpc_method(self) -> str | None:
        return self.message.get("method") if isinstance(self.message, dict) else None


@attrs.define
class Reply:
    """A canned answer from a ``hook``.

    Attributes:
        status: The HTTP status.
        headers: Response headers.
        body: The body (ignored when ``stream`` is set).
        stream: Produces the body in chunks (an SSE stream, say); the response ends with it.
    """

    status: int = 200
    headers: list[tuple[str, str]] = attrs.Factory(list)
    body: bytes = b""
    stream: Callable[[], AsyncIterator[bytes]] | None = None


Hook = Callable[[Recorded], "Reply | None"]

END = object()  # pushed onto an outbox: end that stream


class Outbox:
    """One SSE stream's queue: messages (dicts), raw bytes, or :data:`END`."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.receivers = 0

    def push(self, item: Any) -> None:
        self.queue.put_nowait(item)


class FakeConnection:
    def __init__(self, connection_id: str) -> None:
        self.id = connection_id
        self.stream = Outbox()
        self.sessions: dict[str, Outbox] = {}
        self.established: set[str] = set()
        self.pending_routes: dict[Any, str | None] = {}
        self.reply_routes: dict[Any, str | None] = {}
        self.waiters: dict[Any, asyncio.Future[Any]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def session_outbox(self, session_id: str) -> Outbox:
        return self.sessions.setdefault(session_id, Outbox())


class FakeAcpServer:
    """An ACP Streamable HTTP server with a scripted agent, in one of the two official dialects.

    Attributes:
        dialect: ``"python"`` or ``"typescript"`` (see the module docstring of the transport).
        requests: Every request received, in order.
        hook: Called with each request first; a returned :class:`Reply` is sent instead.
        set_cookies: ``Set-Cookie`` values added to every answer.
        updates_per_prompt: ``session/update`` notifications sent during each prompt.
        ask_permission: Whether a prompt asks ``session/request_permission`` before ending.
        load_establishes: Whether a ``session/load`` answer carries the ``sessionId`` (the
            official Python server 0.12.1 does not, so a loaded session stays unknown there).
        keepalive: Seconds of silence before a keepalive comment (``None``: never).
    """

    def __init__(self, dialect: Literal["python", "typescript"] = "python") -> None:
        self.dialect = dialect
        self.requests: list[Recorded] = []
        self.hook: Hook | None = None
        self.set_cookies: list[str] = []
        self.updates_per_prompt = 3
        self.ask_permission = False
        self.load_establishes = False
        self.keepalive: float | None = 15.0
        self.known_sessions: set[str] = set()
        self.connections: dict[str, FakeConnection] = {}
        self.permission_answers: list[Any] = []
        self._ids = itertools.count(1)

    # -- test helpers ------------------------------------------------------------------------

    @property
    def connection(self) -> FakeConnection:
        """The most recent connection."""
        return list(self.connections.values())[-1]

    def of(self, method: str, rpc_method: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and (rpc_method is None or r.rpc_method == rpc_method)]

    # -- ASGI --------------------------------------------------------------------------------

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
        headers: dict[str, str] = {}
        for key, value in scope["headers"]:
            name = key.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[name] = f"{headers[name]}, {text}" if name in headers else text
        body = b""
        if scope["method"] == "POST":
            while True:
                event = await receive()
                body += event.get("body", b"")
                if not event.get("more_body"):
                    break
        record = Recorded(scope["method"], scope["path"], headers, body)
        if body:
            with contextlib.suppress(ValueError):
                record.message = json.loads(body)
        self.requests.append(record)
        if self.hook is not None:
            reply = self.hook(record)
            if reply is not None:
                await self._send_reply(send, reply)
                return
        if scope["method"] == "POST":
            await self._post(record, send)
        elif scope["method"] == "GET":
            await self._get(record, receive, send)
        elif scope["method"] == "DELETE":
            await self._delete(record, send)
        else:
            await self._send_reply(send, Reply(405))

    async def _send_reply(self, send: Send, reply: Reply) -> None:
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers]
        headers += [(b"set-cookie", c.encode("latin-1")) for c in self.set_cookies]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        if reply.stream is None:
            await send({"type": "http.response.body", "body": reply.body})
            return
        async for chunk in reply.stream():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def _text(self, send: Send, status: int, text: str) -> None:
        await self._send_reply(send, Reply(status, [("content-type", "text/plain")], text.encode()))

    async def _json(self, send: Send, status: int, value: Any, headers: list[tuple[str, str]] | None = None) -> None:
        await self._send_reply(
            send, Reply(status, [("content-type", "application/json"), *(headers or [])], json.dumps(value).encode())
        )

    # -- POST --------------------------------------------------------------------------------

    async def _post(self, record: Recorded, send: Send) -> None:
        python = self.dialect == "python"
        if not record.headers.get("content-type", "").startswith("application/json"):
            await self._text(send, 415, "Unsupported Media Type")
            return
        message = record.message
        if isinstance(message, list):
            if python:
                await self._json(send, 501, {"error": "Batch requests are not supported"})
            else:
                error = {"code": -32600, "message": "JSON-RPC batches are not supported"}
                await self._json(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})
            return
        if not isinstance(message, dict):
            await self._text(send, 400, "Invalid JSON-RPC message")
            return
        connection_id = record.headers.get("acp-connection-id")
        if message.get("method") == "initialize" and connection_id is None:
            connection = FakeConnection(f"conn-{next(self._ids)}")
            self.connections[connection.id] = connection
            result = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
            await self._json(
                send,
                200,
                {"jsonrpc": "2.0", "id": message["id"], "result": result},
                [("Acp-Connection-Id", connection.id)],
            )
            return
        if connection_id is None:
            await self._text(send, 400, "Missing connection id" if python else "Missing Acp-Connection-Id")
            return
        connection = self.connections.get(connection_id)
        if connection is None or connection.closed:
            await self._text(send, 404, "Unknown connection id" if python else "Unknown Acp-Connection-Id")
            return
        header_sid = record.headers.get("acp-session-id")
        method = message.get("method")
        params = message.get("params")
        params_sid = params.get("sessionId") if isinstance(params, dict) else None
        if python:
            if method in SESSION_SCOPED and header_sid is None:
                await self._text(send, 400, "Missing session id header")
                return
            if header_sid is not None and header_sid not in connection.established:
                await self._text(send, 404, "Unknown session id")
                return
            route = params_sid
        else:
            if method is None:
                expected = connection.reply_routes.get(message.get("id"))
                if expected is not None and header_sid != expected:
                    await self._text(send, 400, "Missing Acp-Session-Id")
                    return
                route = None
            else:
                if (method in SESSION_SCOPED or params_sid is not None) and header_sid is None:
                    await self._text(send, 400, "Missing Acp-Session-Id")
                    return
                if header_sid is not None and params_sid is not None and header_sid != params_sid:
                    await self._text(send, 400, "Mismatched Acp-Session-Id")
                    return
                route = None if method == "session/load" else (header_sid or params_sid)
        await self._send_reply(send, Reply(202))
        if method is None:
            waiter = connection.waiters.pop(message.get("id"), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
            return
        if "id" in message:
            connection.pending_routes[message["id"]] = route
        task = asyncio.get_running_loop().create_task(self._agent(connection, message))
        connection.tasks.add(task)
        task.add_done_callback(connection.tasks.discard)

    # -- the scripted agent ------------------------------------------------------------------

    def emit(self, connection: FakeConnection, message: dict[str, Any]) -> None:
        """Route one agent -> client message the way the dialect's server does."""
        python = self.dialect == "python"
        if "method" not in message:  # a response
            route = connection.pending_routes.pop(message.get("id"), None)
            result = message.get("result")
            established = result.get("sessionId") if isinstance(result, dict) else None
            if established is not None:
                connection.established.add(established)
                connection.session_outbox(established)
                if python:
                    connection.stream.push(message)
                    return
            if route is not None and (not python or route in connection.established):
                connection.session_outbox(route).push(message)
            else:
                connection.stream.push(message)
            return
        params = message.get("params")
        sid = params.get("sessionId") if isinstance(params, dict) else None
        if sid is not None and (not python or sid in connection.established):
            if "id" in message:
                connection.reply_routes[message["id"]] = sid
            connection.session_outbox(sid).push(message)
        else:
            connection.stream.push(message)

    async def _agent(self, connection: FakeConnection, message: dict[str, Any]) -> None:
        method = message["method"]
        params = message.get("params") or {}
        sid = params.get("sessionId")
        request_id = message.get("id")

        def answer(result: Any = None, error: dict[str, Any] | None = None) -> None:
            if request_id is None:
                return
            if error is not None:
                self.emit(connection, {"jsonrpc": "2.0", "id": request_id, "error": error})
            else:
                self.emit(connection, {"jsonrpc": "2.0", "id": request_id, "result": result or {}})

        def update(text: str) -> None:
            content = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
            self.emit(
                connection,
                {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": content}},
            )

        unknown = {"code": -32002, "message": "Resource not found", "data": {"sessionId": sid}}
        if method == "session/new":
            new_sid = f"sess-{next(self._ids)}"
            self.known_sessions.add(new_sid)
            answer({"sessionId": new_sid})
        elif method in ("session/load", "session/resume"):
            if sid not in self.known_sessions:
                answer(error=unknown)
                return
            if method == "session/load":
                update("replay 1")
                update("replay 2")
            answer({"sessionId": sid} if self.load_establishes else {})
        elif method == "session/status":
            if sid in self.known_sessions:
                answer({"status": "active"})
            else:
                answer(error=unknown)
        elif method == "session/prompt":
            for index in range(self.updates_per_prompt):
                update(f"chunk {index}")
            if self.ask_permission:
                perm_id = f"perm-{next(self._ids)}"
                waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                connection.waiters[perm_id] = waiter
                self.emit(
                    connection,
                    {
                        "jsonrpc": "2.0",
                        "id": perm_id,
                        "method": "session/request_permission",
                        "params": {"sessionId": sid, "toolCall": {"toolCallId": "t1"}, "options": []},
                    },
                )
                self.permission_answers.append(await waiter)
            answer({"stopReason": "end_turn"})
        elif method in ("session/cancel",):
            return
        elif method == "session/close":
            answer({})
        else:
            answer(error={"code": -32601, "message": "Method not found"})

    # -- GET / DELETE ------------------------------------------------------------------------

    async def _get(self, record: Recorded, receive: Receive, send: Send) -> None:
        python = self.dialect == "python"
        if "text/event-stream" not in record.headers.get("accept", ""):
            await self._text(send, 406, "Not Acceptable")
            return
        connection_id = record.headers.get("acp-connection-id")
        connection = self.connections.get(connection_id or "")
        if connection is None or connection.closed:
            await self._text(send, 404, "Unknown connection id" if python else "Unknown Acp-Connection-Id")
            return
        sid = record.headers.get("acp-session-id")
        if sid is None:
            outbox = connection.stream
        elif python and sid not in connection.established:
            await self._text(send, 404, "Unknown session id")
            return
        else:
            outbox = connection.session_outbox(sid)
        if not python and outbox.receivers:
            await self._text(send, 409, "Outbound stream already has an active receiver")
            return
        outbox.receivers += 1
        try:
            await self._stream(outbox, receive, send)
        finally:
            outbox.receivers -= 1

    async def _stream(self, outbox: Outbox, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        headers += [(b"set-cookie", c.encode("latin-1")) for c in self.set_cookies]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def pump() -> None:
            while True:
                try:
                    item = await asyncio.wait_for(outbox.queue.get(), timeout=self.keepalive)
                except asyncio.TimeoutError:
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                    continue
                if item is END:
                    return
                data = item if isinstance(item, bytes) else f"data: {json.dumps(item)}\n\n".encode()
                await send({"type": "http.response.body", "body": data, "more_body": True})

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        pumping = asyncio.ensure_future(pump())
        watching = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pumping, watching):
                task.cancel()
            await asyncio.gather(pumping, watching, return_exceptions=True)
        if pumping.done() and not pumping.cancelled() and pumping.exception() is None:
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b""})

    async def _delete(self, record: Recorded, send: Send) -> None:
        connection = self.connections.get(record.headers.get("acp-connection-id") or "")
        if connection is None or connection.closed:
            await self._text(send, 404, "Unknown connection id")
            return
        connection.closed = True
        connection.stream.push(END)
        for outbox in connection.sessions.values():
            outbox.push(END)
        for task in connection.tasks:
            task.cancel()
        await self._send_reply(send, Reply(202))


def sse_chunks(*chunks: bytes, hold: asyncio.Event | None = None) -> Callable[[], AsyncIterator[bytes]]:
    """A :attr:`Reply.stream` that sends ``chunks`` then ends (or waits for ``hold`` first)."""

    async def produce() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
        if hold is not None:
            await hold.wait()

    return produce


def event_stream(*chunks: bytes, hold: asyncio.Event | None = None) -> Reply:
    """A ``200 text/event-stream`` :class:`Reply` made of ``chunks``."""
    return Reply(200, [("content-type", "text/event-stream")], stream=sse_chunks(*chunks, hold=hold))
