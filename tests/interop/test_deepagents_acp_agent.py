"""deepagents-acp 0.0.13 (a LangChain Deep Agent behind the ACP adapter) over stdio, end to end.

The agent (``tests/peers/deepagents_acp_agent.py``) runs offline from its cached environment: a
fake LangChain chat model echoes each prompt in two streamed chunks, a ``slow: ...`` prompt is
streamed word by word (to cancel or kill mid-turn), and the sessions are LangGraph checkpoint
threads in a SQLite file, so a respawned process replays them on ``session/load``. Live chunks come
without a ``messageId``; the replay carries LangChain's message ids, and leaves out the partial answer
of a cancelled or interrupted turn. What the agent does is pinned in ``test_facts`` and written up
in ``docs/agents-conformance.md``.

The recovery tests kill the agent idle or mid-turn (the stdio transport respawns it), or delete its
store first (eviction), and check what the client reports and that every turn is in the transcript
exactly once, as its own message.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from acp_client import AcpClient, Callbacks, ConnectionLost, RecoveryPath, Timeouts, UpdateEvent
from acp_client.exceptions import InternalError, MethodNotFound, SessionNotFound
from acp_client.transcript import SegmentStart, TranscriptMessage, TurnStatus
from tests._support import eventually
from tests.e2e._support import Recorder
from tests.interop._real_agents import (
    POLICY,
    SLOW,
    SLOW_PROMPT,
    chunks,
    conversation,
    describe,
    evict,
    kill_agent,
    stdio_url,
    wait_for_agent_text,
    wired_client,
)
from tests.peers.real_agents import DeepagentsAcpAgent

# Only the test itself is timed: on a fresh machine the fixture first installs the agent into the cache
# (minutes; each install step has its own limit in tests/peers/real_agents.py).
pytestmark = pytest.mark.timeout(180, func_only=True)


async def test_facts(deepagents_acp_agent: DeepagentsAcpAgent, tmp_path: Path) -> None:
    """load only; id-less live chunks, replay with ids minus the cancelled turn's partial answer; -32002 / -32603."""
    events: list[UpdateEvent] = []
    url = stdio_url(deepagents_acp_agent.command(tmp_path / "store.sqlite", chunk_delay=0.3))
    async with AcpClient(
        url, retry=POLICY, timeouts=Timeouts(connect=SLOW), callbacks=Callbacks(on_update=events.append)
    ) as client:
        assert client.protocol_version == 1
        caps = client.agent_capabilities
        assert caps.supports("session/load")
        assert not caps.supports("session/resume") and not caps.supports("session/status")
        assert not caps.supports("session/list")

        handle = await client.new_session(tmp_path)
        session = handle.record

        start = len(events)
        assert (await handle.prompt("hello")).stop_reason == "end_turn"
        assert chunks(events[start:], "agent_message_chunk") == [("echo: he", None), ("llo", None)]
        assert handle.transcript.text() == "user: hello\nagent: echo: hello"

        # Cancel a turn that has streamed part of its answer: stopReason cancelled.
        start = len(events)
        turn = asyncio.create_task(handle.prompt(SLOW_PROMPT))
        await wait_for_agent_text(events, "one", start=start)
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
        assert (await handle.prompt("second")).stop_reason == "end_turn"

        attach = {"sessionId": session.session_id, "cwd": str(tmp_path), "mcpServers": []}
        with pytest.raises(MethodNotFound):
            await client.request("session/status", {"sessionId": session.session_id})
        with pytest.raises(MethodNotFound):
            await client.request("session/resume", attach)

        # load replays each message once with its LangChain id (never sent live); the cancelled turn's
        # partial answer is not in it: two user messages follow each other.
        start = len(events)
        assert await client.request("session/load", attach) == {}
        replayed = [
            (e.update.kind, getattr(e.update.content, "text", None))
            for e in events[start:]
            if e.update.kind.endswith("_message_chunk")
        ]
        assert replayed == [
            ("user_message_chunk", "hello"),
            ("agent_message_chunk", "echo: hello"),
            ("user_message_chunk", SLOW_PROMPT),
            ("user_message_chunk", "second"),
            ("agent_message_chunk", "echo: second"),
        ]
        ids = [
            i for _, i in chunks(events[start:], "user_message_chunk") + chunks(events[start:], "agent_message_chunk")
        ]
        assert all(ids) and len(set(ids)) == 5

        # An unknown id: -32002 on load (data names it as "uri"); a prompt to it fails -32603 (a KeyError inside).
        with pytest.raises(SessionNotFound) as lost:
            await client.request("session/load", {**attach, "sessionId": "no-such-session"})
        assert lost.value.data == {"uri": "no-such-session"}
        with pytest.raises(InternalError) as failed:
            await client.request(
                "session/prompt", {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "x"}]}
            )
        assert failed.value.data == {"details": "'no-such-session'"}


def _message(transcript: object, role: str, predicate: object) -> TranscriptMessage:
    found = [m for m in transcript.all_messages() if m.role == role and predicate(m.text)]  # type: ignore[attr-defined,operator]
    assert len(found) == 1, found
    return found[0]


def _partial(text: str) -> bool:
    return text.startswith("echo: one") and text != "echo: " + SLOW_PROMPT.removeprefix("slow: ")


