"""The one table of "session not found" spellings (issue 17 item 3): a test per spelling, naming the
agent it came from, from the pure match to a session that a recovery brought back and the agent
then answered with it — which is recovered again as unknown, never left stuck."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from acp_client import RecoveryPath, RpcError
from acp_client._recovery._not_found import SPELLINGS, says_retry_later, says_session_not_found
from acp_client.state import Continuity, Probe
from acp_client.transcript import TurnStatus

from ._harness import FLAVOURS, VERSIONS, Harness

#: Per spelling: the error the agent it names answers for session ``sid``, as seen on the wire
#: (docs/agents-conformance.md).
EXAMPLES: dict[str, Callable[[str], RpcError]] = {
    SPELLINGS[0].seen_in: lambda sid: RpcError.from_error(-32002, "Resource not found", {"uri": sid}),  # deepagents
    SPELLINGS[1].seen_in: lambda sid: RpcError.from_error(-32602, "Invalid params", f"Unknown sessionId: {sid}"),  # pi
    SPELLINGS[2].seen_in: lambda sid: RpcError.from_error(-32602, "Invalid params", {"sessionId": sid}),  # pydantic
    SPELLINGS[3].seen_in: lambda sid: RpcError.from_error(-32603, "Internal error", {"details": f"'{sid}'"}),
    # Zed's Claude adapters: the reason in data.details, and no session id anywhere.
    SPELLINGS[4].seen_in: lambda sid: RpcError.from_error(-32603, "Internal error", {"details": "Session not found"}),
    SPELLINGS[5].seen_in: lambda sid: RpcError.from_error(-32600, f"session/load: Session '{sid}' not found"),
    SPELLINGS[6].seen_in: lambda sid: RpcError.from_error(-32600, "session/load: No sessions directory found"),
    SPELLINGS[7].seen_in: lambda sid: RpcError.from_error(-32600, f"unknown sessionId: {sid}"),  # agentao
    SPELLINGS[8].seen_in: lambda sid: RpcError.from_error(-32603, "Invalid session identifier"),
}


def test_every_spelling_has_an_example() -> None:
    assert set(EXAMPLES) == {spelling.seen_in for spelling in SPELLINGS}


@pytest.mark.parametrize("spelling", SPELLINGS, ids=[spelling.seen_in for spelling in SPELLINGS])
def test_the_spelling_is_recognized(spelling: object) -> None:
    error = EXAMPLES[spelling.seen_in]("sess-1")  # type: ignore[attr-defined]
    assert says_session_not_found(error, "sess-1") is spelling


def test_claude_adapters_internal_error_with_session_not_found_details() -> None:
    """claude-agent-acp 0.23.x and claude-code-acp answer an unknown session on session/load,
    session/prompt, session/cancel and session/set_mode with -32603 'Internal error' and only
    ``data.details: "Session not found"``: no session id to match, the details say it."""
    claude = next(spelling for spelling in SPELLINGS if "claude-agent-acp" in spelling.seen_in)
    error = RpcError.from_error(-32603, "Internal error", {"details": "Session not found"})
    assert says_session_not_found(error, "sess-1") is claude
    assert says_session_not_found(error, None) is claude  # no id needed
    # Any other internal error is not "not found", whatever else its details say.
    for details in ("Internal server error", "boom", "Session not found in cache; retry failed", "tool not found"):
        other = RpcError.from_error(-32603, "Internal error", {"details": details})
        assert says_session_not_found(other, "sess-1") is None, details
    assert says_session_not_found(RpcError.from_error(-32603, "Internal error", {"message": "x"}), "s") is None
    # The details only count under the generic message and code.
    assert (
        says_session_not_found(RpcError.from_error(-32603, "Tool failed", {"details": "Session not found"}), "s")
        is None
    )
    assert (
        says_session_not_found(RpcError.from_error(-32602, "Internal error", {"details": "Session not found"}), "s")
        is None
    )


def test_pi_acp_unknown_session_id() -> None:
    """pi-acp 0.0.34 answers an unknown session with -32602 'Invalid params' and the reason as the
    whole of ``data``, a string (``tests/interop/test_pi_acp.py`` pins it on the wire): its own row,
    with or without the id known. Other -32602 answers with a string ``data`` are not "not found"."""
    pi = next(spelling for spelling in SPELLINGS if spelling.seen_in.startswith("pi-acp"))
    error = RpcError.from_error(-32602, "Invalid params", "Unknown sessionId: sess-1")
    assert says_session_not_found(error, "sess-1") is pi
    assert says_session_not_found(error, None) is pi
    for data in ("Unknown model", "expected sessionId to be a string", "unknown sessionIds are refused"):
        other = RpcError.from_error(-32602, "Invalid params", data)
        assert says_session_not_found(other, "s") is None, data


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
    """The prompt the agent refused with the spelling was never run: after the session is recovered
    again as unknown, it is sent once on the new session and its answer is the caller's."""
    async with Harness(protocol_version=version) as h:
        h.agent.not_found_error = EXAMPLES[spelling.seen_in]  # type: ignore[attr-defined]
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME
        old = session.session_id
        h.agent.evict(old)  # lost after the recovery: the next prompt hears "not found"
        result = await h.clock.run(session.prompt("two"))
        assert result.stop_reason == "end_turn"  # answered, on the new session
        again = h.outcomes[-1]
        assert again.path is RecoveryPath.NEW_SESSION and again.previous_session_id == old
        assert again.lost_turns == 1 and again.continuity is Continuity.LOST
        assert any(spelling.seen_in in note for note in again.notes)  # type: ignore[attr-defined]
        assert session.session_id != old
        prompts = [m["params"]["sessionId"] for m in h.connector.messages("session/prompt")]
        assert prompts == [old, old, session.session_id]  # "one"; "two" refused on the old id, sent once on the new
        result = await h.clock.run(session.prompt("three"))  # and the session stays usable
        assert result.stop_reason == "end_turn"
        lost, current = session.transcript.segments
        assert lost.lost and [m.text for m in lost.messages] == ["one", "echo: one"]
        assert [m.text for m in current.messages] == ["two", "echo: two", "three", "echo: three"]
        assert [m.status for m in current.messages if m.role == "user"] == [TurnStatus.COMPLETE] * 2


