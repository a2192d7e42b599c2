"""Zed's claude-agent-acp 0.23.1 (the Claude Code CLI behind an ACP adapter) over stdio, end to end.

The adapter runs from the tests' cache (``tests/peers/claude_agents.py``) fully offline: the CLI's model
is the fake Anthropic Messages server on loopback (``tests/peers/fake_anthropic.py``; ``hello`` is
answered ``echo: hello``, a ``SLOW ...`` prompt is streamed word by word), its configuration and
sessions are under a test's home, and nothing leaves 127.0.0.1: the plugin blocklist the CLI would
fetch at start is pre-seeded fresh in its config dir, its other calls out are turned off
(``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``, ``DISABLE_TELEMETRY``, ``DISABLE_AUTOUPDATER``,
``DISABLE_ERROR_REPORTING``), and every proxy variable points at a closed loopback port. The client's
environment allowlist keeps the machine's ``IS_SANDBOX`` out (as root the CLI refuses the
``--allow-dangerously-skip-permissions`` the adapter passes when it is set).

What the adapter does (pinned in ``test_facts``, written up in ``docs/agents-conformance.md``): it
offers ``session/load`` and ``session/resume`` but no ``session/status``, so the client resumes after
a drop; live chunks and the replay carry no ``messageId``; the replay puts its own user messages among
the prompts (``<command-name>/model…``, ``<local-command-stdout>…`` before the first prompt of each
agent process, ``[Request interrupted by user]`` after a cancel); the partial answer of a cancelled
or killed turn is not replayed. An unknown session is -32002 on ``session/load`` and -32603
``Internal error`` with ``data.details: "Session not found"`` on the other session methods. The CLI
writes each turn to its session file shortly after the turn ends (tens of milliseconds, up to a
second): a kill in that window loses the turn, which is why a resume by a respawned process cannot
claim continuity.

The fake model records the conversation the CLI sends with each request, so the tests can prove
whether the agent remembered the earlier turns after a recovery: continuity is asserted ``KEPT`` only
where that evidence exists, ``UNVERIFIED`` after a resume by a respawned process.

One adapter process (and fake model) serves the module: each kill respawns the next test's agent.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from acp_client import RecoveryPath
from acp_client.exceptions import InternalError, SessionNotFound
from acp_client.state import Continuity
from acp_client.store import SqliteSessionStore
from acp_client.transcript import TurnStatus
from tests.e2e._support import Recorder
from tests.interop._claude import (
    INTERRUPTED,
    MODEL_COMMAND,
    MODEL_SET,
    NO_RESPONSE,
    SLOW_PROMPT,
    TOOL_PROMPT,
    drop_turn,
    remembered,
    stored,
    typed,
)
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
    stdio_url,
    stored_client,
    streaming,
)
from tests.peers.claude_agents import ClaudeAdapter
from tests.peers.fake_anthropic import FakeAnthropic

# Only the test itself is timed: on a fresh machine the fixture first installs the adapter (npm).
pytestmark = pytest.mark.timeout(120, func_only=True)

#: One client, one adapter process (respawned by each kill) and the fake model, for the module.
Shared = ModelledAgent[FakeAnthropic]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(claude_agent_acp: ClaudeAdapter, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    home = tmp_path_factory.mktemp("claude-agent") / "home"
    async with modelled_agent(FakeAnthropic(chunk_delay=0.3), claude_agent_acp.command, home) as shared:
        yield shared


@pytest.mark.asyncio(loop_scope="module")
async def test_facts(shared: Shared, tmp_path: Path) -> None:
    """load + resume + list + fork + close, no status; id-less chunks; the replay's own user messages;
    -32002 on load and -32603 'Session not found' elsewhere for an unknown session; IS_SANDBOX kept out."""
    client, _, recorder = shared.agent.take()
    try:
        assert client.protocol_version == 1
        caps = client.agent_capabilities
        for method in ("session/load", "session/resume", "session/list", "session/fork", "session/close"):
            assert caps.supports(method), method
        assert not caps.supports("session/status")

        handle = await client.new_session(tmp_path)
        modes = handle.record.modes
        assert modes is not None and modes.current_mode_id == "default"
        if os.geteuid() == 0:  # the adapter offers bypassPermissions as root only when IS_SANDBOX is set
            assert "bypassPermissions" not in {mode.id for mode in modes.available_modes}

        start = len(recorder.events)
        assert (await handle.prompt("hello")).stop_reason == "end_turn"
        assert chunks(recorder.events[start:]) == [("", None), ("echo: he", None), ("llo", None)]
        assert shared.llm.history_for("hello") == (("user", "hello"),)

        # The model asks for a tool: the CLI runs it (a read-only command needs no permission) and
        # sends the result back; the adapter shows the call, then the answer.
        start = len(recorder.events)
        assert (await handle.prompt(TOOL_PROMPT)).stop_reason == "end_turn"
        kinds = [e.update.kind for e in recorder.events[start:] if e.update.kind != "usage_update"]
        assert kinds[:2] == ["tool_call", "tool_call_update"] and "agent_message_chunk" in kinds, kinds
        assert "".join(text or "" for text, _ in chunks(recorder.events[start:])) == "tool said: hi-from-tool"
        assert shared.llm.prompts[-1] == "[tool_result hi-from-tool]"

        # Cancel mid-stream: stopReason cancelled; the next prompt runs.
        turn = await streaming(handle, recorder.events, SLOW_PROMPT, until="alpha")
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
        assert (await handle.prompt("second")).stop_reason == "end_turn"

        # load of the live session replays the history from the CLI's file: no ids, the /model run of
        # the process before the first prompt, the interruption mark after the cancelled prompt, and
        # no partial answer.
        await stored(shared.home, handle.session_id, "echo: second")
        attach = {"sessionId": handle.session_id, "cwd": str(tmp_path), "mcpServers": []}
        start = len(recorder.events)
        await client.request("session/load", attach)
        replayed = [
            (e.update.kind.removesuffix("_message_chunk"), getattr(e.update.content, "text", None), e.update.message_id)
            for e in recorder.events[start:]
            if e.update.kind.endswith("_message_chunk")
        ]
        assert [(kind, text) for kind, text, _ in replayed] == [
            ("user", MODEL_COMMAND),
            ("user", MODEL_SET),
            ("user", "hello"),
            ("agent", "echo: hello"),
            ("user", TOOL_PROMPT),
            ("agent", "tool said: hi-from-tool"),
            ("user", SLOW_PROMPT),
            ("user", INTERRUPTED),
            ("user", "second"),
            ("agent", "echo: second"),
        ]
        assert all(message_id is None for _, _, message_id in replayed)

        # An unknown session: -32002 on load; -32603 'Internal error' + details 'Session not found' on the
        # other session methods (session/cancel is a notification: the adapter logs the same error).
        with pytest.raises(SessionNotFound) as lost:
            await client.request("session/load", {**attach, "sessionId": "00000000-0000-4000-8000-000000000000"})
        assert lost.value.data == {"uri": "00000000-0000-4000-8000-000000000000"}
        unknown = "no-such-session"
        for method, params in (
            ("session/prompt", {"prompt": [{"type": "text", "text": "x"}]}),
            ("session/set_mode", {"modeId": "default"}),
        ):
            with pytest.raises(InternalError) as failed:
                await client.request(method, {"sessionId": unknown, **params})
            assert (failed.value.message, failed.value.data) == ("Internal error", {"details": "Session not found"})
        assert shared.llm.unknown == []  # the CLI called nothing the fake model does not serve
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_idle_resumes_unverified_and_the_agent_remembers(shared: Shared, tmp_path: Path) -> None:
    """SIGKILL between turns, once the CLI wrote the last turn: resume (no status to probe) on a respawned
    process, so continuity is UNVERIFIED (nothing in memory survived; only the agent's file can say);
    the conversation is untouched, and the next prompt shows the agent had both turns."""
    client, wire, recorder = shared.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "hello", "second")
        assert conversation(handle.transcript) == expected
        await stored(shared.home, handle.session_id, "echo: second")

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])
        assert outcome.path is RecoveryPath.RESUME, seen
        assert outcome.continuity is Continuity.UNVERIFIED, seen
        assert outcome.session_id == outcome.previous_session_id == handle.session_id, seen
        assert [method for method, _ in outcome.steps] == ["session/resume"], seen
        assert conversation(handle.transcript) == expected, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("after")], seen
        assert remembered(shared.llm, "after") == model_history(expected)
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_mid_stream_keeps_the_partial_answer(shared: Shared, tmp_path: Path) -> None:
    client, wire, recorder = shared.agent.take()
    try:
        handle = await client.new_session(tmp_path)
        await handle.prompt("hello")
        turn = await streaming(handle, recorder.events, SLOW_PROMPT, until="beta")
        await stored(shared.home, handle.session_id, SLOW_PROMPT)

        live = len(recorder.events)
        await kill_mid_turn(wire, turn)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])
        assert outcome.path is RecoveryPath.RESUME and outcome.continuity is Continuity.UNVERIFIED, seen
        assert outcome.session_id == outcome.previous_session_id == handle.session_id, seen

        got = conversation(handle.transcript)
        assert got[:3] == [*echo_turn("hello"), ("user", SLOW_PROMPT)], seen
        assert len(got) == 4 and got[3][1].startswith("echo: SLOW alpha beta"), seen
        assert once(handle.transcript, "user", SLOW_PROMPT).status is TurnStatus.INTERRUPTED, seen
        assert handle.transcript.all_messages()[3].incomplete, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*got, *echo_turn("after")], seen
        memory = remembered(shared.llm, "after")
        assert memory == (
            ("user", "hello"),
            ("assistant", "echo: hello"),
            ("user", SLOW_PROMPT),
            ("assistant", NO_RESPONSE),
        ), memory

        # A load now (a replay the app asks for) brings the interrupted prompt without its partial answer
        # but with the CLI's own stand-in answer for it, and a /model run before each process's first
        # prompt: the partial stays, marked incomplete; the stand-in (what the agent now holds as its
        # answer, and sends the model) comes after it as a message of its own, fused with nothing.
        await stored(shared.home, handle.session_id, "echo: after")
        before = typed(handle.transcript)
        live = len(recorder.events)
        await client.load_session(handle.session_id, tmp_path)
        report = handle.transcript.last_replay
        seen = describe(outcome, handle.transcript, recorder.events[live:]) + f"\nreport={report}"
        assert report is not None and report.missing_turns == () and report.lacks_history() is None, seen
        assert typed(handle.transcript) == [*before[:4], ("agent", NO_RESPONSE), *before[4:]], seen
        assert [m.text for m in handle.transcript.all_messages() if m.inserted] == [MODEL_COMMAND + MODEL_SET] * 2, seen
        assert handle.transcript.all_messages()[4].incomplete, seen
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_cancel_then_prompt_then_forced_replay(shared: Shared, tmp_path: Path) -> None:
    """A cancelled turn, a prompt after it, a kill, and then a load of the session (a replay the app
    asks for): every prompt once and alone, the adapter's own user messages kept apart and marked
    inserted, the cancelled turn's partial answer kept and marked incomplete, every completed turn
    found in the replay (the model's history agrees)."""
    client, wire, recorder = shared.agent.take()
    after_cancel = "right after the cancel"
    try:
        handle = await client.new_session(tmp_path)
        await handle.prompt("hello")
        turn = await streaming(handle, recorder.events, SLOW_PROMPT, until="alpha")
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
        assert (await handle.prompt(after_cancel)).stop_reason == "end_turn"
        # The adapter answers end_turn for the prompt after a cancel before the model's answer is shown
        # (the answer may never come live); it is in the CLI's file, and so in the replay.
        await stored(shared.home, handle.session_id, f"echo: {after_cancel}")
        shown = conversation(handle.transcript)
        assert [text for role, text in shown if role == "user"] == ["hello", SLOW_PROMPT, after_cancel], shown
        partial = shown[3]
        assert partial[0] == "agent" and partial[1].startswith("echo: SLOW alpha"), shown
        expected = [*shown[:5], ("agent", f"echo: {after_cancel}")]
        assert shown in (expected, expected[:5]), shown

        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        assert outcome.continuity is Continuity.UNVERIFIED, describe(outcome, handle.transcript)

        live = len(recorder.events)
        loaded = await client.load_session(handle.session_id, tmp_path)
        assert loaded == handle
        report = handle.transcript.last_replay
        seen = describe(outcome, handle.transcript, recorder.events[live:]) + f"\nreport={report}"
        assert report is not None and report.missing_turns == () and report.lacks_history() is None, seen
        # The /model run and its output (two id-less chunks in a row: one message, by the protocol's
        # rule) before the first prompt of the first process, the mark after the cancelled prompt. The
        # respawned process has run no prompt yet, so it added no /model of its own.
        assert report.inserted == 2, seen
        inserted = [m.text for m in handle.transcript.all_messages() if m.inserted]
        assert inserted == [MODEL_COMMAND + MODEL_SET, INTERRUPTED], seen
        assert all(m.role == "user" for m in handle.transcript.all_messages() if m.inserted), seen
        assert typed(handle.transcript) == expected, seen
        assert once(handle.transcript, "user", SLOW_PROMPT).status is TurnStatus.CANCELLED, seen
        assert once(handle.transcript, "agent", partial[1]).incomplete, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert typed(handle.transcript) == [*expected, *echo_turn("after")], seen
        memory = remembered(shared.llm, "after")
        assert [text for role, text in memory if role == "user"] == ["hello", SLOW_PROMPT, after_cancel]
        assert ("assistant", f"echo: {after_cancel}") in memory, memory
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_before_the_cli_wrote_the_last_turn(shared: Shared, tmp_path: Path) -> None:
    """The CLI writes a turn to its file up to a second after answering ``end_turn``; a kill in that
    window loses the turn (made deterministic here by cutting the file as such a kill leaves it). The
    resume by the respawned process is UNVERIFIED, not KEPT: the model is then sent the history without
    that turn. A load afterwards replays without it, and the report names it: continuity LOST."""
    client, wire, recorder = shared.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "hello", "second")
        await stored(shared.home, handle.session_id, "echo: second")

        kill_agent(wire)
        # At once, before the loop can respawn the agent (the CLI had nothing left to write: see above).
        drop_turn(shared.home, handle.session_id, "second")
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events)
        assert outcome.path is RecoveryPath.RESUME and outcome.continuity is Continuity.UNVERIFIED, seen
        assert conversation(handle.transcript) == expected, seen

        live = len(recorder.events)
        await client.load_session(handle.session_id, tmp_path)
        report = handle.transcript.last_replay
        seen = describe(outcome, handle.transcript, recorder.events[live:]) + f"\nreport={report}"
        assert report is not None and report.missing_turns == ("second",), seen
        gap = report.lacks_history()
        assert gap is not None and "second" in gap, seen
        assert typed(handle.transcript) == expected, seen  # the client keeps what the agent lost

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        memory = remembered(shared.llm, "after")
        assert ("user", "second") not in memory and ("user", "hello") in memory, memory
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_evicted_session_goes_new_and_keeps_the_lost_conversation(shared: Shared, tmp_path: Path) -> None:
    """The CLI's session files removed while the agent was down: the resume answers -32002, so a new
    session (continuity LOST); the old conversation stays as an earlier segment marked lost."""
    client, wire, recorder = shared.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "hello", "second")
        old_id = handle.session_id

        await stored(shared.home, old_id, "echo: second")  # the CLI has nothing left to write
        live = len(recorder.events)
        kill_agent(wire)
        evict(ClaudeAdapter.store_of(shared.home))  # at once, before the loop can respawn the agent
        outcome = await recorder.outcome(timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events[live:])
        assert_lost_then_new(outcome, new.transcript, old_id, 2, seen)
        assert outcome.steps == (("session/resume", "not_found"), ("session/new", "ok")), seen
        assert conversation(new.transcript) == expected, seen

        assert (await new.prompt("after")).stop_reason == "end_turn"
        assert conversation(new.transcript) == [*expected, *echo_turn("after")], seen
        assert remembered(shared.llm, "after") == ()  # the new session starts afresh, as reported
    finally:
        shared.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_session_not_found_after_a_recovery_goes_to_a_new_session(shared: Shared, tmp_path: Path) -> None:
    """After a recovery, the adapter forgets the session (``session/close``): the next prompt is
    answered -32603 'Internal error' / 'Session not found', which the client reads as an unknown
    session: a new session, the prompt sent there once, the old conversation kept as lost."""
    client, wire, recorder = shared.agent.take()
    try:
        handle = await client.new_session(tmp_path)
        old_id = handle.session_id
        await handle.prompt("hello")
        await stored(shared.home, old_id, "echo: hello")
        kill_agent(wire)
        first = await recorder.outcome(timeout=SLOW)
        assert first.path is RecoveryPath.RESUME, describe(first, handle.transcript)

        await client.request("session/close", {"sessionId": old_id})
        result = await handle.prompt("orphan")
        assert result.stop_reason == "end_turn"
        outcome = await recorder.outcome(2, timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events)
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.continuity is Continuity.LOST, seen
        assert outcome.session_id not in (None, old_id), seen
        assert conversation(new.transcript) == [
            ("user", "hello"),
            ("agent", "echo: hello"),
            ("user", "orphan"),
            ("agent", "echo: orphan"),
        ], seen
        assert [m.text for m in new.transcript.messages] == ["orphan", "echo: orphan"], seen
        assert list(shared.llm.asked("orphan"))[-1].history == (("user", "orphan"),)
    finally:
        shared.agent.release()


