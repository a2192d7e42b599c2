"""agentao 0.5.17 (a coding agent with its own JSON-RPC server, ``python -m agentao.acp``) over stdio, end to end.

The agent runs from its cached environment (``tests/peers/real_agents.py``) with its OpenAI
settings pointed at the fake OpenAI-compatible server on loopback (``tests/peers/fake_openai.py``):
``hello`` is answered ``echo: hello`` in two streamed chunks; a ``slow: ...`` answer is streamed word
by word (to cancel or kill the agent mid-turn). Chunks carry no ``messageId``, live or replayed.

agentao writes a session to ``<cwd>/.agentao/sessions/`` only when it shuts down cleanly (end of
stdin, which is how the client closes a stdio agent): an agent killed with SIGKILL has lost every
turn since its last clean exit, and answers ``session/load`` with -32600 "... not found". What the
agent does is pinned in ``test_facts`` and written up in ``docs/agents-conformance.md``.

The recovery tests kill the agent idle or mid-turn (the stdio transport respawns it), or restart the
client against a store the agent no longer has (eviction), and check what the client reports and
that every turn is in the transcript exactly once, as its own message.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from acp_client import AcpClient, Callbacks, RecoveryPath, Timeouts, UpdateEvent
from acp_client.exceptions import InvalidRequest, MethodNotFound
from acp_client.store import SqliteSessionStore
from acp_client.transcript import TranscriptMessage, TurnStatus
from tests.e2e._support import Recorder
from tests.interop._real_agents import (
    POLICY,
    SLOW,
    SLOW_PROMPT,
    assert_lost_then_new,
    chunks,
    conversation,
    describe,
    evict,
    kill_agent,
    kill_mid_turn,
    stdio_url,
    stored_client,
    streaming,
    wait_for_agent_text,
    wired_client,
)
from tests.peers.fake_openai import FakeOpenAI
from tests.peers.real_agents import AGENTAO_VERSION, AgentaoAgent

# Only the test itself is timed: on a fresh machine the fixture first installs the agent into the cache
# (minutes; each install step has its own limit in tests/peers/real_agents.py).
pytestmark = pytest.mark.timeout(180, func_only=True)


async def test_facts(agentao_agent: AgentaoAgent, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    """load only; id-less chunks; -32600 for unknown sessions; the store is written at a clean exit only."""
    events: list[UpdateEvent] = []
    fake_openai.chunk_delay = 0.3
    url = stdio_url(agentao_agent.command(tmp_path / "home", fake_openai.base_url))
    cwd = tmp_path / "work"
    cwd.mkdir()
    client = AcpClient(url, retry=POLICY, timeouts=Timeouts(connect=SLOW), callbacks=Callbacks(on_update=events.append))
    async with client:
        assert client.protocol_version == 1
        assert client.agent_info is not None
        assert (client.agent_info.name, client.agent_info.version) == ("agentao", AGENTAO_VERSION)
        caps = client.agent_capabilities
        assert caps.supports("session/load")
        assert not caps.supports("session/resume") and not caps.supports("session/status")
        assert not caps.supports("session/list")

        handle = await client.new_session(cwd)
        session = handle.record
        assert session.modes is not None and session.modes.current_mode_id == "workspace-write"

        start = len(events)
        assert (await handle.prompt("hello")).stop_reason == "end_turn"
        assert chunks(events[start:], "agent_message_chunk") == [("echo: he", None), ("llo", None)]
        assert handle.transcript.text() == "user: hello\nagent: echo: hello"
        assert fake_openai.prompts == ["hello"]  # agentao wraps it in a <system-reminder> the fake drops

        start = len(events)
        turn = asyncio.create_task(handle.prompt(SLOW_PROMPT))
        await wait_for_agent_text(events, "one", start=start)
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"

        attach = {"sessionId": session.session_id, "cwd": str(cwd), "mcpServers": []}
        with pytest.raises(MethodNotFound):
            await client.request("session/status", {"sessionId": session.session_id})
        with pytest.raises(MethodNotFound):
            await client.request("session/resume", attach)
        # Nothing is on disk while the agent runs: an unknown id is -32600, not -32002.
        assert not AgentaoAgent.store_of(cwd).exists()
        with pytest.raises(InvalidRequest) as lost:
            await client.request("session/load", {**attach, "sessionId": "sess_unknown"})
        assert (lost.value.message, lost.value.data) == ("session/load: No sessions directory found", None)
        with pytest.raises(InvalidRequest) as refused:
            await client.request(
                "session/prompt", {"sessionId": "sess_unknown", "prompt": [{"type": "text", "text": "x"}]}
            )
        assert refused.value.message == "unknown sessionId: sess_unknown"
        # Loading the live session again is refused as well.
        with pytest.raises(InvalidRequest) as busy:
            await client.request("session/load", attach)
        assert "is already active" in str(busy.value.message)

    # The client closed the agent's stdin: agentao saved the session on its way out.
    saved = list(AgentaoAgent.store_of(cwd).glob("*.json"))
    assert len(saved) == 1, saved
    async with AcpClient(
        url, retry=POLICY, timeouts=Timeouts(connect=SLOW), callbacks=Callbacks(on_update=events.append)
    ) as client:
        start = len(events)
        await client.request("session/load", attach)
        replayed = [(e.update.kind, text, i) for e in events[start:] for text, i in [_text_id(e)] if text is not None]
        assert replayed[:3] == [
            ("user_message_chunk", "hello", None),
            ("agent_message_chunk", "echo: hello", None),
            ("user_message_chunk", SLOW_PROMPT, None),
        ], replayed
        # The cancelled turn's partial answer is stored too (as far as it had streamed).
        assert len(replayed) == 4 and replayed[3][0] == "agent_message_chunk" and replayed[3][2] is None, replayed
        partial = str(replayed[3][1])
        assert partial.startswith("echo: one") and "echo: " + SLOW_PROMPT.removeprefix("slow: ") != partial, replayed
        with pytest.raises(InvalidRequest) as unknown:
            await client.request("session/load", {**attach, "sessionId": "sess_unknown"})
        assert (unknown.value.message, unknown.value.data) == ("session/load: Session 'sess_unknown' not found", None)


def _text_id(event: UpdateEvent) -> tuple[str | None, str | None]:
    if not event.update.kind.endswith("_message_chunk"):
        return None, None
    return getattr(event.update.content, "text", None), getattr(event.update, "message_id", None)


TWO_TURNS = [("user", "hello"), ("agent", "echo: hello"), ("user", "second"), ("agent", "echo: second")]


def _message(transcript: object, role: str, predicate: object) -> TranscriptMessage:
    found = [m for m in transcript.all_messages() if m.role == role and predicate(m.text)]  # type: ignore[attr-defined,operator]
    assert len(found) == 1, found
    return found[0]


async def test_killed_idle_loses_the_session_and_keeps_the_conversation(
    agentao_agent: AgentaoAgent, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """SIGKILL: agentao saved nothing, its load answers -32600 "... not found": a new session, the conversation
    kept as an earlier segment the agent lost."""
    recorder = Recorder()
    client, wire = wired_client(agentao_agent.command(tmp_path / "home", fake_openai.base_url), recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        old_id = handle.session_id
        await handle.prompt("hello")
        await handle.prompt("second")
        assert conversation(handle.transcript) == TWO_TURNS

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events[live:])

        assert [method for method, _ in outcome.steps] == ["session/load", "session/new"], seen
        assert_lost_then_new(outcome, new.transcript, old_id, 2, seen)
        assert conversation(new.transcript) == TWO_TURNS, seen

        assert (await new.prompt("after")).stop_reason == "end_turn"
        assert conversation(new.transcript) == [*TWO_TURNS, ("user", "after"), ("agent", "echo: after")], seen
        assert fake_openai.prompts[-1] == "after"


async def test_killed_mid_turn_keeps_the_partial_answer_in_the_lost_conversation(
    agentao_agent: AgentaoAgent, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    recorder = Recorder()
    client, wire = wired_client(agentao_agent.command(tmp_path / "home", fake_openai.base_url), recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        old_id = handle.session_id
        await handle.prompt("hello")
        turn = await streaming(handle, recorder.events, SLOW_PROMPT, until="one")

        live = len(recorder.events)
        await kill_mid_turn(wire, turn)
        outcome = await recorder.outcome(timeout=SLOW)
        new = client.session(outcome.session_id or "")
        seen = describe(outcome, new.transcript, recorder.events[live:])

        assert_lost_then_new(outcome, new.transcript, old_id, 2, seen)
        got = conversation(new.transcript)
        assert got[:3] == [("user", "hello"), ("agent", "echo: hello"), ("user", SLOW_PROMPT)] and len(got) == 4, seen
        assert _message(new.transcript, "user", SLOW_PROMPT.__eq__).status is TurnStatus.INTERRUPTED, seen
        assert _message(new.transcript, "agent", lambda text: text.startswith("echo: one")).incomplete, seen

        assert (await new.prompt("after")).stop_reason == "end_turn"
        assert conversation(new.transcript) == [*got, ("user", "after"), ("agent", "echo: after")], seen


async def test_restart_with_a_store_replays_and_eviction_goes_new(
    agentao_agent: AgentaoAgent, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The client restarts with its session store (the agent too: the client closed it, so agentao saved).
    Once: the load replays the two turns, each kept once. Then the agent's store is removed (eviction): the
    client shows the stored conversation as lost history and continues in a new session."""
    url = stdio_url(agentao_agent.command(tmp_path / "home", fake_openai.base_url))
    work = tmp_path / "work"
    work.mkdir()

    with SqliteSessionStore(tmp_path / "client.db") as store:
        async with stored_client(url, store, Recorder()) as client:
            handle = await client.new_session(work)
            old_id = handle.session_id
            await handle.prompt("hello")
            await handle.prompt("second")
        assert len(list(AgentaoAgent.store_of(work).glob("*.json"))) == 1  # saved at the clean exit

        recorder = Recorder()
        async with stored_client(url, store, recorder) as client:
            outcome = await recorder.outcome(timeout=SLOW)
            restored = client.session(old_id)
            seen = describe(outcome, restored.transcript, recorder.events)
            assert outcome.path is RecoveryPath.REPLAY and outcome.continuity, seen
            assert outcome.session_id == old_id, seen
            assert conversation(restored.transcript) == TWO_TURNS, seen
            assert (await restored.prompt("third")).stop_reason == "end_turn"
        three = [*TWO_TURNS, ("user", "third"), ("agent", "echo: third")]

        evict(AgentaoAgent.store_of(work))
        recorder = Recorder()
        async with stored_client(url, store, recorder) as client:
            outcome = await recorder.outcome(timeout=SLOW)
            new = client.session(outcome.session_id or "")
            seen = describe(outcome, new.transcript, recorder.events)
            assert_lost_then_new(outcome, new.transcript, old_id, 3, seen)
            assert conversation(new.transcript) == three, seen
            assert (await new.prompt("after")).stop_reason == "end_turn"
            assert conversation(new.transcript) == [*three, ("user", "after"), ("agent", "echo: after")], seen
