"""The ``websockets`` client connection the WebSocket transport runs on, with its inbound side made cheap.

:class:`ClientConnection` is ``websockets``' asyncio client connection with three changes:

* **Whole text frames are read here.** After the opening handshake, the bytes from TCP are split into
  frames by :meth:`ClientConnection._read_frames`, not by ``websockets``' frame parser (a generator
  per frame and a ``Frame`` object per message: about half the CPU a client spends per update). A
  frame this reader takes is exactly a final, uncompressed, unmasked text frame within the size cap
  whose payload is valid UTF-8; it becomes a ``str`` in :attr:`ClientConnection.inbox`. Every other
  frame (ping, pong, close, binary, a fragment, a compressed frame, invalid UTF-8) is handed to
  ``websockets`` *whole*, so its parser always starts at a frame boundary and keeps every one of
  its rules (pong answers, the closing handshake, 1007 for invalid UTF-8...). A frame that cannot
  be handed whole — a masked one (1002) or one over the size cap (1009, refused on its header,
  before its payload is buffered) — and anything after a close, a binary frame or a fragment hand
  the rest of the stream to ``websockets`` for good. So does a debug-level ``websockets`` logger
  (it logs every frame).
* **Whole text messages skip the message assembler.** What ``websockets`` parses itself and is a
  final text frame still goes to :attr:`ClientConnection.inbox` (one ordered queue); the first
  message that needs the assembler (a fragment, a binary frame, invalid UTF-8) hands every later
  message to it for good, and :attr:`ClientConnection.inbox` is read first. Reading pauses while
  more than ``max_queue`` messages wait, as the library's own flow control does.
* **The closing handshake is bounded in every case.** When the connection starts closing from
  inside ``data_received`` (a close frame from the agent, a frame we must refuse), ``websockets``
  waits for the server to close TCP without a timer; this schedules the abort at the library's
  close deadline.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, Final

from websockets.asyncio.client import ClientConnection as _LibraryConnection
from websockets.exceptions import ConcurrencyError
from websockets.frames import DATA_OPCODES, Frame, Opcode
from websockets.protocol import OPEN

__all__ = ["ClientConnection"]

#: How :meth:`ClientConnection.data_received` reads: the handshake (``websockets`` parses the 101
#: answer), frames (this module splits them), or everything left to ``websockets`` for good.
_HANDSHAKE: Final = 0
_FRAMES: Final = 1
_LIBRARY: Final = 2
#: The first byte of a final, uncompressed text frame (FIN, no RSV bit, opcode 1).
_WHOLE_TEXT: Final = 0x81
_END_OF_HEAD: Final = b"\r\n\r\n"


class ClientConnection(_LibraryConnection):
    """``websockets``' client connection, reading whole text frames itself (see the module docstring)."""

    _abort_handle: asyncio.TimerHandle | None = None
    #: Called once when the TCP connection is gone (the transport stops its keepalive).
    on_lost: Callable[[], None] | None = None
    #: Whole text messages not yet received, oldest first.
    inbox: collections.deque[str]
    #: Whether new messages still go to :attr:`inbox` (not after a hand-over or the end of TCP).
    taking = False
    _waiter: asyncio.Future[None] | None = None
    _paused = False
    _high: int | None = None
    _low = 0
    _mode = _HANDSHAKE
    #: The last bytes of the handshake seen so far (its end may straddle two reads).
    _head_tail = b""
    #: The start of a frame whose end has not arrived yet (at most one frame, within the size cap).
    _pending: bytearray | None = None
    _max_size: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.inbox = collections.deque()
        # Only where websockets hands each parsed frame to process_event (its asyncio connection
        # does); elsewhere every message goes through recv() as before.
        self.taking = callable(getattr(_LibraryConnection, "process_event", None))
        high = getattr(self.recv_messages, "high", 16)  # websockets' max_queue (None: no limit)
        self._high = high
        low = getattr(self.recv_messages, "low", None)
        self._low = low if low is not None else (high // 4 if high is not None else 0)

    @property
    def reads_frames(self) -> bool:
        """Whether this module splits the inbound frames now (else ``websockets``' parser does)."""
        return self._mode == _FRAMES

    # -- reading

    def data_received(self, data: bytes) -> None:
        mode = self._mode
        if mode == _FRAMES:
            self._read_frames(data)
        elif mode == _HANDSHAKE:
            self._read_handshake(data)
        else:
            super().data_received(data)
        deadline = self.close_deadline
        if deadline is not None and self._abort_handle is None:
            self._abort_handle = self.loop.call_at(deadline, self.transport.abort)

    def _read_handshake(self, data: bytes) -> None:
        """Give ``websockets`` the 101 answer up to its blank line; read frames from there on."""
        seen = self._head_tail + data
        end = seen.find(_END_OF_HEAD)
        if end < 0:
            self._head_tail = seen[-3:]
            super().data_received(data)
            return
        cut = end + len(_END_OF_HEAD) - len(self._head_tail)
        self._head_tail = b""
        super().data_received(data[:cut])
        self._mode = _FRAMES if self._may_read_frames() else _LIBRARY
        rest = data[cut:]
        if not rest:
            return
        if self._mode == _FRAMES:
            self._read_frames(rest)
        else:
            super().data_received(rest)

    def _may_read_frames(self) -> bool:
        """Whether the link is open and this module may split its frames (else ``websockets`` does)."""
        protocol = self.protocol
        if not self.taking or protocol.state is not OPEN or protocol.debug:
            return False
        max_size = getattr(protocol, "max_message_size", -1)  # -1: a websockets whose size settings we do not know
        if getattr(protocol, "max_fragment_size", None) is not None or (max_size is not None and max_size < 0):
            return False
        self._max_size = max_size
        return True

    def _read_frames(self, data: bytes) -> None:
        pending = self._pending
        if pending:
            pending += data
            buffer: bytes | bytearray = pending
        else:
            buffer = data
        size = len(buffer)
        position = 0
        inbox = self.inbox
        queued = len(inbox)
        limit = self._max_size
        while size - position >= 2:
            head = buffer[position]
            length = buffer[position + 1]
            start = position + 2
            if length > 125:
                if length & 0x80:  # masked: websockets fails the link (1002)
                    self._leave_to_library(buffer, position)
                    break
                if length == 126:
                    if size - position < 4:
                        break
                    length = buffer[start] << 8 | buffer[start + 1]
                    start += 2
                else:
                    if size - position < 10:
                        break
                    length = int.from_bytes(buffer[start : start + 8], "big")
                    start += 8
            if limit is not None and length > limit:  # websockets refuses it on its header (1009)
                self._leave_to_library(buffer, position)
                break
            end = start + length
            if end > size:
                break
            if head == _WHOLE_TEXT:
                try:
                    inbox.append(str(buffer[start:end], "utf-8"))
                except UnicodeDecodeError:
                    pass  # websockets' assembler fails the link (1007) when recv() decodes it
                else:
                    position = end
                    continue
            # Any other whole frame: websockets parses it from its first byte to its last.
            _LibraryConnection.data_received(self, bytes(buffer[position:end]))
            position = end
            if not self.taking or self.protocol.state is not OPEN:
                self._leave_to_library(buffer, position)
                break
        if self._mode == _FRAMES:
            if position < len(buffer):
                if pending:
                    del pending[:position]
                else:
                    self._pending = bytearray(memoryview(buffer)[position:])
            elif pending:
                pending.clear()
        if len(inbox) > queued:
            self._queued()

    def _leave_to_library(self, buffer: bytes | bytearray, position: int) -> None:
        """Hand ``buffer[position:]`` and every later byte to ``websockets``' parser, for good."""
        self._mode = _LIBRARY
        self._pending = None
        if position < len(buffer):
            _LibraryConnection.data_received(self, bytes(buffer[position:]))

    def eof_received(self) -> None:
        if self._mode == _FRAMES:  # a frame cut short by the end of TCP is websockets' to report
            self._leave_to_library(self._pending or b"", 0)
        super().eof_received()

    def process_event(self, event: Any) -> None:
        if self.taking and type(event) is Frame:  # the handshake response is not a Frame
            opcode = event.opcode
            if opcode is Opcode.TEXT and event.fin:
                try:
                    self.inbox.append(str(event.data, "utf-8"))
                except UnicodeDecodeError:
                    self._hand_over()  # websockets fails the link (1007) when recv() decodes it
                else:
                    self._queued()
                    return
            elif opcode in DATA_OPCODES:
                self._hand_over()
        super().process_event(event)

    def _hand_over(self) -> None:
        self.taking = False
        if self._paused:  # the assembler runs the flow control from now on
            self._paused = False
            self.transport.resume_reading()
        self._wake()

    def _queued(self) -> None:
        """New messages are in :attr:`inbox`: wake the reader; pause TCP while too many wait."""
        self._wake()
        high = self._high
        if high is not None and len(self.inbox) > high and not self._paused:
            self._paused = True
            self.transport.pause_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self) -> str:
        """The oldest message of :attr:`inbox` (which must not be empty)."""
        inbox = self.inbox
        text = inbox.popleft()
        if self._paused and len(inbox) <= self._low:
            self._paused = False
            self.transport.resume_reading()
        return text

    async def wait_for_message(self) -> None:
        """Return once :attr:`inbox` holds a message or :attr:`taking` has ended.

        Raises:
            ConcurrencyError: Another task is waiting already.
        """
        if self._waiter is not None:
            raise ConcurrencyError("wait_for_message() is already running")
        waiter = self._waiter = self.loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._mode = _LIBRARY
        self._pending = None
        if self._abort_handle is not None:
            self._abort_handle.cancel()
        super().connection_lost(exc)
        self.taking = False
        self._wake()
        if self.on_lost is not None:
            self.on_lost()
