"""Reading HTTP bodies: bounded decompression and capped reads. No ``httpx`` type in here.

A few kilobytes of ``gzip`` can inflate to gigabytes, so :meth:`Inflater.pieces` hands out the
output lazily, at most :data:`INFLATE_STEP` bytes at a time and never more than the caller's
remaining budget plus one byte: memory stays bounded by the caller's cap, whatever the ratio.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import AsyncIterable, Iterator
from typing import Any, Final

from ..exceptions import MessageTooLarge, ProtocolError

#: The most decompressed output produced in one step.
INFLATE_STEP: Final = 64 * 1024


class Inflater:
    """Incremental decompression of one body (``identity``, ``gzip`` or ``deflate``, the last with
    or without its zlib wrapper: some servers send raw deflate); another encoding is a ``ProtocolError``."""

    __slots__ = ("_raw_fallback", "_z", "identity")

    def __init__(self, content_encoding: str) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",")]
        codings = [c for c in codings if c and c != "identity"]
        self._raw_fallback = False
        self._z: Any = None
        #: No decompression at all: :meth:`pieces` passes data through.
        self.identity = not codings
        if self.identity:
            return
        if codings in (["gzip"], ["x-gzip"]):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif codings == ["deflate"]:
            self._z = zlib.decompressobj(zlib.MAX_WBITS)
            self._raw_fallback = True
        else:
            raise ProtocolError(f"unsupported Content-Encoding {content_encoding!r}")

    def pieces(self, data: bytes, budget: int | None = None) -> Iterator[bytes]:
        """The decompressed output of ``data``, lazily, in pieces of at most :data:`INFLATE_STEP`
        and never longer than ``budget + 1`` (so exceeding the budget is noticed at once); corrupt
        data is a ``ProtocolError``."""
        if self.identity:
            if data:
                yield data
            return
        buf = data
        produced = 0
        try:
            while not self._z.eof:
                limit = INFLATE_STEP if budget is None else max(1, min(INFLATE_STEP, budget - produced + 1))
                try:
                    piece = self._z.decompress(buf, limit)
                except zlib.error:
                    if not self._raw_fallback:
                        raise
                    self._raw_fallback = False
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                self._raw_fallback = False
                buf = self._z.unconsumed_tail
                if piece:
                    produced += len(piece)
                    yield piece
                # A full piece may leave output inside zlib even when the input is used up.
                if not buf and len(piece) < limit:
                    return
        except zlib.error as exc:
            raise ProtocolError(f"corrupt compressed body: {exc}") from exc


async def read_body(
    chunks: AsyncIterable[bytes], *, content_encoding: str, content_length: str, cap: int, truncate: bool
) -> bytes:
    """Read a whole body, decompressing in bounded steps; never more than ``cap`` bytes decoded
    (``truncate``: cut it there instead of raising ``MessageTooLarge``, for the diagnostics of
    error answers). An unsupported or corrupt encoding is a ``ProtocolError``."""
    inflater = Inflater(content_encoding)
    if not truncate and inflater.identity and content_length.isdigit() and int(content_length) > cap:
        raise MessageTooLarge(f"an HTTP body of {content_length} bytes exceeds the {cap}-byte cap", limit=cap)
    # BytesIO hands its buffer over on getvalue() without a copy: a body near the cap is held once.
    out = io.BytesIO()
    total = 0
    async for raw in chunks:
        for piece in inflater.pieces(raw, cap - total):
            total += len(piece)
            if total > cap:
                if truncate:
                    out.write(piece[: len(piece) - (total - cap)])
                    return out.getvalue()
                raise MessageTooLarge(f"an HTTP body exceeds the {cap}-byte cap", limit=cap)
            out.write(piece)
    return out.getvalue()
