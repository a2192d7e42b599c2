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

from acp_client import AcpClient, Callbacks, Timeouts, UpdateEvent
from acp_client.exceptions import InternalError, MethodNotFound, SessionNotFound
from tests.interop._real_agents import POLICY, SLOW, stdio_url, wait_for_agent_text
from tests.peers.real_agents import DeepagentsAcpAgent

pytestmark = pytest.mark.timeout(180)

SLOW_PROMPT = "slow: one two three four five six seven eight"


def _chunks(events: list[UpdateEvent], kind: str) -> list[tuple[str | None, str | None]]:
    return [
        (getattr(e.update.content, "text", None), getattr(e.update, "message_id", None))
        for e in events
        if e.update.kind == kind
    ]


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
        assert _chunks(events[start:], "agent_message_chunk") == [("echo: he", None), ("llo", None)]
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
            i for _, i in _chunks(events[start:], "user_message_chunk") + _chunks(events[start:], "agent_message_chunk")
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
