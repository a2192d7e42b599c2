"""fast-agent-mcp 0.10.48 (``fast-agent acp --model passthrough``) over stdio, end to end.

fast-agent needs Python >= 3.13: it runs from its own cached environment, built from a separate
interpreter (``tests/peers/real_agents.py``; the tests skip loudly when the machine has none). The
passthrough model echoes each prompt; ``***CALL_TOOL NAME {json}`` makes it call a tool of the MCP
server ``tests/peers/fast_agent_tools.py`` (``write_note``, ``wait``), which fast-agent does only
after asking the client's permission. Sessions are kept under the ``--home`` directory, so a
respawned process knows them. What the agent does is pinned in ``test_facts*`` and written up in
``docs/agents-conformance.md``.

The recovery tests kill the agent idle or mid-turn (the stdio transport respawns it) and check the
path taken and that the rebuilt transcript holds every turn exactly once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import pytest_asyncio

from acp_client import AcpClient, Callbacks, ConnectionLost, RecoveryPath, Timeouts, UpdateEvent
from acp_client.exceptions import MethodNotFound, SessionNotFound
from acp_client.transcript import TurnStatus
from tests._support import eventually
from tests.e2e._support import Recorder
from tests.interop._real_agents import (
    POLICY,
    SLOW,
    Permissions,
    SharedAgent,
    conversation,
    describe,
    evict,
    kill_agent,
    message_counts,
    messages,
    stdio_url,
    wired_client,
)
from tests.peers.real_agents import FAST_AGENT_VERSION, FastAgent

# Only the test itself is timed: on a fresh machine the fixture first installs the agent into the cache
# (minutes; each install step has its own limit in tests/peers/real_agents.py).
pytestmark = pytest.mark.timeout(240, func_only=True)

NOTE = '***CALL_TOOL write_note {"text": "buy milk"}'
SAVED = json.dumps({"result": "saved buy milk"}, separators=(",", ":"))
TWO_TURNS = f"user: hello\nagent: hello\nuser: {NOTE}\nagent: " + json.dumps(
    {"result": "saved buy milk"}, separators=(",", ":")
)


def _wait(seconds: float) -> str:
    return "***CALL_TOOL wait " + json.dumps({"seconds": seconds})


async def _wait_for_tool_call(events: list[UpdateEvent], start: int) -> None:
    await eventually(
        lambda: any(event.update.kind == "tool_call" for event in events[start:]), timeout=SLOW, what="a tool_call"
    )


@attrs.frozen
class Shared:
    """One fast-agent process (it starts slowly) for the tests that do not kill it."""

    client: AcpClient
    events: list[UpdateEvent]
    permissions: Permissions
    cwd: Path


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(fast_agent: FastAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    cwd = tmp_path_factory.mktemp("fast-agent")
    permissions = Permissions()
    events: list[UpdateEvent] = []
    url = stdio_url(fast_agent.command(cwd / "home"))
    client = AcpClient(
        url,
        retry=POLICY,
        timeouts=Timeouts(connect=SLOW),
        handlers=permissions.handlers(),
        callbacks=Callbacks(on_update=events.append),
    )
    async with client:
        yield Shared(client, events, permissions, cwd)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def dying(fast_agent: FastAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedAgent]:
    """One fast-agent client for the kill and evict tests (each kill respawns the next test's agent)."""
    home = tmp_path_factory.mktemp("fast-agent-kills") / "home"
    agent = SharedAgent(fast_agent.command(home), store=home)
    async with agent.client:
        yield agent


@pytest.mark.asyncio(loop_scope="module")
async def test_initialize_new_prompt_permission_cancel_list(shared: Shared) -> None:
    client, events, permissions = shared.client, shared.events, shared.permissions
    assert client.protocol_version == 1
    assert client.agent_info is not None
    assert (client.agent_info.name, client.agent_info.version) == ("fast-agent-acp", FAST_AGENT_VERSION)
    caps = client.agent_capabilities
    assert caps.supports("session/load") and caps.supports("session/resume") and caps.supports("session/list")
    assert not caps.supports("session/status")

    handle = await client.new_session(shared.cwd)
    session = handle.record
    assert session.modes is not None and session.modes.current_mode_id == "agent"

    # The passthrough model streams the prompt back (one chunk, no messageId).
    start = len(events)
    assert (await handle.prompt("hello")).stop_reason == "end_turn"
    chunks = [event for event in events[start:] if event.update.kind == "agent_message_chunk"]
    assert [getattr(chunk.update.content, "text", None) for chunk in chunks] == ["hello"]
    assert getattr(chunks[0].update, "message_id", None) is None
    assert handle.transcript.text() == "user: hello\nagent: hello"

    # An MCP tool call: fast-agent asks permission first (tool call id "pending"), then runs it.
    before = len(permissions.requests)
    assert (await handle.prompt(NOTE)).stop_reason == "end_turn"
    assert len(permissions.requests) == before + 1
    request = permissions.requests[-1]
    assert request.tool_call is not None and request.tool_call.title == "python/write_note"
    assert request.tool_call.tool_call_id == "pending"
    assert {option.kind for option in request.options} == {"allow_once", "allow_always", "reject_once", "reject_always"}
    views = list(handle.transcript.tool_calls.values())
    assert [(view.title, view.status) for view in views] == [("python/write_note", "completed")]
    assert handle.transcript.text() == TWO_TURNS

    # Cancel a turn busy in a slow tool: the agent answers stopReason cancelled.
    start = len(events)
    turn = asyncio.create_task(handle.prompt(_wait(30)))
    await _wait_for_tool_call(events, start)
    await handle.cancel()
    assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
    assert len(permissions.requests) == before + 2

    listed = {item.session_id: item for item in (await client.list_sessions()).sessions}
    assert listed[session.session_id].title == "hello"


@pytest.mark.asyncio(loop_scope="module")
async def test_facts(shared: Shared) -> None:
    """status -32601; unknown ids -32002 on resume and load; resume replays everything, without messageIds."""
    client, events = shared.client, shared.events
    session = await client.new_session(shared.cwd)
    await client.prompt(session.session_id, "hi")
    attach = {"sessionId": session.session_id, "cwd": str(shared.cwd), "mcpServers": []}
    with pytest.raises(MethodNotFound):
        await client.request("session/status", {"sessionId": session.session_id})
    with pytest.raises(SessionNotFound):
        await client.request("session/resume", {**attach, "sessionId": "no-such-session"})
    with pytest.raises(SessionNotFound):
        await client.request("session/load", {**attach, "sessionId": "no-such-session"})
    start = len(events)
    result = await client.request("session/resume", attach)
    assert result["modes"]["currentModeId"] == "agent"
    replayed = [
        (event.update.kind, getattr(event.update.content, "text", None), getattr(event.update, "message_id", None))
        for event in events[start:]
        if event.update.kind in ("user_message_chunk", "agent_message_chunk")
    ]
    assert replayed == [("user_message_chunk", "hi", None), ("agent_message_chunk", "hi", None)]


@pytest.mark.asyncio(loop_scope="module")
async def test_naive_updated_at_is_kept(shared: Shared) -> None:
    """fast-agent sends ``updatedAt`` without a zone (``2026-12-01T13:06:35.841840``): keep it as sent."""
    session = await shared.client.new_session(shared.cwd)
    await shared.client.prompt(session.session_id, "hello")
    listed = {item.session_id: item for item in (await shared.client.list_sessions()).sessions}
    updated_at = listed[session.session_id].updated_at
    assert updated_at is not None and updated_at.tzinfo is None


async def test_facts_echoes_any_protocol_version(fast_agent: FastAgent, tmp_path: Path) -> None:
    """Asked for v2, fast-agent answers protocolVersion 2 but in the v1 shape (agentCapabilities, agentInfo):
    the client treats it as v1 and initializes again in the v1 shape (issue 8 item 5)."""
    client, wire = wired_client(fast_agent.command(tmp_path / "home"), Recorder(), protocol_version=2)
    async with client:
        sent = wire.messages("initialize")
        assert [message["params"]["protocolVersion"] for message in sent] == [2, 1]
        assert "clientCapabilities" in sent[1]["params"] and "clientInfo" in sent[1]["params"]
        assert client.protocol_version == 1
        assert client.agent_capabilities.supports("session/load")
        assert client.agent_info is not None and client.agent_info.name == "fast-agent-acp"
        handle = await client.new_session(tmp_path)
        assert (await handle.prompt("hello")).stop_reason == "end_turn"
        assert handle.transcript.text() == "user: hello\nagent: hello"


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_idle_keeps_every_turn_once(dying: SharedAgent, tmp_path: Path) -> None:
    client, wire, recorder = dying.take()
    try:
        handle = await client.new_session(tmp_path)
        session = handle.record
        await handle.prompt("hello")
        await handle.prompt(NOTE)
        assert handle.transcript.text() == TWO_TURNS

        links = len(wire.transports)
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert len(wire.transports) == links + 1
        assert outcome.session_id == outcome.previous_session_id == session.session_id, seen
        assert outcome.continuity, seen
        assert outcome.path in (RecoveryPath.RESUME, RecoveryPath.REPLAY), seen
        assert "session/new" not in [method for method, _ in outcome.steps], seen
        # fast-agent replays the whole history during a plain session/resume: marked as replay, kept once.
        replayed = [event for event in recorder.events[live:] if event.update.kind.endswith("_message_chunk")]
        assert replayed and all(event.replay for event in replayed), seen
        # Each turn once. The replay renders the tool turn's answer as the agent stored it (the tool-call
        # message's text, then the result), so the agent's text of that turn is not pinned.
        await eventually(
            lambda: [role for role, _ in messages(handle.transcript)] == ["user", "agent"] * 2,
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        assert messages(handle.transcript, "user") == [("user", "hello"), ("user", NOTE)], seen
        agent = messages(handle.transcript, "agent")
        assert agent[0] == ("agent", "hello") and agent[1][1].endswith(SAVED), seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert messages(handle.transcript)[-2:] == [("user", "after"), ("agent", "after")]
        assert [role for role, _ in messages(handle.transcript)] == ["user", "agent"] * 3
        assert [m.status for m in handle.transcript.all_messages() if m.role == "user"] == [TurnStatus.COMPLETE] * 3
    finally:
        dying.release()



@pytest.mark.asyncio(loop_scope="module")
async def test_killed_mid_turn_reports_the_turn_and_keeps_the_rest(dying: SharedAgent, tmp_path: Path) -> None:
    client, wire, recorder = dying.take()
    try:
        handle = await client.new_session(tmp_path)
        session = handle.record
        await handle.prompt("hello")
        start = len(recorder.events)
        slow = _wait(30)
        turn = asyncio.create_task(handle.prompt(slow))
        await _wait_for_tool_call(recorder.events, start)

        live = len(recorder.events)
        kill_agent(wire)
        with pytest.raises(ConnectionLost) as lost:
            await turn
        assert lost.value.may_have_executed
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert [getattr(block, "text", None) for item in recorder.interrupted for block in item.prompt] == [slow]
        assert outcome.session_id == outcome.previous_session_id == session.session_id, seen
        assert outcome.continuity, seen
        assert outcome.path in (RecoveryPath.RESUME, RecoveryPath.REPLAY), seen
        await eventually(
            lambda: handle.transcript.text().startswith("user: hello\nagent: hello"),
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        assert messages(handle.transcript, "user") == [("user", "hello"), ("user", slow)], seen
        assert message_counts(handle.transcript.text())["agent: hello"] == 1, seen
        statuses = [m.status for m in handle.transcript.all_messages() if m.role == "user"]
        assert statuses == [TurnStatus.COMPLETE, TurnStatus.INTERRUPTED], seen

        # The next turn runs; fast-agent answers it by reporting the tool call the kill interrupted.
        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert messages(handle.transcript, "user") == [("user", "hello"), ("user", slow), ("user", "after")]
        assert messages(handle.transcript)[-1] == ("agent", "**The user interrupted this tool call**")
        assert message_counts(handle.transcript.text())["agent: hello"] == 1, seen
    finally:
        dying.release()



@pytest.mark.asyncio(loop_scope="module")
async def test_evicted_session_goes_new_and_keeps_the_lost_conversation(dying: SharedAgent, tmp_path: Path) -> None:
    """The sessions removed from fast-agent's home while it was down: resume is -32002, so a new session; the old
    conversation stays as an earlier segment marked lost, and the outcome counts the lost turns."""
    client, wire, recorder = dying.take()
    home = dying.store
    assert home is not None
    try:
        handle = await client.new_session(tmp_path)
        old_id = handle.session_id
        await handle.prompt("hello")
        await handle.prompt("second")
        expected = [("user", "hello"), ("agent", "hello"), ("user", "second"), ("agent", "second")]
        assert conversation(handle.transcript) == expected

        evict(FastAgent.store_of(home))
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.NEW_SESSION and not outcome.continuity, seen
        assert outcome.previous_session_id == old_id and outcome.session_id not in (None, old_id), seen
        assert [step for step, _ in outcome.steps] == ["session/resume", "session/new"], seen
        assert outcome.lost_turns == 2, seen
        assert [(segment.session_id, segment.lost, segment.turns) for segment in new.transcript.segments] == [
            (old_id, True, 2),
            (outcome.session_id, False, 0),
        ], seen
        assert conversation(new.transcript) == expected, seen

        assert (await new.prompt("after")).stop_reason == "end_turn"
        assert conversation(new.transcript) == [*expected, ("user", "after"), ("agent", "after")], seen
    finally:
        dying.release()
