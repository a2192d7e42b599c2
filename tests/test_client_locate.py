"""``AcpClient.locate()``: every instance's answer, over the client's live links (issue 11 item 2)."""

from __future__ import annotations

from acp_client import AcpClient
from acp_client.pool import Endpoint, Pool, Probe
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent, SessionStore
from tests._harness import FAST_RETRY


async def test_locate_reuses_live_links_and_warms_the_others() -> None:
    clock = FakeClock()
    store = SessionStore()
    agents = [ReferenceAgent(name=f"agent-{n}", store=store, clock=clock) for n in "abc"]
    connectors = [MemoryConnector(agent, name=n) for agent, n in zip(agents, "abc", strict=True)]
    endpoints = [Endpoint(f"memory://{n}", n, connector=c) for n, c in zip("abc", connectors, strict=True)]
    try:
        async with AcpClient(Pool(endpoints), retry=FAST_RETRY, clock=clock) as client:
            handle = await client.new_session("/tmp")
            assert [c.connects for c in connectors] == [1, 0, 0]
            first = await client.locate(handle.session_id)
            assert [a.probe for a in first.answers] == [Probe.ACTIVE, Probe.INACTIVE, Probe.INACTIVE]
            assert [c.connects for c in connectors] == [1, 2, 2]  # a probe link each, and a kept link each
            assert [c.live_links for c in connectors] == [1, 1, 1]
            again = await client.locate(handle.session_id)
            assert [a.probe for a in again.answers] == [a.probe for a in first.answers]
            assert [c.connects for c in connectors] == [1, 2, 2]  # no new link: all asked over live ones
            connectors[2].refuse()
            connectors[2].drop()
            third = await client.locate(handle.session_id)
            assert third.answers[2].probe is Probe.UNREACHABLE
            assert not agents[1].sessions[handle.session_id].in_memory  # nothing was loaded
    finally:
        for connector in connectors:
            await connector.aclose()


async def test_locate_on_a_single_endpoint_client() -> None:
    agent = ReferenceAgent()
    connector = MemoryConnector(agent, name="one")
    async with AcpClient(connector, retry=None) as client:
        handle = await client.new_session("/tmp")
        location = await client.locate(handle.session_id)
        unknown = await client.locate("sess_nowhere")
        assert connector.connects == 1  # asked over the client's own link
    assert [a.probe for a in location.answers] == [Probe.ACTIVE]
    assert location.answers[0].endpoint.name == "memory://one"
    assert [a.probe for a in unknown.answers] == [Probe.UNKNOWN]
    assert client.endpoints == ()
    await connector.aclose()


async def test_locate_timeout_left_out_is_the_probe_timeout_and_none_is_no_limit() -> None:
    import asyncio

    from acp_client import Timeouts

    clock = FakeClock()
    agent = ReferenceAgent(clock=clock)
    connector = MemoryConnector(agent, name="one")
    try:
        async with AcpClient(connector, retry=FAST_RETRY, clock=clock, timeouts=Timeouts(probe=3.0)) as client:
            handle = await client.new_session("/tmp")
            agent.stall()  # session/status is read and never answered
            started = clock.monotonic()
            located = await clock.run(client.locate(handle.session_id))
            assert located.answers[0].probe is Probe.UNREACHABLE
            assert clock.monotonic() - started == 3.0  # Timeouts.probe
            waiting = asyncio.ensure_future(client.locate(handle.session_id, timeout=None))
            await clock.advance(10_000.0)
            assert not waiting.done()  # None: no limit
            agent.stall(False)
            waiting.cancel()
    finally:
        await connector.aclose()
