"""isaac-acp 0.4.0 (a pydantic-ai coding agent with its own ACP server) over stdio, end to end.

The agent runs from its cached environment (``tests/peers/real_agents.py``) with its model pointed
at the fake OpenAI-compatible server on loopback (``tests/peers/fake_openai.py``): ``hello`` is
answered ``echo: hello``; a ``slow: ...`` answer takes a while (to cancel or kill the agent mid-turn).
isaac sends the whole answer as one chunk when the turn ends (the model's deltas are not forwarded),
with a newline appended, and without a ``messageId``; it replays on ``session/load`` without ids
too. Sessions are files under the agent's home (``IsaacAcpAgent.store_of``); a respawned process
replays them. What the agent does is pinned in ``test_facts`` and written up in
``docs/agents-conformance.md``.

The recovery tests kill the agent idle or mid-turn (the stdio transport respawns it), or remove its
store first (eviction), and check what the client reports and that every turn is in the transcript
exactly once, as its own message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import pytest_asyncio

from acp_client import AcpClient, Callbacks, RecoveryPath, Timeouts, UpdateEvent
from acp_client.exceptions import MethodNotFound
from acp_client.transcript import TurnStatus
from tests._support import eventually
from tests.interop._real_agents import (
    POLICY,
    SLOW,
    SLOW_PROMPT,
    SharedAgent,
    chunks,
    conversation,
    describe,
    evict,
    kill_agent,
    kill_mid_turn,
    stdio_url,
)
from tests.peers.fake_openai import FakeOpenAI
from tests.peers.real_agents import IsaacAcpAgent

# isaac takes 10 s or more to start on a loaded machine, and each recovery test starts it twice.
# Only the test itself is timed: on a fresh machine the fixture first installs the agent into the cache
# (minutes; each install step has its own limit in tests/peers/real_agents.py).
pytestmark = pytest.mark.timeout(300, func_only=True)


@attrs.frozen
class Dying:
    """One isaac-acp client (and fake model) for the kill and evict tests: each kill respawns the
    next test's agent (isaac takes seconds to start)."""

    agent: SharedAgent
    llm: FakeOpenAI


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def dying(isaac_acp_agent: IsaacAcpAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Dying]:
    home = tmp_path_factory.mktemp("isaac-kills") / "home"
    with FakeOpenAI() as llm:
        agent = SharedAgent(isaac_acp_agent.command(home, llm.base_url), store=home)
        async with agent.client:
            yield Dying(agent, llm)


async def _model_got(llm: FakeOpenAI, prompt: str) -> None:
    await eventually(lambda: prompt in llm.prompts, timeout=SLOW, what=f"the model asked {prompt!r}")


