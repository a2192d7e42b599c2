"""The transport seam.

A :class:`Transport` moves whole JSON-RPC messages between the client and one agent connection;
a :class:`Connector` opens a fresh one (and is what the supervisor calls again after a drop).
Nothing above this module imports ``websockets``, ``httpx`` or ``asyncio.subprocess``.

Contract:

* ``send(message)`` delivers one message (a dict) or batch (a list). It raises a
  :class:`~acp_client.exceptions.TransportError` when it cannot; ``maybe_delivered`` on that error
  says whether the agent may have seen the message. A per-message refusal (an HTTP 4xx for that
  POST) raises without closing the transport; a dead link raises
  :class:`~acp_client.exceptions.TransportClosed`.
* ``receive()`` returns the next inbound message (a dict) or batch (a list). A frame that cannot
  be decoded raises :class:`~acp_client.exceptions.MalformedFrame` (or
  :class:`~acp_client.exceptions.MessageTooLarge` where the link survives an oversized frame)
  and the transport stays usable: call ``receive()`` again. When the link has ended, every call
  raises :class:`~acp_client.exceptions.TransportClosed` (with the cause as ``reason``).
* ``aclose()`` ends the link and releases everything; it is idempotent and never raises for an
  already dead link.
* Optional: ``receive_ready()`` is ``receive()`` without the coroutine: the message already queued
  (or what ``receive()`` would raise for it), ``None`` when nothing is. The connection takes a
  burst of updates through it, one call per message instead of a coroutine.
* Optional: ``watch_resumes(listener)`` (see :class:`Reattaching`): a transport that reattaches a
  broken stream to the same server-side connection calls ``listener`` with a
  :class:`StreamResumed` each time; the link stays open, pending requests stay pending.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import attrs

from .._codec._jsonrpc import Message
from .._util._checks import check_count, field_check
from ..state import StreamResumed

__all__ = ["Connector", "Limits", "Reattaching", "StreamResumed", "Transport", "TransportInfo"]

_MIB = 1024 * 1024


def _byte_count(*, zero: bool = False) -> Any:
    return field_check(check_count, minimum=0 if zero else 1, unit="bytes")


@attrs.frozen
class Limits:
    """Caps on inbound data, in bytes, after decompression: exceeding one is a clear error
    (:class:`~acp_client.exceptions.MessageTooLarge`), never unbounded memory.

    Raises:
        ConfigurationError: A cap that is not a whole number of bytes, or one that would refuse
            every message (0; only ``max_stderr_bytes`` may be 0: keep no stderr).
    """

    #: One WebSocket message, one stdio line, or one SSE event's data.
    max_message_bytes: int = attrs.field(default=16 * _MIB, validator=_byte_count())
    #: One SSE line (a field line of an event).
    max_sse_line_bytes: int = attrs.field(default=16 * _MIB, validator=_byte_count())
    #: One HTTP response body (the ``initialize`` answer, error bodies).
    max_http_body_bytes: int = attrs.field(default=16 * _MIB, validator=_byte_count())
    #: The stderr of a stdio agent kept in memory for diagnostics (the rest is only logged).
    max_stderr_bytes: int = attrs.field(default=64 * 1024, validator=_byte_count(zero=True))


@attrs.frozen
class TransportInfo:
    """What is known about an open link, for logs and the app.

    Attributes:
        kind: ``"websocket"``, ``"http"``, ``"stdio"`` or ``"memory"``.
        target: The URL or the command, with credentials removed (safe to log).
        connection_id: The ``Acp-Connection-Id`` the server assigned, when it did.
        http_version: ``"HTTP/1.1"`` or ``"HTTP/2"`` for the HTTP transport.
        pid: The agent process id for stdio.
        agent_process: Names the agent process behind this link when the transport knows it
            (stdio: each process it starts gets its own name): two links with the same value
            reach the same live process, two with different values reach different ones, so a
            session the first held is not in the second's memory. ``None`` when the process
            cannot be known (network transports: any process may serve the server's URL).
        ordered: Whether every inbound message travels one ordered stream. ``False`` for
            Streamable HTTP, where a response and the updates before it may arrive on different
            SSE streams (so a load/resume answer can overtake the last replayed updates).
    """

    kind: str
    target: str
    connection_id: str | None = None
    http_version: str | None = None
    pid: int | None = None
    ordered: bool = True
    agent_process: str | None = None


@runtime_checkable
class Transport(Protocol):
    """One open link to an agent, moving whole JSON-RPC messages."""

    @property
    def info(self) -> TransportInfo: ...

    async def send(self, message: Message) -> None: ...

    async def receive(self) -> Message: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Reattaching(Protocol):
    """A transport that reattaches broken streams and says so (optional; see the module docstring)."""

    def watch_resumes(self, listener: Callable[[StreamResumed], None] | None) -> None:
        """Call ``listener`` (on the event loop, never raising into the transport) after each reattach."""
        ...


@runtime_checkable
class Connector(Protocol):
    """Opens links to one agent endpoint. Called again by the supervisor after each drop."""

    @property
    def target(self) -> str:
        """The endpoint, with credentials removed (safe to log)."""
        ...

    async def connect(self) -> Transport:
        """Open a new link.

        Raises:
            ConnectError: The link could not be established.
            TlsVerificationError: The peer's certificate did not verify.
            HttpStatusError: The server answered the handshake with an error status.
        """
        ...


def describe(message: Any) -> str:
    """A short description of a message for debug logs (method or id, never params)."""
    if isinstance(message, dict):
        if "method" in message:
            return f"{message.get('method')} id={message.get('id')}"
        return f"response id={message.get('id')}"
    if isinstance(message, list):
        return f"batch of {len(message)}"
    return type(message).__name__