async def test_editor_restart_with_a_store(
    claude_agent_acp: ClaudeAdapter, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """The editor closes (its agent process ends with it) and starts again with the same session store:
    the restored conversation shows at once, the resume by a new process is UNVERIFIED, and the model's
    history proves the agent had both turns."""
    url = stdio_url(claude_agent_acp.command(tmp_path / "home", fake_anthropic.base_url))
    work = tmp_path / "work"
    work.mkdir()
    expected = [*echo_turn("hello"), *echo_turn("second")]

    with SqliteSessionStore(tmp_path / "client.db") as store:
        async with stored_client(url, store, Recorder()) as client:
            handle = await client.new_session(work)
            old_id = handle.session_id
            await handle.prompt("hello")
            await handle.prompt("second")
            await stored(tmp_path / "home", old_id, "echo: second")

        recorder = Recorder()
        async with stored_client(url, store, recorder) as client:
            outcome = await recorder.outcome(timeout=SLOW)
            restored = client.session(old_id)
            seen = describe(outcome, restored.transcript, recorder.events)
            assert outcome.path is RecoveryPath.RESUME and outcome.continuity is Continuity.UNVERIFIED, seen
            assert outcome.session_id == old_id, seen
            assert conversation(restored.transcript) == expected, seen
            assert (await restored.prompt("third")).stop_reason == "end_turn"
            assert conversation(restored.transcript) == [*expected, *echo_turn("third")]
    assert remembered(fake_anthropic, "third") == model_history(expected)
