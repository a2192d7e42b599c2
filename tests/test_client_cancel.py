"""Cancel means cancel (issue 17 item 7): a prompt whose ``timeout`` runs out, or whose awaiting task
is cancelled, sends ``session/cancel`` for its session and gives the agent ``Timeouts.cancel_grace``
to end the turn; the next prompt is not sent while the agent may still be running the old turn (it
waits up to the grace, then raises ``TurnInProgress``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_client import RequestTimeout, Timeouts, TurnInProgress
from acp_client.transcript import TurnStatus

from ._harness import VERSIONS, Harness
from ._support import eventually


def sent(h: Harness, method: str) -> list[dict[str, Any]]:
    return [m for m in h.connector.sent() if isinstance(m, dict) and m.get("method") == method]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_prompt_timeout_sends_session_cancel_and_waits_for_the_turn_to_end(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        session = await h.client.new_session("/a")
        with pytest.raises(RequestTimeout):
            await h.clock.run(session.prompt("/slow", timeout=2.0))
        (cancel,) = sent(h, "session/cancel")
        assert cancel["params"] == {"sessionId": session.session_id}
        assert not sent(h, "$/cancel_request")  # the turn is cancelled, not just the request
        assert not session.turn_running  # the agent ended the turn within the grace
        prompt = next(m for m in session.transcript.messages if m.role == "user")
        assert prompt.status is TurnStatus.CANCELLED
        assert (await h.clock.run(session.prompt("next"))).stop_reason == "end_turn"


@pytest.mark.parametrize("version", VERSIONS)
async def test_cancelling_the_awaiting_task_sends_session_cancel(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        session = await h.client.new_session("/a")
        task = asyncio.ensure_future(session.prompt("/slow"))
        await eventually(lambda: h.agent.sessions[session.session_id].state == "running", 60, clock=h.clock, step=0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(lambda: not session.turn_running, 60, clock=h.clock, step=0.05)
        assert len(sent(h, "session/cancel")) == 1
        assert (await h.clock.run(session.prompt("next"))).stop_reason == "end_turn"


@pytest.mark.parametrize("version", VERSIONS)
async def test_the_next_prompt_is_not_sent_while_the_agent_may_still_run_the_old_turn(version: int) -> None:
    async with Harness(
        protocol_version=version, faults=["ignore-cancel"], client_kwargs={"timeouts": Timeouts(cancel_grace=3.0)}
    ) as h:
        session = await h.client.new_session("/a")
        started = h.clock.monotonic()
        with pytest.raises(RequestTimeout):
            await h.clock.run(session.prompt("/slow", timeout=2.0))
        assert h.clock.monotonic() - started >= 5.0  # the timeout, then the grace
        assert session.turn_running  # the agent ignored session/cancel: the turn still runs
        prompts = len(sent(h, "session/prompt"))
        waited = h.clock.monotonic()
        with pytest.raises(TurnInProgress, match="has not ended the cancelled turn"):
            await h.clock.run(session.prompt("next"))
        assert h.clock.monotonic() - waited >= 3.0  # it waited the grace for the old turn
        assert len(sent(h, "session/prompt")) == prompts  # and never sent the new prompt


async def _until(h: Harness, condition: Any, limit: float = 60.0) -> None:
    """Move fake time on in small steps until ``condition()`` holds."""
    start = h.clock.monotonic()
    while not condition():
        assert h.clock.monotonic() - start < limit, "the condition never held"
        await h.clock.advance(0.05)
