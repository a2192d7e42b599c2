"""Bounded decompression and capped body reads, without sockets."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator

import pytest

from acp_client.exceptions import MessageTooLarge, ProtocolError
from acp_client.transports._body import INFLATE_STEP, Inflater, read_body

PAYLOAD = b"".join(b"%08d," % n for n in range(100_000))  # 900 kB, compressible but not trivially


def deflate(data: bytes, wbits: int) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return z.compress(data) + z.flush()


ENCODED = {
    "gzip": ("gzip", gzip.compress(PAYLOAD)),
    "zlib": ("deflate", deflate(PAYLOAD, zlib.MAX_WBITS)),
    "raw": ("deflate", deflate(PAYLOAD, -zlib.MAX_WBITS)),
    "identity": ("", PAYLOAD),
}


async def stream(data: bytes, size: int = 4096) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.mark.parametrize("kind", list(ENCODED))
async def test_every_encoding_round_trips_in_any_chunking(kind: str) -> None:
    header, body = ENCODED[kind]
    for size in (1, 7, 4096, len(body)):
        if size == 1 and len(body) > 100_000:
            continue
        chunks = stream(body, size)
        got = await read_body(chunks, content_encoding=header, content_length="", cap=len(PAYLOAD), truncate=False)
        assert got == PAYLOAD


def test_pieces_are_lazy_and_bounded() -> None:
    inflater = Inflater("gzip")
    bomb = gzip.compress(b"\0" * (32 << 20))  # one chunk of ~32 kB inflating to 32 MiB
    pieces = inflater.pieces(bomb)
    first = next(pieces)  # nothing else has been inflated yet
    assert len(first) == INFLATE_STEP
    assert all(len(piece) <= INFLATE_STEP for piece in pieces)


def test_pieces_respect_the_budget() -> None:
    pieces = list(Inflater("gzip").pieces(gzip.compress(b"a" * 10_000), budget=100))
    assert len(pieces[0]) == 101  # one byte past the budget tells the caller it is exceeded


def test_output_held_inside_zlib_is_not_lost() -> None:
    # The input ends exactly when a step fills: the rest must still come out of this call.
    data = bytes(range(256)) * (INFLATE_STEP // 128)
    assert b"".join(Inflater("deflate").pieces(deflate(data, zlib.MAX_WBITS))) == data


async def test_caps() -> None:
    header, body = ENCODED["gzip"]
    with pytest.raises(MessageTooLarge) as too_big:
        await read_body(stream(body), content_encoding=header, content_length="", cap=1000, truncate=False)
    assert too_big.value.limit == 1000
    cut = await read_body(stream(body), content_encoding=header, content_length="", cap=1000, truncate=True)
    assert cut == PAYLOAD[:1000]
    with pytest.raises(MessageTooLarge):  # refused from the declared length, before reading
        await read_body(stream(b""), content_encoding="", content_length="5000", cap=1000, truncate=False)


async def test_unknown_or_corrupt_encodings() -> None:
    with pytest.raises(ProtocolError, match="unsupported"):
        Inflater("br")
    with pytest.raises(ProtocolError, match="unsupported"):
        Inflater("gzip, deflate")
    assert Inflater("identity").identity and Inflater("").identity
    with pytest.raises(ProtocolError, match="corrupt"):
        await read_body(stream(b"not gzip at all"), content_encoding="gzip", content_length="", cap=100, truncate=False)
