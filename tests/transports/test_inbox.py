"""The HTTP transport's inbound queue and SSE reader, driven with chunks in memory (no sockets)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from acp_client.exceptions import MalformedFrame, MessageTooLarge, TransportClosed
from acp_client.transports._inbox import EventReader, Inbox
from acp_client.transports.base import Limits


def event(index: int) -> bytes:
    note = {"jsonrpc": "2.0", "method": "session/update", "params": {"n": index}}
    return b"data: " + json.dumps(note).encode() + b"\n\n"


async def chunks(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def reader(inbox: Inbox, *, limits: Limits | None = None) -> EventReader:
    return EventReader(
        inbox, limits=limits or Limits(), content_encoding="", target="test", inspect=lambda m, s: None, source=None
    )


async def receive_all(inbox: Inbox, count: int) -> list[object]:
    out: list[object] = []
    while len(out) < count:
        try:
            out.append(await inbox.get())
        except (MalformedFrame, MessageTooLarge) as exc:
            out.append(type(exc).__name__)
    return out


async def test_a_receiver_asleep_on_an_empty_inbox_gets_a_chunk_bigger_than_the_inbox() -> None:
    inbox = Inbox(4)
    receiving = asyncio.ensure_future(receive_all(inbox, 10))
    await asyncio.sleep(0)  # asleep, waiting for the first message
    reading = asyncio.ensure_future(reader(inbox).read(chunks(b"".join(event(i) for i in range(10))), lambda: False))
    got = await asyncio.wait_for(receiving, 5)
    assert [message["params"]["n"] for message in got] == list(range(10))  # type: ignore[index]
    assert await asyncio.wait_for(reading, 5) is True


async def test_errors_wait_their_turn_behind_queued_messages() -> None:
    inbox = Inbox(2)
    receiving = asyncio.ensure_future(receive_all(inbox, 6))
    await asyncio.sleep(0)
    big = b"data: " + b"x" * 200 + b"\n\n"
    stream = event(0) + event(1) + b"data: {not json\n\n" + event(2) + big + event(3)
    limits = Limits(max_message_bytes=100)
    reading = asyncio.ensure_future(reader(inbox, limits=limits).read(chunks(stream), lambda: False))
    got = await asyncio.wait_for(receiving, 5)
    assert [m if isinstance(m, str) else m["params"]["n"] for m in got] == [  # type: ignore[index]
        0,
        1,
        "MalformedFrame",
        2,
        "MessageTooLarge",
        3,
    ]
    await asyncio.wait_for(reading, 5)


@pytest.mark.parametrize("split", [1, 7, 64])
async def test_any_chunking_delivers_every_message_in_order(split: int) -> None:
    inbox = Inbox(3)
    data = b"".join(event(i) for i in range(20))
    pieces = [data[i : i + split] for i in range(0, len(data), split)]
    receiving = asyncio.ensure_future(receive_all(inbox, 20))
    await asyncio.sleep(0)
    await asyncio.wait_for(reader(inbox).read(chunks(*pieces), lambda: False), 5)
    got = await asyncio.wait_for(receiving, 5)
    assert [message["params"]["n"] for message in got] == list(range(20))  # type: ignore[index]


async def test_get_ready_hands_over_what_is_queued_and_never_waits() -> None:
    inbox = Inbox(4)
    assert inbox.get_ready() is None
    inbox.deliver({"n": 1})
    inbox.deliver(MalformedFrame("not JSON"))
    inbox.deliver({"n": 2})
    assert inbox.get_ready() == {"n": 1}
    with pytest.raises(MalformedFrame):
        inbox.get_ready()
    inbox.close("gone")
    assert inbox.get_ready() == {"n": 2}  # queued before the end: still handed over
    assert inbox.get_ready() is None  # the end is get()'s to raise
    with pytest.raises(TransportClosed, match="gone"):
        await inbox.get()


async def test_get_ready_makes_room_for_a_waiting_reader() -> None:
    inbox = Inbox(1)
    inbox.deliver({"n": 0})
    pushing = asyncio.ensure_future(inbox.push({"n": 1}))
    await asyncio.sleep(0)
    assert not pushing.done()  # full: the reader waits
    assert inbox.get_ready() == {"n": 0}
    await asyncio.wait_for(pushing, 5)
    assert inbox.get_ready() == {"n": 1}
