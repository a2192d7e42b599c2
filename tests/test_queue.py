"""The outage queue (``acp_client._link._queue``): one admission and one ``max_age`` per call, even
when the call waits twice (an endpoint group's session, then its link)."""

from __future__ import annotations

import asyncio

import pytest

from acp_client import ConnectionLost, QueueFull, QueueOptions
from acp_client._link._queue import OutageQueue, Ticket
from acp_client.testing import FakeClock


async def test_a_call_waiting_in_two_queues_gets_one_max_age() -> None:
    clock = FakeClock()
    options = QueueOptions(max_size=5, max_age=30.0)
    group: OutageQueue[None] = OutageQueue(options, clock)
    link: OutageQueue[None] = OutageQueue(options, clock)
    ticket = Ticket()
    first = asyncio.ensure_future(group.wait("x", ticket=ticket))
    await clock.advance(20.0)
    group.release(None)
    await first
    second = asyncio.ensure_future(link.wait("x", ticket=ticket))  # the rest of its 30 s, not 30 more
    await clock.advance(10.0)
    await clock.settle()
    assert second.done()
    with pytest.raises(ConnectionLost):
        await second


async def test_a_call_admitted_once_is_not_refused_by_the_next_queue() -> None:
    clock = FakeClock()
    options = QueueOptions(max_size=1, max_age=30.0)
    group: OutageQueue[None] = OutageQueue(options, clock)
    link: OutageQueue[None] = OutageQueue(options, clock)
    other = asyncio.ensure_future(link.wait("y"))  # the link's queue is full
    await clock.settle()
    with pytest.raises(QueueFull):
        await link.wait("z")
    ticket = Ticket()
    first = asyncio.ensure_future(group.wait("x", ticket=ticket))
    await clock.settle()
    group.release(None)
    await first
    waiting = asyncio.ensure_future(link.wait("x", ticket=ticket))  # admitted already: waits
    await clock.settle()
    link.release(None)
    await waiting
    await other
