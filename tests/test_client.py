"""The client facade: lifecycle methods, capability checks, version negotiation, fatal errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_client import (
    AcpClient,
    Callbacks,
    CapabilityNotSupported,
    ClientClosed,
    ConfigurationError,
    ConnectionLost,
    RequestTimeout,
    RetryPolicy,
    SessionNotFound,
    SessionNotTracked,
    State,
    Timeouts,
    TurnInProgress,
)
from acp_client._codec._jsonrpc import error_message, result_message
from acp_client.exceptions import IncompatibleProtocolVersion, UnsupportedProtocolVersion
from acp_client.state import Probe
from acp_client.testing import FakeClock, MemoryConnector, inside
from acp_client.transports import AuthenticationFailed
from acp_client.transports.base import Transport
from acp_client.transports.memory import MemoryTransport, memory_pair
from tests._harness import Harness


class ScriptedAgent:
    """Answers initialize from a list of canned answers (one per connection)."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.seen: list[dict[str, Any]] = []

    async def serve(self, transport: Transport) -> None:
        try:
            while True:
                message = await transport.receive()
                assert isinstance(message, dict)
                self.seen.append(message)
                if "id" in message and "method" in message:
                    answer = self.answers.pop(0) if self.answers else {"result": {"protocolVersion": 1}}
                    if "error" in answer:
                        await transport.send(error_message(message["id"], **answer["error"]))
                    else:
                        await transport.send(result_message(message["id"], answer["result"]))
        except Exception:
            return


@pytest.mark.parametrize("version", [1, 2])
async def test_capability_checks_never_touch_the_wire(version: int) -> None:
    async with Harness(protocol_version=version, advertise_status=False, advertise_resume=False) as h:
        session = await h.client.new_session("/work")
        before = len(h.connector.sent())
        with pytest.raises(CapabilityNotSupported) as info:
            await h.client.session_status(session.session_id)
        assert "status" in info.value.capability
        if version == 1:  # in v2, session/resume is part of the baseline `capabilities.session`
            with pytest.raises(CapabilityNotSupported):
                await h.client.resume_session(session.session_id, "/work")
        else:
            with pytest.raises(CapabilityNotSupported):
                await h.client.load_session(session.session_id, "/work")
        assert len(h.connector.sent()) == before


async def test_negotiated_version_and_capabilities() -> None:
    async with Harness(protocol_version=2) as h:
        assert h.client.protocol_version == 2
        assert h.client.agent_capabilities.supports("session/status")
        assert h.client.agent_info is not None and h.client.agent_info.name == "acp-reference-agent"


async def test_agent_answering_an_older_supported_version_is_spoken() -> None:
    agent = ScriptedAgent([{"result": {"protocolVersion": 1, "agentCapabilities": {}}}])
    async with AcpClient(MemoryConnector(agent), protocol_version=2, clock=FakeClock()) as client:
        assert client.protocol_version == 1


async def test_unsupported_protocol_version_error_retries_with_a_common_one() -> None:
    agent = ScriptedAgent(
        [
            {"error": {"code": -32022, "message": "unsupported", "data": {"requested": 2, "supported": [1]}}},
            {"result": {"protocolVersion": 1, "agentCapabilities": {}}},
        ]
    )
    async with AcpClient(MemoryConnector(agent), protocol_version=2, clock=FakeClock()) as client:
        assert client.protocol_version == 1
    assert [m["params"]["protocolVersion"] for m in agent.seen if m.get("method") == "initialize"] == [2, 1]


async def test_no_common_version_fails() -> None:
    agent = ScriptedAgent([{"error": {"code": -32022, "message": "no", "data": {"supported": [7]}}}])
    client = AcpClient(MemoryConnector(agent), clock=FakeClock())
    with pytest.raises(UnsupportedProtocolVersion):
        await client.connect()
    assert client.state.state is State.FAILED


async def test_incompatible_version_on_reconnect_is_fatal() -> None:
    agent = ScriptedAgent(
        [
            {"result": {"protocolVersion": 1, "agentCapabilities": {}}},
            {"result": {"protocolVersion": 99}},
        ]
    )
    clock = FakeClock()
    connector = MemoryConnector(agent)
    client = AcpClient(connector, clock=clock, retry=RetryPolicy(jitter=False))
    await client.connect()
    connector.drop()
    await clock.settle()
    await clock.advance(5.0)
    assert client.state.state is State.FAILED
    assert isinstance(inside(client).supervisor.failure, IncompatibleProtocolVersion)
    await client.aclose()