async def test_facts(isaac_acp_agent: IsaacAcpAgent, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    """load + list, no resume, no status; one id-less chunk per answer; lost ids are not errors; cancel works."""
    events: list[UpdateEvent] = []
    url = stdio_url(isaac_acp_agent.command(tmp_path / "home", fake_openai.base_url))
    async with AcpClient(
        url, retry=POLICY, timeouts=Timeouts(connect=SLOW), callbacks=Callbacks(on_update=events.append)
    ) as client:
        assert client.protocol_version == 1
        caps = client.agent_capabilities
        assert caps.supports("session/load") and caps.supports("session/list")
        assert not caps.supports("session/resume") and not caps.supports("session/status")

        handle = await client.new_session(tmp_path)
        session = handle.record
        assert session.modes is not None and session.modes.current_mode_id == "ask"

        # The answer arrives as one chunk at the end of the turn, newline appended, without a messageId.
        start = len(events)
        assert (await handle.prompt("hello")).stop_reason == "end_turn"
        assert chunks(events[start:]) == [("echo: hello\n", None)]
        assert fake_openai.prompts == ["hello"]

        with pytest.raises(MethodNotFound):
            await client.request("session/status", {"sessionId": session.session_id})
        attach = {"cwd": str(tmp_path), "mcpServers": []}
        with pytest.raises(MethodNotFound):
            await client.request("session/resume", {**attach, "sessionId": session.session_id})

        # An id the agent never had: load answers success and replays nothing, and a prompt to it runs.
        start = len(events)
        loaded = await client.request("session/load", {**attach, "sessionId": "never-created"})
        assert isinstance(loaded, dict) and "configOptions" in loaded
        prompted = await client.request(
            "session/prompt", {"sessionId": "never-created", "prompt": [{"type": "text", "text": "who"}]}
        )
        assert prompted == {"stopReason": "end_turn"}
        made_up = [e for e in events[start:] if e.update.kind.endswith("_message_chunk")]
        assert [(e.session_id, e.update.kind) for e in made_up] == [("never-created", "agent_message_chunk")]
        assert chunks(made_up) == [("echo: who\n", None)]  # the load replayed nothing

        # Cancel a running turn (nothing was shown yet): stopReason cancelled.
        turn = asyncio.create_task(handle.prompt(SLOW_PROMPT))
        await _model_got(fake_openai, SLOW_PROMPT)
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"

        listed = {item.session_id for item in (await client.list_sessions()).sessions}
        assert session.session_id in listed


def _status(transcript: object, prompt: str) -> TurnStatus | None:
    found = [m.status for m in transcript.all_messages() if m.role == "user" and m.text == prompt]  # type: ignore[attr-defined]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_idle_keeps_every_turn_once(dying: Dying, tmp_path: Path) -> None:
    """A cancelled turn without an answer, then another prompt: isaac replays two id-less user messages in a
    row; they stay two messages, each turn once."""
    client, wire, recorder = dying.agent.take()
    fake_openai = dying.llm
    fake_openai.prompts.clear()
    try:
        handle = await client.new_session(tmp_path)
        session_id = handle.session_id
        await handle.prompt("hello")
        turn = asyncio.create_task(handle.prompt(SLOW_PROMPT))
        await _model_got(fake_openai, SLOW_PROMPT)
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
        await handle.prompt("second")
        expected = [
            ("user", "hello"),
            ("agent", "echo: hello\n"),
            ("user", SLOW_PROMPT),
            ("user", "second"),
            ("agent", "echo: second\n"),
        ]
        assert conversation(handle.transcript) == expected

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        # No status, no resume: load, which replays the history (without ids).
        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity, seen
        assert outcome.session_id == outcome.previous_session_id == session_id, seen
        assert [method for method, _ in outcome.steps] == ["session/load"], seen
        await eventually(
            lambda: conversation(handle.transcript) == expected,
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        assert _status(handle.transcript, SLOW_PROMPT) is TurnStatus.CANCELLED, seen
        assert _status(handle.transcript, "second") is TurnStatus.COMPLETE, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, ("user", "after"), ("agent", "echo: after\n")]
    finally:
        dying.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_mid_turn_reports_the_turn_and_keeps_the_rest(dying: Dying, tmp_path: Path) -> None:
    client, wire, recorder = dying.agent.take()
    fake_openai = dying.llm
    fake_openai.prompts.clear()
    try:
        handle = await client.new_session(tmp_path)
        session_id = handle.session_id
        await handle.prompt("hello")
        turn = asyncio.create_task(handle.prompt(SLOW_PROMPT))
        await _model_got(fake_openai, SLOW_PROMPT)  # isaac shows nothing of an answer before the turn ends

        live = len(recorder.events)
        await kill_mid_turn(wire, turn)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert [getattr(block, "text", None) for item in recorder.interrupted for block in item.prompt] == [SLOW_PROMPT]
        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity, seen
        assert outcome.session_id == outcome.previous_session_id == session_id, seen
        # isaac stored the interrupted prompt (no answer): each turn once, the prompt marked interrupted.
        expected = [("user", "hello"), ("agent", "echo: hello\n"), ("user", SLOW_PROMPT)]
        await eventually(
            lambda: conversation(handle.transcript) == expected,
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        assert _status(handle.transcript, SLOW_PROMPT) is TurnStatus.INTERRUPTED, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, ("user", "after"), ("agent", "echo: after\n")]
    finally:
        dying.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_evicted_session_is_not_reported_as_continuity(dying: Dying, tmp_path: Path) -> None:
    """The store removed while the agent was down: isaac answers the load with success and replays nothing.
    The client must not claim continuity, and keeps the conversation the agent lost."""
    client, wire, recorder = dying.agent.take()
    fake_openai = dying.llm
    fake_openai.prompts.clear()
    home = dying.agent.store
    assert home is not None
    try:
        handle = await client.new_session(tmp_path)
        await handle.prompt("hello")
        await handle.prompt("second")
        expected = [("user", "hello"), ("agent", "echo: hello\n"), ("user", "second"), ("agent", "echo: second\n")]
        assert conversation(handle.transcript) == expected

        evict(IsaacAcpAgent.store_of(home))
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.REPLAY and not outcome.continuity, seen
        assert any("replayed nothing for a session with 2 turn(s)" in note for note in outcome.notes), seen  # why
        assert outcome.session_id == outcome.previous_session_id, seen  # isaac serves the id (an empty session)
        assert conversation(handle.transcript) == expected, seen  # nothing thrown away, nothing doubled

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, ("user", "after"), ("agent", "echo: after\n")], seen
        assert [m.status for m in handle.transcript.all_messages() if m.role == "user"] == [TurnStatus.COMPLETE] * 3
        assert fake_openai.prompts[-1] == "after"  # the model was asked again: the prompt ran
    finally:
        dying.agent.release()
