"""Inbound messages of a Streamable HTTP link: the bounded queue, and the reader that fills it.

Several SSE streams feed one :class:`Inbox`; ``receive()`` takes from it in arrival order. A full
inbox stops the readers (they wait in :meth:`Inbox.push`): back-pressure on the server through
TCP / HTTP/2 flow control. :class:`EventReader` turns one stream's raw chunks into messages
(bounded decompression, the SSE caps, JSON-RPC decoding); the caller maps the network's errors.

Keep the limit small (128): a thousand events decoded at once from one network read are out of
the CPU caches by the time each is used, about a third more CPU per update
(``benchmarks/throughput.py``); a small limit costs only a task switch per batch.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterable, Callable
from typing import TypeAlias

from .._codec._jsonrpc import Message, decode_frame
from .._util._logging import get_logger
from ..exceptions import AcpError, MalformedFrame, MessageTooLarge, TransportClosed
from ._body import Inflater
from ._reattach import RESYNC_EVENT, RESYNC_MARKER, is_resync_message
from ._sse import SseEvent, SseParser
from .base import Limits

# The HTTP transport's logger: these records are about its streams (apps filter on that name).
logger = get_logger("acp_client.transports.http")

Inbound: TypeAlias = "Message | AcpError"


class Inbox:
    """A bounded queue of inbound messages (or errors to raise from ``receive()``) of ``limit`` items."""

    __slots__ = ("_full", "_items", "_space", "_wakeup", "closed", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: collections.deque[Inbound] = collections.deque()
        self._wakeup = asyncio.Event()
        self._space = asyncio.Event()
        self._full = False  # a push() waits for room
        #: Why the link ended, once it has: ``get()`` raises it when the queue is empty.
        self.closed: TransportClosed | None = None

    def __len__(self) -> int:
        return len(self._items)

    def deliver(self, item: Inbound) -> None:
        """Queue ``item`` now, whatever the length (for items that cannot wait)."""
        self._items.append(item)
        self._wakeup.set()

    async def push(self, item: Inbound) -> None:
        """Queue ``item``, waiting (and so not reading) while the queue is full; dropped once closed."""
        while len(self._items) >= self.limit and self.closed is None:
            self._space.clear()
            self._full = True
            await self._space.wait()
        if self.closed is None:
            self.deliver(item)

    async def get(self) -> Message:
        """The next message; raises a queued error, or :attr:`closed` once the queue is empty."""
        while True:
            message = self.get_ready()
            if message is not None:
                return message
            if self.closed is not None:
                raise TransportClosed(self.closed.reason, maybe_delivered=False)
            self._wakeup.clear()
            await self._wakeup.wait()

    def get_ready(self) -> Message | None:
        """:meth:`get` for what is queued already: the next message, ``None`` when the queue is empty."""
        items = self._items
        if not items:
            return None
        item = items.popleft()
        if self._full and len(items) < self.limit:
            self._full = False
            self._space.set()
        if type(item) is dict or type(item) is list:
            return item
        assert isinstance(item, AcpError)
        raise item

    def close(self, reason: str) -> None:
        """The link has ended: wake the reader and every waiting stream."""
        if self.closed is None:
            self.closed = TransportClosed(reason)
        self._wakeup.set()
        self._full = False
        self._space.set()

    def clear(self) -> None:
        self._items.clear()


class EventReader:
    """Reads one SSE stream into an :class:`Inbox`.

    Args:
        inspect: Called with each message that is not a notification, and each ``state_update``
            notification (v2 turns), with ``source``: the stream's session id (``None``: the
            connection stream).
        last_event_id: Where a reattached stream goes on from.
        on_resync: Called once when the server signals it cannot resume the stream (see
            :mod:`._reattach`); the messages after the signal are still queued.

    Attributes:
        lost: An oversized event was skipped on this stream (a message was lost).
        resync: The server signalled it could not resume the stream.
    """

    __slots__ = ("_inbox", "_inflater", "_inspect", "_on_resync", "_parser", "_source", "_target", "lost", "resync")

    def __init__(
        self,
        inbox: Inbox,
        *,
        limits: Limits,
        content_encoding: str,
        target: str,
        inspect: Callable[[Message, str | None], None],
        source: str | None,
        last_event_id: str = "",
        on_resync: Callable[[str], None] | None = None,
    ) -> None:
        self._inbox = inbox
        self._parser = SseParser(
            max_line_bytes=limits.max_sse_line_bytes, max_event_bytes=limits.max_message_bytes, message_data=True
        )
        self._parser.last_event_id = last_event_id
        self._on_resync = on_resync
        self.resync = False
        self._inflater = Inflater(content_encoding)
        self._target = target
        self._inspect = inspect
        self._source = source
        self.lost = False

    @property
    def last_event_id(self) -> str:
        """The last event id the stream carried (``""``: none)."""
        return self._parser.last_event_id

    def _resync(self, detail: str) -> None:
        if not self.resync:
            self.resync = True
            if self._on_resync is not None:
                self._on_resync(detail)

    async def read(self, chunks: AsyncIterable[bytes], after_chunk: Callable[[], bool]) -> bool:
        """Read until the stream ends (``True``) or ``after_chunk()`` says stop (``False``); corrupt
        compressed data is a ``ProtocolError``, the network's exceptions pass through."""
        inflater, feed, inbox = self._inflater, self._parser.feed, self._inbox
        inspect, source = self._inspect, self._source
        # The hot path appends directly while there is room, and wakes the receiver once per
        # chunk (and before any await: a receiver asleep on an empty inbox must see what is queued).
        items, limit, wakeup = inbox._items, inbox.limit, inbox._wakeup
        async for raw in chunks:
            for chunk in (raw,) if inflater.identity else inflater.pieces(raw):
                for item in feed(chunk):
                    if type(item) is bytes:  # the data of a "message" event
                        if not item:
                            continue
                        try:
                            message = decode_frame(item)
                        except MalformedFrame as exc:
                            wakeup.set()
                            await inbox.push(exc)
                            continue
                        if type(message) is not dict or "id" in message:  # a notification needs no tracking
                            inspect(message, source)
                        elif item.find(RESYNC_MARKER) >= 0 and is_resync_message(message):
                            self._resync("the server asked for a resync (state_resync_required)")
                        elif item.find(b'"state_update"') >= 0:
                            inspect(message, source)  # a v2 turn's state: the transport tracks running turns
                        if len(items) < limit:
                            items.append(message)
                        else:
                            wakeup.set()
                            await inbox.push(message)
                    elif type(item) is SseEvent:
                        if item.event == RESYNC_EVENT:
                            self._resync(f"the server cannot resume the stream: {item.text[:200]}")
                        else:
                            logger.debug("ignoring an SSE event of type %r", item.event)
                    else:
                        assert isinstance(item, MessageTooLarge)
                        logger.warning("skipped an oversized SSE event from %s: %s", self._target, item)
                        self.lost = True
                        wakeup.set()
                        await inbox.push(item)
                if items:
                    wakeup.set()
            if after_chunk():
                return False
        if self._parser.finish():
            await inbox.push(MalformedFrame("an SSE stream ended inside an event; the partial event was discarded"))
        return True
