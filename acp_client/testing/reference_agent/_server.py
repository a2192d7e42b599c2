"""Serving a :class:`ReferenceAgent` over WebSocket and Streamable HTTP under hypercorn.

One ``/acp`` endpoint, as the ACP transports RFD draws it:

* ``GET /acp`` with ``Upgrade: websocket``: one ACP connection per socket, text frames, the
  ``Acp-Connection-Id`` header on the 101 answer.
* ``POST /acp`` ``initialize`` → ``200`` with the JSON-RPC answer and ``Acp-Connection-Id``; every
  later POST names that connection and answers ``202``; the JSON-RPC answers arrive on SSE streams:
  ``GET /acp`` with ``Accept: text/event-stream`` opens the connection stream, adding
  ``Acp-Session-Id`` opens a session stream. ``DELETE /acp`` ends the connection.

Both client dialects work: ``Acp-Session-Id`` is accepted (not required) on ``session/status``,
``session/load`` and ``session/resume``, and a session stream may be opened for any session the
agent knows. A message goes to its session's stream when a client listens there or the session is
attached to the connection, else to the connection stream; all messages caused by one request
(its answer, its replay, its turn) stay on one stream, so their order holds.

``GET /health`` answers ``200`` with ``{"status": "ok", "agent": NAME, "instance": ID}`` (``503``
while :meth:`ReferenceServer.refuse_connections` is in force): a load balancer's health check.

Hypercorn listens on a private loopback port behind a :class:`~acp_client.testing.proxy.FaultProxy`,
which is what :meth:`ReferenceServer.drop_connections` cuts: clients see real TCP resets.

**Resumable streams** (``resumable_streams=True``; off by default, like the official SDKs' servers,
whose streams a client cannot resume). Every SSE event carries an ``id:``, counted per stream from 1, and every
stream answer carries ``Acp-Stream-Epoch`` (this server's instance id: the numbering it belongs
to). The last ``stream_history`` events written to a stream are kept, so a ``GET`` that comes back
with ``Last-Event-ID`` (and the epoch, if it sends one) on the same connection gets everything
written after that id again, then the live stream. When it cannot (the events were evicted, the id
or the epoch is not this stream's), the stream begins with the **resync signal**, an SSE event of
type ``resync`` whose data is ``{"reason": ..., "lastEventId": ...}``, and goes on live: the client
knows messages are missing. A connection whose connection stream has no listener for
``stream_grace`` seconds is ended as by ``DELETE`` (its turns aborted; a later request naming it
answers ``404``); ``stream_grace=None`` keeps it until ``DELETE``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import socket
import uuid
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Final, cast

import attrs

from ..._codec._jsonrpc import Request, RequestId, classify, decode_frame, encode, error_message
from ..._util._version import install_hint
from ...clock import Clock, SystemClock
from ...exceptions import MalformedFrame, TransportClosed
from ..proxy import FaultProxy
from ._agent import AgentConnection, ReferenceAgent

logger = logging.getLogger(__name__)

_Scope = dict[str, Any]
_Receive = Callable[[], Awaitable[dict[str, Any]]]
_Send = Callable[[dict[str, Any]], Awaitable[None]]

CONNECTION_ID_HEADER: Final = "acp-connection-id"
SESSION_ID_HEADER: Final = "acp-session-id"
#: Methods whose POST must carry ``Acp-Session-Id`` (their answers go on the session stream).
SESSION_SCOPED_METHODS: Final = frozenset(
    {"session/prompt", "session/cancel", "session/set_mode", "session/set_config_option", "session/close"}
)
MAX_POST_BYTES: Final = 16 * 1024 * 1024
_ROUTES_KEPT: Final = 4096
_RECORDS_KEPT: Final = 1000
_KEEPALIVE: Final = b": keepalive\n\n"
STREAM_EPOCH_HEADER: Final = "acp-stream-epoch"
LAST_EVENT_ID_HEADER: Final = "last-event-id"
#: The health-check path (``GET`` → 200, or 503 while refusing).
HEALTH_PATH: Final = "/health"


@attrs.frozen
class RequestRecord:
    """One HTTP request or WebSocket handshake the server received (for assertions in tests).

    Headers are kept verbatim, cookies and credentials included: this is test introspection, and
    nothing here is logged.

    Attributes:
        transport: ``"http"`` or ``"websocket"``.
        method: The HTTP method (``"GET"`` for a WebSocket handshake).
        path: The request path.
        http_version: ``"1.1"`` or ``"2"``.
        headers: ``(name, value)`` pairs, names lowercased, in order.
        status: The status answered (``101`` for an accepted WebSocket, ``403`` for one closed
            before accepting).
    """

    transport: str
    method: str
    path: str
    http_version: str
    headers: tuple[tuple[str, str], ...]
    status: int

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        for key, value in self.headers:
            if key == wanted:
                return value
        return None


def _headers_of(scope: _Scope) -> list[tuple[str, str]]:
    return [(bytes(k).decode("latin-1").lower(), bytes(v).decode("latin-1")) for k, v in scope.get("headers", [])]


def _first(headers: list[tuple[str, str]], name: str) -> str | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def _accepts(accept: str, wanted: str) -> bool:
    major = wanted.split("/", 1)[0]
    for part in accept.split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media in (wanted, "*/*", f"{major}/*"):
            return True
    return False


def _sse_event(message: dict[str, Any], event_id: int | None) -> bytes:
    if event_id is None:
        return f"data: {encode(message)}\n\n".encode()
    return f"id: {event_id}\ndata: {encode(message)}\n\n".encode()


class _SseStream:
    """Outbound messages for one SSE stream: buffered while nobody listens, numbered, and the last
    ``history`` written ones kept so a listener that comes back with ``Last-Event-ID`` gets them again."""

    def __init__(self, name: str, history: int = 1024) -> None:
        self.name = name
        #: Numbered messages not written yet.
        self.buffer: collections.deque[tuple[int, dict[str, Any]]] = collections.deque()
        #: Numbered messages written, newest last (at most ``history``).
        self.sent: collections.deque[tuple[int, dict[str, Any]]] = collections.deque()
        self.history = history
        #: The highest id no longer kept (0: none evicted).
        self.evicted_through = 0
        #: The id the current listener resumed from (what it holds already).
        self.floor = 0
        self.next_id = 1
        self.wake = asyncio.Event()
        self.generation = 0
        self.listening = False
        self.closed = False

    def push(self, message: dict[str, Any]) -> None:
        if self.closed:
            return
        self.buffer.append((self.next_id, message))
        self.next_id += 1
        self.wake.set()

    def written(self, item: tuple[int, dict[str, Any]]) -> None:
        """``item`` went out: keep it for a resumption (the oldest kept one goes when full)."""
        if self.history <= 0:
            self.evicted_through = item[0]
            return
        if len(self.sent) >= self.history:
            self.evicted_through = self.sent.popleft()[0]
        self.sent.append(item)

    def requeue(self, items: list[tuple[int, dict[str, Any]]]) -> None:
        """Put numbered messages back among those not written yet, in id order."""
        if items:
            merged = {item[0]: item for item in (*self.buffer, *items)}
            self.buffer = collections.deque(merged[key] for key in sorted(merged))
            self.wake.set()

    def resume(self, last: int) -> bool:
        """Queue again what was written after event ``last``; ``False`` when that cannot be done."""
        self.floor = last
        if last >= self.next_id or last < self.evicted_through:
            return False
        again = [item for item in self.sent if item[0] > last]
        while self.sent and self.sent[-1][0] > last:
            self.sent.pop()
        self.requeue(again)
        return True

    def attach(self) -> int:
        """Make a new listener current (an older one stops); returns its token."""
        self.generation += 1
        self.listening = True
        self.wake.set()
        return self.generation

    def detach(self, token: int) -> None:
        if token == self.generation:
            self.listening = False

    def close(self) -> None:
        self.closed = True
        self.listening = False
        self.buffer.clear()
        self.wake.set()


@attrs.define
class _Route:
    """Where the messages caused by one request go (decided at the first one)."""

    session_id: str | None
    stream: _SseStream | None = None


class _HttpConnection:
    """One Streamable HTTP connection: the agent connection and its SSE streams."""

    def __init__(self, server: ReferenceServer) -> None:
        self.server = server
        self.core: AgentConnection = server.agent.connect(self._send)
        self.id = self.core.id
        self.stream = _SseStream("connection", server.stream_history)
        #: Ends the connection when its connection stream has had no listener for the grace period.
        self.expiry: asyncio.Task[None] | None = None
        self.session_streams: dict[str, _SseStream] = {}
        self.routes: collections.OrderedDict[str, _Route] = collections.OrderedDict()
        self.initialize_waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.closed = False

    def add_route(self, request_id: RequestId, session_id: str | None) -> None:
        key = str(request_id)
        self.routes[key] = _Route(session_id)
        self.routes.move_to_end(key)
        while len(self.routes) > _ROUTES_KEPT:
            self.routes.popitem(last=False)

    def session_stream(self, session_id: str) -> _SseStream:
        stream = self.session_streams.get(session_id)
        if stream is None:
            stream = self.session_streams[session_id] = _SseStream(f"session {session_id}", self.server.stream_history)
        return stream

    def pick(self, session_id: str | None) -> _SseStream:
        if session_id is None:
            return self.stream
        stream = self.session_streams.get(session_id)
        if stream is not None and stream.listening:
            return stream
        if self.core.is_attached(session_id):
            return self.session_stream(session_id)
        return self.stream

    async def _send(self, message: dict[str, Any], cause: RequestId | None) -> None:
        if self.closed:
            return
        if "method" not in message:
            waiter = self.initialize_waiters.pop(str(message.get("id")), None)
            if waiter is not None:
                if not waiter.done():
                    waiter.set_result(message)
                return
        route = self.routes.get(str(cause)) if cause is not None else None
        if route is not None:
            if route.stream is None or route.stream.closed:
                route.stream = self.pick(route.session_id)
            route.stream.push(message)
            return
        params = message.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        self.pick(session_id if isinstance(session_id, str) else None).push(message)

    async def close(self) -> None:
        self.closed = True
        if self.expiry is not None and self.expiry is not asyncio.current_task():
            self.expiry.cancel()
        self.stream.close()
        for stream in self.session_streams.values():
            stream.close()
        for waiter in self.initialize_waiters.values():
            if not waiter.done():
                waiter.cancel()
        await self.core.close()


class _WsConnection:
    """One WebSocket connection."""

    def __init__(self, server: ReferenceServer, send: _Send) -> None:
        self._asgi_send = send
        self._lock = asyncio.Lock()
        self.closed = False
        self.core: AgentConnection = server.agent.connect(self._send)

    async def _send(self, message: dict[str, Any], cause: RequestId | None) -> None:
        if self.closed:
            raise TransportClosed("the WebSocket is closed", maybe_delivered=False)
        async with self._lock:
            try:
                await self._asgi_send({"type": "websocket.send", "text": encode(message)})
            except Exception as exc:
                self.closed = True
                raise TransportClosed(f"WebSocket send failed: {exc}") from exc

    async def close(self) -> None:
        self.closed = True
        await self.core.close()


class ReferenceServer:
    """Serves one :class:`ReferenceAgent` on loopback over WebSocket and Streamable HTTP.

    Runs under hypercorn (the ``testing`` extra): HTTP/1.1 and HTTP/2 (h2c with prior knowledge
    on cleartext, ALPN ``h2`` with TLS). Use it as an async context manager.

    Every WebSocket handshake and every ``initialize`` answer sets the cookie
    ``acp_affinity=<instance id>; Path=/; HttpOnly`` (plus ``Secure`` with TLS), so cookie handling
    across reconnects can be tested; :attr:`requests` shows what the clients sent back.
    ``GET /health`` is the load balancer's health check (503 while refusing connections).

    Args:
        agent: The agent to serve.
        host: The address to listen on.
        port: The port (``0``: a free one, see :attr:`port`).
        tls: ``(certificate file, key file)`` to serve ``wss://`` / ``https://``.
        keepalive_interval: Seconds of silence after which an SSE stream gets a keepalive comment.
        clock: Measures :meth:`refuse_connections` windows and ``stream_grace`` (the system clock
            by default).
        path: The endpoint path.
        resumable_streams: Number SSE events and resume streams from ``Last-Event-ID`` (see the
            module docstring).
        stream_grace: Seconds an HTTP connection outlives the loss of its connection stream
            (the client may reattach meanwhile); ``None``: until ``DELETE``.
        stream_history: Events kept per SSE stream for a resumption by ``Last-Event-ID``.
    """

    def __init__(
        self,
        agent: ReferenceAgent,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: tuple[str, str] | None = None,
        keepalive_interval: float = 15.0,
        clock: Clock | None = None,
        path: str = "/acp",
        resumable_streams: bool = False,
        stream_grace: float | None = None,
        stream_history: int = 1024,
    ) -> None:
        self.agent = agent
        self.resumable_streams = resumable_streams
        self.stream_grace = stream_grace
        self.stream_history = stream_history if resumable_streams else 0
        self.host = host
        self.tls = tls
        self.keepalive_interval = keepalive_interval
        self.path = path
        #: Identifies this server in the ``acp_affinity`` cookie.
        self.instance_id = uuid.uuid4().hex[:16]
        self._requested_port = port
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._refuse_until: float | None = None
        self._proxy: FaultProxy | None = None
        self._stop = asyncio.Event()
        self._started = asyncio.Event()
        self._serve_task: asyncio.Task[None] | None = None
        self._http: dict[str, _HttpConnection] = {}
        self._ws: set[_WsConnection] = set()
        self._records: collections.deque[RequestRecord] = collections.deque(maxlen=_RECORDS_KEPT)

    def __repr__(self) -> str:
        port = self._proxy.port if self._proxy is not None else None
        return f"ReferenceServer({self.host}:{port}, tls={self.tls is not None})"

    # -- lifecycle --------------------------------------------------------------------------------

    async def __aenter__(self) -> ReferenceServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start hypercorn and the front proxy.

        Raises:
            ImportError: hypercorn is not installed (the message says how to install it).
            OSError: An address cannot be bound.
        """
        if self._serve_task is not None:
            return
        try:
            from hypercorn.asyncio import serve
            from hypercorn.config import Config
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(f"ReferenceServer needs hypercorn: {install_hint('testing')}") from exc

        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(128)
            internal_port = int(listener.getsockname()[1])
        except BaseException:
            listener.close()
            raise
        config = Config()
        config.bind = [f"fd://{listener.detach()}"]
        if self.tls is not None:
            config.certfile, config.keyfile = self.tls
        config.alpn_protocols = ["h2", "http/1.1"]
        config.accesslog = None
        config.errorlog = logging.getLogger(f"{__name__}.hypercorn")
        config.graceful_timeout = 0.5
        config.include_server_header = False
        self._stop.clear()
        self._serve_task = asyncio.get_running_loop().create_task(
            serve(cast(Any, self._asgi), config, shutdown_trigger=self._stop.wait, mode="asgi"),
            name="reference-server-hypercorn",
        )
        started = asyncio.ensure_future(self._started.wait())
        await asyncio.wait({started, self._serve_task}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            started.cancel()
            await self._serve_task  # raises what stopped hypercorn
        proxy = FaultProxy(
            "127.0.0.1",
            internal_port,
            host=self.host,
            port=self._requested_port,
            clock=self._clock,
        )
        try:
            await proxy.start()
        except BaseException:
            await self._stop_hypercorn()
            raise
        self._proxy = proxy
        logger.info("reference server on %s and %s", self.ws_url, self.http_url)

    async def aclose(self) -> None:
        """Close every connection and stop serving. Idempotent."""
        proxy, self._proxy = self._proxy, None
        if proxy is not None:
            await proxy.aclose()
        await self._close_all(list(self._http.values()), list(self._ws))
        await self._stop_hypercorn()

    async def _stop_hypercorn(self) -> None:
        task, self._serve_task = self._serve_task, None
        if task is None:
            return
        self._stop.set()
        try:
            await task
        except Exception:
            logger.exception("hypercorn failed while stopping")
        self._started.clear()

    # -- addresses ----------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port clients connect to.

        Raises:
            RuntimeError: The server is not running.
        """
        if self._proxy is None:
            raise RuntimeError("ReferenceServer is not running; use 'async with ReferenceServer(agent)'")
        return self._proxy.port

    def _base(self, scheme: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}{self.path}"

    @property
    def ws_url(self) -> str:
        """``ws://HOST:PORT/acp`` (``wss://`` with TLS)."""
        return self._base("wss" if self.tls is not None else "ws")

    @property
    def http_url(self) -> str:
        """``http://HOST:PORT/acp`` (``https://`` with TLS)."""
        return self._base("https" if self.tls is not None else "http")

    # -- controls -----------------------------------------------------------------------------------

    @property
    def connection_count(self) -> int:
        """Live ACP connections: open WebSockets plus HTTP connections not yet deleted or dropped."""
        return len(self._ws) + len(self._http)

    @property
    def tcp_connections(self) -> int:
        """TCP connections accepted so far (each WebSocket, and each HTTP/1.1 or HTTP/2 connection that
        carried requests, however many): what a benchmark counts to see connection reuse."""
        return self._proxy.total_connections if self._proxy is not None else 0

    @property
    def requests(self) -> list[RequestRecord]:
        """The last requests received (at most 1000), oldest first."""
        return list(self._records)

    @property
    def refusing(self) -> bool:
        """Whether new requests and handshakes are being refused right now."""
        return self._refuse_until is not None and self._clock.monotonic() < self._refuse_until

    async def drop_connections(self) -> None:
        """Abruptly end every live WebSocket and HTTP connection and SSE stream.

        Clients see TCP resets. The HTTP connection ids are forgotten (a later request naming one
        answers 404), so an HTTP client must initialize again. Sessions stay in the agent's memory.
        """
        http, ws = list(self._http.values()), list(self._ws)
        if self._proxy is not None:
            await self._proxy.cut()
        await self._close_all(http, ws)
        logger.info("reference server dropped %d HTTP and %d WebSocket connection(s)", len(http), len(ws))

    async def restart(self) -> None:
        """Simulate an agent restart: :meth:`drop_connections`, then :meth:`ReferenceAgent.lose_memory`."""
        await self.drop_connections()
        self.agent.lose_memory()

    def refuse_connections(self, seconds: float) -> None:
        """For ``seconds``: HTTP requests get ``503`` with ``Retry-After``, WebSocket handshakes are
        rejected with ``503``."""
        self._refuse_until = self._clock.monotonic() + max(0.0, seconds)

    async def _close_all(self, http: list[_HttpConnection], ws: list[_WsConnection]) -> None:
        for connection in http:
            self._http.pop(connection.id, None)
        for wsc in ws:
            self._ws.discard(wsc)
        for connection in http:
            await connection.close()
        for wsc in ws:
            await wsc.close()

    def _retry_after(self) -> str:
        remaining = (self._refuse_until or 0.0) - self._clock.monotonic()
        return str(max(1, math.ceil(remaining)))

    # -- ASGI -----------------------------------------------------------------------------------------

    async def _asgi(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind not in ("http", "websocket"):
            return
        recorded = False
        headers = _headers_of(scope)

        async def recording_send(message: dict[str, Any]) -> None:
            nonlocal recorded
            if not recorded:
                status: int | None = None
                kind_ = message.get("type")
                if kind_ in ("http.response.start", "websocket.http.response.start"):
                    status = int(message.get("status", 0))
                elif kind_ == "websocket.accept":
                    status = 101
                elif kind_ == "websocket.close":
                    status = 403
                if status is not None:
                    recorded = True
                    self._records.append(
                        RequestRecord(
                            transport=str(kind),
                            method=str(scope.get("method", "GET")),
                            path=str(scope.get("path", "")),
                            http_version=str(scope.get("http_version", "")),
                            headers=tuple(headers),
                            status=status,
                        )
                    )
            await send(message)

        try:
            if kind == "websocket":
                await self._websocket(scope, headers, receive, recording_send)
            else:
                await self._http_request(scope, headers, receive, recording_send)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("reference server failed on %s %s", scope.get("method"), scope.get("path"))
            raise

    async def _lifespan(self, receive: _Receive, send: _Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
                self._started.set()
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _cookie(self) -> bytes:
        cookie = f"acp_affinity={self.instance_id}; Path=/; HttpOnly"
        if self.tls is not None:
            cookie += "; Secure"
        return cookie.encode()

    # -- WebSocket ------------------------------------------------------------------------------------

    async def _ws_reject(self, send: _Send, status: int, headers: list[tuple[bytes, bytes]], text: str) -> None:
        body = text.encode()
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()), *headers],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})

    async def _websocket(self, scope: _Scope, headers: list[tuple[str, str]], receive: _Receive, send: _Send) -> None:
        first = await receive()
        if first.get("type") != "websocket.connect":
            return
        can_reject = "websocket.http.response" in scope.get("extensions", {})
        if scope.get("path") != self.path or self.refusing:
            status, text = (404, "not found") if scope.get("path") != self.path else (503, "refusing connections")
            extra = [(b"retry-after", self._retry_after().encode())] if status == 503 else []
            if can_reject:
                await self._ws_reject(send, status, extra, text)
            else:
                await send({"type": "websocket.close", "code": 1013})
            return
        connection = _WsConnection(self, send)
        self._ws.add(connection)
        await send(
            {
                "type": "websocket.accept",
                "headers": [(b"acp-connection-id", connection.core.id.encode()), (b"set-cookie", self._cookie())],
            }
        )
        try:
            while True:
                event = await receive()
                kind = event.get("type")
                if kind == "websocket.disconnect":
                    break
                if kind != "websocket.receive":
                    continue
                frame = event.get("text")
                if not isinstance(frame, str):
                    logger.debug("reference server ignored a binary WebSocket frame")
                    continue
                await connection.core.handle_frame(frame)
        finally:
            self._ws.discard(connection)
            await connection.close()

    # -- Streamable HTTP ------------------------------------------------------------------------------

    async def _respond(
        self,
        send: _Send,
        status: int,
        body: dict[str, Any] | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        payload = encode(body).encode() if body is not None else b""
        response_headers = [(b"content-length", str(len(payload)).encode())]
        if body is not None:
            response_headers.append((b"content-type", b"application/json"))
        response_headers.extend(headers or [])
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": payload})

    async def _error(
        self, send: _Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        await self._respond(send, status, {"error": text}, headers)

    async def _http_request(
        self, scope: _Scope, headers: list[tuple[str, str]], receive: _Receive, send: _Send
    ) -> None:
        if scope.get("path") == HEALTH_PATH and scope.get("method") == "GET" and self.path != HEALTH_PATH:
            await self._health(send)
            return
        if scope.get("path") != self.path:
            await self._error(send, 404, "not found")
            return
        if self.refusing:
            await self._error(send, 503, "refusing connections", [(b"retry-after", self._retry_after().encode())])
            return
        method = scope.get("method")
        if method == "POST":
            await self._post(headers, receive, send)
        elif method == "GET":
            await self._get(headers, receive, send)
        elif method == "DELETE":
            await self._delete(headers, send)
        else:
            await self._error(send, 405, "method not allowed", [(b"allow", b"GET, POST, DELETE")])

    async def _health(self, send: _Send) -> None:
        if self.refusing:
            await self._error(send, 503, "refusing connections", [(b"retry-after", self._retry_after().encode())])
            return
        await self._respond(send, 200, {"status": "ok", "agent": self.agent.name, "instance": self.instance_id})

    async def _read_body(self, receive: _Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            if message["type"] != "http.request":
                continue
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > MAX_POST_BYTES:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _post(self, headers: list[tuple[str, str]], receive: _Receive, send: _Send) -> None:
        content_type = (_first(headers, "content-type") or "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            await self._error(send, 415, "Content-Type must be application/json")
            return
        accept = _first(headers, "accept")
        if (
            accept is not None
            and not _accepts(accept, "application/json")
            and not _accepts(accept, "text/event-stream")
        ):
            await self._error(send, 406, "Accept must allow application/json")
            return
        body = await self._read_body(receive)
        if body is None:
            await self._error(send, 413, "request body too large or incomplete")
            return
        try:
            message = decode_frame(body)
        except MalformedFrame as exc:
            await self._respond(send, 400, error_message(None, -32700, f"Parse error: {exc}"))
            return
        if isinstance(message, list):
            await self._error(send, 501, "JSON-RPC batches are not supported")
            return
        try:
            item = classify(message)
        except MalformedFrame as exc:
            await self._respond(send, 400, error_message(None, -32600, f"Invalid request: {exc}"))
            return
        if isinstance(item, Request) and item.method == "initialize":
            await self._initialize(item, message, send)
            return
        connection_id = _first(headers, CONNECTION_ID_HEADER)
        if connection_id is None:
            await self._error(send, 400, "missing Acp-Connection-Id header")
            return
        connection = self._http.get(connection_id)
        if connection is None:
            await self._error(send, 404, "unknown connection id")
            return
        method = getattr(item, "method", None)
        params = getattr(item, "params", None)
        params_session = params.get("sessionId") if isinstance(params, dict) else None
        header_session = _first(headers, SESSION_ID_HEADER)
        scoped = method in SESSION_SCOPED_METHODS
        if scoped and header_session is None:
            await self._error(send, 400, "missing Acp-Session-Id header")
            return
        if header_session is not None:
            if isinstance(params_session, str) and params_session != header_session:
                await self._error(send, 400, "Acp-Session-Id does not match params.sessionId")
                return
            known = connection.core.is_attached(header_session) or self.agent.knows_session(header_session)
            if scoped and not known:
                await self._error(send, 404, "unknown session id")
                return
        if isinstance(item, Request):
            session_for_route = header_session
            if session_for_route is None and scoped and isinstance(params_session, str):
                session_for_route = params_session
            connection.add_route(item.id, session_for_route)
        await connection.core.handle(message)
        await self._respond(send, 202)

    async def _initialize(self, item: Request, message: dict[str, Any], send: _Send) -> None:
        connection = _HttpConnection(self)
        self._http[connection.id] = connection
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        connection.initialize_waiters[str(item.id)] = waiter
        await connection.core.handle(message)
        try:
            answer = await waiter
        except asyncio.CancelledError:
            if connection.closed:  # dropped while waiting (a stalled agent): the TCP link is gone
                return
            raise
        await self._respond(
            send,
            200,
            answer,
            [(b"acp-connection-id", connection.id.encode()), (b"set-cookie", self._cookie())],
        )

    async def _get(self, headers: list[tuple[str, str]], receive: _Receive, send: _Send) -> None:
        accept = _first(headers, "accept") or ""
        if not _accepts(accept, "text/event-stream"):
            await self._error(send, 406, "Accept must include text/event-stream")
            return
        connection_id = _first(headers, CONNECTION_ID_HEADER)
        if connection_id is None:
            await self._error(send, 400, "missing Acp-Connection-Id header")
            return
        connection = self._http.get(connection_id)
        if connection is None:
            await self._error(send, 404, "unknown connection id")
            return
        session_id = _first(headers, SESSION_ID_HEADER)
        if session_id is not None:
            if not connection.core.is_attached(session_id) and not self.agent.knows_session(session_id):
                await self._error(send, 404, "unknown session id")
                return
            stream = connection.session_stream(session_id)
        else:
            stream = connection.stream
            if connection.expiry is not None:
                connection.expiry.cancel()
                connection.expiry = None
        cursor: tuple[str | None, str | None] = (None, None)
        if self.resumable_streams:
            cursor = (_first(headers, LAST_EVENT_ID_HEADER), _first(headers, STREAM_EPOCH_HEADER))
        try:
            await self._stream_sse(stream, receive, send, cursor)
        finally:
            if session_id is None and not stream.listening and not connection.closed:
                self._expire_later(connection)

    def _resume(self, stream: _SseStream, last: str | None, epoch: str | None) -> dict[str, Any] | None:
        """Queue again what ``stream`` wrote after ``last``; the resync signal's data when it cannot."""
        if last is None:
            return None
        if epoch is not None and epoch != self.instance_id:
            return {"reason": "epoch", "lastEventId": last}
        if not last.isdigit() or not stream.resume(int(last)):
            return {"reason": "evicted" if last.isdigit() else "unknown id", "lastEventId": last}
        return None

    def _expire_later(self, connection: _HttpConnection) -> None:
        """End ``connection`` unless its connection stream is reattached within ``stream_grace``."""
        grace = self.stream_grace
        if grace is None or connection.expiry is not None:
            return

        async def expire() -> None:
            await self._clock.sleep(grace)
            if connection.stream.listening or connection.closed:
                return
            if self._http.get(connection.id) is connection:
                del self._http[connection.id]
                logger.info("reference server: connection %s expired after its %gs grace", connection.id, grace)
                await connection.close()

        connection.expiry = asyncio.get_running_loop().create_task(expire(), name="reference-server-expiry")

    async def _stream_sse(
        self, stream: _SseStream, receive: _Receive, send: _Send, cursor: tuple[str | None, str | None] = (None, None)
    ) -> None:
        token = stream.attach()  # first: an older listener stops taking messages before they are queued again
        if cursor[0] is None:
            stream.floor = 0
        resync = self._resume(stream, *cursor)
        disconnected = asyncio.Event()

        async def watch_disconnect() -> None:
            while True:
                event = await receive()
                if event.get("type") == "http.disconnect":
                    break
            disconnected.set()
            stream.wake.set()

        watcher = asyncio.ensure_future(watch_disconnect())
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream"),
                        (b"cache-control", b"no-cache"),
                        *(
                            [(STREAM_EPOCH_HEADER.encode(), self.instance_id.encode())]
                            if self.resumable_streams
                            else []
                        ),
                    ],
                }
            )
            if resync is not None:
                signal = f"event: resync\ndata: {encode(resync)}\n\n".encode()
                await send({"type": "http.response.body", "body": signal, "more_body": True})
            while not (disconnected.is_set() or stream.closed or stream.generation != token):
                if stream.buffer:
                    item = stream.buffer.popleft()
                    try:
                        await send(
                            {
                                "type": "http.response.body",
                                "body": _sse_event(item[1], item[0] if self.resumable_streams else None),
                                "more_body": True,
                            }
                        )
                    except Exception:
                        stream.requeue([item])
                        raise
                    if stream.generation != token and item[0] > stream.floor:
                        stream.requeue([item])  # a newer listener took over while it was written here
                    else:
                        stream.written(item)
                    continue
                stream.wake.clear()
                try:
                    await asyncio.wait_for(stream.wake.wait(), self.keepalive_interval)
                except asyncio.TimeoutError:
                    await send({"type": "http.response.body", "body": _KEEPALIVE, "more_body": True})
            if not disconnected.is_set():
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            stream.detach(token)

    async def _delete(self, headers: list[tuple[str, str]], send: _Send) -> None:
        connection_id = _first(headers, CONNECTION_ID_HEADER)
        if connection_id is None:
            await self._error(send, 400, "missing Acp-Connection-Id header")
            return
        connection = self._http.pop(connection_id, None)
        if connection is None:
            await self._error(send, 404, "unknown connection id")
            return
        await connection.close()
        await self._respond(send, 202)
