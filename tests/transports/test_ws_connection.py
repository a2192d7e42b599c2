"""The WebSocket connection's own frame reader (``transports/_ws_connection.py``), byte by byte.

Each test opens a real ``websockets`` client connection on one end of a socket pair (its writes —
the request, pongs, close frames — go to the other end, where the test reads them) and then feeds
the server's bytes to ``data_received`` in pieces it chooses, so every split of a header, of an
extended length, of a payload and of the handshake's blank line is exercised deterministically.
What the reader must keep: every message in order, exactly once, whatever the splits; every rule of
``websockets``' own parser for the frames it does not take (pongs, the closing handshake, 1002 for
a masked frame or reserved bits, 1009 on the header of a frame over the cap, 1007 for invalid
UTF-8, the assembler for binary frames and fragments); at most one frame buffered.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import socket
import struct
import zlib
from collections.abc import AsyncIterator, Sequence

import attrs
import pytest
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.protocol import CLOSING, OPEN
from websockets.uri import parse_uri

from acp_client.transports._ws_connection import ClientConnection

from ._ws_servers import server_frame, switching_protocols

URL = "ws://agent.test/acp"


@attrs.define
class Link:
    """A client connection and the socket its writes go to."""

    connection: ClientConnection
    peer: socket.socket
    answer: bytes  # the 101 answer to its request
    handshake: asyncio.Task[None]  # done once the answer is fed

    def feed(self, pieces: Sequence[bytes]) -> None:
        for piece in pieces:
            self.connection.data_received(piece)

    def client_frames(self) -> list[tuple[int, bytes]]:
        """The frames the client wrote so far: ``(opcode, unmasked payload)``."""
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := self.peer.recv(65536):
                data += chunk
        frames = []
        while data:
            first, second = data[0], data[1]
            length, start = second & 0x7F, 2
            if length == 126:
                (length,), start = struct.unpack("!H", data[2:4]), 4
            mask, start = data[start : start + 4], start + 4
            payload = bytes(byte ^ mask[i % 4] for i, byte in enumerate(data[start : start + length]))
            frames.append((first & 0x0F, payload))
            data = data[start + length :]
        return frames

    def messages(self) -> list[str]:
        return list(self.connection.inbox)


@pytest.fixture
async def links() -> AsyncIterator[list[Link]]:
    made: list[Link] = []
    yield made
    for link in made:
        link.connection.transport.abort()
        link.peer.close()


async def open_link(
    links: list[Link], *, max_size: int | None = 1 << 20, deflate: bool = False, logger: logging.Logger | None = None
) -> Link:
    """A client connection that has sent its request; the test feeds the answer."""
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    extensions = [ClientPerMessageDeflateFactory()] if deflate else None
    protocol = ClientProtocol(parse_uri(URL), max_size=max_size, extensions=extensions, logger=logger)
    loop = asyncio.get_running_loop()
    _, connection = await loop.create_connection(
        lambda: ClientConnection(protocol, ping_interval=None, close_timeout=1), sock=ours
    )
    handshake = asyncio.create_task(connection.handshake())
    request = b""
    while b"\r\n\r\n" not in request:
        request += await loop.sock_recv(theirs, 65536)
    extra = [("Sec-WebSocket-Extensions", "permessage-deflate")] if deflate else []
    link = Link(connection, theirs, switching_protocols(request, extra), handshake)
    links.append(link)
    return link


async def opened(link: Link) -> None:
    """Wait for the handshake (its answer fed already)."""
    await asyncio.wait_for(link.handshake, 5)


def text(size: int, tag: int = 0) -> bytes:
    body = f'{{"n":{tag},"pad":"'.encode()
    return body + b"x" * max(0, size - len(body) - 2) + b'"}'


def split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    points = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


#: Lengths around every header form: 7-bit, 16-bit (126..65535), 64-bit (65536 and more).
SMALL = [text(20, 0), text(125, 1), text(126, 2), text(300, 3)]
LARGE = [text(70_000, 4), text(65_535, 5), text(65_536, 6)]


def frames_of(messages: Sequence[bytes], ping_after: int | None = None) -> bytes:
    out = b""
    for index, message in enumerate(messages):
        out += server_frame(1, message)
        if index == ping_after:
            out += server_frame(9, b"are you there")
    return out


async def test_every_split_of_the_answer_and_its_frames_gives_the_same_messages(links: list[Link]) -> None:
    expected = [m.decode() for m in SMALL]
    first = await open_link(links)
    stream = first.answer + frames_of(SMALL, ping_after=1)
    cases: list[list[int]] = [[cut] for cut in range(1, len(stream))]
    cases.append(list(range(1, len(stream))))  # one byte at a time
    for index, cuts in enumerate(cases):
        link = first if index == 0 else await open_link(links)
        stream = link.answer + frames_of(SMALL, ping_after=1)
        link.feed(split(stream, cuts))
        await opened(link)
        assert link.messages() == expected, cuts
        assert link.connection.protocol.state is OPEN
        assert link.connection.reads_frames
        assert link.client_frames() == [(10, b"are you there")], cuts  # the ping answered, once
        assert not link.connection._pending
        link.connection.transport.abort()


@pytest.mark.parametrize("seed", range(8))
async def test_large_frames_in_random_pieces(links: list[Link], seed: int) -> None:
    rng = random.Random(seed)
    messages = [*SMALL, *LARGE, *SMALL]
    link = await open_link(links)
    stream = link.answer + frames_of(messages, ping_after=4)
    cuts = [rng.randrange(1, len(stream)) for _ in range(rng.choice([3, 30, 300]))]
    # and a cut inside every header and extended length
    offset = len(link.answer)
    for message in messages:
        header = 2 if len(message) < 126 else 4 if len(message) < 65536 else 10
        cuts.append(offset + rng.randrange(1, header + 1))
        offset += header + len(message)
        if message is messages[4]:
            offset += 2 + len(b"are you there")
    link.feed(split(stream, cuts))
    await opened(link)
    assert link.messages() == [m.decode() for m in messages]
    assert link.connection.protocol.state is OPEN
    assert link.connection.reads_frames
    assert link.client_frames() == [(10, b"are you there")]


async def test_at_most_one_frame_is_buffered(links: list[Link]) -> None:
    link = await open_link(links, max_size=200_000)
    link.feed([link.answer])
    await opened(link)
    frame = server_frame(1, text(200_000))
    for start in range(0, len(frame), 4096):
        link.feed([frame[start : start + 4096]])
        assert len(link.connection._pending or b"") <= len(frame)
    assert link.messages() == [text(200_000).decode()]
    assert not link.connection._pending


async def test_a_frame_over_the_cap_is_refused_on_its_header(links: list[Link]) -> None:
    for header in (struct.pack("!BBQ", 0x81, 127, 1 << 62), struct.pack("!BBH", 0x81, 126, 1001)):
        link = await open_link(links, max_size=1000)
        link.feed([link.answer + server_frame(1, text(50)) + header])  # no payload follows
        await opened(link)
        assert link.messages() == [text(50).decode()]
        assert link.connection.protocol.close_sent is not None
        assert link.connection.protocol.close_sent.code == 1009
        assert link.connection._pending is None  # nothing of it was kept
        assert link.client_frames()[0][0] == 8  # the client's close frame went out


@pytest.mark.parametrize(
    "bad",
    [
        bytes([0x81, 0x80 | 3]) + b"mask" + b"abc",  # a masked frame from the server
        bytes([0xC1, 3]) + b'"x"',  # RSV1 without an extension
        bytes([0xA1, 3]) + b'"x"',  # RSV2
        bytes([0x83, 3]) + b'"x"',  # a reserved opcode
        bytes([0x89, 126]) + struct.pack("!H", 200) + b"p" * 200,  # a control frame over 125 bytes
    ],
    ids=["masked", "rsv1", "rsv2", "opcode", "long-ping"],
)
@pytest.mark.parametrize("cap", [1 << 20, None], ids=["capped", "uncapped"])
async def test_a_frame_breaking_the_protocol_fails_the_link_with_1002(
    links: list[Link], bad: bytes, cap: int | None
) -> None:
    link = await open_link(links, max_size=cap)
    link.feed([link.answer + server_frame(1, text(30, 1)) + bad + server_frame(1, text(30, 2))])
    await opened(link)
    assert link.messages() == [text(30, 1).decode()]  # nothing after the bad frame
    assert link.connection.protocol.close_sent is not None
    assert link.connection.protocol.close_sent.code == 1002


async def test_frames_after_a_close_frame_are_discarded(links: list[Link]) -> None:
    link = await open_link(links)
    close = server_frame(8, struct.pack("!H", 1000) + b"bye")
    link.feed([link.answer + server_frame(1, text(30, 1)) + close + server_frame(1, text(30, 2))])
    await opened(link)
    assert link.messages() == [text(30, 1).decode()]
    assert link.connection.protocol.state is CLOSING
    assert link.client_frames() == [(8, struct.pack("!H", 1000) + b"bye")]  # the close answered


async def test_invalid_utf8_goes_to_the_assembler_which_fails_the_link_with_1007(links: list[Link]) -> None:
    link = await open_link(links)
    link.feed([link.answer + server_frame(1, text(30, 1)) + server_frame(1, b'"\xff"') + server_frame(1, text(30, 2))])
    await opened(link)
    assert link.messages() == [text(30, 1).decode()]
    assert link.connection.taking is False
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(link.connection.recv(), 5)
    assert link.connection.protocol.close_sent is not None
    assert link.connection.protocol.close_sent.code == 1007


async def test_binary_frames_and_fragments_go_to_the_assembler_in_order(links: list[Link]) -> None:
    link = await open_link(links)
    whole = text(40, 3)
    stream = (
        link.answer
        + server_frame(1, text(30, 1))
        + server_frame(2, b"\x00binary")
        + server_frame(1, whole[:10], fin=False)
        + server_frame(0, whole[10:])
        + server_frame(1, text(30, 4))
    )
    link.feed(split(stream, range(len(link.answer) + 1, len(stream), 7)))
    await opened(link)
    assert link.messages() == [text(30, 1).decode()]
    assert await link.connection.recv() == b"\x00binary"
    assert await link.connection.recv() == whole.decode()
    assert await link.connection.recv() == text(30, 4).decode()


async def test_compressed_frames_are_decoded_by_websockets_between_plain_ones(links: list[Link]) -> None:
    link = await open_link(links, deflate=True)
    squeeze = zlib.compressobj(wbits=-15)
    compressed = squeeze.compress(text(500, 2)) + squeeze.flush(zlib.Z_SYNC_FLUSH)
    assert compressed.endswith(b"\x00\x00\xff\xff")
    packed = bytes([0xC1, len(compressed[:-4])]) + compressed[:-4]  # RSV1: one compressed message
    stream = link.answer + server_frame(1, text(30, 1)) + packed + server_frame(1, text(30, 3))
    link.feed(split(stream, range(len(link.answer) + 1, len(stream), 5)))
    await opened(link)
    assert link.messages() == [text(30, 1).decode(), text(500, 2).decode(), text(30, 3).decode()]
    assert link.connection.taking
    assert link.connection.reads_frames


async def test_a_frame_cut_short_by_the_end_of_tcp_is_reported(links: list[Link]) -> None:
    link = await open_link(links)
    frame = server_frame(1, text(300, 2))
    link.feed([link.answer + server_frame(1, text(30, 1)) + frame[:100]])
    await opened(link)
    link.connection.eof_received()
    assert link.messages() == [text(30, 1).decode()]
    assert isinstance(link.connection.protocol.parser_exc, EOFError)


async def test_a_debug_logger_leaves_every_frame_to_websockets_which_logs_it(
    links: list[Link], caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("tests.ws_debug")
    caplog.set_level(logging.DEBUG, logger="tests.ws_debug")
    link = await open_link(links, logger=logger)
    link.feed([link.answer + server_frame(1, text(30, 1)) + server_frame(1, text(30, 2))])
    await opened(link)
    assert link.messages() == [text(30, 1).decode(), text(30, 2).decode()]
    assert sum("< TEXT" in record.getMessage() for record in caplog.records) == 2
    assert not link.connection.reads_frames


async def test_a_burst_pauses_reading_until_the_messages_are_taken(links: list[Link]) -> None:
    link = await open_link(links)
    link.feed([link.answer + b"".join(server_frame(1, text(30, i)) for i in range(300))])
    await opened(link)
    transport = link.connection.transport
    assert not transport.is_reading()
    taken = [link.connection.take() for _ in range(300)]
    assert taken == [text(30, i).decode() for i in range(300)]
    assert transport.is_reading()


async def test_an_answer_that_is_not_101_is_left_to_websockets(links: list[Link]) -> None:
    link = await open_link(links)
    refusal = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno" + server_frame(1, text(30))
    link.feed(split(refusal, [5, 40]))
    with pytest.raises(Exception, match="403"):
        await asyncio.wait_for(link.handshake, 5)
    assert link.messages() == []
