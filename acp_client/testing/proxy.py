"""A byte-transparent TCP proxy that injects network faults between a client and an agent.

Put a :class:`FaultProxy` in front of any loopback server (the reference agent, the official SDK
servers, your own agent) and point the client at :meth:`FaultProxy.url`. It forwards raw bytes, so
it works for WebSocket, HTTP/1.1, h2c and TLS alike, and it can:

* :meth:`~FaultProxy.cut` every live connection (both sides see a reset),
* :meth:`~FaultProxy.blackhole` the link (sockets stay open, nothing is forwarded: a half-open
  link that only a ping or a timeout can detect; bytes held meanwhile are delivered if the
  blackhole is lifted, as after a healed network partition),
* :meth:`~FaultProxy.refuse` new connections for a while (accepted, then reset at once).

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
from urllib.parse import urlsplit, urlunsplit

from ..clock import Clock, SystemClock

__all__ = ["FaultProxy"]

logger = logging.getLogger(__name__)

_CHUNK = 64 * 1024


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s socket with a TCP reset (SO_LINGER 0), not a graceful FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Link:
    """One proxied connection: the client socket and, once connected, the upstream one."""

    def __init__(self, proxy: FaultProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client_reader = reader
        self.client_writer = writer
        self.upstream_writer: asyncio.StreamWriter | None = None
        self.aborted = False

    def abort(self) -> None:
        """Reset both sides now."""
        self.aborted = True
        _reset(self.client_writer)
        if self.upstream_writer is not None:
            _reset(self.upstream_writer)

    async def run(self) -> None:
        proxy = self.proxy
        try:
            await proxy._flowing.wait()
            if self.aborted:
                return
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(
                    proxy.upstream_host, proxy.upstream_port
                )
            except OSError as exc:
                logger.info("fault proxy could not reach %s:%s: %s", proxy.upstream_host, proxy.upstream_port, exc)
                self.abort()
                return
            self.upstream_writer = upstream_writer
            if self.aborted:
                self.abort()
                return
            pipes = {
                asyncio.ensure_future(self._pipe(self.client_reader, upstream_writer)),
                asyncio.ensure_future(self._pipe(upstream_reader, self.client_writer)),
            }
            try:
                done, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_EXCEPTION)
                if any(not task.cancelled() and task.exception() is not None for task in done):
                    self.abort()
                if pending:
                    await asyncio.wait(pending)
            finally:
                for task in pipes:
                    task.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            if not self.aborted:
                self.client_writer.close()
                if self.upstream_writer is not None:
                    self.upstream_writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        gate = self.proxy._flowing
        while True:
            data = await reader.read(_CHUNK)
            if not gate.is_set():
                self.proxy.held_bytes += len(data)
                try:
                    await gate.wait()
                finally:
                    self.proxy.held_bytes -= len(data)
            if self.aborted:
                return
            if not data:
                if writer.can_write_eof() and not writer.is_closing():
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                return
            writer.write(data)
            await writer.drain()


class FaultProxy:
    """A TCP proxy on loopback in front of one upstream ``host:port``, with fault controls.

    Use it as an async context manager (or call :meth:`start` and :meth:`aclose`).

    Args:
        upstream_host: Where to forward connections.
        upstream_port: The upstream port.
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
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refuse_until: float | None = None
        #: Every connection accepted so far (refused ones included).
        self.total_connections = 0
        #: Connections reset on arrival because of :meth:`refuse`.
        self.refused_connections = 0
        #: Bytes read and held by :meth:`blackhole`, not yet forwarded (a test waits for them to
        #: know the bytes it sent are in the hole, instead of waiting a while).
        self.held_bytes = 0

    def __repr__(self) -> str:
        return f"FaultProxy({self.host}:{self._port} -> {self.upstream_host}:{self.upstream_port})"

    async def __aenter__(self) -> FaultProxy:
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
        """Start listening.

        Raises:
            OSError: The address cannot be bound.
        """
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._accept, self.host, self._requested_port)
        self._port = int(self._server.sockets[0].getsockname()[1])
        logger.debug(
            "fault proxy listening on %s:%d -> %s:%d", self.host, self._port, self.upstream_host, self.upstream_port
        )

    async def aclose(self) -> None:
        """Stop listening and reset every connection. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        self._flowing.set()
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
        netloc = f"{host}:{self.port}"
        if parts.username is not None:
            userinfo = parts.username + (f":{parts.password}" if parts.password is not None else "")
            netloc = f"{userinfo}@{netloc}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    @property
    def connection_count(self) -> int:
        """How many connections are being proxied right now."""
        return len(self._links)

    @property
    def blackholed(self) -> bool:
        """Whether :meth:`blackhole` is on."""
        return not self._flowing.is_set()

    @property
    def refusing(self) -> bool:
        """Whether new connections are being refused right now."""
        return self._refuse_until is not None and self._clock.monotonic() < self._refuse_until

    async def cut(self) -> None:
        """Abort every current connection: both the client and the upstream see a reset."""
        links = list(self._links)
        for link in links:
            link.abort()
        if links:
            logger.info("fault proxy cut %d connection(s)", len(links))
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def blackhole(self, on: bool = True) -> None:
        """Stop (``on``) or resume forwarding on every connection, current and new.

        While on, sockets stay open and bytes are read but held, so neither side hears from the
        other; new connections are accepted but not connected upstream.
        """
        if on:
            self._flowing.clear()
        else:
            self._flowing.set()

    def refuse(self, seconds: float) -> None:
        """For ``seconds`` from now, accept new connections and reset them at once."""
        self._refuse_until = self._clock.monotonic() + max(0.0, seconds)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.total_connections += 1
        if self.refusing:
            self.refused_connections += 1
            _reset(writer)
            return
        link = _Link(self, reader, writer)
        self._links.add(link)
        # The link runs in a task of our own, so cut() can cancel it without asyncio's stream
        # server seeing its callback task end cancelled.
        task = asyncio.get_running_loop().create_task(self._run(link), name="fault-proxy-link")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, link: _Link) -> None:
        try:
            await link.run()
        except OSError as exc:
            logger.debug("fault proxy link ended: %s", exc)
            link.abort()
        finally:
            self._links.discard(link)