class Answers:
    """Rewrites the agent's answers per method, on the links opened from now on: ``refuse[method]``
    says how many of the next answers to requests of ``method`` become pydantic-acp's "not found"
    (-32602 'Invalid params' naming the session the request named). Whatever the agent streamed for
    the request before its answer still arrives."""

    def __init__(self, h: Harness) -> None:
        self.refuse: dict[str, int] = {}
        self.requests: dict[object, tuple[str, str | None]] = {}
        h.connector.on_send, h.connector.rewrite = self._sent, self._received

    def _sent(self, message: object) -> None:
        if isinstance(message, dict) and "method" in message and "id" in message:
            params = message.get("params") or {}
            self.requests[message["id"]] = (message["method"], params.get("sessionId"))

    def _received(self, message: object) -> object:
        if not isinstance(message, dict) or "result" not in message or message.get("id") not in self.requests:
            return message
        method, sid = self.requests[message["id"]]
        if self.refuse.get(method, 0) <= 0:
            return message
        self.refuse[method] -= 1
        error = {"code": -32602, "message": "Invalid params", "data": {"sessionId": sid}}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}


async def test_a_refused_prompt_after_which_the_agent_had_streamed_is_not_sent_again() -> None:
    """The agent streamed part of an answer, then answered "not found": it may have acted on the
    prompt, so it is not resent. The session is still recovered again (never stuck); the refused
    turn stays where it was heard, in the lost segment, with what it streamed."""
    async with Harness() as h:
        answers = Answers(h)
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        await h.drop_and_recover()
        old = session.session_id
        answers.refuse["session/prompt"] = 1
        with pytest.raises(RpcError):
            await h.clock.run(session.prompt("two"))  # "echo: two" streamed, then the refusal
        assert [m["params"]["sessionId"] for m in h.connector.messages("session/prompt")] == [old, old]
        again = h.outcomes[-1]
        assert again.path is RecoveryPath.NEW_SESSION and session.session_id != old
        assert (await h.clock.run(session.prompt("three"))).stop_reason == "end_turn"
        lost, current = session.transcript.segments
        assert [(m.text, m.status) for m in lost.messages] == [
            ("one", TurnStatus.COMPLETE),
            ("echo: one", None),
            ("two", TurnStatus.FAILED),
            ("echo: two", None),
        ]
        assert [m.text for m in current.messages] == ["three", "echo: three"]


