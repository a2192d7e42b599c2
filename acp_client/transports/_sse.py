"""An incremental Server-Sent Events parser (WHATWG HTML, "event stream interpretation"). Pure.

Bytes go in as they arrive, split anywhere; whole events come out. Beyond the specification's
rules (CR, LF or CRLF split across chunks, a leading BOM, ``id`` without NUL; ``retry`` is ignored:
the transport has its own reattach delays), comment lines are dropped as they arrive, never
buffered. A line over ``max_line_bytes`` or an event whose data exceeds ``max_event_bytes`` (an
incomplete line counts as it grows, so memory stays under twice the cap) yields one
:class:`~acp_client.exceptions.MessageTooLarge` in stream order, and the rest of that event is
skipped unstored: only that event is lost, and it is reported.

A chunk that completes events is first split at its blank lines (an event of one ``data:`` line
is taken whole); anything else goes line by line, with the same result.
:meth:`SseParser.finish` discards an unterminated event, as the specification says, and says so.
"""

from __future__ import annotations

from typing import Final, TypeAlias

import attrs

from ..exceptions import ConfigurationError, MessageTooLarge

#: Room for a field name, colon and space in an incomplete data line counted against the event cap.
_FIELD_SLACK: Final = 8
_BOM: Final = b"\xef\xbb\xbf"
_COLON: Final = 0x3A
_SPACE: Final = 0x20


@attrs.frozen(slots=True)
class SseEvent:
    """One dispatched event: its data as raw UTF-8 bytes (``data`` lines joined with ``\\n``), its
    type, and the last event id in effect when it was dispatched (``""``: none)."""

    data: bytes
    event: str = "message"
    id: str = ""

    @property
    def text(self) -> str:
        """``data`` decoded as UTF-8 (invalid sequences replaced, as the specification says)."""
        return self.data.decode("utf-8", "replace")


#: What :meth:`SseParser.feed` yields: an event, or the report of an oversized one; with
#: ``message_data``, the data of a ``message`` event instead of the event.
SseItem: TypeAlias = SseEvent | bytes | MessageTooLarge


