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
from pathlib import Path

import pytest

from acp_client import AcpClient, Callbacks, Timeouts, UpdateEvent
from acp_client.exceptions import MethodNotFound
from tests._support import eventually
from tests.interop._real_agents import POLICY, SLOW, stdio_url
from tests.peers.fake_openai import FakeOpenAI
from tests.peers.real_agents import IsaacAcpAgent

# isaac takes 10 s or more to start on a loaded machine, and each recovery test starts it twice.
pytestmark = pytest.mark.timeout(300)

SLOW_PROMPT = "slow: one two three four five six seven eight"


def _agent_chunks(events: list[UpdateEvent]) -> list[tuple[str | None, str | None]]:
    return [
        (getattr(e.update.content, "text", None), getattr(e.update, "message_id", None))
        for e in events
        if e.update.kind == "agent_message_chunk"
    ]


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
        assert _agent_chunks(events[start:]) == [("echo: hello\n", None)]
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
        assert _agent_chunks(made_up) == [("echo: who\n", None)]  # the load replayed nothing

        # Cancel a running turn (nothing was shown yet): stopReason cancelled.
        turn = asyncio.create_task(handle.prompt(SLOW_PROMPT))
        await _model_got(fake_openai, SLOW_PROMPT)
        await handle.cancel()
        assert (await asyncio.wait_for(turn, SLOW)).stop_reason == "cancelled"

        listed = {item.session_id for item in (await client.list_sessions()).sessions}
        assert session.session_id in listed
