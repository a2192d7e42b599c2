"""The connection's bounds on their own (``acp_client._rpc._limits``): the memory of abandoned ids and
the in-flight cap. ``tests/test_connection_limits.py`` drives them through a whole connection."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_client._rpc._limits import AbandonedIds, IncomingCap
from acp_client.exceptions import ConfigurationError


def test_abandoned_ids_keep_the_newest_and_are_taken_once() -> None:
    ids = AbandonedIds(kept=2)
    for request_id in (1, 2, 3):
        ids.remember(request_id)
    assert not ids.take(1)  # the oldest went first
    assert ids.take(2)
    assert not ids.take(2)  # a second answer to it is news
    assert ids.take(3)


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "2"])
def test_a_cap_that_is_not_a_positive_integer_is_refused(limit: Any) -> None:
    async def send(message: Any) -> None: ...

    with pytest.raises(ConfigurationError, match="max_incoming_requests"):
        IncomingCap(limit, send=send, spawn=asyncio.ensure_future, is_closed=lambda: False)


async def test_refusals_start_at_the_cap_and_go_out_in_order() -> None:
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    cap = IncomingCap(1, send=send, spawn=asyncio.ensure_future, is_closed=lambda: False)
    assert cap.refusal(1) is None
    cap.started()
    refusals = [cap.refusal(request_id) for request_id in (2, 3)]
    assert all(r is not None and r["error"]["code"] == -32603 for r in refusals)
    for refusal in refusals:
        assert refusal is not None
        cap.queue(refusal)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert [m["id"] for m in sent] == [2, 3]
    cap.finished()
    assert cap.refusal(4) is None
