"""Bad input at the client level: :class:`~acp_client.AcpClient` against hostile agents on loopback.

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

The client must never crash, hang or silently corrupt: each bad message is reported to
``on_protocol_error`` (typed) while the connection is kept where the protocol allows, a request fails
with a clear typed error where it cannot be answered, and the next good answer still resolves its
request.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from acp_client import (
    AcpClient,
    AcpError,
    AgentExited,
    AuthenticationFailed,
    Callbacks,
    ClientClosed,
    ConnectionLost,
    HttpStatusError,
    InvalidMessage,
    Limits,
    MalformedFrame,
    MessageTooLarge,
    MissingHeader,
    NotAcceptable,
    ProtocolError,
    RequestTimeout,
    RetryPolicy,
    ServiceUnavailable,
    State,
    Timeouts,
    TransportClosed,
    UnexpectedResponse,
    UnknownConnection,
    UnsupportedMediaType,
    UpdateEvent,
)
from acp_client.types import UnknownSessionUpdate
from tests.transports._http_servers import Hypercorn

T = TypeVar("T")

TIMEOUT = 10.0
STDIO_AGENT = Path(__file__).with_name("hostile_stdio_agent.py")
FAST_RETRY = RetryPolicy(initial_delay=0.05, max_delay=0.2, jitter=False, suspend_after=None)

Message = dict[str, Any]


async def within(awaitable: Awaitable[T], timeout: float = TIMEOUT) -> T:
    """Await with a deadline, so a hang fails the test instead of stalling the run."""
    return await asyncio.wait_for(awaitable, timeout)


async def eventually(predicate: Callable[[], bool], *, timeout: float = TIMEOUT, what: str = "condition") -> None:
    """Poll ``predicate`` until it holds (no fixed sleeps as synchronization)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def bounded(awaitable: Awaitable[T], timeout: float, what: str) -> T:
    """Like :func:`within`, but a hang fails with a message saying what hung."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
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


@pytest.fixture
async def ws_agent() -> AsyncIterator[HostileWsAgent]:
    agent = await HostileWsAgent().start()
    try:
        yield agent
    finally:
        await agent.stop()


@pytest.fixture
async def http_agent() -> AsyncIterator[tuple[HostileHttpAgent, Hypercorn]]:
    app = HostileHttpAgent()
    server = await Hypercorn(app).start()  # type: ignore[arg-type]
    try:
        yield app, server
    finally:
        app.shut_down()
        await server.stop()


@pytest.fixture(params=["ws", "http", "stdio"])
async def peer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Peer]:
    kind = request.param
    if kind == "ws":
        ws = await HostileWsAgent().start()
        try:
            yield Peer(kind, ws.url, lambda: ws.received)
        finally:
            await ws.stop()
    elif kind == "http":
        app = HostileHttpAgent()
        server = await Hypercorn(app).start()  # type: ignore[arg-type]
        try:
            yield Peer(kind, server.url, lambda: app.received)
        finally:
            app.shut_down()
            await server.stop()
    else:
        log = tmp_path / "stdio-agent.log"
        yield Peer(kind, stdio_endpoint(log), lambda: read_log(log))


# --------------------------------------------------------------------------------------------------
# Bad frames on every transport

DEEP = 400  # deep, yet well within what the JSON decoder accepts from any task
BAD_FRAMES = [
    pytest.param('{"jsonrpc": "2.0", "id": $ID, "result": {"echo": "WRONG"', MalformedFrame, 1, id="truncated-json"),
    pytest.param("hello, I am not JSON", MalformedFrame, 1, id="not-json"),
    pytest.param('"just a string"', MalformedFrame, 1, id="json-string"),
    pytest.param("42", MalformedFrame, 1, id="bare-number"),
    pytest.param("null", MalformedFrame, 1, id="json-null"),
    pytest.param("[]", MalformedFrame, 1, id="empty-batch"),
    pytest.param("[1, 2]", MalformedFrame, 2, id="batch-of-garbage"),
    pytest.param('{"jsonrpc": "1.0", "id": $ID, "result": {"echo": "WRONG"}}', MalformedFrame, 1, id="jsonrpc-1.0"),
    pytest.param('{"id": $ID, "result": {"echo": "WRONG"}}', MalformedFrame, 1, id="jsonrpc-missing"),
    pytest.param(
        '{"jsonrpc": "2.0", "id": $ID, "result": {"echo": "WRONG"}, "error": {"code": 1, "message": "x"}}',
        MalformedFrame,
        1,
        id="result-and-error",
    ),
    pytest.param('{"jsonrpc": "2.0", "id": $ID}', MalformedFrame, 1, id="neither-result-nor-error"),
    pytest.param('{"jsonrpc": "2.0", "id": $ID, "error": "nope"}', MalformedFrame, 1, id="error-not-an-object"),
    pytest.param('{"jsonrpc": "2.0", "id": [$ID], "result": {"echo": "WRONG"}}', MalformedFrame, 1, id="id-is-a-list"),
    pytest.param('{"jsonrpc": "2.0", "method": 7, "params": {}}', MalformedFrame, 1, id="method-not-a-string"),
    pytest.param('{"jsonrpc": "2.0", "method": "session/update", "params": 5}', MalformedFrame, 1, id="params-number"),
    pytest.param('{"jsonrpc": "2.0", "id": 987654, "result": {}}', UnexpectedResponse, 1, id="unknown-id"),
    pytest.param(
        '{"jsonrpc": "2.0", "id": "nobody", "error": {"code": -32603, "message": "x"}}',
        UnexpectedResponse,
        1,
        id="error-for-unknown-id",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}',
        UnexpectedResponse,
        1,
        id="error-without-id",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": 12}}',
        InvalidMessage,
        1,
        id="undecodable-session-update",
    ),
    pytest.param("[" * 5000 + "]" * 5000, MalformedFrame, 1, id="nested-5000-list"),
    pytest.param('{"a":' * 5000 + "1" + "}" * 5000, MalformedFrame, 1, id="nested-5000-object"),
    pytest.param(
        '{"jsonrpc": "2.0", "id": $ID, "result": {"n": ' + "7" * 5000 + "}}", MalformedFrame, 1, id="5000-digit-number"
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "x/n", "params": {"n": -' + "1" * 5000 + "}}",
        MalformedFrame,
        1,
        id="5000-digit-negative-in-notification",
    ),
    pytest.param(
        '{"jsonrpc": "1.0", "x": ' + "[" * DEEP + "]" * DEEP + "}",
        MalformedFrame,
        1,
        id="deep-list-in-malformed-message",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "id": "nobody", "result": ' + "[" * DEEP + "]" * DEEP + "}",
        UnexpectedResponse,
        1,
        id="deep-result-for-unknown-id",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": '
        + "[" * DEEP
        + "]" * DEEP
        + "}}",
        InvalidMessage,
        1,
        id="deep-session-update",
    ),
]
#: Frames that are legal JSON-RPC the client must simply cope with (nothing to report).
ODD_BUT_LEGAL = [
    pytest.param(
        '{"jsonrpc": "2.0", "method": "x/unknown_notification", "params": {"a": [1, {"b": null}]}}',
        id="unknown-notification",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "nobody", '
        '"update": {"sessionUpdate": "brand_new_kind", "x": 1}}}',
        id="unknown-update-kind",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "not-running"}}',
        id="cancel-of-nothing",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "x/n", "params": {"text": "\\ud800 lone surrogate \\u0000"}}',
        id="lone-surrogate-in-notification",
    ),
    pytest.param('{"jsonrpc": "2.0", "method": "x/n", "params": {"n": 1e999, "m": -1e999}}', id="infinite-floats"),
    pytest.param('{"jsonrpc": "2.0", "method": "x/n", "params": {"n": ' + "9" * 4000 + "}}", id="4000-digits"),
]


@pytest.mark.parametrize(("frame", "reported", "per_frame"), BAD_FRAMES)
async def test_a_bad_frame_is_reported_and_the_answer_still_resolves(
    peer: Peer, frame: str, reported: type[AcpError], per_frame: int
) -> None:
    errors: list[AcpError] = []
    async with peer.client(callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        result = await within(client.request("_hostile", {"before": [frame, frame], "tag": "first"}))
        assert result == {"echo": "first"}  # never the WRONG answer a broken frame carried
        assert [type(error) for error in errors] == [reported] * (2 * per_frame), errors
        if isinstance(errors[0], MalformedFrame):
            assert errors[0].excerpt  # the report shows the start of the frame
        # The next good answer resolves its request too, on the same connection.
        assert await within(client.request("_hostile", {"tag": "second"})) == {"echo": "second"}
        assert client.state.state is State.CONNECTED
        assert len(errors) == 2 * per_frame


@pytest.mark.parametrize("frame", ODD_BUT_LEGAL)
async def test_odd_but_legal_frames_are_taken_in_stride(peer: Peer, frame: str) -> None:
    errors: list[AcpError] = []
    notifications: list[tuple[str, Any]] = []
    updates: list[UpdateEvent] = []

    def on_notification(method: str, params: Any) -> None:
        notifications.append((method, params))

    async with peer.client(
        callbacks=Callbacks(on_protocol_error=errors.append, on_notification=on_notification, on_update=updates.append)
    ) as client:
        result = await within(client.request("_hostile", {"before": [frame], "tag": "first"}))
        assert result == {"echo": "first"}
        assert errors == []
        message = json.loads(frame)
        if message["method"] == "session/update":  # an unknown variant is kept, not rejected
            assert [(e.session_id, e.update.kind) for e in updates] == [("nobody", "brand_new_kind")]
            assert isinstance(updates[0].update, UnknownSessionUpdate)
            assert updates[0].update.raw == message["params"]["update"]
        elif message["method"] == "$/cancel_request":
            assert notifications == []  # the connection handles it
        else:
            assert notifications == [(message["method"], message["params"])]
        assert await within(client.request("_hostile", {"tag": "second"})) == {"echo": "second"}
        assert client.state.state is State.CONNECTED


async def test_broken_requests_are_answered_invalid_request(peer: Peer) -> None:
    """A request the client cannot read is answered ``Invalid Request`` (id null, as JSON-RPC says)."""
    errors: list[AcpError] = []
    async with peer.client(callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        frames = ['{"jsonrpc": "2.0", "id": {"x": 1}, "method": "fs/read_text_file"}', "[]"]
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        await eventually(lambda: len(peer.replies()) >= 2, what="two error replies")
        for reply in peer.replies():
            assert reply["id"] is None
            assert reply["error"]["code"] == -32600
        assert [type(e) for e in errors] == [MalformedFrame, MalformedFrame]


async def test_agent_requests_for_unknown_methods_get_method_not_found(peer: Peer) -> None:
    async with peer.client() as client:
        frames = [
            '{"jsonrpc": "2.0", "id": "agent-1", "method": "x/unknown", "params": {}}',
            '{"jsonrpc": "2.0", "id": "agent-2", "method": "fs/read_text_file", "params": {"sessionId": "s", '
            '"path": "/etc/passwd"}}',
            '{"jsonrpc": "2.0", "id": "agent-3", "method": "terminal/create", "params": {"sessionId": "s", '
            '"command": "rm"}}',
        ]
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        await eventually(lambda: len(peer.replies()) >= 3, what="three replies")
        replies = {reply["id"]: reply for reply in peer.replies()}
        assert {key: reply["error"]["code"] for key, reply in replies.items()} == {
            "agent-1": -32601,
            "agent-2": -32601,  # no file-system policy: not offered
            "agent-3": -32601,  # no terminal handler: not offered
        }
        assert await within(client.request("_hostile", {"tag": "again"})) == {"echo": "again"}


async def test_a_reply_echoing_a_lone_surrogate_id_is_sent_escaped(peer: Peer) -> None:
    """An agent request whose id holds a lone surrogate (legal as a JSON escape, not as UTF-8): the
    client's reply carries it back escaped, and neither the client nor its link breaks."""
    async with peer.client() as client:
        frame = '{"jsonrpc": "2.0", "id": "\\udcff", "method": "x/unknown", "params": {}}'
        assert await within(client.request("_hostile", {"before": [frame], "tag": "t"})) == {"echo": "t"}
        await eventually(lambda: len(peer.replies()) >= 1, what="the reply")
        assert [(r["id"], r["error"]["code"]) for r in peer.replies()] == [("\udcff", -32601)]
        assert await within(client.request("_hostile", {"tag": "after"})) == {"echo": "after"}
        assert client.state.state is State.CONNECTED


