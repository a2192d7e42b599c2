"""The shared timer of same-length delays (``acp_client._recovery._grace``), on a fake clock."""

from __future__ import annotations

from acp_client._recovery._grace import _QUEUES, after
from acp_client.testing import FakeClock


async def test_delays_end_in_order_each_at_its_own_time_and_cancelled_ones_never() -> None:
    clock = FakeClock()
    ended: list[str] = []
    after(clock, 0.5, lambda: ended.append("a"))  # times in binary fractions: exact sums
    await clock.advance(0.25)
    after(clock, 0.5, lambda: ended.append("b"))
    gone = after(clock, 0.5, lambda: ended.append("gone"))
    await clock.advance(0.125)
    after(clock, 0.5, lambda: ended.append("c"))
    gone.cancel()
    await clock.advance(0.125)  # t = 0.5
    assert ended == ["a"]
    await clock.advance(0.125)  # t = 0.625
    assert ended == ["a"]
    await clock.advance(0.125)  # t = 0.75
    assert ended == ["a", "b"]
    await clock.advance(0.125)  # t = 0.875
    assert ended == ["a", "b", "c"]
    await clock.advance(5)
    assert ended == ["a", "b", "c"]


async def test_a_raising_callback_does_not_stop_the_others_and_an_idle_clock_is_not_kept() -> None:
    clock = FakeClock()
    ended: list[int] = []

    def boom() -> None:
        raise RuntimeError("boom")

    after(clock, 0.5, boom)
    after(clock, 0.5, lambda: ended.append(1))
    await clock.advance(0.5)
    assert ended == [1]
    assert all(key[0] is not clock for queues in _QUEUES.values() for key in queues)
