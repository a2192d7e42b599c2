"""A link cut at any point of a streamed answer never leaves a "complete" message missing text: the
answer is whole, or marked incomplete and the app told (the reference agent, the fake clock)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_client.exceptions import ConnectionLost
from tests._harness import Harness

CHUNKS = 12
PROMPT = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
ANSWER = f"echo: {PROMPT}"


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(min_value=0, max_value=CHUNKS + 1), version=st.sampled_from([1, 2]))
async def test_a_cut_anywhere_in_a_streamed_answer_never_yields_a_complete_message_missing_text(
    cut: int, version: int
) -> None:
    async with Harness(protocol_version=version, chunks_per_prompt=CHUNKS, chunk_delay=1.0) as h:
        handle = await h.client.new_session("/work")
        turn = asyncio.ensure_future(handle.prompt(PROMPT))

        def streamed() -> int:
            return sum(1 for e in h.updates if e.update.kind == "agent_message_chunk" and not e.replay)

        await h.clock.settle()
        while streamed() < cut and not turn.done():
            await h.clock.advance(0.25)
        h.connector.drop()
        await h.until_connected()
        await h.clock.settle()
        try:
            await h.clock.run(turn)
            finished = True
        except ConnectionLost:
            finished = False

        agent = [m for m in handle.transcript.messages if m.role == "agent"]
        for message in agent:
            assert message.incomplete or message.text == ANSWER, (cut, version, handle.transcript.text())
        if not finished:
            assert [i.session_id for i in h.interrupted] == [handle.session_id]  # the app was told
        else:
            assert agent and agent[-1].text == ANSWER and not agent[-1].incomplete
        # The session goes on, whatever happened to that turn.
        second = asyncio.ensure_future(handle.prompt("again"))
        assert (await h.clock.run(second)).stop_reason == "end_turn"
        assert handle.transcript.text().endswith("user: again\nagent: echo: again")
