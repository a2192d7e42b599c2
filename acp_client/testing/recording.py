"""See what a client put on the wire: a connector wrapper that records every link and message.

Wrap any :class:`~acp_client.transports.base.Connector` — a real endpoint's or a
:class:`~acp_client.testing.MemoryConnector` — and hand the wrapper to the client::

    wire = RecordingConnector(connector_for("ws://127.0.0.1:8000/acp"))
    async with AcpClient(wire) as client:
        await client.new_session("/tmp")
    assert wire.sent_methods() == ["initialize", "session/new"]

Each link the client opens is a :class:`RecordingTransport` in :attr:`RecordingConnector.transports`
(oldest first), so a test can tell what went out before and after a reconnect. A test can also
rewrite what the agent sends (``rewrite``) or watch each message as it is sent (``on_send``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._codec._jsonrpc import Message
from ..transports.base import Connector, Transport, TransportInfo

__all__ = ["RecordingConnector", "RecordingTransport"]

#: Rewrites one message from the agent before the client sees it (``None`` drops it).
Rewrite = Callable[[Message], Message | None]


class RecordingTransport:
    """Passes everything through to ``inner``, keeping a copy of each message sent and received.

    Args:
        rewrite: Applied to each message from the agent before the client gets it; returning
            ``None`` drops the message. ``received`` keeps what the agent actually sent.
        on_send: Called with each message once it was sent.
    """

    def __init__(
        self, inner: Transport, *, rewrite: Rewrite | None = None, on_send: Callable[[Message], None] | None = None
    ) -> None:
        self.inner = inner
        self._rewrite = rewrite
        self._on_send = on_send
        #: What the client sent on this link, in order (a batch is one entry).
        self.sent: list[Message] = []
        #: What the agent sent on this link, in order, before any rewrite.
        self.received: list[Message] = []

    @property
    def info(self) -> TransportInfo:
        return self.inner.info

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        await self.inner.send(message)
        if self._on_send is not None:
            self._on_send(message)

    async def receive(self) -> Message:
        while True:
            message = await self.inner.receive()
            self.received.append(message)
            if self._rewrite is None:
                return message
            rewritten = self._rewrite(message)
            if rewritten is not None:
                return rewritten

    async def aclose(self) -> None:
        await self.inner.aclose()


class RecordingConnector:
    """Wraps a connector; every link it opens is recorded in :attr:`transports`, oldest first.

    ``rewrite`` and ``on_send`` (see :class:`RecordingTransport`) apply to the links opened after
    they are set.
    """

    def __init__(self, inner: Connector) -> None:
        self.inner = inner
        self.transports: list[RecordingTransport] = []
        self.rewrite: Rewrite | None = None
        self.on_send: Callable[[Message], None] | None = None

    @property
    def target(self) -> str:
        return self.inner.target

    async def connect(self) -> Transport:
        transport = RecordingTransport(await self.inner.connect(), rewrite=self.rewrite, on_send=self.on_send)
        self.transports.append(transport)
        return transport

    @property
    def current(self) -> RecordingTransport:
        """The most recent link.

        Raises:
            LookupError: No link was opened yet.
        """
        if not self.transports:
            raise LookupError("no link was opened")
        return self.transports[-1]

    def sent(self, link: int | None = None) -> list[dict[str, Any]]:
        """Every message object sent (on one link, by index, or on all), in order; batches flattened."""
        links = self.transports if link is None else [self.transports[link]]
        out: list[dict[str, Any]] = []
        for transport in links:
            for message in transport.sent:
                members = message if isinstance(message, list) else [message]
                out.extend(m for m in members if isinstance(m, dict))
        return out

    def sent_methods(self, link: int | None = None) -> list[str]:
        """The methods of the requests and notifications sent (on one link, or on all), in order."""
        return [m["method"] for m in self.sent(link) if isinstance(m.get("method"), str)]

    def messages(self, method: str) -> list[dict[str, Any]]:
        """The messages sent with ``method``, on every link, in order."""
        return [m for m in self.sent() if m.get("method") == method]
