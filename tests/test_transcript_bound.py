"""The transcript is bounded in memory: past ``max_bytes`` the oldest content goes, summarized as
``… N bytes dropped``; the newest prompt never goes. Pure tests, a property, and a flooding agent
(the reference agent's ``/slow`` turn, which streams until cancelled) over the harness."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from acp_client import Transcript
from acp_client._codec import decode_session_update
from acp_client.transcript import DEFAULT_MAX_TRANSCRIPT_BYTES, TurnStatus
from acp_client.types import TextContent
from tests._harness import Harness


def chunk(text: str, kind: str = "agent_message_chunk") -> object:
    return decode_session_update({"sessionUpdate": kind, "content": {"type": "text", "text": text}}, protocol_version=1)


def held(t: Transcript) -> int:
    return sum(len(m.text.encode()) for m in t.all_messages())


def test_the_default_bound_is_documented_and_can_be_set() -> None:
    assert Transcript().max_bytes == DEFAULT_MAX_TRANSCRIPT_BYTES == 64 * 1024 * 1024
    t = Transcript()
    t.max_bytes = 1000
    assert t.max_bytes == 1000 and Transcript().max_bytes == DEFAULT_MAX_TRANSCRIPT_BYTES


def test_one_endless_answer_keeps_its_newest_part_and_the_prompt() -> None:
    t = Transcript()
    t.max_bytes = 10_000
    t.begin_turn([TextContent(text="tell me everything")], record=True)
    for index in range(5000):  # 5000 chunks of ~20 bytes: ten times the bound
        t.apply(chunk(f"piece {index:06d} ok. "))
    assert held(t) <= 10_000
    prompt, answer = t.messages
    assert prompt.text == "tell me everything"
    assert answer.text.startswith("… ") and " bytes dropped … " in answer.text
    assert answer.text.endswith("piece 004999 ok. ")
    assert answer.dropped_bytes == t.dropped_bytes > 70_000
    t.finish_turn(TurnStatus.COMPLETE)
    assert prompt.status is TurnStatus.COMPLETE


def test_old_turns_go_first_and_the_text_says_how_much() -> None:
    t = Transcript()
    t.max_bytes = 2_000
    for turn in range(100):
        t.begin_turn([TextContent(text=f"prompt {turn}")], record=True)
        t.apply(chunk("x" * 50))
        t.finish_turn(TurnStatus.COMPLETE)
    assert held(t) <= 2_000
    assert t.messages[-2].text == "prompt 99" and t.messages[-1].text == "x" * 50
    assert t.dropped > 0 and t.text().startswith(f"… {t.dropped_bytes} bytes dropped\n")


@given(
    st.lists(
        st.tuples(st.integers(0, 300), st.lists(st.integers(0, 400), max_size=30)),
        min_size=1,
        max_size=20,
    ),
    st.integers(200, 5_000),
)
def test_the_bound_holds_and_the_newest_prompt_is_whole(turns: list[tuple[int, list[int]]], bound: int) -> None:
    t = Transcript()
    t.max_bytes = bound
    for number, (prompt_size, pieces) in enumerate(turns):
        prompt = f"{number}:" + "p" * prompt_size
        t.begin_turn([TextContent(text=prompt)], record=True)
        for size in pieces:
            t.apply(chunk("é" * size))  # two bytes each
        t.finish_turn(TurnStatus.COMPLETE)
        newest = next(m for m in reversed(t.messages) if m.role == "user")
        assert newest.text == prompt
        # Over the bound only by what is never cut: the newest prompt (and a marker).
        assert held(t) <= max(bound, len(prompt.encode()) + 100)


async def test_an_agent_that_streams_without_end_keeps_the_client_bounded() -> None:
    async with Harness() as h:
        handle = await h.client.new_session(cwd="/work/project")
        handle.transcript.max_bytes = 4096
        turn = asyncio.ensure_future(handle.prompt("/slow"))
        await h.clock.advance(300.0)  # /slow sends a chunk every 50 ms: ~6000 chunks
        await handle.cancel()
        await h.clock.run(turn)
        transcript = handle.transcript
        assert held(transcript) <= 4096
        assert transcript.messages[0].text == "/slow"
        assert transcript.dropped_bytes > 30_000
        assert " bytes dropped … " in transcript.messages[-1].text
