"""An in-memory transport pair, for tests of the connection, the supervisor and app code.

Messages are encoded to JSON text on ``send`` and decoded on ``receive`` with the same framing
code the real transports use, so malformed frames can be injected with :meth:`MemoryTransport.send_raw`
and are reported exactly as they would be from a socket.
"""

from __future__ import annotations

import asyncio
import collections
from typing import TypeAlias

from .._codec._jsonrpc import Message, decode_frame, encode
from ..exceptions import TransportClosed
from .base import TransportInfo

__all__ = ["MemoryTransport", "memory_pair"]

_Item: TypeAlias = str | bytes | TransportClosed


class MemoryTransport:
    """One end of an in-memory link. Create a connected pair with :func:`memory_pair`."""

    def __init__(self, name: str = "memory") -> None:
        self._info = TransportInfo(kind="memory", target=name)
        self._inbox: collections.deque[_Item] = collections.deque()
        self._wakeup: asyncio.Event = asyncio.Event()
        self._peer: MemoryTransport | None = None
        self._closed: TransportClosed | None = None
        #: Every message this end sent, in order (for assertions in tests).
        self.sent: list[Message] = []

    @property
    def info(self) -> TransportInfo:
        return self._info

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def send(self, message: Message) -> None:
        self._check_open()
        self.sent.append(message)
        self._deliver(encode(message))

    def send_raw(self, frame: str | bytes) -> None:
        """Deliver ``frame`` to the peer verbatim (for injecting malformed input)."""
        self._check_open()
        self._deliver(frame)

    async def receive(self) -> Message:
        while True:
            if self._inbox:
                item = self._inbox.popleft()
                if isinstance(item, TransportClosed):
                    self._closed = self._closed or item
                    self._inbox.appendleft(item)
                    raise TransportClosed(item.reason)
                return decode_frame(item)
            if self._closed is not None:
                raise TransportClosed(self._closed.reason)
            self._wakeup.clear()
            await self._wakeup.wait()

    async def aclose(self) -> None:
        self.close()

    def close(self, reason: str = "closed by this side") -> None:
        """Close both ends; the peer sees ``TransportClosed(reason)`` after its queued frames."""
        if self._closed is not None:
            return
        self._closed = TransportClosed(reason)
        self._wakeup.set()
        peer = self._peer
        if peer is not None and peer._closed is None:
            peer._push(TransportClosed(reason))

    def _check_open(self) -> None:
        if self._closed is not None:
            raise TransportClosed(self._closed.reason, maybe_delivered=False)

    def _deliver(self, item: _Item) -> None:
        peer = self._peer
        if peer is None or peer._closed is not None:
            raise TransportClosed("peer is closed", maybe_delivered=False)
        peer._push(item)

    def _push(self, item: _Item) -> None:
        self._inbox.append(item)
        self._wakeup.set()


def memory_pair(
    client_name: str = "memory-client", agent_name: str = "memory-agent"
) -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected ends: ``(client_side, agent_side)``."""
    client, agent = MemoryTransport(client_name), MemoryTransport(agent_name)
    client._peer, agent._peer = agent, client
    return client, agent