class AuthConnector(MemoryConnector):
    def __init__(self, agent: Any, refusals: int) -> None:
        super().__init__(agent)
        self.refusals = refusals
        self.token = "old"

    async def connect(self) -> Transport:
        if self.token != "fresh" and self.refusals > 0:
            self.refusals -= 1
            raise AuthenticationFailed("401 Unauthorized", status=401)
        return await super().connect()


async def test_credentials_are_refreshed_exactly_once() -> None:
    from acp_client.testing import ReferenceAgent

    clock = FakeClock()
    connector = AuthConnector(ReferenceAgent(clock=clock), refusals=0)
    refreshed: list[str] = []
    useful = [True]

    def refresh() -> None:
        refreshed.append("x" if useful[0] else "y")
        if useful[0]:
            connector.token = "fresh"

    callbacks = Callbacks(refresh_credentials=refresh)
    client = AcpClient(connector, clock=clock, callbacks=callbacks, retry=RetryPolicy(jitter=False))
    await client.connect()
    connector.token, connector.refusals = "old", 5
    connector.drop()
    await clock.settle()
    await clock.advance(1.0)
    assert client.state.state is State.CONNECTED and refreshed == ["x"]
    # Refused again even after a refresh: fatal at once.
    connector.token, connector.refusals = "stale", 5
    useful[0] = False  # the next refresh gets no better credentials
    connector.drop()
    await clock.settle()
    await clock.advance(1.0)
    assert client.state.state is State.FAILED and refreshed == ["x", "y"]
    assert isinstance(inside(client).supervisor.failure, AuthenticationFailed)
    await client.aclose()


async def test_without_a_refresh_hook_401_is_fatal() -> None:
    from acp_client.testing import ReferenceAgent

    clock = FakeClock()
    connector = AuthConnector(ReferenceAgent(clock=clock), refusals=1)
    client = AcpClient(connector, clock=clock)
    with pytest.raises(AuthenticationFailed):
        await client.connect()
    assert client.state.state is State.FAILED


async def test_one_turn_at_a_time() -> None:
    async with Harness(chunk_delay=1.0) as h:
        session = (await h.client.new_session("/work")).record
        handle = h.client.session(session.session_id)
        first = asyncio.ensure_future(handle.prompt("one"))
        await h.clock.settle()
        with pytest.raises(TurnInProgress):
            await handle.prompt("two")
        assert (await h.clock.run(first)).stop_reason == "end_turn"


async def test_prompt_timeout_uses_the_clock() -> None:
    async with Harness(protocol_version=2, chunk_delay=10.0) as h:
        session = await h.client.new_session("/work")
        turn = asyncio.ensure_future(h.client.prompt(session.session_id, "slow", timeout=5.0))
        await h.clock.advance(5.0)
        with pytest.raises(RequestTimeout):
            await turn


async def test_closing_while_connecting_leaves_no_live_link() -> None:
    h = Harness()
    connecting = asyncio.ensure_future(h.client.connect())
    await asyncio.sleep(0)  # connect() is now waiting for the initialize answer
    await h.client.aclose()
    with pytest.raises(ClientClosed):
        await connecting
    assert h.client.state.state is State.CLOSED
    assert h.connector.live_links == 0
    await h.connector.aclose()


async def test_forgetting_a_session_ends_the_wait_for_its_running_v2_turn() -> None:
    # Untracked, the session's idle state_update is no longer matched to the turn: the prompt
    # must not wait for it forever.
    async with Harness(protocol_version=2) as h:
        session = (await h.client.new_session("/work")).record
        handle = h.client.session(session.session_id)
        turn = asyncio.ensure_future(handle.prompt("/slow"))
        await h.clock.advance(1.0)
        assert handle.turn_running
        h.client.forget_session(session.session_id)
        with pytest.raises(SessionNotTracked):
            await h.clock.run(turn, limit=10_000)


