"""Telemetry through the other doors: a client with several endpoints, and the sync facade."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest_asyncio
from opentelemetry.trace import SpanKind

from acp_client import AcpClient, Callbacks, RecoveryOutcome, State
from acp_client.pool import Pool
from acp_client.sync import SyncAcpClient
from acp_client.testing import ReferenceAgent, ReferenceServer, SessionStore
from tests._support import FAST_RETRY, eventually
from tests.telemetry._otel import Otel, total


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


async def test_a_pool_client_traces_its_requests_and_recoveries(otel: Otel, servers: list[ReferenceServer]) -> None:
    outcomes: list[RecoveryOutcome] = []
    callbacks = Callbacks(on_resume=outcomes.append, on_replay=outcomes.append, on_new_session=outcomes.append)
    urls = [server.ws_url for server in servers]
    async with AcpClient(Pool(urls), telemetry=otel.telemetry, retry=FAST_RETRY, callbacks=callbacks) as client:
        handle = await client.new_session(os.getcwd())
        await handle.prompt("hello")
        home = next(server for server in servers if handle.session_id in server.agent.sessions)
        await home.restart()
        await eventually(lambda: outcomes and client.state.state is State.CONNECTED, what="recovered")
        await handle.prompt("again")
    ports = {dict(span.attributes or {}).get("server.port") for span in otel.spans("initialize")}
    assert ports >= {home.port}
    [session] = otel.spans("acp.recovery.session")
    assert dict(session.attributes or {})["acp.recovery.path"] == outcomes[0].path.value
    assert otel.spans("acp.recovery")  # the home link's outage
    assert total(otel.metrics()["acp.client.recoveries"]) == 1
    assert all(r.meta and "traceparent" in r.meta for r in home.agent.meta_log.received)


async def test_a_session_resumed_on_its_home_is_a_child_of_that_links_episode(
    otel: Otel, servers: list[ReferenceServer]
) -> None:
    # The home keeps the session through the drop: it resumes there, within the link's own
    # recovery round, so its span is a child of that link's acp.recovery episode (as with one
    # endpoint). A session that moves to another instance is a failover's: a root of its own.
    outcomes: list[RecoveryOutcome] = []
    urls = [server.ws_url for server in servers]
    async with AcpClient(
        Pool(urls), telemetry=otel.telemetry, retry=FAST_RETRY, callbacks=Callbacks(on_resume=outcomes.append)
    ) as client:
        handle = await client.new_session(os.getcwd())
        [url] = [e.url for e in client.endpoints if e.name == handle.endpoint]
        [home] = [server for server in servers if server.ws_url == url]
        await home.drop_connections()
        await eventually(lambda: outcomes and client.state.state is State.CONNECTED, what="resumed")
    [session] = otel.spans("acp.recovery.session")
    assert dict(session.attributes or {})["acp.recovery.path"] == "resume"
    episodes = {span.context.span_id for span in otel.spans("acp.recovery")}
    assert session.parent is not None and session.parent.span_id in episodes


async def test_the_sync_facade_takes_the_same_option(otel: Otel, reference_server: ReferenceServer) -> None:
    url = reference_server.ws_url

    def run() -> str:
        with SyncAcpClient(url, telemetry=otel.telemetry, retry=FAST_RETRY) as client:
            handle = client.new_session(os.getcwd())
            return str(handle.prompt("hello", timeout=30).stop_reason)

    assert await asyncio.to_thread(run) == "end_turn"
    [prompt] = otel.spans("session/prompt")  # ended (and exported) when the prompt returned
    assert prompt.kind is SpanKind.CLIENT


async def test_the_short_links_of_a_pool_client_are_traced(otel: Otel, servers: list[ReferenceServer]) -> None:
    # The first locate() asks an instance the client has no link to over a link of its own
    # (opened, asked, closed): its requests are traced like those of the client's links.
    urls = [server.ws_url for server in servers]
    async with AcpClient(Pool(urls), telemetry=otel.telemetry, retry=FAST_RETRY) as client:
        handle = await client.new_session(os.getcwd())
        [other] = [
            server
            for server in servers
            if handle.endpoint not in (e.name for e in client.endpoints if e.url == server.ws_url)
        ]
        await client.locate(handle.session_id)
    ports = {dict(span.attributes or {}).get("server.port") for span in otel.spans("session/status")}
    assert other.port in ports
    assert all(r.meta and "traceparent" in r.meta for r in other.agent.meta_log.received)
