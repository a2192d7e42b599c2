"""pydantic-acp 1.10.0 (a pydantic-ai agent behind the ACP adapter) over stdio, end to end.

The agent (``tests/peers/pydantic_acp_agent.py``) runs offline from its cached environment: echo
answers streamed in chunks, a ``write_note`` tool that needs the user's approval, a ``slow:`` turn
to cancel or kill, sessions in a ``FileSessionStore`` so a respawned process still knows them.
``unstable`` turns on the SDK's unstable methods (``session/resume``); pydantic-acp advertises
resume either way. What the agent does is pinned in ``test_facts_*`` and written up in
``docs/agents-conformance.md``.

The recovery tests kill the agent idle or mid-turn (the stdio transport respawns it) and check the
path taken and that the rebuilt transcript holds every turn exactly once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from acp_client import AcpClient, Callbacks, ConnectionLost, RecoveryPath, Timeouts, UpdateEvent
from acp_client.exceptions import InvalidParams, MethodNotFound
from acp_client.transcript import TurnStatus
from tests._support import eventually
from tests.e2e._support import Recorder
from tests.interop._real_agents import (
    POLICY,
    SLOW,
    Permissions,
    conversation,
    describe,
    evict,
    kill_agent,
    message_counts,
    stdio_url,
    wait_for_agent_text,
    wired_client,
)
from tests.peers.real_agents import PYDANTIC_ACP_VERSION, PydanticAcpAgent

# Only the test itself is timed: on a fresh machine the fixture first installs the agent into the cache
# (minutes; each install step has its own limit in tests/peers/real_agents.py).
pytestmark = pytest.mark.timeout(180, func_only=True)

MODES = [pytest.param(False, id="stable"), pytest.param(True, id="unstable")]
TWO_TURNS = "user: hello\nagent: echo: hello\nuser: tool: buy milk\nagent: note saved: buy milk"


def _chunk_ids(events: list[UpdateEvent]) -> list[str | None]:
    return [getattr(e.update, "message_id", None) for e in events if e.update.kind == "agent_message_chunk"]


async def test_initialize_new_prompt_permission_cancel_list(
    pydantic_acp_agent: PydanticAcpAgent, tmp_path: Path
) -> None:
    permissions = Permissions()
    events: list[UpdateEvent] = []
    url = stdio_url(pydantic_acp_agent.command(tmp_path / "store", chunk_delay=0.2))
    async with AcpClient(
        url,
        retry=POLICY,
        timeouts=Timeouts(connect=SLOW),
        handlers=permissions.handlers(),
        callbacks=Callbacks(on_update=events.append),
    ) as client:
        assert client.protocol_version == 1
        assert client.agent_info is not None
        assert (client.agent_info.name, client.agent_info.version) == ("echo-agent", PYDANTIC_ACP_VERSION)
        caps = client.agent_capabilities
        assert caps.supports("session/load") and caps.supports("session/resume") and caps.supports("session/list")
        assert not caps.supports("session/status")

        handle = await client.new_session(tmp_path)
        session = handle.record

        # A streamed answer: two chunks of one message (one messageId), live (not replay).
        start = len(events)
        assert (await handle.prompt("hello")).stop_reason == "end_turn"
        ids = _chunk_ids(events[start:])
        assert len(ids) == 2 and ids[0] is not None and ids[0] == ids[1]
        assert not any(event.replay for event in events)
        assert handle.transcript.text() == "user: hello\nagent: echo: hello"

        # A tool that needs approval: one session/request_permission, then the tool runs.
        assert (await handle.prompt("tool: buy milk")).stop_reason == "end_turn"
        assert len(permissions.requests) == 1
        request = permissions.requests[0]
        assert request.session_id == session.session_id
        assert request.tool_call is not None and request.tool_call.title == "write_note"
        assert {option.kind for option in request.options} == {"allow_once", "reject_once"}
        views = list(handle.transcript.tool_calls.values())
        assert [(view.title, view.status) for view in views] == [("write_note", "completed")]
        assert handle.transcript.text() == TWO_TURNS

        # Cancel a running turn: the agent answers stopReason cancelled.
        start = len(events)
        turn = asyncio.create_task(handle.prompt("slow: one two three four five six seven eight"))
        await wait_for_agent_text(events, "one", start=start)
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"

        # session/list knows the session, with its title and a zoned updatedAt.
        page = await client.list_sessions()
        assert [listed.session_id for listed in page.sessions] == [session.session_id]
        listed = page.sessions[0]
        assert listed.title == "hello"
        assert listed.updated_at is not None and listed.updated_at.utcoffset() is not None


async def test_facts_stable(pydantic_acp_agent: PydanticAcpAgent, tmp_path: Path) -> None:
    """Without unstable methods: resume is advertised but -32601; status -32601; load of an unknown id succeeds."""
    url = stdio_url(pydantic_acp_agent.command(tmp_path / "store"))
    async with AcpClient(url, retry=POLICY, timeouts=Timeouts(connect=SLOW)) as client:
        session = await client.new_session(tmp_path)
        attach = {"sessionId": session.session_id, "cwd": str(tmp_path), "mcpServers": []}
        with pytest.raises(MethodNotFound):
            await client.request("session/resume", attach)
        with pytest.raises(MethodNotFound):
            await client.request("session/status", {"sessionId": session.session_id})
        # An unknown session is not -32002 on load: the agent answers success and replays nothing.
        assert await client.request("session/load", {**attach, "sessionId": "no-such-session"}) == {}


async def test_facts_unstable(pydantic_acp_agent: PydanticAcpAgent, tmp_path: Path) -> None:
    """With unstable methods: resume replays the whole history, with the live agent messageIds; unknown -> -32602."""
    events: list[UpdateEvent] = []
    url = stdio_url(pydantic_acp_agent.command(tmp_path / "store", unstable=True))
    async with AcpClient(
        url, retry=POLICY, timeouts=Timeouts(connect=SLOW), callbacks=Callbacks(on_update=events.append)
    ) as client:
        session = await client.new_session(tmp_path)
        await client.prompt(session.session_id, "hello")
        live_ids = _chunk_ids(events)
        attach = {"sessionId": session.session_id, "cwd": str(tmp_path), "mcpServers": []}
        start = len(events)
        assert await client.request("session/resume", attach) == {}
        await eventually(lambda: len(_chunk_ids(events[start:])) == 2, what="the replayed agent chunks")
        replayed = events[start:]
        users = [e for e in replayed if e.update.kind == "user_message_chunk"]
        assert [getattr(u.update.content, "text", None) for u in users] == ["hello"]
        assert getattr(users[0].update, "message_id", None) is not None  # an id the live turn never sent
        assert _chunk_ids(replayed) == live_ids
        with pytest.raises(InvalidParams):
            await client.request("session/resume", {**attach, "sessionId": "no-such-session"})


@pytest.mark.parametrize("unstable", MODES)
async def test_killed_idle_keeps_every_turn_once(
    pydantic_acp_agent: PydanticAcpAgent, tmp_path: Path, unstable: bool
) -> None:
    recorder = Recorder()
    client, wire = wired_client(pydantic_acp_agent.command(tmp_path / "store", unstable=unstable), recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        session = handle.record
        await handle.prompt("hello")
        await handle.prompt("tool: buy milk")
        assert handle.transcript.text() == TWO_TURNS

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert len(wire.transports) == 2
        assert outcome.session_id == outcome.previous_session_id == session.session_id, seen
        assert outcome.continuity, seen
        methods = [method for method, _ in outcome.steps]
        assert "session/new" not in methods, seen
        if unstable:
            assert outcome.path in (RecoveryPath.RESUME, RecoveryPath.REPLAY), seen
        else:  # resume is refused (-32601): degrade to load, never to a new session
            assert outcome.path is RecoveryPath.REPLAY, seen
            assert methods == ["session/resume", "session/load"] and outcome.steps[-1][1] == "ok", seen
        # Both load and (this agent's) resume replay the history: marked as replay, kept once.
        replayed = [event for event in recorder.events[live:] if event.update.kind.endswith("_message_chunk")]
        assert replayed and all(event.replay for event in replayed), seen
        await eventually(
            lambda: handle.transcript.text() == TWO_TURNS,
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        assert len(handle.transcript.tool_calls) == 1

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert handle.transcript.text() == f"{TWO_TURNS}\nuser: after\nagent: echo: after"
        assert [m.status for m in handle.transcript.all_messages() if m.role == "user"] == [TurnStatus.COMPLETE] * 3


@pytest.mark.parametrize("unstable", MODES)
async def test_killed_mid_turn_reports_the_turn_and_keeps_the_rest(
    pydantic_acp_agent: PydanticAcpAgent, tmp_path: Path, unstable: bool
) -> None:
    recorder = Recorder()
    command = pydantic_acp_agent.command(tmp_path / "store", unstable=unstable, chunk_delay=0.5)
    client, wire = wired_client(command, recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        session = handle.record
        await handle.prompt("hello")
        start = len(recorder.events)
        slow = "slow: one two three four five six seven eight"
        turn = asyncio.create_task(handle.prompt(slow))
        await wait_for_agent_text(recorder.events, "one", start=start)

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
        assert "session/new" not in [method for method, _ in outcome.steps], seen
        expected_path = (RecoveryPath.RESUME, RecoveryPath.REPLAY) if unstable else (RecoveryPath.REPLAY,)
        assert outcome.path in expected_path, seen
        # The agent stored the interrupted prompt but not its partial answer: each turn once, in order.
        done = "user: hello\nagent: echo: hello\nuser [interrupted]: " + slow  # the cut-off turn is marked
        await eventually(
            lambda: handle.transcript.text().startswith(done),
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        counts = message_counts(handle.transcript.text())
        assert counts["user: hello"] == counts["agent: echo: hello"] == counts[f"user [interrupted]: {slow}"] == 1, seen
        # The partial answer the user saw stays, once, marked incomplete (the replay leaves it out).
        before = handle.transcript.all_messages()
        assert [(m.role, m.status) for m in before] == [
            ("user", TurnStatus.COMPLETE),
            ("agent", None),
            ("user", TurnStatus.INTERRUPTED),
            ("agent", None),
        ], seen
        partial = before[-1]
        full = "echo: " + slow.removeprefix("slow: ")
        assert partial.incomplete and partial.text.startswith("echo: one"), seen
        assert full.startswith(partial.text.rstrip()) and partial.text.rstrip() != full, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [
            *[(m.role, m.text) for m in before],
            ("user", "after"),
            ("agent", "echo: after"),
        ], seen


async def test_v2_proposal_reinitializes_in_the_v1_shape(pydantic_acp_agent: PydanticAcpAgent, tmp_path: Path) -> None:
    """pydantic-acp answers ``protocolVersion: 1`` to a v2 ``initialize``: the client says it again in v1's shape."""
    client, wire = wired_client(pydantic_acp_agent.command(tmp_path / "store"), Recorder(), protocol_version=2)
    async with client:
        assert client.protocol_version == 1
        params = wire.messages("initialize")[-1]["params"]
        assert params["protocolVersion"] == 1, wire.messages("initialize")
        assert "clientCapabilities" in params and "clientInfo" in params, wire.messages("initialize")
        session = await client.new_session(tmp_path)
        await client.prompt(session.session_id, "hello")
        assert client.session(session.session_id).transcript.text() == "user: hello\nagent: echo: hello"