@pytest.mark.parametrize("version", [1, 2])
async def test_app_initiated_load_or_resume_marks_replay(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        session = await h.client.new_session("/work")
        await h.clock.run(h.client.prompt(session.session_id, "remember me"))
        h.agent.lose_memory()
        h.client.forget_session(session.session_id)
        live = len(h.updates)
        if version == 1:
            record = await h.client.load_session(session.session_id, "/work")
        else:
            record = await h.client.resume_session(session.session_id, "/work", replay=True)
        assert record.session_id == session.session_id
        replayed = h.updates[live:]
        assert replayed and all(e.replay for e in replayed)
        handle = h.client.session(session.session_id)
        assert [m.text for m in handle.transcript.messages] == ["remember me", "echo: remember me"]


async def test_resume_with_replay_needs_v2() -> None:
    async with Harness(protocol_version=1) as h:
        session = await h.client.new_session("/work")
        with pytest.raises(CapabilityNotSupported):
            await h.client.resume_session(session.session_id, "/work", replay=True)


async def test_status_list_fork_close() -> None:
    async with Harness(protocol_version=1) as h:
        h.agent.list_page_size = 2
        ids = [(await h.client.new_session(f"/w{i}")).session_id for i in range(5)]
        status = await h.client.session_status(ids[0])
        assert status.status is Probe.ACTIVE and status.raw_status == "active"
        unknown = await h.client.session_status("sess_nope")
        assert unknown.status is Probe.UNKNOWN
        page = await h.client.list_sessions()
        assert len(page.sessions) == 2 and page.next_cursor
        everything = [s.session_id async for s in h.client.iter_sessions()]
        assert sorted(everything) == sorted(ids)
        assert [s.session_id for s in (await h.client.list_sessions(cwd="/w3")).sessions] == [ids[3]]
        fork = await h.client.fork_session(ids[0], "/w0")
        assert fork.session_id not in ids and h.client.session(fork.session_id)
        await h.client.close_session(ids[1])
        assert ids[1] not in [s.session_id for s in h.client.sessions]


@pytest.mark.parametrize("bad", ["a\r\nInjected: 1", "x\x00y", ""])
async def test_unsafe_session_ids_are_rejected_before_sending(bad: str) -> None:
    async with Harness() as h:
        before = len(h.connector.sent())
        with pytest.raises(ConfigurationError):
            await h.client.load_session(bad, "/work")
        assert len(h.connector.sent()) == before


def test_unknown_endpoint_scheme() -> None:
    with pytest.raises(ConfigurationError):
        AcpClient("ftp://example.com")
    with pytest.raises(ConfigurationError):
        AcpClient("ws://x", protocol_version=3)


async def test_memory_transport_rejects_after_close() -> None:
    client_side, _agent_side = memory_pair()
    assert isinstance(client_side, MemoryTransport)
    await client_side.aclose()
    assert client_side.closed


async def test_a_refused_load_or_resume_leaves_nothing_tracked() -> None:

    async with Harness(protocol_version=1) as h:
        with pytest.raises(SessionNotFound):
            await h.client.load_session("sess_nope", "/work")
        with pytest.raises(SessionNotFound):
            await h.client.resume_session("sess_nope", "/work")
        assert h.client.sessions == []


async def test_tls_verification_failure_on_reconnect_is_fatal_at_once() -> None:
    from acp_client.testing import ReferenceAgent
    from acp_client.transports import TlsVerificationError

    class TlsConnector(MemoryConnector):
        broken = False
        attempts = 0

        async def connect(self) -> Transport:
            if self.broken:
                self.attempts += 1
                raise TlsVerificationError("certificate verify failed: self-signed certificate")
            return await super().connect()

    clock = FakeClock()
    connector = TlsConnector(ReferenceAgent(clock=clock))
    client = AcpClient(connector, clock=clock, retry=RetryPolicy(jitter=False, max_attempts=50))
    await client.connect()
    connector.broken = True
    connector.drop()
    await clock.settle()
    await clock.advance(60.0)
    assert client.state.state is State.FAILED
    assert connector.attempts == 1
    assert isinstance(inside(client).supervisor.failure, TlsVerificationError)
    await client.aclose()


async def test_raw_requests_use_the_client_request_timeout() -> None:
    async with Harness(client_kwargs={"timeouts": Timeouts(request=7.0)}) as h:
        h.agent.stall(True)
        call = asyncio.ensure_future(h.client.request("_custom/echo", {}))
        await h.clock.advance(7.0)
        with pytest.raises(RequestTimeout):
            await call


async def test_closing_the_client_is_not_a_turn_interruption() -> None:
    async with Harness(chunk_delay=1.0) as h:
        session = await h.client.new_session("/work")
        turn = asyncio.ensure_future(h.client.prompt(session.session_id, "long"))
        await h.clock.advance(1.5)
        await h.client.aclose()
        with pytest.raises((ConnectionLost, ClientClosed)):
            await turn
        assert h.interrupted == []
