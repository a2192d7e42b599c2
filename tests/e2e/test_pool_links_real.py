"""A client facing several real instances sends its own headers, TLS and cookies on every
connection it makes to them: its links, the fan-out's probe links and a one-off ``session/close``.

Two reference agents on loopback (WebSocket and Streamable HTTP), one shared store. Before the fix
a probe link to an instance the client had no link to was a bare connector for the URL: an agent
behind authentication answered it 401, so the fan-out found the instance unreachable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from acp_client import AcpClient
from acp_client.pool import Pool, Probe
from acp_client.testing import ReferenceAgent, ReferenceServer, SessionStore, inside

BOTH = pytest.mark.parametrize("transport", ["ws", "http"])

KEY = ("x-api-key", "k-123")


@pytest_asyncio.fixture
async def servers() -> AsyncIterator[list[ReferenceServer]]:
    store = SessionStore()
    started = [ReferenceServer(ReferenceAgent(name=f"agent-{n}", store=store)) for n in "ab"]
    for server in started:
        await server.start()
    try:
        yield started
    finally:
        for server in started:
            await server.aclose()


def urls(servers: list[ReferenceServer], transport: str) -> list[str]:
    return [server.ws_url if transport == "ws" else server.http_url for server in servers]


def without_key(server: ReferenceServer) -> list[str]:
    """The requests that reached the endpoint path without the client's header."""
    return [
        f"{record.method} {record.path}"
        for record in server.requests
        if record.path.startswith(server.path) and KEY not in record.headers
    ]


@BOTH
async def test_fan_out_probes_carry_the_clients_headers(servers: list[ReferenceServer], transport: str) -> None:
    options = {} if transport == "ws" else {"http2": False}
    async with AcpClient(Pool(urls(servers, transport)), headers=dict([KEY]), transport_options=options) as client:
        handle = await client.new_session("/tmp")  # on a; the client has no link to b yet
        location = await client.locate(handle.session_id)
        assert [answer.probe for answer in location.answers] == [Probe.ACTIVE, Probe.INACTIVE]
        assert [answer.endpoint for answer in location.answers] == list(client.endpoints)
    assert servers[1].requests, "b was never asked"
    assert without_key(servers[0]) == [] and without_key(servers[1]) == []


@BOTH
async def test_a_one_off_close_carries_the_clients_headers(servers: list[ReferenceServer], transport: str) -> None:
    options = {} if transport == "ws" else {"http2": False}
    async with AcpClient(Pool(urls(servers, transport)), headers=dict([KEY]), transport_options=options) as client:
        handle = await client.new_session("/tmp")
        session_id = handle.session_id
        pool = inside(client).links
        assert pool is not None
        b = pool.links[1]
        assert not b.connected  # the close goes over a connection of its own
        side = AcpClient(urls(servers, transport)[1], headers=dict([KEY]), transport_options=options)
        async with side:
            await side.load_session(session_id, "/tmp")  # another client opens it on b
            assert servers[1].agent.sessions[session_id].in_memory
            assert await pool.close_copy(b, session_id)
            assert not servers[1].agent.sessions[session_id].in_memory
    assert without_key(servers[1]) == []


async def test_a_close_where_the_agent_does_not_know_the_session_counts_as_closed(
    servers: list[ReferenceServer],
) -> None:
    async with AcpClient(Pool(urls(servers, "ws"))) as client:
        await client.new_session("/tmp")
        pool = inside(client).links
        assert pool is not None
        assert await pool.close_copy(pool.links[1], "sess_nowhere")
