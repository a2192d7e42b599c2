"""Asking instances about sessions (``acp_client._recovery._probing``): ``locate()`` answers by its timeout
whatever an instance does — one that never answers and never lets its link close included — and
the link is closed after, in the background."""

from __future__ import annotations

import asyncio

from acp_client import RequestTimeout
from acp_client._recovery import _probing
from acp_client.location import Endpoint
from acp_client.pool import locate
from acp_client.state import Probe
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent
from acp_client.transports.base import Transport


class Clinging(MemoryConnector):
    """A hostile instance's links: closing one waits until :attr:`release` is set."""

    def __init__(self, agent: ReferenceAgent) -> None:
        super().__init__(agent, name="clinging")
        self.release = asyncio.Event()
        self.closes = 0

    async def connect(self) -> Transport:
        transport = await super().connect()
        close = transport.aclose

        async def clinging() -> None:
            self.closes += 1
            await self.release.wait()
            await close()

        transport.aclose = clinging  # type: ignore[method-assign]
        return transport


async def test_locate_answers_by_its_timeout_and_closes_the_link_after() -> None:
    clock = FakeClock()
    agent = ReferenceAgent(clock=clock, faults=["hang-status"])  # never answers session/status
    hostile = Clinging(agent)
    honest = ReferenceAgent(clock=clock)
    endpoints = [
        Endpoint("memory://hostile", connector=hostile),
        Endpoint("memory://honest", connector=MemoryConnector(honest)),
    ]
    started = clock.monotonic()
    location = await clock.run(locate("sess_1", endpoints, timeout=1.5, clock=clock), limit=1.6)
    assert clock.monotonic() - started <= 1.5 + 1e-9
    assert [answer.probe for answer in location.answers] == [Probe.UNREACHABLE, Probe.UNKNOWN]
    assert isinstance(location.answers[0].error, RequestTimeout)
    await clock.settle()
    assert hostile.closes == 1 and len(_probing._closing) == 1  # still closing, in the background
    hostile.release.set()
    await clock.run(asyncio.gather(*_probing._closing))
    assert not _probing._closing and hostile.live_links == 0
