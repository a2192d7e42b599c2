"""Streams that resume: the reference server with resumable streams behind a fault proxy that cuts or
silences one kind of HTTP connection, and the client reattaching (or, when it cannot, reconnecting).

Reattach: a broken stream is reopened on the same ``Acp-Connection-Id`` with ``Last-Event-ID``; the
turn goes on, no ``initialize``, no probe, no replay; the app hears ``on_stream_resumed``. Reconnect:
only when the server no longer knows the connection, cannot resume (a resync), or cannot be reached
within ``reattach_timeout``. Never a ``DELETE`` of a connection whose turn may still run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from acp_client import AcpClient, StreamResumed, TurnStatus
from acp_client.exceptions import ConnectionLost
from acp_client.testing import FaultProxy, ReferenceServer
from tests._support import DEADLINE, FAST_RETRY, eventually, within
from tests.e2e._support import Recorder, RecordingAgent

PROMPT = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
ANSWER = f"echo: {PROMPT}"


class Setup:
    def __init__(self, server: ReferenceServer, proxy: FaultProxy, agent: RecordingAgent) -> None:
        self.server, self.proxy, self.agent = server, proxy, agent
        self.recorder = Recorder()
        self.resumed: list[StreamResumed] = []

    def client(self, protocol_version: int = 1, **transport_options: Any) -> AcpClient:
        return AcpClient(
            self.proxy.url(self.server.http_url),
            protocol_version=protocol_version,
            transport_options={"http2": False, **transport_options},
            retry=FAST_RETRY,
            callbacks=self.recorder.callbacks(on_stream_resumed=self.resumed.append),
        )

    def initializes(self) -> int:
        return sum(1 for r in self.server.requests if r.method == "POST" and r.header("acp-connection-id") is None)

    def deletes(self) -> list[str | None]:
        return [r.header("acp-connection-id") for r in self.server.requests if r.method == "DELETE"]

    def chunks(self) -> int:
        return sum(1 for e in self.recorder.events if e.update.kind == "agent_message_chunk" and not e.replay)


async def _setup(**server_options: Any) -> AsyncIterator[Setup]:
    agent = RecordingAgent(chunks_per_prompt=24, chunk_delay=0.04)
    server = ReferenceServer(agent, resumable_streams=True, **server_options)
    async with server, FaultProxy("127.0.0.1", server.port) as proxy:
        yield Setup(server, proxy, agent)


@pytest_asyncio.fixture
async def setup() -> AsyncIterator[Setup]:
    async for value in _setup():
        yield value


@pytest_asyncio.fixture
async def short_history() -> AsyncIterator[Setup]:
    async for value in _setup(stream_history=2):
        yield value


def _answer(handle: Any) -> str:
    return handle.transcript.text().rsplit("agent: ", 1)[-1]


@pytest.mark.parametrize("kind", ["session_stream", "connection_stream"])
async def test_a_cut_stream_is_reattached_and_the_turn_goes_on(
    setup: Setup, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="acp_client.wire")
    async with setup.client() as client:
        handle = await client.new_session("/work")
        turn = asyncio.ensure_future(handle.prompt(PROMPT))
        await eventually(lambda: setup.chunks() >= 3, what="the turn streaming")
        assert setup.proxy.connections(kind) == 1
        await setup.proxy.cut(kind)
        result = await within(turn)
        assert result.stop_reason == "end_turn"
        assert _answer(handle) == ANSWER  # every chunk, once, in order
        assert not any(m.incomplete for m in handle.transcript.messages)
        assert [m.status for m in handle.transcript.messages if m.role == "user"] == [TurnStatus.COMPLETE]
        if kind == "session_stream":
            assert [(r.session_id, r.from_event_id != "") for r in setup.resumed] == [(handle.session_id, True)]
        else:
            # The connection stream carried the answers of the connection's requests: a round trip
            # on it after the cut shows it reattached (its answer comes there).
            await client.list_sessions()
            await eventually(lambda: len(setup.resumed) == 1, what="the connection stream reattached")
            assert setup.resumed[0].session_id is None
        assert setup.recorder.outcomes == [] and setup.recorder.interrupted == []
        assert setup.initializes() == 1
        frames = [r.getMessage() for r in caplog.records if r.name == "acp_client.wire"]
        assert sum('"method":"initialize"' in f for f in frames if " > " in f) == 1
        resumed_gets = [r for r in setup.server.requests if r.method == "GET" and r.header("last-event-id")]
        assert resumed_gets and all(r.header("acp-stream-epoch") == setup.server.instance_id for r in resumed_gets)
    assert setup.deletes() == [setup.resumed[0].connection_id]  # the app's close ends it, once


async def test_a_silent_stream_is_reattached_after_the_idle_timeout(setup: Setup) -> None:
    async with setup.client(sse_idle_timeout=0.4) as client:
        handle = await client.new_session("/work")
        turn = asyncio.ensure_future(handle.prompt(PROMPT))
        await eventually(lambda: setup.chunks() >= 2, what="the turn streaming")
        assert await setup.proxy.silence("session_stream") == 1  # quiet, then given up by the client
        result = await within(turn)
        assert result.stop_reason == "end_turn"
        assert _answer(handle) == ANSWER
        assert "idle timeout" in setup.resumed[0].reason
        assert setup.initializes() == 1


async def test_a_server_that_forgot_the_connection_means_a_reconnect(setup: Setup) -> None:
    async with setup.client() as client:
        handle = await client.new_session("/work")
        await handle.prompt("hello")
        first = setup.initializes()
        await setup.server.drop_connections()  # the server forgets the connection: 404 on reattach
        outcome = await setup.recorder.outcome()
        assert setup.initializes() == first + 1
        assert outcome.session_id == handle.session_id
        assert setup.resumed == []
        assert (await handle.prompt("again")).stop_reason == "end_turn"


async def test_a_resync_marks_the_streaming_answer_incomplete_and_recovers(short_history: Setup) -> None:
    setup = short_history
    async with setup.client(sse_idle_timeout=0.4) as client:
        handle = await client.new_session("/work")
        turn = asyncio.ensure_future(handle.prompt(PROMPT))
        await eventually(lambda: setup.chunks() >= 2, what="the turn streaming")
        await setup.proxy.silence("session_stream")  # what the server writes meanwhile outgrows its history
        with pytest.raises(ConnectionLost):
            await within(turn)
        await setup.recorder.outcome()
        assert [i.session_id for i in setup.recorder.interrupted] == [handle.session_id]
        assert [r for r in setup.resumed if r.session_id is not None] == []  # (the idle connection stream was)
        partial = [m for m in handle.transcript.messages if m.role == "agent" and m.incomplete]
        complete_short = [
            m
            for m in handle.transcript.messages
            if m.role == "agent" and not m.incomplete and m.text != ANSWER and ANSWER.startswith(m.text)
        ]
        assert complete_short == []  # never a "complete" answer missing text
        assert partial or _answer(handle) == ANSWER
        assert setup.initializes() == 2


@pytest.mark.parametrize("version", [1, 2])
async def test_no_delete_for_a_connection_given_up_while_its_turn_runs(setup: Setup, version: int) -> None:
    async with setup.client(version, reattach_timeout=0.3) as client:
        handle = await client.new_session("/work")
        turn = asyncio.ensure_future(handle.prompt("/slow"))
        await eventually(lambda: setup.chunks() >= 2, what="the /slow turn streaming")
        first = setup.agent.connection_ids()[-1]
        await setup.proxy.refuse(0.8)  # nothing gets through until the reattach deadline has passed
        await setup.proxy.cut()
        with pytest.raises(ConnectionLost):
            await within(turn)
        await setup.recorder.outcome()
        assert setup.initializes() == 2
        await handle.cancel()  # the app stops what may still run; the session works on
        assert (await handle.prompt("after")).stop_reason == "end_turn"
        # A drop with no turn running: that connection is ended from the next link, as before.
        second = setup.agent.connection_ids()[-1]
        await setup.proxy.refuse(0.8)
        await setup.proxy.cut()
        await setup.recorder.outcome(2)
        await eventually(lambda: second in setup.deletes(), timeout=DEADLINE, what="the idle connection's DELETE")
        assert first not in setup.deletes()  # the connection whose turn ran was never ended by the client


async def test_a_cut_post_connection_between_requests_costs_nothing(setup: Setup) -> None:
    async with setup.client() as client:
        handle = await client.new_session("/work")
        await eventually(lambda: setup.proxy.connections("post") >= 1)
        await setup.proxy.cut("post")  # the kept-alive connection of the POSTs
        assert (await handle.prompt(PROMPT)).stop_reason == "end_turn"
        assert _answer(handle) == ANSWER
        assert setup.initializes() == 1 and setup.recorder.outcomes == []


@pytest.mark.parametrize(("version", "http2"), [(1, False), (2, False), (1, True)])
async def test_every_connection_reset_mid_turn_reattaches_both_streams(setup: Setup, version: int, http2: bool) -> None:
    async with setup.client(version, http2=http2) as client:
        handle = await client.new_session("/work")
        turn = asyncio.ensure_future(handle.prompt(PROMPT))
        await eventually(lambda: setup.chunks() >= 3, what="the turn streaming")
        await setup.proxy.cut()  # every TCP connection: the POSTs', the connection stream's, the session stream's
        assert (await within(turn)).stop_reason == "end_turn"
        assert _answer(handle) == ANSWER
        await client.list_sessions()  # its answer comes on the connection stream
        await eventually(lambda: {r.session_id for r in setup.resumed} == {None, handle.session_id})
        assert setup.initializes() == 1 and setup.recorder.outcomes == [] and setup.recorder.interrupted == []
        assert setup.deletes() == []
