"""Splitting the stdout of a stdio agent into lines, with a cap. Pure (no I/O).

The stdio transport feeds :class:`LineSplitter` whatever the pipe delivers; whole lines come out.
A line longer than the cap is never held in memory: its bytes are dropped as they arrive and a
:class:`TooLong` marker takes its place, so the transport can report it and go on.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

__all__ = ["Line", "LineSplitter", "TooLong"]


@attrs.frozen
class TooLong:
    """Marks a stdout line that exceeded the cap (its bytes were dropped)."""

    seen: int  # bytes seen before giving up on the line (a lower bound of its length)


Line: TypeAlias = bytes | TooLong


class LineSplitter:
    """Splits a byte stream into lines, never holding more than ``limit`` bytes of one line.

    ``feed()`` returns the complete lines (without ``\\n``; a trailing ``\\r`` is kept, it is JSON
    whitespace) and a :class:`TooLong` marker for each line over the cap. The rest of an overlong
    line is skipped as it arrives, without buffering it. Blank lines are dropped.
    """

    __slots__ = ("_discarding", "_limit", "_partial")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()
        self._discarding = False

    @property
    def buffered(self) -> int:
        """Bytes of the current incomplete line held in memory."""
        return len(self._partial)

    def _too_long(self, line: bytes | bytearray) -> bool:
        size = len(line)
        if size and line[-1] == 0x0D:  # a CRLF line's CR does not count
            size -= 1
        return size > self._limit

    def feed(self, data: bytes) -> list[Line]:
        """Consume ``data``; return the lines it completed."""
        out: list[Line] = []
        parts = data.split(b"\n")
        tail = parts.pop()
        for part in parts:
            if self._discarding:  # this newline ends an overlong line
                self._discarding = False
                self._partial.clear()
                continue
            if self._partial:
                self._partial += part
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = part
            if not line or line.isspace():
                continue
            if self._too_long(line):
                out.append(TooLong(len(line)))
            else:
                out.append(line)
        if tail and not self._discarding:
            # +1: the line may still end in a CR that does not count against the cap.
            if len(self._partial) + len(tail) > self._limit + 1:
                out.append(TooLong(len(self._partial) + len(tail)))
                self._partial.clear()
                self._discarding = True
            else:
                self._partial += tail
        return out

    def finish(self) -> list[Line]:
        """End of stream: return the last line if it had no newline."""
        out: list[Line] = []
        if not self._discarding and self._partial and not self._partial.isspace():
            line = bytes(self._partial)
            out.append(TooLong(len(line)) if self._too_long(line) else line)
        self._partial.clear()
        self._discarding = False
        return out