async def test_an_agent_that_never_answers_times_out_and_is_told(peer: Peer) -> None:
    async with peer.client() as client:
        with pytest.raises(RequestTimeout) as caught:
            await within(client.request("_hostile", {"answer": False, "tag": "lost"}, timeout=0.3))
        assert caught.value.method == "_hostile"
        sent = [m for m in peer.received() if isinstance(m, dict) and m.get("method") == "_hostile"]
        await eventually(
            lambda: any(isinstance(m, dict) and m.get("method") == "$/cancel_request" for m in peer.received()),
            what="$/cancel_request",
        )
        cancel = next(m for m in peer.received() if isinstance(m, dict) and m.get("method") == "$/cancel_request")
        assert cancel["params"] == {"requestId": sent[0]["id"]}
        assert "id" not in cancel  # a notification
        assert await within(client.request("_hostile", {"tag": "fine"})) == {"echo": "fine"}


async def test_a_late_answer_after_the_timeout_is_ignored_not_misdelivered(peer: Peer) -> None:
    """The first request times out; its answer then arrives, before the second request's answer. The
    client gave up on it itself, so it is no protocol error of the agent (logged at DEBUG only)."""
    errors: list[AcpError] = []
    async with peer.client(callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        with pytest.raises(RequestTimeout):
            await within(client.request("_hostile", {"answer": False}, timeout=0.2))
        first_id = next(m["id"] for m in peer.received() if isinstance(m, dict) and m.get("method") == "_hostile")
        late = json.dumps({"jsonrpc": "2.0", "id": first_id, "result": {"echo": "LATE"}})
        assert await within(client.request("_hostile", {"before": [late], "tag": "second"})) == {"echo": "second"}
        assert errors == []


async def test_an_oversized_message_is_a_clear_error(peer: Peer) -> None:
    """Over ``limits.max_message_bytes``: reported as :class:`MessageTooLarge`. Over stdio and HTTP the
    link survives (the message is skipped); a WebSocket is closed with 1009, the pending request fails
    with ``ConnectionLost``, and the client reconnects."""
    errors: list[AcpError] = []
    big = json.dumps({"jsonrpc": "2.0", "method": "x/big", "params": {"blob": "x" * 6000}})
    retry = FAST_RETRY if peer.kind == "ws" else None
    async with peer.client(
        callbacks=Callbacks(on_protocol_error=errors.append), limits=Limits(max_message_bytes=4096), retry=retry
    ) as client:
        if peer.kind == "ws":
            with pytest.raises(ConnectionLost) as lost:
                await within(client.request("_hostile", {"before": [big], "tag": "big"}))
            assert lost.value.may_have_executed is True
        else:
            assert await within(client.request("_hostile", {"before": [big], "tag": "big"})) == {"echo": "big"}
        assert [type(e) for e in errors] == [MessageTooLarge]
        assert errors[0].limit == 4096  # type: ignore[attr-defined]
        # Either way the next request is answered (after a reconnect for the WebSocket).
        assert await within(client.request("_hostile", {"tag": "small"})) == {"echo": "small"}
        assert client.state.state is State.CONNECTED


async def test_a_flood_of_garbage_does_not_starve_the_answer(peer: Peer) -> None:
    errors: list[AcpError] = []
    frames = [f"garbage {i} {{" for i in range(300)]
    async with peer.client(callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        assert len(errors) == 300
        assert all(isinstance(e, MalformedFrame) for e in errors)


# --------------------------------------------------------------------------------------------------
# WebSocket specifics


async def test_ws_binary_frames_are_reported_and_ignored(ws_agent: HostileWsAgent) -> None:
    errors: list[AcpError] = []
    binary = {"binary": base64.b64encode(json.dumps({"jsonrpc": "2.0", "id": 0, "result": {}}).encode()).decode()}
    invalid_utf8 = {"binary": base64.b64encode(b"\xff\xfe\x00garbage").decode()}
    async with AcpClient(ws_agent.url, retry=None, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        result = await within(client.request("_hostile", {"before": [binary, invalid_utf8], "tag": "t"}))
        assert result == {"echo": "t"}
        assert [type(e) for e in errors] == [MalformedFrame, MalformedFrame]
        assert "binary frame" in str(errors[0])
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


async def test_ws_close_mid_request_is_connection_lost(ws_agent: HostileWsAgent) -> None:
    async with AcpClient(ws_agent.url, retry=None) as client:
        with pytest.raises(ConnectionLost) as caught:
            await within(client.request("_hostile", {"before": [{"close": 1011}]}))
        assert caught.value.may_have_executed is True
        assert "1011" in str(caught.value.cause)
        await eventually(lambda: client.state.state is State.FAILED, what="the failed state")
        with pytest.raises(ClientClosed):
            await within(client.request("_hostile", {"tag": "after"}))


async def test_ws_agent_that_never_answers_initialize_times_out() -> None:
    agent = await HostileWsAgent(silent_initialize=True).start()
    try:
        client = AcpClient(agent.url, retry=None, timeouts=Timeouts(connect=0.5))
        with pytest.raises(RequestTimeout) as caught:
            await within(client.connect())
        assert caught.value.method == "initialize"
        assert client.state.state is State.FAILED
        await client.aclose()
    finally:
        await agent.stop()


@pytest.mark.parametrize(
    ("status", "error"), [(403, AuthenticationFailed), (500, HttpStatusError), (503, ServiceUnavailable)]
)
async def test_ws_handshake_refused_is_a_typed_connect_error(status: int, error: type[AcpError]) -> None:
    agent = await HostileWsAgent(refuse_status=status).start()
    try:
        client = AcpClient(agent.url, retry=None)
        with pytest.raises(error) as caught:
            await within(client.connect())
        assert caught.value.status == status  # type: ignore[attr-defined]
        assert client.state.state is State.FAILED
        await client.aclose()
    finally:
        await agent.stop()


# --------------------------------------------------------------------------------------------------
# Streamable HTTP specifics

SSE_CASES = [
    pytest.param([{"sse": "data: not json\n\n"}], [MalformedFrame], id="data-not-json"),
    pytest.param([{"sse": "data: [1\r\n\r\n"}], [MalformedFrame], id="crlf-data-not-json"),
    pytest.param([{"sse": "this line has no colon\n\n"}], [], id="line-without-colon"),
    pytest.param([{"sse": ": a comment\n\n:\n\n"}], [], id="comments"),
    pytest.param([{"sse": "event: ping\ndata: {}\n\n"}], [], id="other-event-type"),
    pytest.param([{"sse": "retry: soon\nid: \x01\nevent\n\n"}], [], id="odd-fields-no-data"),
    pytest.param([{"sse": "data\n\n"}], [], id="empty-data"),
    pytest.param(
        [{"sse": 'data: {"jsonrpc": "2.0",\ndata:  "method": "x/n", "params": {}}\n\n'}], [], id="multi-line-data"
    ),
    pytest.param([{"sse": "da"}, {"sse": "ta: nope"}, {"sse": "\n"}, {"sse": "\n"}], [MalformedFrame], id="split-bad"),
    pytest.param(
        [{"sse_b64": base64.b64encode(b"data: \xff\xfe\xfd\n\n").decode()}], [MalformedFrame], id="invalid-utf8"
    ),
    # Only a BOM at the very start of a stream is stripped; later, "\ufeffdata" is an unknown field.
    pytest.param([{"sse": "\ufeffdata: 1\n\n"}], [], id="bom-mid-stream"),
]


@pytest.mark.parametrize(("frames", "reported"), SSE_CASES)
async def test_sse_garbage_is_reported_or_ignored_and_the_stream_goes_on(
    http_agent: tuple[HostileHttpAgent, Hypercorn], frames: list[Any], reported: list[type[AcpError]]
) -> None:
    _app, server = http_agent
    errors: list[AcpError] = []
    async with AcpClient(server.url, retry=None, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        assert [type(e) for e in errors] == reported
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}
        assert client.state.state is State.CONNECTED


async def test_sse_oversized_line_is_skipped(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    _app, server = http_agent
    errors: list[AcpError] = []
    limits = Limits(max_message_bytes=4096, max_sse_line_bytes=4096)
    async with AcpClient(
        server.url, retry=None, limits=limits, callbacks=Callbacks(on_protocol_error=errors.append)
    ) as client:
        frames = [{"sse": "data: " + "y" * 10000 + "\n\n"}, {"sse": ": " + "z" * 10000 + "\n\n"}]
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        assert errors and all(isinstance(e, MessageTooLarge) for e in errors)
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


async def test_sse_event_truncated_by_the_end_of_the_stream(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    """The connection stream ends inside an event: the partial event is reported, the pending request
    fails with ``ConnectionLost`` (the link is gone) and, with a retry policy, the client reconnects."""
    app, server = http_agent
    errors: list[AcpError] = []
    async with AcpClient(server.url, retry=FAST_RETRY, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        frames = [{"sse": 'data: {"jsonrpc": "2.0", "id": 0, "res'}, {"end": True}]
        with pytest.raises(ConnectionLost) as caught:
            await within(client.request("_hostile", {"before": frames, "answer": False}))
        assert caught.value.may_have_executed is True
        assert [type(e) for e in errors] == [MalformedFrame]
        assert "inside an event" in str(errors[0])
        assert await within(client.request("_hostile", {"tag": "after"})) == {"echo": "after"}
        assert len(app.streams) >= 1
        assert client.state.state is State.CONNECTED


HTTP_POST_STATUSES = [
    pytest.param(400, "missing header", MissingHeader, id="400"),
    pytest.param(401, "who are you", AuthenticationFailed, id="401"),
    pytest.param(403, "go away", AuthenticationFailed, id="403"),
    pytest.param(406, "no", NotAcceptable, id="406"),
    pytest.param(415, "wrong media", UnsupportedMediaType, id="415"),
    pytest.param(418, "teapot", HttpStatusError, id="418"),
    pytest.param(429, "slow down", ServiceUnavailable, id="429"),
    pytest.param(500, "<html>boom</html>", HttpStatusError, id="500"),
    pytest.param(502, "bad gateway", HttpStatusError, id="502"),
    pytest.param(503, "later", ServiceUnavailable, id="503"),
]


@pytest.mark.parametrize(("status", "body", "error"), HTTP_POST_STATUSES)
async def test_http_error_status_for_a_post_fails_that_request_only(
    http_agent: tuple[HostileHttpAgent, Hypercorn], status: int, body: str, error: type[AcpError]
) -> None:
    _app, server = http_agent
    async with AcpClient(server.url, retry=None) as client:
        params = {"status": status, "body": body, "content_type": "text/html", "retry_after": 7}
        with pytest.raises(error) as caught:
            await within(client.request("_hostile", params))
        assert caught.value.status == status  # type: ignore[attr-defined]
        assert body[:20] in caught.value.body  # type: ignore[attr-defined]
        assert caught.value.maybe_delivered is (status >= 500 and error is HttpStatusError)  # type: ignore[attr-defined]
        if error is ServiceUnavailable:
            assert caught.value.retry_after == 7  # type: ignore[attr-defined]
        # The connection is kept: the next request is answered.
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}
        assert client.state.state is State.CONNECTED


async def test_http_404_for_the_connection_ends_the_link(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    _app, server = http_agent
    async with AcpClient(server.url, retry=None) as client:
        with pytest.raises(UnknownConnection):
            await within(client.request("_hostile", {"status": 404, "body": '{"error": "Unknown connection id"}'}))
        await eventually(lambda: client.state.state is State.FAILED, what="the failed state")
        with pytest.raises(ClientClosed):
            await within(client.request("_hostile", {"tag": "after"}))


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        pytest.param("text/html", "<html>hello</html>", id="html"),
        pytest.param("application/json", "{not json", id="json-garbage"),
        pytest.param("application/json", "17", id="json-number"),
    ],
)
async def test_http_200_with_an_unexpected_body_is_reported(
    http_agent: tuple[HostileHttpAgent, Hypercorn], content_type: str, body: str
) -> None:
    """A POST answered 200 with a body that is not a JSON-RPC message: reported; the real answer then
    comes on the stream and resolves the request."""
    _app, server = http_agent
    errors: list[AcpError] = []
    async with AcpClient(server.url, retry=None, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        params = {"status": 200, "content_type": content_type, "body": body, "then_answer_on_stream": True, "tag": "t"}
        assert await within(client.request("_hostile", params)) == {"echo": "t"}
        assert [type(e) for e in errors] == [MalformedFrame]
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


async def test_http_answer_in_the_post_body_resolves(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    _app, server = http_agent
    async with AcpClient(server.url, retry=None) as client:
        params = {"status": 200, "content_type": "application/json", "body": "$ANSWER", "tag": "inline"}
        assert await within(client.request("_hostile", params)) == {"echo": "inline"}


INIT_FAILURES = [
    pytest.param({"init_status": 500, "init_body": b"oops"}, HttpStatusError, id="500"),
    pytest.param({"init_status": 401, "init_body": b"no"}, AuthenticationFailed, id="401"),
    pytest.param({"init_status": 503, "init_body": b"later"}, ServiceUnavailable, id="503"),
    pytest.param({"init_status": 404, "init_body": b"nothing here"}, UnknownConnection, id="404"),
    pytest.param({"init_content_type": "text/html", "init_body": b"<html></html>"}, MalformedFrame, id="html"),
    pytest.param({"init_body": b"{broken"}, MalformedFrame, id="broken-json"),
    pytest.param({"init_body": b"[]"}, ProtocolError, id="empty-batch"),
    pytest.param({"init_body": b'{"jsonrpc": "2.0", "id": 999, "result": {}}'}, ProtocolError, id="wrong-id"),
    pytest.param({"init_body": b'{"jsonrpc": "2.0", "method": "x/n"}'}, ProtocolError, id="a-notification"),
    pytest.param({"no_connection_id": True}, ProtocolError, id="no-connection-id"),
    pytest.param({"get_content_type": "text/plain"}, ProtocolError, id="stream-wrong-content-type"),
    pytest.param({"get_status": 500}, HttpStatusError, id="stream-500"),
]


@pytest.mark.parametrize(("knobs", "error"), INIT_FAILURES)
async def test_http_connect_failures_are_typed(
    http_agent: tuple[HostileHttpAgent, Hypercorn], knobs: dict[str, Any], error: type[AcpError]
) -> None:
    app, server = http_agent
    for name, value in knobs.items():
        setattr(app, name, value)
    client = AcpClient(server.url, retry=None, timeouts=Timeouts(connect=5))
    with pytest.raises(error):
        await within(client.connect())
    assert client.state.state is State.FAILED
    await within(client.aclose())


async def test_http_initialize_that_never_answers_times_out(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    """The server takes the initialize POST and never answers it: ``connect_timeout`` bounds the wait.

    Over Streamable HTTP sending ``initialize`` is the POST that waits for the answer, so the request's
    timer must cover the send (else the client waits for the transport's 45 s SSE idle timeout).
    """
    app, server = http_agent
    app.hang_initialize = True
    client = AcpClient(server.url, retry=None, timeouts=Timeouts(connect=0.5))
    with pytest.raises((RequestTimeout, ConnectionLost, TransportClosed)):
        await bounded(client.connect(), 5, "connect() with connect_timeout=0.5")
    assert client.state.state is State.FAILED
    await within(client.aclose())


async def test_http_post_that_never_answers_times_out(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    """The server takes a POST and never sends its status line: the request's own timeout fires (the
    send is abandoned), and the link stays usable."""
    app, server = http_agent
    async with AcpClient(server.url, retry=None) as client:
        with pytest.raises(RequestTimeout):
            await bounded(client.request("_hostile", {"hang": True}, timeout=0.5), 5, "a request with timeout=0.5")
        app.release_hung_posts()
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


# --------------------------------------------------------------------------------------------------
# stdio specifics


async def test_stdio_garbage_before_initialize_is_reported(tmp_path: Path) -> None:
    errors: list[AcpError] = []
    endpoint = stdio_endpoint(tmp_path / "log", "--garbage-at-start")
    async with AcpClient(endpoint, retry=None, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        assert client.agent_info is not None and client.agent_info.name == "hostile"
        assert len(errors) == 3 and all(isinstance(e, MalformedFrame) for e in errors)
        assert await within(client.request("_hostile", {"tag": "t"})) == {"echo": "t"}


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("\xff\xfe invalid utf-8\n", id="invalid-utf8"),
        pytest.param("\x00\x00\x00\n", id="nul-bytes"),
        pytest.param('{"jsonrpc": "2.0", "method": "x/n"}\r\n', id="crlf-is-fine"),
        pytest.param("\n\n   \n", id="blank-lines"),
    ],
)
async def test_stdio_raw_lines(tmp_path: Path, raw: str) -> None:
    errors: list[AcpError] = []
    async with AcpClient(
        stdio_endpoint(tmp_path / "log"), retry=None, callbacks=Callbacks(on_protocol_error=errors.append)
    ) as client:
        assert await within(client.request("_hostile", {"before": [{"raw": raw}], "tag": "t"})) == {"echo": "t"}
        expected = [MalformedFrame] if raw.startswith(("\xff", "\x00")) else []
        assert [type(e) for e in errors] == expected
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


async def test_stdio_agent_exiting_mid_request(tmp_path: Path) -> None:
    errors: list[AcpError] = []
    states: list[State] = []
    async with AcpClient(
        stdio_endpoint(tmp_path / "log"),
        retry=None,
        callbacks=Callbacks(on_protocol_error=errors.append, on_state_change=lambda s: states.append(s.state)),
    ) as client:
        with pytest.raises(ConnectionLost) as caught:
            await within(client.request("_hostile", {"before": ["last words {"], "exit": 3}))
        assert caught.value.may_have_executed is True
        cause = caught.value.cause
        assert isinstance(cause, AgentExited), cause
        assert cause.exit_code == 3
        assert [type(e) for e in errors] == [MalformedFrame]  # the garbage it printed before dying
        await eventually(lambda: client.state.state is State.FAILED, what="the failed state")
        assert State.RECONNECTING not in states  # retry=None: no reconnect
        with pytest.raises(ClientClosed):
            await within(client.request("_hostile", {"tag": "after"}))


async def test_stdio_agent_exiting_during_initialize(tmp_path: Path) -> None:
    client = AcpClient(stdio_endpoint(tmp_path / "log", "--exit-on-initialize", "5"), retry=None)
    with pytest.raises(TransportClosed) as caught:
        await within(client.connect())
    assert "exited with code 5" in str(caught.value)
    lost = caught.value.__cause__
    assert isinstance(lost, ConnectionLost) and isinstance(lost.cause, AgentExited)
    assert lost.cause.exit_code == 5
    assert client.state.state is State.FAILED
    await client.aclose()


async def test_stdio_agent_that_never_answers_initialize_times_out(tmp_path: Path) -> None:
    client = AcpClient(
        stdio_endpoint(tmp_path / "log", "--silent-initialize"), retry=None, timeouts=Timeouts(connect=0.5)
    )
    with pytest.raises(RequestTimeout):
        await within(client.connect())
    assert client.state.state is State.FAILED
    await client.aclose()
