"""The one table of "session not found" spellings (issue 17 item 3): a test per spelling, naming the
agent it came from, from the pure match to a session that a recovery brought back and the agent
then answered with it — which is recovered again as unknown, never left stuck."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from acp_client import RecoveryPath, RpcError
from acp_client._not_found import SPELLINGS, says_session_not_found

from ._harness import VERSIONS, Harness

#: Per spelling: the error the agent it names answers for session ``sid``, as seen on the wire
#: (docs/agents-conformance.md).
EXAMPLES: dict[str, Callable[[str], RpcError]] = {
    SPELLINGS[0].seen_in: lambda sid: RpcError.from_error(-32002, "Resource not found", {"uri": sid}),  # deepagents
    SPELLINGS[1].seen_in: lambda sid: RpcError.from_error(-32602, "Invalid params", {"sessionId": sid}),  # pydantic
    SPELLINGS[2].seen_in: lambda sid: RpcError.from_error(-32603, "Internal error", {"details": f"'{sid}'"}),
    SPELLINGS[3].seen_in: lambda sid: RpcError.from_error(-32600, f"session/load: Session '{sid}' not found"),
    SPELLINGS[4].seen_in: lambda sid: RpcError.from_error(-32600, "session/load: No sessions directory found"),
    SPELLINGS[5].seen_in: lambda sid: RpcError.from_error(-32600, f"unknown sessionId: {sid}"),  # agentao
    SPELLINGS[6].seen_in: lambda sid: RpcError.from_error(-32603, "Invalid session identifier"),
}


def test_every_spelling_has_an_example() -> None:
    assert set(EXAMPLES) == {spelling.seen_in for spelling in SPELLINGS}


@pytest.mark.parametrize("spelling", SPELLINGS, ids=[spelling.seen_in for spelling in SPELLINGS])
def test_the_spelling_is_recognized(spelling: object) -> None:
    error = EXAMPLES[spelling.seen_in]("sess-1")  # type: ignore[attr-defined]
    assert says_session_not_found(error, "sess-1") is spelling


def test_other_errors_are_not_session_not_found() -> None:
    # The reference agent's "not attached" names the session too, but says something specific.
    attached = RpcError.from_error(-32602, "session not attached to this connection", {"sessionId": "s"})
    assert says_session_not_found(attached, "s") is None
    assert (
        says_session_not_found(RpcError.from_error(-32602, "Invalid params", {"message": "Invalid session id"}), "s")
        is None
    )
    assert says_session_not_found(RpcError.from_error(-32602, "prompt must be an array"), "s") is None
    assert says_session_not_found(RpcError.from_error(-32602, "bad", {"sessionId": "other"}), "s") is None
    assert says_session_not_found(RpcError.from_error(-32603, "Internal error", "boom"), "s") is None
    assert says_session_not_found(RpcError.from_error(-32601, "Method not found"), "s") is None
    assert says_session_not_found(ValueError("session not found"), "s") is None


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("spelling", SPELLINGS, ids=[spelling.seen_in for spelling in SPELLINGS])
async def test_a_session_lost_after_a_recovery_is_recovered_again_as_unknown(spelling: object, version: int) -> None:
    async with Harness(protocol_version=version) as h:
        h.agent.not_found_error = EXAMPLES[spelling.seen_in]  # type: ignore[attr-defined]
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME
        old = session.session_id
        h.agent.evict(old)  # lost after the recovery: the next prompt hears "not found"
        with pytest.raises(RpcError):
            await h.clock.run(session.prompt("two"))
        again = h.outcomes[-1]
        assert again.path is RecoveryPath.NEW_SESSION and again.previous_session_id == old
        assert again.lost_turns == 1 and not again.continuity
        assert any(spelling.seen_in in note for note in again.notes)  # type: ignore[attr-defined]
        assert session.session_id != old
        result = await h.clock.run(session.prompt("three"))  # never stuck
        assert result.stop_reason == "end_turn"
        lost, current = session.transcript.segments
        assert [m.text for m in lost.messages] == ["one", "echo: one", "two"]
        assert lost.messages[-1].status == "failed"
        assert [m.text for m in current.messages] == ["three", "echo: three"]