async def test_killed_idle_keeps_every_turn_once_and_the_partial_answer(
    deepagents_acp_agent: DeepagentsAcpAgent, tmp_path: Path
) -> None:
    """The replay leaves out the cancelled turn's partial answer (the user saw it): it stays, marked incomplete."""
    recorder = Recorder()
    client, wire = wired_client(deepagents_acp_agent.command(tmp_path / "store.sqlite", chunk_delay=0.3), recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        session_id = handle.session_id
        await handle.prompt("hello")
        start = len(recorder.events)
        turn = asyncio.create_task(handle.prompt(SLOW_PROMPT))
        await wait_for_agent_text(recorder.events, "one", start=start)
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"
        await handle.prompt("second")
        before = conversation(handle.transcript)
        assert [role for role, _ in before] == ["user", "agent", "user", "agent", "user", "agent"], before
        assert _partial(before[3][1]), before

        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity, seen
        assert outcome.session_id == outcome.previous_session_id == session_id, seen
        assert [method for method, _ in outcome.steps] == ["session/load"], seen
        replayed = [e for e in recorder.events[live:] if e.update.kind.endswith("_message_chunk")]
        assert len(replayed) == 5 and all(e.replay for e in replayed), seen  # the partial answer is not among them
        await eventually(
            lambda: conversation(handle.transcript) == before,
            timeout=5,
            what=lambda: describe(outcome, handle.transcript, recorder.events[live:]),
        )
        assert _message(handle.transcript, "agent", _partial).incomplete, seen
        assert _message(handle.transcript, "user", SLOW_PROMPT.__eq__).status is TurnStatus.CANCELLED, seen
        assert not _message(handle.transcript, "agent", "echo: second".__eq__).incomplete, seen

        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*before, ("user", "after"), ("agent", "echo: after")], seen


async def test_killed_mid_turn_keeps_the_partial_answer(
    deepagents_acp_agent: DeepagentsAcpAgent, tmp_path: Path
) -> None:
    recorder = Recorder()
    client, wire = wired_client(deepagents_acp_agent.command(tmp_path / "store.sqlite", chunk_delay=0.5), recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        session_id = handle.session_id
        await handle.prompt("hello")
        start = len(recorder.events)
        turn = asyncio.create_task(handle.prompt(SLOW_PROMPT))
        await wait_for_agent_text(recorder.events, "one", start=start)

        live = len(recorder.events)
        kill_agent(wire)
        with pytest.raises(ConnectionLost) as lost:
            await turn
        assert lost.value.may_have_executed
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity, seen
        assert outcome.session_id == outcome.previous_session_id == session_id, seen

        def settled() -> bool:
            got = conversation(handle.transcript)
            return got[:3] == [("user", "hello"), ("agent", "echo: hello"), ("user", SLOW_PROMPT)] and len(got) == 4

        await eventually(settled, timeout=5, what=lambda: describe(outcome, handle.transcript, recorder.events[live:]))
        partial = _message(handle.transcript, "agent", _partial)
        assert partial.incomplete, seen
        assert _message(handle.transcript, "user", SLOW_PROMPT.__eq__).status is TurnStatus.INTERRUPTED, seen

        before = conversation(handle.transcript)
        assert (await handle.prompt("after")).stop_reason == "end_turn"
        assert conversation(handle.transcript) == [*before, ("user", "after"), ("agent", "echo: after")], seen


async def test_evicted_session_goes_new_and_keeps_the_lost_conversation(
    deepagents_acp_agent: DeepagentsAcpAgent, tmp_path: Path
) -> None:
    """The checkpoint file deleted while the agent was down: load is -32002, so a new session; the old
    conversation stays as an earlier segment marked lost, and the outcome counts the lost turns."""
    recorder = Recorder()
    store = tmp_path / "store.sqlite"
    client, wire = wired_client(deepagents_acp_agent.command(store), recorder)
    async with client:
        handle = await client.new_session(tmp_path)
        old_id = handle.session_id
        await handle.prompt("hello")
        await handle.prompt("second")
        expected = [("user", "hello"), ("agent", "echo: hello"), ("user", "second"), ("agent", "echo: second")]

        evict(store)
        live = len(recorder.events)
        kill_agent(wire)
        outcome = await recorder.outcome(timeout=SLOW)
        seen = describe(outcome, handle.transcript, recorder.events[live:])

        assert outcome.path is RecoveryPath.NEW_SESSION and not outcome.continuity, seen
        assert outcome.previous_session_id == old_id and outcome.session_id not in (None, old_id), seen
        assert ("session/load", "not_found") in outcome.steps, seen
        assert outcome.lost_turns == 2, seen
        new = client.session(outcome.session_id)
        transcript = new.transcript
        assert conversation(transcript) == expected, seen
        earlier, current = transcript.segments
        assert (earlier.session_id, earlier.lost, earlier.turns) == (old_id, True, 2), seen
        assert (current.session_id, current.began, current.messages) == (
            outcome.session_id,
            SegmentStart.NEW_AFTER_LOSS,
            [],
        ), seen

        assert (await new.prompt("after")).stop_reason == "end_turn"
        assert conversation(transcript) == [*expected, ("user", "after"), ("agent", "echo: after")], seen
        assert transcript.segments[-1].text() == "user: after\nagent: echo: after"  # what the agent holds
