"""The opt-in that carries a lost conversation into the new session (issue 17 item 2): off by
default; on, the first prompt after a new-session recovery carries the lost conversation as context,
once, and the transcript keeps only what the user typed."""

from __future__ import annotations

from typing import Any

import pytest

from acp_client import RecoveryPath

from ._harness import Harness


def prompts_sent(h: Harness) -> list[list[str]]:
    return [
        [block.get("text") for block in m["params"]["prompt"]]
        for m in h.connector.sent()
        if isinstance(m, dict) and m.get("method") == "session/prompt"
    ]


@pytest.mark.parametrize("carry", [False, True])
async def test_the_lost_conversation_goes_with_the_next_prompt_only_when_asked(carry: bool) -> None:
    kwargs: dict[str, Any] = {"carry_lost_context": True} if carry else {}
    async with Harness(client_kwargs=kwargs) as h:
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("my name is Ada"))
        h.agent.evict(session.session_id)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.lost_turns == 1
        await h.clock.run(session.prompt("what is my name?"))
        await h.clock.run(session.prompt("thanks"))
        first, after, last = prompts_sent(h)
        assert first == ["my name is Ada"] and last == ["thanks"]
        if carry:
            context, prompt = after
            assert "user: my name is Ada" in context and "agent: echo: my name is Ada" in context
            assert prompt == "what is my name?"
        else:
            assert after == ["what is my name?"]
        assert [m.text for m in session.transcript.messages if m.role == "user"] == ["what is my name?", "thanks"]