async def test_a_refused_prompt_is_sent_again_only_once() -> None:
    """The new session refuses the resent prompt too: the caller gets that refusal (no loop), the
    prompt is a failed turn of the new segment, and the next prompt still gets through."""
    async with Harness() as h:
        answers = Answers(h)
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        await h.drop_and_recover()
        h.agent.evict(session.session_id)
        h.agent.not_found_error = EXAMPLES[SPELLINGS[1].seen_in]  # pydantic-acp's
        answers.refuse["session/prompt"] = 1  # (the first answer is the agent's own refusal: not rewritten)
        with pytest.raises(RpcError):
            await h.clock.run(session.prompt("two"))
        assert len(h.connector.messages("session/prompt")) == 3  # one, two, two again: not a third time
        assert (await h.clock.run(session.prompt("three"))).stop_reason == "end_turn"
        assert [(m.text, m.status) for m in session.transcript.messages if m.role == "user"] == [
            ("two", TurnStatus.FAILED),
            ("three", TurnStatus.COMPLETE),
        ]


async def test_a_refused_prompt_whose_new_session_fails_stays_a_failed_turn() -> None:
    """Recovering the session again fails (the agent refuses ``session/new``): the prompt is not
    resent, the caller gets the refusal, and the transcript keeps the prompt as a failed turn."""
    async with Harness() as h:
        answers = Answers(h)
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        await h.drop_and_recover()
        h.agent.evict(session.session_id)
        answers.refuse["session/new"] = 1
        with pytest.raises(RpcError):
            await h.clock.run(session.prompt("two"))
        assert h.outcomes[-1].path is RecoveryPath.ABANDON
        assert len(h.connector.messages("session/prompt")) == 2
        assert [(m.text, m.status) for m in session.transcript.all_messages() if m.role == "user"] == [
            ("one", TurnStatus.COMPLETE),
            ("two", TurnStatus.FAILED),
        ]


@pytest.mark.parametrize("status", [True, False], ids=["probed", "not-probed"])
@pytest.mark.parametrize(
    ("agent", "quoted"),
    [
        ("pi-acp", "-32602 'Invalid params' (details: 'Unknown sessionId: {sid}')"),
        ("claude-agent-acp", "-32603 'Internal error' (details: 'Session not found')"),
    ],
)
async def test_notes_quote_the_code_and_message_the_agent_sent(agent: str, quoted: str, status: bool) -> None:
    """The outcome's notes say what the agent answered (its code and message), not -32002."""
    spelling = next(spelling for spelling in SPELLINGS if agent in spelling.seen_in)
    async with Harness(advertise_status=status) as h:
        h.agent.not_found_error = EXAMPLES[spelling.seen_in]
        session = await h.client.new_session("/a")
        await h.clock.run(session.prompt("one"))
        h.agent.evict(session.session_id)
        quoted = quoted.format(sid=session.session_id)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.NEW_SESSION and outcome.continuity is Continuity.LOST
        if status:
            assert f"session/status: not found ({quoted})" in outcome.notes
        else:
            assert f"session/resume: not found ({quoted}); trying session/new" in outcome.notes
        assert not any("-32002" in note for note in outcome.notes), outcome.notes


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("spelling", SPELLINGS, ids=[spelling.seen_in for spelling in SPELLINGS])
async def test_status_and_locate_read_every_spelling_as_unknown(spelling: object, flavour: str) -> None:
    """The one table serves ``session_status()`` and the instances' fan-out (``locate``) too."""
    async with Harness(pool=flavour == "pool") as h:
        agents = [h.agent] + ([h.other.memory.agent] if h.other is not None else [])
        for agent in agents:
            agent.not_found_error = EXAMPLES[spelling.seen_in]  # type: ignore[attr-defined,union-attr]
        session = await h.client.new_session("/a")
        h.agent.evict(session.session_id)
        assert (await h.clock.run(h.client.session_status(session.session_id))).status is Probe.UNKNOWN
        location = await h.clock.run(h.client.locate(session.session_id))
        assert [answer.probe for answer in location.answers] == [Probe.UNKNOWN] * len(agents)


def test_a_refusal_for_now_says_retry_later() -> None:
    # Qwen Code's daemon while it closes a session whose WebSocket dropped: busy, not gone.
    closing = RpcError.from_error(
        -32602, 'No session with id "s1". The session is closing; retry after close completes', {"sessionId": "s1"}
    )
    assert says_retry_later(closing)
    assert says_retry_later(RpcError.from_error(-32603, "Internal error", {"details": "busy, retry later"}))
    assert not says_retry_later(RpcError.from_error(-32602, 'No session with id "s1"', {"sessionId": "s1"}))
    assert not says_retry_later(RpcError.from_error(-32002, "Resource not found"))
