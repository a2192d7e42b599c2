"""pi-acp 0.0.34 (the ACP adapter of the pi coding agent, pi 1.6 under Node 22) over stdio, end to end.

The agent runs from its cached install (``tests/peers/codex_pi_agents.py``) with its home in a test
directory and its model the fake Responses API server on loopback (``tests/peers/fake_responses.py``,
pi's ``openai-responses`` API): ``hello`` is answered ``echo: hello`` in two deltas, a ``SLOW ...``
prompt word by word. The fake server records the history pi sends with every request, which is what
pi remembers: the tests read it to prove whether the agent still had the earlier turns.

What pi-acp does on the wire (``docs/agents-conformance.md``): it advertises ``loadSession`` and
``session/list``, neither ``session/resume`` nor ``session/status``; live chunks come without
``messageId``, between ``session_info_update``s; ``session/load`` replays id-less
``user_message_chunk`` / ``agent_message_chunk`` pairs, the partial answer of a cancelled turn
included (pi does not send that partial to its model again). Sessions are JSONL files under
``~/.pi/agent/sessions``, found through pi-acp's map ``~/.pi/pi-acp/session-map.json``: with the file
gone, load succeeds and replays nothing; with the map entry gone too, load answers ``-32602``
"Invalid params" (data ``Unknown sessionId: ...``), one of the spellings of "not found".

So every recovery after a kill is a replay (load), and continuity is kept exactly when the replay
brings back every completed turn (a session file cut short, or gone, makes it lost); the model shows
each time what pi had.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from acp_client import RecoveryPath
from acp_client.exceptions import InvalidParams, MethodNotFound
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
)
from tests.peers.codex_pi_agents import PiAcpAgent
from tests.peers.fake_responses import FakeResponses

# Only the test itself is timed: on a fresh machine the fixture first installs the agent (npm, ~15 s).
pytestmark = pytest.mark.timeout(120, func_only=True)

Pi = ModelledAgent[FakeResponses]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pi(pi_acp_agent: PiAcpAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pi]:
    home = tmp_path_factory.mktemp("pi") / "home"
    async with modelled_agent(FakeResponses(chunk_delay=0.2), pi_acp_agent.command, home) as shared:
        yield shared


@pytest.mark.asyncio(loop_scope="module")
async def test_facts(pi: Pi, tmp_path: Path) -> None:
    """load + list, no resume, no status; id-less live chunks; a tool call; -32602 "Unknown sessionId"."""
    client, _, recorder = pi.agent.take()
    try:
        assert client.protocol_version == 1
        caps = client.agent_capabilities
        assert caps.supports("session/load") and caps.supports("session/list")
        assert not caps.supports("session/resume") and not caps.supports("session/status")

        handle = await client.new_session(tmp_path)
        start = len(recorder.events)
        assert (await handle.prompt("facts hello")).stop_reason == "end_turn"
        assert chunks(recorder.events[start:]) == [("echo: facts", None), (" hello", None)]
        assert pi.llm.history_for("facts hello") == (("user", "facts hello"),)

        # A tool the model asks for: pi runs it (no permission asked) and reports the call; its output goes
        # back to the model, which answers with it.
        note = tmp_path / "note.txt"
        note.write_text("a note", encoding="utf-8")
        start = len(recorder.events)
        assert (await handle.prompt(f'TOOL read {{"path": "{note}"}}')).stop_reason == "end_turn"
        calls = [
            (e.update.kind, getattr(e.update, "status", None))
            for e in recorder.events[start:]
            if e.update.kind.startswith("tool_call")
        ]
        assert calls == [
            ("tool_call", "pending"),
            ("tool_call_update", "in_progress"),
            ("tool_call_update", "completed"),
        ]
        assert chunks(recorder.events[start:]) == [("tool said: a note", None)]
        assert pi.llm.requests[-1].history[-1] == ("tool", "a note")

        with pytest.raises(MethodNotFound):
            await client.request("session/status", {"sessionId": handle.session_id})
        unknown = "01a24f78-0000-7000-8000-000000000000"
        attach = {"sessionId": unknown, "cwd": str(tmp_path), "mcpServers": []}
        with pytest.raises(InvalidParams) as missing:
            await client.request("session/load", attach)
        assert (missing.value.message, missing.value.data) == ("Invalid params", f"Unknown sessionId: {unknown}")
        with pytest.raises(InvalidParams):
            await client.request("session/prompt", {"sessionId": unknown, "prompt": []})
    finally:
        pi.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_idle_replays_and_keeps_continuity(pi: Pi, tmp_path: Path) -> None:
    """SIGKILL between turns: pi's load replays both turns; each stays once, continuity kept (every completed
    turn came back), and the model shows the agent had them."""
    client, wire, recorder = pi.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "idle hello", "idle second")
        session_id = handle.session_id
        assert conversation(handle.transcript) == expected

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.REPLAY and outcome.session_id == session_id, seen
        assert [method for method, _ in outcome.steps] == ["session/load"], seen
        assert replayed_chunks(recorder.events[live:]) == [
            ("user_message_chunk", "idle hello", None),
            ("agent_message_chunk", "echo: idle hello", None),
            ("user_message_chunk", "idle second", None),
            ("agent_message_chunk", "echo: idle second", None),
        ], seen
        assert outcome.continuity is Continuity.KEPT, seen
        await eventually(
            lambda: conversation(handle.transcript) == expected,
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )

        assert (await handle.prompt("idle after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("idle after")], seen
        assert pi.llm.history_for("idle after") == model_history([*expected, ("user", "idle after")]), seen
    finally:
        pi.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_mid_stream_keeps_the_partial_answer(pi: Pi, tmp_path: Path) -> None:
    """SIGKILL while the answer streams: the prompt is reported interrupted, the partial answer kept and marked
    incomplete; the replay brings the completed turn and the cut prompt back (continuity kept)."""
    client, wire, recorder = pi.agent.take()
    try:
        handle = await client.new_session(tmp_path)
        await handle.prompt("cut hello")
        turn = await streaming(handle, recorder.events, SLOW_WORDS_PROMPT, until="two")

        live = len(recorder.events)
        await kill_mid_turn(wire, turn)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert [getattr(b, "text", None) for item in recorder.interrupted for b in item.prompt] == [SLOW_WORDS_PROMPT]
        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity is Continuity.KEPT, seen
        got = conversation(handle.transcript)
        assert got[:3] == [*echo_turn("cut hello"), ("user", SLOW_WORDS_PROMPT)] and len(got) == 4, seen
        assert got[3][0] == "agent" and got[3][1].startswith("echo: one two"), seen
        assert once(handle.transcript, "user", SLOW_WORDS_PROMPT).status is TurnStatus.INTERRUPTED, seen
        assert once(handle.transcript, "agent", got[3][1]).incomplete, seen

        assert (await handle.prompt("cut after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*got, *echo_turn("cut after")], seen
        # pi had stored the cut prompt (not the partial answer): the model gets both prompts.
        history = [*echo_turn("cut hello"), ("user", SLOW_WORDS_PROMPT), ("user", "cut after")]
        assert pi.llm.history_for("cut after") == model_history(history), seen
    finally:
        pi.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_cancel_then_prompt_then_kill(pi: Pi, tmp_path: Path) -> None:
    """A cancelled turn (partial answer shown), another prompt, then a kill: pi's load replays the cancelled
    turn's partial too. Each prompt and the partial once, the partial still marked; continuity kept."""
    client, wire, recorder = pi.agent.take()
    try:
        handle = await client.new_session(tmp_path)
        session_id = handle.session_id
        await handle.prompt("cancel hello")
        turn = await streaming(handle, recorder.events, SLOW_WORDS_PROMPT, until="two")
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
        partial = conversation(handle.transcript)[3]
        assert partial[0] == "agent" and partial[1].startswith("echo: one two"), handle.transcript.text()
        assert once(handle.transcript, "agent", partial[1]).incomplete
        await handle.prompt("cancel after")
        expected = [*echo_turn("cancel hello"), ("user", SLOW_WORDS_PROMPT), partial, *echo_turn("cancel after")]
        assert conversation(handle.transcript) == expected
        # pi keeps the partial in its session but does not send it to the model again.
        before = [*echo_turn("cancel hello"), ("user", SLOW_WORDS_PROMPT), ("user", "cancel after")]
        assert pi.llm.history_for("cancel after") == model_history(before)

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.REPLAY and outcome.session_id == session_id, seen
        replayed = replayed_chunks(recorder.events[live:])
        assert [(kind, text) for kind, text, _ in replayed] == [
            ("user_message_chunk", "cancel hello"),
            ("agent_message_chunk", "echo: cancel hello"),
            ("user_message_chunk", SLOW_WORDS_PROMPT),
            ("agent_message_chunk", partial[1]),
            ("user_message_chunk", "cancel after"),
            ("agent_message_chunk", "echo: cancel after"),
        ], seen
        await eventually(
            lambda: conversation(handle.transcript) == expected,
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        assert outcome.continuity is Continuity.KEPT, seen
        assert once(handle.transcript, "user", SLOW_WORDS_PROMPT).status is TurnStatus.CANCELLED, seen
        assert once(handle.transcript, "agent", partial[1]).incomplete, seen

        assert (await handle.prompt("cancel third")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("cancel third")], seen
        history = [*before, ("agent", "echo: cancel after"), ("user", "cancel third")]
        assert pi.llm.history_for("cancel third") == model_history(history), seen
    finally:
        pi.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_session_file_removed_replays_nothing_and_is_lost(pi: Pi, tmp_path: Path) -> None:
    """pi's session files removed (its map kept), then a kill: the load succeeds and replays nothing. That is
    no continuity: lost, said in the notes; the conversation stays, and the model gets only the new prompt."""
    client, wire, recorder = pi.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "empty hello", "empty second")

        evict(PiAcpAgent.store_of(pi.home))
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity is Continuity.LOST, seen
        assert any("replayed nothing for a session with 2 turn(s)" in note for note in outcome.notes), seen
        assert conversation(handle.transcript) == expected, seen

        assert (await handle.prompt("empty after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("empty after")], seen
        assert pi.llm.history_for("empty after") == (("user", "empty after"),), seen
    finally:
        pi.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_session_file_missing_its_last_turn_is_lost(pi: Pi, tmp_path: Path) -> None:
    """pi's session file lost its last completed turn (as when a turn reaches disk after its end), then a kill:
    the load replays the first turn only. A completed turn missing from the replay proves the agent lacks it:
    continuity lost, the note names the turn; the transcript keeps both, and the model never sees the second."""
    client, wire, recorder = pi.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "short hello", "short second")

        [file] = PiAcpAgent.store_of(pi.home).glob(f"*/*_{handle.session_id}.jsonl")
        lines = file.read_text(encoding="utf-8").splitlines(keepends=True)
        assert [json.loads(line)["message"]["role"] for line in lines[-2:]] == ["user", "assistant"]
        file.write_text("".join(lines[:-2]), encoding="utf-8")  # the second turn, prompt and answer
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity is Continuity.LOST, seen
        assert [(kind, text) for kind, text, _ in replayed_chunks(recorder.events[live:])] == [
            ("user_message_chunk", "short hello"),
            ("agent_message_chunk", "echo: short hello"),
        ], seen
        assert any("lacks 1 of the 2 completed turn(s)" in note and "short second" in note for note in outcome.notes)
        assert handle.transcript.last_replay is not None, seen
        assert handle.transcript.last_replay.missing_turns == ("short second",), seen
        assert conversation(handle.transcript) == expected, seen

        assert (await handle.prompt("short after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*expected, *echo_turn("short after")], seen
        history = [*echo_turn("short hello"), ("user", "short after")]
        assert pi.llm.history_for("short after") == model_history(history), seen
    finally:
        pi.agent.release()


@pytest.mark.asyncio(loop_scope="module")
async def test_evicted_session_is_unknown_and_goes_new(pi: Pi, tmp_path: Path) -> None:
    """pi's sessions and its session map removed, then a kill: load answers -32602 "Unknown sessionId", which
    means "not found": a new session, the conversation kept as an earlier segment marked lost."""
    client, wire, recorder = pi.agent.take()
    try:
        handle, expected = await session_with(client, tmp_path, "evict hello", "evict second")
        old_id = handle.session_id

        evict(PiAcpAgent.store_of(pi.home))
        evict(PiAcpAgent.map_of(pi.home))
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events[live:])

        assert_lost_then_new(outcome, new.transcript, old_id, 2, seen)
        assert [method for method, _ in outcome.steps] == ["session/load", "session/new"], seen
        assert any("-32602" in note for note in outcome.notes), seen  # the code actually received
        assert conversation(new.transcript) == expected, seen

        assert (await new.prompt("evict after")).stop_reason == "end_turn"
        assert conversation(new.transcript) == [*expected, *echo_turn("evict after")], seen
        assert pi.llm.history_for("evict after") == (("user", "evict after"),), seen
    finally:
        pi.agent.release()


async def test_editor_restart_with_a_store_replays_and_keeps_continuity(
    pi_acp_agent: PiAcpAgent, fake_responses: FakeResponses, tmp_path: Path
) -> None:
    """The editor (client) restarts on its session store, the agent with it: the stored conversation shows at
    once, pi's load replays it (each turn once), continuity kept, and the model shows pi had it."""
    home = tmp_path / "home"
    url = stdio_url(pi_acp_agent.command(home, fake_responses.base_url))

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
            assert outcome.path is RecoveryPath.REPLAY and outcome.session_id == old_id, seen
            assert outcome.continuity is Continuity.KEPT, seen
            assert conversation(restored.transcript) == two, seen
            assert (await restored.prompt("third")).stop_reason == "end_turn"
            assert conversation(restored.transcript) == [*two, *echo_turn("third")], seen
            assert fake_responses.history_for("third") == model_history([*two, ("user", "third")]), seen