@pytest.mark.parametrize("unstable", MODES)
async def test_evicted_session_is_not_continuity_and_never_stuck(
    pydantic_acp_agent: PydanticAcpAgent, tmp_path: Path, unstable: bool
) -> None:
    """The store removed while the agent was down. Stable: resume is -32601, the load answers ``{}`` and replays
    nothing (not continuity); the agent then refuses the next prompt with -32602 naming the session, which sends
    the session through recovery again, as lost, and the prompt (never run) goes once to the new session: the
    caller gets its answer. Unstable: resume answers that -32602 at once. Either way a new session follows, the
    lost conversation stays as earlier history (every turn once, as its own message), and the prompts run."""
    recorder = Recorder()
    store = tmp_path / "store"
    client, wire = wired_client(pydantic_acp_agent.command(store, unstable=unstable), recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        old_id = handle.session_id
        await handle.prompt("hello")
        await handle.prompt("tool: buy milk")
        expected = conversation(handle.transcript)
        assert "\n".join(f"{role}: {text}" for role, text in expected) == TWO_TURNS

        evict(PydanticAcpAgent.store_of(store))
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])
        assert not outcome.continuity and outcome.previous_session_id == old_id, seen
        if not unstable:
            assert outcome.path is RecoveryPath.REPLAY and outcome.session_id == old_id, seen
            assert [step for step, _ in outcome.steps] == ["session/resume", "session/load"], seen
            assert any("replayed nothing" in note for note in outcome.notes), seen
            # The first prompt after the recovery succeeds: refused on the old id, sent once on the new one.
            assert (await handle.prompt("first")).stop_reason == "end_turn", seen
            prompts = [m["params"]["sessionId"] for m in wire.messages("session/prompt")]
            assert prompts[-2:] == [old_id, handle.session_id] and handle.session_id != old_id, prompts
            outcome = await recorder.outcome(2, timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events[live:])
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.session_id not in (None, old_id), seen
        assert outcome.lost_turns == 2, seen
        assert [(segment.session_id, segment.lost) for segment in new.transcript.segments] == [
            (old_id, True),
            (outcome.session_id, False),
        ], seen

        assert (await new.prompt("after")).stop_reason == "end_turn", seen
        first = [] if unstable else [("user", "first"), ("agent", "echo: first")]
        assert conversation(new.transcript) == [*expected, *first, ("user", "after"), ("agent", "echo: after")], seen
        statuses = [m.status for m in new.transcript.all_messages() if m.role == "user"]
        assert statuses == [TurnStatus.COMPLETE] * len(statuses), seen
