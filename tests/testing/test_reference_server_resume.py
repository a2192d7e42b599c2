"""The reference server's resumable streams, seen with a raw HTTP client: event ids, resumption from
``Last-Event-ID``, the resync signal, the epoch header, the grace period of a connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from acp_client.testing import FakeClock, ReferenceAgent, ReferenceServer
from tests._support import eventually, within

EVENT_STREAM = {"Accept": "text/event-stream"}


class Raw:
    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client, self.url = client, url
        self.connection_id = ""
        self.next_id = 0

    async def initialize(self) -> None:
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
        answer = await self.client.post(self.url, json=body, headers={"Accept": "application/json"})
        assert answer.status_code == 200
        self.connection_id = answer.headers["acp-connection-id"]

    async def post(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        answer = await self.client.post(self.url, json=body, headers={"Acp-Connection-Id": self.connection_id})
        assert answer.status_code == 202
        return self.next_id

    @asynccontextmanager
    async def stream(self, **headers: str) -> AsyncIterator[tuple[httpx.Response, Any]]:
        all_headers = {**EVENT_STREAM, "Acp-Connection-Id": self.connection_id, **headers}
        async with self.client.stream("GET", self.url, headers=all_headers) as response:
            yield response, _events(response)


async def _events(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if "data" in event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


async def _take(events: Any, count: int) -> list[dict[str, str]]:
    return [await within(anext(events)) for _ in range(count)]


@asynccontextmanager
async def _raw(**options: Any) -> AsyncIterator[tuple[ReferenceServer, Raw]]:
    server = ReferenceServer(ReferenceAgent(), resumable_streams=True, **options)
    async with server, httpx.AsyncClient(timeout=10) as client:
        raw = Raw(client, server.http_url)
        await raw.initialize()
        yield server, raw


async def test_events_are_numbered_and_a_stream_resumes_from_last_event_id() -> None:
    async with _raw() as (server, raw):
        async with raw.stream() as (response, events):
            assert response.headers["acp-stream-epoch"] == server.instance_id
            for _ in range(3):
                await raw.post("session/list", {})
            got = await _take(events, 3)
        assert [e["id"] for e in got] == ["1", "2", "3"]
        # Back from event 1: events 2 and 3 again, then the live stream goes on numbering.
        async with raw.stream(**{"Last-Event-ID": "1", "Acp-Stream-Epoch": server.instance_id}) as (_, events):
            again = await _take(events, 2)
            await raw.post("session/list", {})
            live = await _take(events, 1)
        assert [(e["id"], json.loads(e["data"])["id"]) for e in again] == [("2", 2), ("3", 3)]
        assert live[0]["id"] == "4"


async def test_a_stream_that_cannot_be_resumed_begins_with_the_resync_signal() -> None:
    async with _raw(stream_history=1) as (_, raw):
        async with raw.stream() as (_, events):
            for _ in range(3):
                await raw.post("session/list", {})
            await _take(events, 3)
        async with raw.stream(**{"Last-Event-ID": "1"}) as (_, events):
            first = await _take(events, 1)
        assert first[0]["event"] == "resync"
        assert json.loads(first[0]["data"]) == {"reason": "evicted", "lastEventId": "1"}
        async with raw.stream(**{"Last-Event-ID": "3", "Acp-Stream-Epoch": "another-server"}) as (_, events):
            first = await _take(events, 1)
        assert json.loads(first[0]["data"])["reason"] == "epoch"


async def test_a_connection_without_its_stream_ends_after_the_grace_period() -> None:
    clock = FakeClock()
    async with _raw(stream_grace=5.0, clock=clock) as (server, raw):
        async with raw.stream() as (_, events):
            await raw.post("session/list", {})
            await _take(events, 1)
        await eventually(lambda: server.connection_count == 1)
        await clock.advance(4.0)
        async with raw.stream(**{"Last-Event-ID": "1"}) as (response, _):  # within the grace: still there
            assert response.status_code == 200
        await clock.advance(4.0)
        assert server.connection_count == 1  # the reattach started the grace period over
        await clock.advance(1.5)
        await eventually(lambda: server.connection_count == 0, what="the connection expired")
        async with raw.stream() as (response, _):
            assert response.status_code == 404


async def test_streams_are_not_numbered_unless_asked() -> None:
    async with ReferenceServer(ReferenceAgent()) as server, httpx.AsyncClient(timeout=10) as client:
        raw = Raw(client, server.http_url)
        await raw.initialize()
        async with raw.stream() as (response, events):
            await raw.post("session/list", {})
            got = await _take(events, 1)
        assert "acp-stream-epoch" not in response.headers
        assert "id" not in got[0]
