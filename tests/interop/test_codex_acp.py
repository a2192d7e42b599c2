"""codex-acp 0.16 (Zed's ACP adapter around the Codex CLI) over stdio, end to end.

The agent runs from its cached install (``tests/peers/codex_pi_agents.py``) with its home in a test
directory and its model the fake Responses API server on loopback (``tests/peers/fake_responses.py``):
``hello`` is answered ``echo: hello`` in two deltas, a ``SLOW ...`` prompt word by word (a turn to
cancel or kill mid-stream). The fake server records the history codex sends with every request, which
is what codex remembers: the tests read it to prove whether the agent still had the earlier turns.

What codex does on the wire (``docs/agents-conformance.md``): it advertises ``loadSession`` and
``session/resume`` (no ``session/status``); live chunks come without ``messageId``; ``session/resume``
attaches without replaying; ``session/load`` replays id-less ``user_message_chunk`` /
``agent_message_chunk`` pairs, without the partial answer of a cancelled turn; an unknown session is
``-32002`` on load, resume and prompt. Sessions are rollout files under ``CODEX_HOME/sessions``: a
respawned process resumes them from disk.

So a kill makes the client resume (no probe, resume advertised): the agent was respawned, so the
client cannot know whether it kept the session and says *unverified* (the model then shows whether it
did: it does, unless its rollout file lost a turn, which the resume does not reveal).
A forced replay holding every completed turn keeps continuity; an evicted session goes new, lost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from acp_client import RecoveryPath
from acp_client.exceptions import MethodNotFound, SessionNotFound
from acp_client.state import Continuity
from acp_client.store import SqliteSessionStore
from acp_client.transcript import TurnStatus
from tests._support import eventually
from tests.e2e._support import Recorder
from tests.interop._real_agents import (
    SLOW,
    SLOW_WORDS_PROMPT,
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
    replayed_chunks,
    session_with,
    stdio_url,
    stored_client,
    streaming,
    wired_client,
)
from tests.peers.codex_pi_agents import CodexAcpAgent
from tests.peers.fake_responses import FakeResponses

# Only the test itself is timed: on a fresh machine the fixture first installs the agent (npm, ~10 s).
pytestmark = pytest.mark.timeout(120, func_only=True)

Codex = ModelledAgent[FakeResponses]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def codex(codex_acp_agent: CodexAcpAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Codex]:
    home = tmp_path_factory.mktemp("codex") / "home"
    async with modelled_agent(FakeResponses(chunk_delay=0.2), codex_acp_agent.command, home) as shared:
        yield shared


@pytest.mark.asyncio(loop_scope="module")
async def test_facts(codex: Codex, tmp_path: Path) -> None:
    """load + resume + list + close, no status; id-less live chunks; a tool call; -32002 for an unknown session."""
    client, _, recorder = codex.agent.take()
    try:
        assert client.protocol_version == 1
        caps = client.agent_capabilities
        assert caps.supports("session/load") and caps.supports("session/resume") and caps.supports("session/list")
        assert not caps.supports("session/status")

        handle = await client.new_session(tmp_path)
        start = len(recorder.events)
        assert (await handle.prompt("facts hello")).stop_reason == "end_turn"
        assert chunks(recorder.events[start:]) == [("echo: facts", None), (" hello", None)]
        assert codex.llm.history_for("facts hello") == (("user", "facts hello"),)

        # A tool the model asks for. There is no sandbox here (no bubblewrap): the command asks to run outside.
        note = tmp_path / "note.txt"
        note.write_text("a note", encoding="utf-8")
        await client.request("session/set_mode", {"sessionId": handle.session_id, "modeId": "auto"})
        start = len(recorder.events)
        command = '{"cmd": "cat note.txt", "sandbox_permissions": "require_escalated", "justification": "a test"}'
        assert (await handle.prompt(f"TOOL exec_command {command}")).stop_reason == "end_turn"
        calls = [
            (e.update.kind, getattr(e.update, "status", None))
            for e in recorder.events[start:]
            if e.update.kind.startswith("tool_call")
        ]
        assert calls == [("tool_call", "in_progress"), ("tool_call_update", "completed")]
        [(answer, _)] = chunks(recorder.events[start:])
        assert answer.startswith("tool said: ") and answer.endswith("Output:\na note"), answer
        assert codex.llm.requests[-1].history[-1] == ("tool", answer.removeprefix("tool said: "))

        with pytest.raises(MethodNotFound):
            await client.request("session/status", {"sessionId": handle.session_id})
        unknown = {"sessionId": "01a24f76-0000-7000-8000-000000000000", "cwd": str(tmp_path), "mcpServers": []}
        for method in ("session/load", "session/resume"):
            with pytest.raises(SessionNotFound) as missing:
                await client.request(method, unknown)
            assert (missing.value.code, missing.value.message) == (-32002, "Resource not found")
        with pytest.raises(SessionNotFound):
            await client.request("session/prompt", {"sessionId": unknown["sessionId"], "prompt": []})
    finally:
        codex.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_idle_resumes_unverified(codex: Codex, tmp_path: Path) -> None:
    """SIGKILL between turns: the respawned codex resumes the session from disk, without a replay. The client
    cannot know that it kept the conversation: continuity unverified. The model then shows that it did."""
    client, wire, recorder = codex.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "idle hello", "idle second")
        session_id = handle.session_id
        assert conversation(handle.transcript) == expected

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.RESUME and outcome.session_id == session_id, seen
        assert outcome.continuity is Continuity.UNVERIFIED, seen
        assert [method for method, _ in outcome.steps] == ["session/resume"], seen
        assert outcome.replayed_updates == 0, seen
        assert conversation(handle.transcript) == expected, seen

        assert (await handle.prompt("idle after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("idle after")], seen
        # The respawned agent sent its model the whole conversation: it had kept it.
        assert codex.llm.history_for("idle after") == model_history([*expected, ("user", "idle after")]), seen
    finally:
        codex.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_resume_cannot_see_a_store_that_lost_the_last_turn(codex: Codex, tmp_path: Path) -> None:
    """Why a resume after a respawn is unverified, not kept: codex's rollout file lost its last turn (as when a
    turn reaches disk after its end), then a kill. The resume succeeds all the same and replays nothing, so the
    client cannot tell; it says unverified. The model shows the agent lacked the turn."""
    client, wire, recorder = codex.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "short hello", "short second")

        [file] = CodexAcpAgent.store_of(codex.home).rglob(f"rollout-*-{handle.session_id}.jsonl")
        lines = file.read_text(encoding="utf-8").splitlines(keepends=True)
        starts = [i for i, line in enumerate(lines) if json.loads(line)["payload"].get("type") == "task_started"]
        assert len(starts) == 2, lines
        file.write_text("".join(lines[: starts[-1]]), encoding="utf-8")  # the second turn, prompt and answer
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.RESUME and outcome.continuity is Continuity.UNVERIFIED, seen
        assert outcome.replayed_updates == 0, seen
        assert conversation(handle.transcript) == expected, seen

        assert (await handle.prompt("short after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("short after")], seen
        history = [*echo_turn("short hello"), ("user", "short after")]
        assert codex.llm.history_for("short after") == model_history(history), seen
    finally:
        codex.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_mid_stream_keeps_the_partial_answer(codex: Codex, tmp_path: Path) -> None:
    """SIGKILL while the answer streams: the prompt is reported interrupted, the partial answer kept and
    marked incomplete; the session resumes (unverified); codex had stored the cut prompt, not the partial."""
    client, wire, recorder = codex.agent.take()
    try:
        handle = await client.new_session(tmp_path)
        await handle.prompt("cut hello")
        turn = await streaming(handle, recorder.events, SLOW_WORDS_PROMPT, until="two")

        live = len(recorder.events)
        await kill_mid_turn(wire, turn)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert [getattr(b, "text", None) for item in recorder.interrupted for b in item.prompt] == [SLOW_WORDS_PROMPT]
        assert outcome.path is RecoveryPath.RESUME and outcome.continuity is Continuity.UNVERIFIED, seen
        got = conversation(handle.transcript)
        assert got[:3] == [*echo_turn("cut hello"), ("user", SLOW_WORDS_PROMPT)] and len(got) == 4, seen
        assert got[3][0] == "agent" and got[3][1].startswith("echo: one two"), seen
        assert once(handle.transcript, "user", SLOW_WORDS_PROMPT).status is TurnStatus.INTERRUPTED, seen
        assert once(handle.transcript, "agent", got[3][1]).incomplete, seen

        assert (await handle.prompt("cut after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*got, *echo_turn("cut after")], seen
        history = [*echo_turn("cut hello"), ("user", SLOW_WORDS_PROMPT), ("user", "cut after")]
        assert codex.llm.history_for("cut after") == model_history(history), seen
    finally:
        codex.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_evicted_session_goes_new_and_lost(codex: Codex, tmp_path: Path) -> None:
    """The sessions removed, then a kill: resume answers -32002, a new session; the conversation stays as an
    earlier segment marked lost, continuity lost; the model gets only the new prompt."""
    client, wire, recorder = codex.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "evict hello", "evict second")
        old_id = handle.session_id

        evict(CodexAcpAgent.store_of(codex.home))
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events[live:])

        assert_lost_then_new(outcome, new.transcript, old_id, 2, seen)
        assert [method for method, _ in outcome.steps] == ["session/resume", "session/new"], seen
        assert conversation(new.transcript) == expected, seen

        assert (await new.prompt("evict after")).stop_reason == "end_turn"
        assert conversation(new.transcript) == [*expected, *echo_turn("evict after")], seen
        assert codex.llm.history_for("evict after") == (("user", "evict after"),), seen
    finally:
        codex.agent.release()


class _ForceReplay(Recorder):
    """A recorder whose client asks for a replay whatever the decision table proposes."""

    def callbacks(self, **extra: Any) -> Any:
        return super().callbacks(decide_recovery=lambda context: RecoveryPath.REPLAY, **extra)


async def test_cancel_then_prompt_then_forced_replay(
    codex_acp_agent: CodexAcpAgent, fake_responses: FakeResponses, tmp_path: Path
) -> None:
    """A cancelled turn (partial answer shown), another prompt, then a kill with the app asking for a replay:
    codex's load replays the turns without the cancelled partial. Each prompt once, the partial kept and
    marked; every completed turn is in the replay, so continuity is kept, and the model shows it was."""
    fake_responses.chunk_delay = 0.2
    recorder = _ForceReplay()
    client, wire = wired_client(codex_acp_agent.command(tmp_path / "home", fake_responses.base_url), recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        session_id = handle.session_id
        await handle.prompt("hello")
        turn = await streaming(handle, recorder.events, SLOW_WORDS_PROMPT, until="two")
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
        partial = conversation(handle.transcript)[3]
        assert partial[0] == "agent" and partial[1].startswith("echo: one two"), handle.transcript.text()
        assert once(handle.transcript, "agent", partial[1]).incomplete
        await handle.prompt("after")
        expected = [*echo_turn("hello"), ("user", SLOW_WORDS_PROMPT), partial, *echo_turn("after")]
        assert conversation(handle.transcript) == expected
        # The cancelled turn's partial answer never reached codex's history.
        before = [*echo_turn("hello"), ("user", SLOW_WORDS_PROMPT), ("user", "after")]
        assert fake_responses.history_for("after") == model_history(before)

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.REPLAY and outcome.session_id == session_id, seen
        assert [method for method, _ in outcome.steps] == ["session/load"], seen
        assert replayed_chunks(recorder.events[live:]) == [
            ("user_message_chunk", "hello", None),
            ("agent_message_chunk", "echo: hello", None),
            ("user_message_chunk", SLOW_WORDS_PROMPT, None),
            ("user_message_chunk", "after", None),
            ("agent_message_chunk", "echo: after", None),
        ], seen
        await eventually(
            lambda: conversation(handle.transcript) == expected,
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        assert outcome.continuity is Continuity.KEPT, seen
        assert once(handle.transcript, "user", SLOW_WORDS_PROMPT).status is TurnStatus.CANCELLED, seen
        assert once(handle.transcript, "agent", partial[1]).incomplete, seen

        assert (await handle.prompt("third")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("third")], seen
        history = [*echo_turn("hello"), ("user", SLOW_WORDS_PROMPT), *echo_turn("after"), ("user", "third")]
        assert fake_responses.history_for("third") == model_history(history), seen


async def test_editor_restart_with_a_store_resumes_unverified(
    codex_acp_agent: CodexAcpAgent, fake_responses: FakeResponses, tmp_path: Path
) -> None:
    """The editor (client) restarts on its session store, the agent with it: the stored conversation shows
    at once, the session resumes (a new agent process: unverified), and the model shows codex kept it."""
    url = stdio_url(codex_acp_agent.command(tmp_path / "home", fake_responses.base_url))

    two = [*echo_turn("hello"), *echo_turn("second")]
    with SqliteSessionStore(tmp_path / "client.db") as store:
        async with stored_client(url, store, Recorder()) as client:
            handle = await client.new_session(tmp_path)
            old_id = handle.session_id
            await handle.prompt("hello")
            await handle.prompt("second")
            assert conversation(handle.transcript) == two

        recorder = Recorder()
        async with stored_client(url, store, recorder) as client:
            outcome = await recorder.outcome(timeout=SLOW)
            restored = client.session(old_id)
            seen = describe(outcome, restored.transcript, recorder.events)
            assert outcome.path is RecoveryPath.RESUME and outcome.session_id == old_id, seen
            assert outcome.continuity is Continuity.UNVERIFIED, seen
            assert conversation(restored.transcript) == two, seen
            assert (await restored.prompt("third")).stop_reason == "end_turn"
            assert conversation(restored.transcript) == [*two, *echo_turn("third")], seen
            assert fake_responses.history_for("third") == model_history([*two, ("user", "third")]), seen