class SseParser:
    """Incremental SSE parser: :meth:`feed` bytes, get events; :meth:`finish` at the end.

    ``max_line_bytes`` excludes the terminator. ``message_data``: yield each ``message`` event as
    its data (``bytes``); other types still come as :class:`SseEvent`. ``last_event_id`` follows
    the stream.
    """

    __slots__ = (
        "_bom_pending",
        "_data",
        "_data_size",
        "_event_type",
        "_max_event",
        "_max_line",
        "_message_data",
        "_partial",
        "_skip_event",
        "_skip_lf",
        "_skip_line",
        "last_event_id",
    )

    def __init__(self, *, max_line_bytes: int, max_event_bytes: int, message_data: bool = False) -> None:
        if max_line_bytes < 1 or max_event_bytes < 1:
            raise ConfigurationError("SSE size caps must be positive")
        self._message_data = message_data
        self._max_line = max_line_bytes
        self._max_event = max_event_bytes
        self._bom_pending: bytes | None = b""  # None once the start of the stream has been checked
        self._partial = bytearray()  # the start of a line whose terminator has not arrived yet
        self._skip_lf = False  # the previous chunk ended with CR: a leading LF belongs to it
        self._skip_line = False  # dropping the rest of an oversized line (not buffered)
        self._skip_event = False  # dropping the rest of an oversized event, up to a blank line
        self._data: list[bytes | bytearray] = []
        self._data_size = 0
        self._event_type: bytes = b""
        self.last_event_id = ""

    def feed(self, chunk: bytes) -> list[SseItem]:
        """Parse the next piece of the stream (split anywhere); returns the events it completed, in
        order, with a :class:`~acp_client.exceptions.MessageTooLarge` in place of each oversized one."""
        out: list[SseItem] = []
        if not chunk:
            return out
        if self._bom_pending is not None:
            head = self._bom_pending + chunk
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._bom_pending = head  # could still be a BOM: wait for more
                return out
            self._bom_pending = None
            chunk = head[len(_BOM) :] if head.startswith(_BOM) else head
            if not chunk:
                return out
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                if not chunk:
                    return out
        # find(), not ``in``: ``bytes in bytes`` builds and clears a TypeError first (much slower).
        if chunk.find(b"\r") >= 0 and chunk[-1] != 0x0D:
            lf_only = chunk.replace(b"\r\n", b"\n")
            if lf_only.find(b"\r") < 0:  # CRLF terminators only: the same lines, ended with LF
                chunk = lf_only
        if chunk.find(b"\r") < 0 and chunk.find(b"\n\n") >= 0:
            chunk = self._feed_events(chunk, out)
            if not chunk:
                return out
        self._feed_lines(chunk, out)
        return out

    def _feed_events(self, chunk: bytes, out: list[SseItem]) -> bytes:
        """The fast path (LF terminators only, at least one whole event); returns what follows the
        last blank line, for :meth:`_feed_lines`."""
        blocks = chunk.split(b"\n\n")
        rest = blocks.pop()
        if self._partial or self._skip_line or self._data or self._event_type or self._skip_event:
            # An event (or line) began in an earlier chunk: finish it the slow way.
            self._feed_lines(blocks[0] + b"\n\n", out)
            del blocks[0]
        max_line = self._max_line
        simple = min(max_line, self._max_event + 6)  # a whole event of one data line within both caps
        as_data = self._message_data
        for block in blocks:
            # Each block is a whole event: its lines, without the terminator of the last one.
            if block.startswith(b"data: ") and len(block) <= simple and block.find(b"\n") < 0:
                out.append(block[6:] if as_data else SseEvent(block[6:], "message", self.last_event_id))
                continue
            for line in block.split(b"\n"):
                self._checked_line(line, out)
            self._line(b"", out)
        return rest

    def _feed_lines(self, chunk: bytes, out: list[SseItem]) -> None:
        """The general path: line by line, any terminators, a line or event begun earlier."""
        lines = chunk.splitlines(keepends=True)
        tail = lines[-1]
        last = tail[-1]
        if last == 0x0A:
            tail = b""
        elif last == 0x0D:
            tail = b""
            self._skip_lf = True  # a CRLF may be split across chunks
        else:
            lines.pop()  # no terminator yet: kept in ``_partial`` below
        for raw in lines:
            line = raw.rstrip(b"\r\n")  # only the terminator: a line never contains CR or LF
            if self._skip_line:
                # The rest of an oversized line (or of a comment): drop it.
                self._skip_line = False
                continue
            if self._partial:
                # Hand the buffer over instead of copying it: the line is parsed in place.
                whole, self._partial = self._partial, bytearray()
                whole += line
                self._checked_line(whole, out)
            else:
                self._checked_line(line, out)
        if tail:
            if self._skip_line:
                return
            if not self._partial and (self._skip_event or tail[0] == _COLON):
                # A comment, or a line of an event being skipped: never buffered.
                self._skip_line = True
                return
            self._partial += tail
            size = len(self._partial)
            if size > self._max_line or self._data_size + size > self._max_event + _FIELD_SLACK:
                # The incomplete line alone is too long, or would take the event past its cap.
                self._partial = bytearray()
                self._skip_line = True
                if size > self._max_line:
                    self._line_too_long(out, f"more than {size}")
                else:
                    self._oversized(out, f"SSE event data exceeds the {self._max_event}-byte cap", self._max_event)

    def finish(self) -> bool:
        """Declare the end of the stream and reset the parser; ``True`` when an unterminated event
        was discarded, so the caller can report it."""
        truncated = bool(self._data) or bool(self._partial)
        self._partial = bytearray()
        self._reset_event()
        self._skip_line = self._skip_event = self._skip_lf = False
        self._bom_pending = b""
        return truncated

    def _checked_line(self, line: bytes | bytearray, out: list[SseItem]) -> None:
        if len(line) > self._max_line:
            self._line_too_long(out, str(len(line)))
        else:
            self._line(line, out)

    def _line_too_long(self, out: list[SseItem], size: str) -> None:
        self._oversized(out, f"SSE line of {size} bytes exceeds the {self._max_line}-byte cap", self._max_line)

    def _oversized(self, out: list[SseItem], message: str, limit: int) -> None:
        if not self._skip_event:
            out.append(MessageTooLarge(message + "; the event was skipped", limit=limit))
        self._skip_event = True
        self._reset_event()

    def _reset_event(self) -> None:
        self._data = []
        self._data_size = 0
        self._event_type = b""

    def _line(self, line: bytes | bytearray, out: list[SseItem]) -> None:
        if not line:
            if self._skip_event:
                self._skip_event = False
                self._reset_event()
                return
            if self._data:
                parts = self._data
                data = b"\n".join(parts) if len(parts) > 1 else bytes(parts[0])
                event = self._event_type.decode("utf-8", "replace") if self._event_type else "message"
                out.append(
                    data if self._message_data and event == "message" else SseEvent(data, event, self.last_event_id)
                )
            self._reset_event()
            return
        if self._skip_event or line[0] == _COLON:
            return
        colon = line.find(b":")
        value: bytes | bytearray
        if colon < 0:
            field, value = line, b""  # the whole line names the field
        else:
            field = line[:colon]
            start = colon + 2 if len(line) > colon + 1 and line[colon + 1] == _SPACE else colon + 1
            if type(line) is bytearray:
                del line[:start]  # in place (no copy): what is left is the value
                value = line
            else:
                value = line[start:]
        if field == b"data":
            size = self._data_size + len(value) + (1 if self._data else 0)
            if size > self._max_event:
                self._oversized(out, f"SSE event data exceeds the {self._max_event}-byte cap", self._max_event)
                return
            self._data.append(value)
            self._data_size = size
        elif field == b"event":
            self._event_type = bytes(value)
        elif field == b"id" and b"\x00" not in value:
            self.last_event_id = value.decode("utf-8", "replace")
        # Any other field is ignored (``retry`` too: see the module docstring).
