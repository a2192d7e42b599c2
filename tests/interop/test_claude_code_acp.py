"""Zed's older claude-code-acp 0.16.2 (the Claude Code CLI behind an ACP adapter) over stdio, end to end.

Run like claude-agent-acp (``tests/interop/test_claude_agent_acp.py``): from the tests' cache
(``tests/peers/claude_agents.py``), against the fake Anthropic Messages server on loopback, and with no
route off the machine: the plugin blocklist is pre-seeded fresh in the CLI's config dir, its calls out
are turned off (``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``, ``DISABLE_TELEMETRY``,
``DISABLE_AUTOUPDATER``, ``DISABLE_ERROR_REPORTING``), and the metrics call this adapter's CLI still
makes at every start goes to the dead loopback proxy every proxy variable names. ``IS_SANDBOX`` stays
out of its environment (the client's allowlist).

What it does differently (pinned in ``test_facts``, written up in ``docs/agents-conformance.md``): no
``session/close``; its replay has no ``/model`` run (``[Request interrupted by user]`` after a cancel
is still there); a prompt cut off by a kill is neither replayed nor sent to the model again; an unknown
session is -32603 ``Internal error`` with ``data.details: "Session not found"`` on ``session/load``
too. It offers ``session/resume`` and no ``session/status``, so the client resumes after a drop, and
continuity after a respawn is UNVERIFIED; the fake model's recorded history shows what the agent kept.

One adapter process (and fake model) serves the module: each kill respawns the next test's agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from acp_client import RecoveryPath
from acp_client.exceptions import InternalError
from acp_client.state import Continuity
from acp_client.transcript import TurnStatus
from tests.interop._claude import INTERRUPTED, SLOW_PROMPT, drop_turn, remembered, stored, typed
from tests.interop._real_agents import (
    SLOW,
    ModelledAgent,
    assert_lost_then_new,
    chunks,
    conversation,
    describe,
    echo_turn,
    evict,
    kill_agent,
    kill_mid_turn,
    model_history,
    modelled_agent,
    once,
    session_with,
    streaming,
)
from tests.peers.claude_agents import ClaudeAdapter
from tests.peers.fake_anthropic import FakeAnthropic

# Only the test itself is timed: on a fresh machine the fixture first installs the adapter (npm).
pytestmark = pytest.mark.timeout(120, func_only=True)

#: One client, one adapter process (respawned by each kill) and the fake model, for the module.
Shared = ModelledAgent[FakeAnthropic]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(claude_code_acp: ClaudeAdapter, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    home = tmp_path_factory.mktemp("claude-code") / "home"
    async with modelled_agent(FakeAnthropic(chunk_delay=0.3), claude_code_acp.command, home) as shared:
        yield shared


@pytest.mark.asyncio(loop_scope="module")
async def test_facts(shared: Shared, tmp_path: Path) -> None:
    """load + resume + list + fork, no status, no close; id-less chunks; a replay without a /model run;
    -32603 'Session not found' for an unknown session on load and prompt."""
    client, _, recorder = shared.agent.take()
    try:
        caps = client.agent_capabilities
        for method in ("session/load", "session/resume", "session/list", "session/fork"):
            assert caps.supports(method), method
        assert not caps.supports("session/status") and not caps.supports("session/close")

        handle = await client.new_session(tmp_path)
        start = len(recorder.events)
        assert (await handle.prompt("hello")).stop_reason == "end_turn"
        assert chunks(recorder.events[start:]) == [("", None), ("echo: he", None), ("llo", None)]
        await stored(shared.home, handle.session_id, "echo: hello")

        attach = {"sessionId": handle.session_id, "cwd": str(tmp_path), "mcpServers": []}
        start = len(recorder.events)
        await client.request("session/load", attach)
        replayed = [
            (e.update.kind, getattr(e.update.content, "text", None), e.update.message_id)
            for e in recorder.events[start:]
            if e.update.kind.endswith("_message_chunk")
        ]
        assert replayed == [("user_message_chunk", "hello", None), ("agent_message_chunk", "echo: hello", None)]

        for method, params in (
            ("session/load", {"cwd": str(tmp_path), "mcpServers": []}),
            ("session/prompt", {"prompt": [{"type": "text", "text": "x"}]}),
        ):
            with pytest.raises(InternalError) as failed:
                await client.request(method, {"sessionId": "00000000-0000-4000-8000-000000000000", **params})
            assert (failed.value.message, failed.value.data) == ("Internal error", {"details": "Session not found"})
        assert shared.llm.unknown == []
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_idle_resumes_unverified_and_the_agent_remembers(shared: Shared, tmp_path: Path) -> None:
    client, wire, recorder = shared.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "hello", "second")
        await stored(shared.home, handle.session_id, "echo: second")

        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events)
        assert outcome.path is RecoveryPath.RESUME and outcome.continuity is Continuity.UNVERIFIED, seen
        assert outcome.session_id == outcome.previous_session_id == handle.session_id, seen
        assert conversation(handle.transcript) == expected, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("after")], seen
        assert remembered(shared.llm, "after") == model_history(expected)
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_mid_stream_keeps_the_partial_answer_the_agent_dropped(shared: Shared, tmp_path: Path) -> None:
    """The prompt cut off by the kill is gone from the agent (not replayed, not sent to the model again);
    the client keeps it once, interrupted, with its partial answer marked incomplete, and a forced
    replay does not count it as a missing completed turn."""
    client, wire, recorder = shared.agent.take()
    try:
        handle = await client.new_session(tmp_path)
        await handle.prompt("hello")
        await stored(shared.home, handle.session_id, "echo: hello")
        turn = await streaming(handle, recorder.events, SLOW_PROMPT, until="beta")

        await kill_mid_turn(wire, turn)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events)
        assert outcome.path is RecoveryPath.RESUME and outcome.continuity is Continuity.UNVERIFIED, seen
        got = conversation(handle.transcript)
        assert got[:3] == [*echo_turn("hello"), ("user", SLOW_PROMPT)], seen
        assert len(got) == 4 and got[3][1].startswith("echo: SLOW alpha beta"), seen
        assert once(handle.transcript, "user", SLOW_PROMPT).status is TurnStatus.INTERRUPTED, seen
        assert handle.transcript.all_messages()[3].incomplete, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert remembered(shared.llm, "after") == model_history(echo_turn("hello"))
        await stored(shared.home, handle.session_id, "echo: after")

        live = len(recorder.events)
        await client.load_session(handle.session_id, tmp_path)
        report = handle.transcript.last_replay
        seen = describe(outcome, handle.transcript, recorder.events[live:]) + f"\nreport={report}"
        assert report is not None and report.missing_turns == () and report.lacks_history() is None, seen
        assert typed(handle.transcript) == [*got, *echo_turn("after")], seen
        assert handle.transcript.all_messages()[3].incomplete, seen
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_cancel_then_prompt_then_forced_replay(shared: Shared, tmp_path: Path) -> None:
    client, wire, recorder = shared.agent.take()
    try:
        handle = await client.new_session(tmp_path)
        await handle.prompt("hello")
        turn = await streaming(handle, recorder.events, SLOW_PROMPT, until="alpha")
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
        assert (await handle.prompt("right after the cancel")).stop_reason == "end_turn"
        before = conversation(handle.transcript)
        assert [role for role, _ in before] == ["user", "agent", "user", "agent", "user", "agent"], before
        await stored(shared.home, handle.session_id, "echo: right after the cancel")

        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        assert outcome.continuity is Continuity.UNVERIFIED, describe(outcome, handle.transcript)

        live = len(recorder.events)
        await client.load_session(handle.session_id, tmp_path)
        report = handle.transcript.last_replay
        seen = describe(outcome, handle.transcript, recorder.events[live:]) + f"\nreport={report}"
        assert report is not None and report.missing_turns == () and report.inserted == 1, seen
        assert [(m.role, m.text) for m in handle.transcript.all_messages() if m.inserted] == [("user", INTERRUPTED)]
        assert typed(handle.transcript) == before, seen
        assert once(handle.transcript, "user", SLOW_PROMPT).status is TurnStatus.CANCELLED, seen
        assert once(handle.transcript, "agent", before[3][1]).incomplete, seen
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_before_the_cli_wrote_the_last_turn(shared: Shared, tmp_path: Path) -> None:
    """A kill before the CLI wrote the last turn (made deterministic by cutting the file as such a kill
    leaves it): the resume by the respawned process is UNVERIFIED, the model is sent the history without
    that turn, and a load afterwards names it as missing (continuity LOST)."""
    client, wire, recorder = shared.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "hello", "second")
        await stored(shared.home, handle.session_id, "echo: second")

        kill_agent(wire)
        drop_turn(shared.home, handle.session_id, "second")  # at once, before the loop can respawn the agent
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events)
        assert outcome.path is RecoveryPath.RESUME and outcome.continuity is Continuity.UNVERIFIED, seen

        live = len(recorder.events)
        await client.load_session(handle.session_id, tmp_path)
        report = handle.transcript.last_replay
        seen = describe(outcome, handle.transcript, recorder.events[live:]) + f"\nreport={report}"
        assert report is not None and report.missing_turns == ("second",) and report.lacks_history(), seen
        assert typed(handle.transcript) == expected, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert remembered(shared.llm, "after") == model_history(echo_turn("hello"))
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_evicted_session_goes_new_and_keeps_the_lost_conversation(shared: Shared, tmp_path: Path) -> None:
    """The CLI's session files removed while the agent was down: the resume is refused with -32603, the
    load that follows answers -32603 'Session not found', so a new session (continuity LOST); the old
    conversation stays as an earlier segment marked lost."""
    client, wire, recorder = shared.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "hello", "second")
        old_id = handle.session_id

        await stored(shared.home, old_id, "echo: second")  # the CLI has nothing left to write
        kill_agent(wire)
        evict(ClaudeAdapter.store_of(shared.home))  # at once, before the loop can respawn the agent
        outcome = await recorder.outcome(timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events)
        assert_lost_then_new(outcome, new.transcript, old_id, 2, seen)
        # The resume fails (-32603, the CLI found nothing to resume), so the client tries a load, which
        # answers the 'Session not found' spelling: a new session.
        assert [method for method, _ in outcome.steps] == ["session/resume", "session/load", "session/new"], seen
        assert outcome.steps[1] == ("session/load", "not_found"), seen
        assert conversation(new.transcript) == expected, seen

        assert (await new.prompt("after")).stop_reason == "end_turn"
        assert conversation(new.transcript) == [*expected, *echo_turn("after")], seen
        assert remembered(shared.llm, "after") == ()
    finally:
        shared.agent.release()
