"""Which turns may still run on a connection (pure): what decides whether a dropped one is DELETEd."""

from __future__ import annotations

from acp_client._codec._jsonrpc import request_message
from acp_client.transports._routing import RunningTurns


def _prompt(request_id: object, sid: str = "s1") -> dict[str, object]:
    return request_message(request_id, "session/prompt", {"sessionId": sid, "prompt": []})  # type: ignore[arg-type]


def _idle(sid: str) -> dict[str, object]:
    update = {"sessionUpdate": "state_update", "state": "idle"}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}}


def test_a_v1_turn_runs_until_its_prompt_is_answered() -> None:
    turns = RunningTurns()
    assert not turns
    assert turns.sent(_prompt(1), "s1") == 1
    assert turns
    turns.inbound({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
    assert not turns


def test_a_v2_turn_runs_from_its_acceptance_until_idle() -> None:
    turns = RunningTurns()
    turns.sent(_prompt("p", "s2"), "s2")
    turns.inbound({"jsonrpc": "2.0", "id": "p", "result": {"messageId": "m1"}})
    assert turns  # accepted: the turn goes on
    turns.inbound(_idle("other"))
    assert turns
    turns.inbound(_idle("s2"))
    assert not turns


def test_refused_prompts_and_other_messages_start_nothing() -> None:
    turns = RunningTurns()
    assert turns.sent(request_message(1, "session/list", {}), None) is None
    assert turns.sent([_prompt(2)], "s1") is None  # a batch: not tracked
    request_id = turns.sent(_prompt(3), "s1")
    turns.unsent(request_id)
    assert not turns
    turns.sent(_prompt(4), "s1")
    turns.inbound({"jsonrpc": "2.0", "id": 4, "error": {"code": -32002, "message": "not found"}})
    assert not turns


def test_hostile_answers_do_not_break_it() -> None:
    turns = RunningTurns()
    turns.sent(_prompt(5), "s1")
    for odd in (
        {"jsonrpc": "2.0", "id": [5], "result": {}},
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": ["x"], "update": {}}},
        {"jsonrpc": "2.0", "method": "session/update", "params": "nope"},
        [{"jsonrpc": "2.0", "id": 5, "result": {}}],
    ):
        turns.inbound(odd)  # type: ignore[arg-type]
    assert turns
