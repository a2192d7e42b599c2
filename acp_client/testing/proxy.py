"""A byte-transparent TCP proxy that injects network faults between a client and an agent.

Put a :class:`FaultProxy` in front of any loopback server (the reference agent, the official SDK
servers, your own agent) and point the client at :meth:`FaultProxy.url`. It forwards raw bytes, so
it works for WebSocket, HTTP/1.1, h2c and TLS alike, and it can:

* :meth:`~FaultProxy.cut` every live connection (both sides see a reset),
* :meth:`~FaultProxy.blackhole` the link (sockets stay open, nothing is forwarded: a half-open
  link that only a ping or a timeout can detect; bytes held meanwhile are delivered if the
  blackhole is lifted, as after a healed network partition),
* :meth:`~FaultProxy.refuse` new connections for a while (accepted, then reset at once),
* :meth:`~FaultProxy.cut` or :meth:`~FaultProxy.silence` only the connections of one **kind**: over
  cleartext HTTP/1.1 the proxy reads the head of each request a client sends and names its
  connection after the latest one: ``"post"``, ``"connection_stream"`` (an SSE ``GET`` without
  ``Acp-Session-Id``), ``"session_stream"`` (with it), ``"delete"``, ``"websocket"`` (an upgrade),
  or ``"other"`` (anything it cannot read: TLS, HTTP/2, a chunked upload, no request yet).

::

    async with ReferenceServer(agent) as server, FaultProxy("127.0.0.1", server.port) as proxy:
        client = await connect(proxy.url(server.ws_url))
        await proxy.cut()                  # the client sees a drop and reconnects through the proxy
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from types import TracebackType
from typing import cast
from urllib.parse import urlsplit, urlunsplit

from ..clock import Clock, SystemClock

__all__ = ["KINDS", "FaultProxy"]

logger = logging.getLogger(__name__)

_SETTLE_TURNS = 3
#: The connection kinds :meth:`FaultProxy.cut` and :meth:`FaultProxy.silence` take.
KINDS = frozenset({"post", "connection_stream", "session_stream", "delete", "websocket", "other"})
#: The longest request head the proxy reads to name a connection (past it: ``"other"``).
_MAX_HEAD = 64 * 1024


class _RequestSniffer:
    """Names an HTTP/1.1 connection after the latest request its client sent (see the module docstring)."""

    __slots__ = ("_body_left", "_head", "done", "kind")

    def __init__(self) -> None:
        self.kind = "other"
        self._head = bytearray()
        self._body_left = 0
        self.done = False  # nothing more can be read of this connection

    def feed(self, data: bytes) -> None:
        while data and not self.done:
            if self._body_left:
                taken = min(self._body_left, len(data))
                self._body_left -= taken
                data = data[taken:]
                continue
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                if len(self._head) > _MAX_HEAD or not self._plausible():
                    self.kind, self.done = "other", True
                return
            head, data = bytes(self._head[:end]), bytes(self._head[end + 4 :])
            self._head = bytearray()
            self._parse(head)

    def _plausible(self) -> bool:
        start = bytes(self._head[:8])
        return any(method.startswith(start) or start.startswith(method) for method in (b"GET ", b"POST ", b"DELETE "))

    def _parse(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        method = lines[0].split(" ", 1)[0].upper()
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("upgrade", "").lower() == "websocket":
            self.kind, self.done = "websocket", True
        elif method == "GET" and "text/event-stream" in headers.get("accept", ""):
            self.kind = "session_stream" if "acp-session-id" in headers else "connection_stream"
        else:
            self.kind = {"POST": "post", "DELETE": "delete"}.get(method, "other")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.done = True  # the body's end cannot be found without decoding it
            return
        try:
            self._body_left = max(0, int(headers.get("content-length", "0")))
        except ValueError:
            self.done = True


def _reset(transport: asyncio.Transport) -> None:
    """Close ``transport``'s socket with a TCP reset (SO_LINGER 0), not a graceful FIN."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _End(asyncio.Protocol):
    """One side of a link (the client's socket, or the upstream one): what it sent that is not
    forwarded yet, and whether its reading is paused."""

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.peer: _End = self
        self.transport: asyncio.Transport | None = None
        #: Bytes read from this side and not yet written to the peer (a blackhole, or no upstream yet).
        self.held: list[bytes] = []
        #: This side ended its stream (``"eof"``: half-closed, ``"closed"``): to pass on after ``held``.
        self.ending: str | None = None
        self.ending_passed = False
        #: The peer's transport is above its high-water mark: stop reading this side.
        self.peer_full = False
        self.reading_paused = False
        self.transport_lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.link.made(self)

    def data_received(self, data: bytes) -> None:
        self.link.forward(self, data)

    def eof_received(self) -> bool:
        self.link.end(self, "eof")
        return True  # keep the socket open: a half-close travels, the other way still flows

    def pause_writing(self) -> None:
        self.peer.peer_full = True
        self.link.update_reading(self.peer)

    def resume_writing(self) -> None:
        self.peer.peer_full = False
        self.link.update_reading(self.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.lost(self, exc)


class _Link:
    """One proxied connection: the client's socket and, once connected, the upstream one.

    Bytes go straight from one side's ``data_received`` into the other side's transport; while
    they cannot (a blackhole, or the upstream not connected yet) they are held and that side's
    reading is paused. A full transport pauses reading on the side that fills it.
    """

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.client = _End(self)
        self.upstream = _End(self)
        self.client.peer, self.upstream.peer = self.upstream, self.client
        self.connected = False
        self.aborted = False
        self.finished = False
        self.connecting: asyncio.Task[None] | None = None
        self.sniffer = _RequestSniffer()
        #: :meth:`FaultProxy.silence` holds this connection's bytes.
        self.silenced = False
        #: Done once every socket of the link reported ``connection_lost``.
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def flowing(self) -> bool:
        return self.connected and not self.aborted and not self.proxy.blackholed and not self.silenced

    @property
    def kind(self) -> str:
        """What the client's latest request on this connection was (see :data:`KINDS`)."""
        return self.sniffer.kind

    def made(self, end: _End) -> None:
        if end is self.client:
            self.proxy._accepted(self)
            return
        if self.aborted:
            assert end.transport is not None
            _reset(end.transport)
            return
        self.connected = True
        self.flush()

    def forward(self, src: _End, data: bytes) -> None:
        if self.aborted or not data:
            return
        if src is self.client and not self.sniffer.done:
            self.sniffer.feed(data)
        if self.flowing and not src.held:
            self._write(src.peer, data)
            return
        src.held.append(data)
        self.proxy._hold(src is self.client, len(data))
        self.update_reading(src)

    def end(self, src: _End, how: str) -> None:
        """``src`` ended its stream (``"eof"`` or ``"closed"``); pass that on after its held bytes."""
        if self.aborted or src.ending is not None:
            return
        src.ending = how
        if self.flowing and not src.held:
            self._pass_ending(src)

    def flush(self) -> None:
        """Write what both sides hold, if the link flows."""
        for src in (self.client, self.upstream):
            if not self.flowing:
                return
            held, src.held = src.held, []
            for data in held:
                self.proxy._hold(src is self.client, -len(data))
                self._write(src.peer, data)
            if src.ending is not None:
                self._pass_ending(src)
            self.update_reading(src)

    def update_reading(self, src: _End) -> None:
        transport = src.transport
        if transport is None or self.aborted or transport.is_closing():
            return
        pause = bool(src.held) or src.peer_full
        if pause != src.reading_paused:
            src.reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _write(self, dst: _End, data: bytes) -> None:
        if dst.transport is not None and not dst.transport.is_closing():
            dst.transport.write(data)

    def _pass_ending(self, src: _End) -> None:
        if src.ending_passed:
            return
        src.ending_passed = True
        dst = src.peer.transport
        if dst is not None and not dst.is_closing():
            if src.ending == "eof" and dst.can_write_eof():
                with contextlib.suppress(OSError):
                    dst.write_eof()
            else:
                dst.close()
        if self.client.ending_passed and self.upstream.ending_passed:
            self.close()

    def close(self) -> None:
        """End gracefully: both sockets close once their buffers are written."""
        for side in (self.client, self.upstream):
            if side.transport is not None and not side.transport.is_closing():
                side.transport.close()
        self._finish()

    def abort(self) -> None:
        """Reset both sides now."""
        if self.aborted:
            return
        self.aborted = True
        for side in (self.client, self.upstream):
            self.proxy._hold(side is self.client, -sum(map(len, side.held)))
            side.held.clear()
            if side.transport is not None:
                _reset(side.transport)
        if self.connecting is not None and self.connecting is not asyncio.current_task():
            self.connecting.cancel()
        self._finish()

    def lost(self, end: _End, exc: Exception | None) -> None:
        end.transport_lost = True
        if not self.gone.done() and all(s.transport is None or s.transport_lost for s in (self.client, self.upstream)):
            self.gone.set_result(None)
        if self.aborted:
            return
        if exc is not None:
            logger.debug("fault proxy link ended: %s", exc)
            self.abort()  # a reset on one side is a reset on the other
            return
        self.end(end, "closed")
        if end.peer.transport is None or end.peer.transport.is_closing():
            self._finish()

    def _finish(self) -> None:
        if not self.finished:
            self.finished = True
            self.proxy._links.discard(self)


def _check_kind(kind: str | None) -> None:
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown connection kind {kind!r}; one of {sorted(KINDS)}")


class FaultProxy:
    """A TCP proxy on loopback in front of one upstream ``host:port``, with fault controls.

    Use it as an async context manager (or call :meth:`start` and :meth:`aclose`).

    Args:
        upstream_host: Where to forward connections.
        host: The address to listen on (an IP address: a name such as ``localhost`` may bind
            several addresses, each on its own free port).
        port: The port to listen on (``0``: a free port, see :attr:`port`).
        clock: Measures :meth:`refuse` windows (the system clock by default).
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock | None = None,
    ) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._blackholed = False
        self._refuse_until: float | None = None
        #: Every connection accepted so far (refused ones included).
        self.total_connections = 0
        #: Connections reset on arrival because of :meth:`refuse`.
        self.refused_connections = 0
        #: Bytes read and held by :meth:`blackhole`, not yet forwarded (a test waits for them to
        #: know the bytes it sent are in the hole, instead of waiting a while).
        self.held_bytes = 0
        #: The part of :attr:`held_bytes` the clients sent (a request on its way to the upstream;
        #: what the upstream sent, keepalives included, is not counted here).
        self.held_client_bytes = 0

    def __repr__(self) -> str:
        return f"FaultProxy({self.host}:{self._port} -> {self.upstream_host}:{self.upstream_port})"

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start listening.

        Raises:
            OSError: The address cannot be bound.
        """
        if self._server is not None:
            return
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Link(self).client, self.host, self._requested_port)
        self._port = int(self._server.sockets[0].getsockname()[1])
        logger.debug(
            "fault proxy listening on %s:%d -> %s:%d", self.host, self._port, self.upstream_host, self.upstream_port
        )

    async def aclose(self) -> None:
        """Stop listening and reset every connection. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        self._blackholed = False
        await self.cut()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    @property
    def port(self) -> int:
        """The port the proxy listens on.

        Raises:
            RuntimeError: The proxy has not been started.
        """
        if self._port is None:
            raise RuntimeError("FaultProxy is not started; use 'async with FaultProxy(...)'")
        return self._port

    def url(self, upstream_url: str) -> str:
        """``upstream_url`` pointed at the proxy (same scheme, path and query)."""
        parts = urlsplit(upstream_url)
        host = f"[{self.host}]" if ":" in self.host else self.host
        userinfo, at, _ = parts.netloc.rpartition("@")
        return urlunsplit((parts.scheme, f"{userinfo}{at}{host}:{self.port}", parts.path, parts.query, parts.fragment))

    @property
    def connection_count(self) -> int:
        """How many connections are being proxied right now."""
        return len(self._links)

    @property
    def blackholed(self) -> bool:
        """Whether :meth:`blackhole` is on."""
        return self._blackholed

    @property
    def refusing(self) -> bool:
        """Whether new connections are being refused right now."""
        return self._refuse_until is not None and self._clock.monotonic() < self._refuse_until

    def connections(self, kind: str | None = None) -> int:
        """How many connections of ``kind`` (any, when ``None``) are proxied right now."""
        return sum(1 for link in self._links if kind is None or link.kind == kind)

    async def cut(self, kind: str | None = None) -> None:
        """Abort every current connection (of ``kind`` only, when given; see :data:`KINDS`): both
        the client and the upstream see a reset.

        Raises:
            ValueError: An unknown ``kind``.
        """
        _check_kind(kind)
        links = [link for link in self._links if kind is None or link.kind == kind]
        for link in links:
            link.abort()
        if links:
            logger.info("fault proxy cut %d %sconnection(s)", len(links), f"{kind} " if kind is not None else "")
        if kind is None:
            tasks = [task for task in self._tasks if not task.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)
        if links:
            await asyncio.gather(*(link.gone for link in links))
            # A few more turns of the loop: a peer on this loop reads its reset before we return.
            for _ in range(_SETTLE_TURNS):
                await asyncio.sleep(0)

    async def blackhole(self, on: bool = True) -> None:
        """Stop (``on``) or resume forwarding on every connection, current and new.

        While on, sockets stay open and bytes are read but held, so neither side hears from the
        other; new connections are accepted but not connected upstream. Lifted, what was held is
        written on before this returns (a peer on this loop has had the turns to read it).
        """
        if on == self._blackholed:
            return
        self._blackholed = on
        if on:
            return
        for link in list(self._links):
            if link.connected:
                link.flush()
            else:
                self._connect(link)
        for _ in range(_SETTLE_TURNS):
            await asyncio.sleep(0)

    async def silence(self, kind: str, on: bool = True) -> int:
        """Hold the bytes of the current connections of ``kind`` (``on``), or let them flow again.

        A silenced connection stays open and says nothing either way, as a stalled stream does;
        connections opened later flow (awaited like every fault of the proxy; let flow again,
        what was held is written on before this returns). Returns how many connections were
        changed.

        Raises:
            ValueError: An unknown ``kind``.
        """
        _check_kind(kind)
        links = [link for link in self._links if link.kind == kind and link.silenced != on]
        for link in links:
            link.silenced = on
            if not on:
                link.flush()
        if links and not on:
            for _ in range(_SETTLE_TURNS):
                await asyncio.sleep(0)
        return len(links)

    def _hold(self, from_client: bool, count: int) -> None:
        self.held_bytes += count
        if from_client:
            self.held_client_bytes += count

    async def refuse(self, seconds: float) -> None:
        """For ``seconds`` from now, accept new connections and reset them at once (``0``: stop
        refusing). Awaited like every fault of the proxy."""
        self._refuse_until = self._clock.monotonic() + max(0.0, seconds)

    def _accepted(self, link: _Link) -> None:
        self.total_connections += 1
        if self.refusing:
            self.refused_connections += 1
            link.abort()
            return
        self._links.add(link)
        if not self._blackholed:
            self._connect(link)

    def _connect(self, link: _Link) -> None:
        if link.connecting is not None or link.aborted:
            return
        # A task of our own, so cut() can cancel a connection attempt still under way.
        task = asyncio.get_running_loop().create_task(self._connect_upstream(link), name="fault-proxy-connect")
        link.connecting = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect_upstream(self, link: _Link) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(lambda: link.upstream, self.upstream_host, self.upstream_port)
        except OSError as exc:
            logger.info("fault proxy could not reach %s:%s: %s", self.upstream_host, self.upstream_port, exc)
            link.abort()
