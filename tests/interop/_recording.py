"""A connector wrapper that records every link it opens and every message the client sends on it.

Used to prove what reached the wire (or that nothing did) and to read each link's
:class:`~acp_client.transports.base.TransportInfo` (e.g. the negotiated HTTP version), without
touching the client's internals.
"""

from __future__ import annotations

from typing import Any

from acp_client import Connector, Transport, TransportInfo
from acp_client._jsonrpc import Message


class RecordingTransport:
    """Passes everything through to ``inner`` and keeps a copy of each message sent."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.sent: list[Message] = []

    @property
    def info(self) -> TransportInfo:
        return self.inner.info

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        await self.inner.send(message)

    async def receive(self) -> Message:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


class RecordingConnector:
    """Wraps a connector; ``transports`` lists every link opened, oldest first."""

    def __init__(self, inner: Connector) -> None:
        self.inner = inner
        self.transports: list[RecordingTransport] = []

    @property
    def target(self) -> str:
        return self.inner.target

    async def connect(self) -> Transport:
        transport = RecordingTransport(await self.inner.connect())
        self.transports.append(transport)
        return transport

    @property
    def current(self) -> RecordingTransport:
        """The most recent link."""
        assert self.transports, "no link was opened"
        return self.transports[-1]

    def sent(self) -> list[dict[str, Any]]:
        """Every message object sent on every link, in order (batch members flattened)."""
        out: list[dict[str, Any]] = []
        for transport in self.transports:
            for message in transport.sent:
                members = message if isinstance(message, list) else [message]
                out.extend(m for m in members if isinstance(m, dict))
        return out

    def sent_methods(self) -> list[str]:
        return [m["method"] for m in self.sent() if "method" in m]
