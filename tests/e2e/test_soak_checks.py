"""The soak's invariant checks catch what they claim to (no servers: synthetic events).

A soak that reports zero violations is only worth something if each check fires on the failure it
names; these feed the checker the symptoms of issue 12 directly.
"""

from __future__ import annotations

import collections
from pathlib import Path

import attrs

from acp_client import ConnectionState, RecoveryOutcome, RecoveryPath, State, Transcript, UpdateEvent
from acp_client.state import Continuity, Probe
from acp_client.types import AgentMessageChunk, TextContent
from tests.e2e._soak import _Session, _Soak


class _Peer:
    name = "fake"

    def server_rss(self) -> None:
        return None


@attrs.define
class _Handle:
    session_id: str
    transcript: Transcript = attrs.Factory(Transcript)


def _soak(*ids: str) -> _Soak:
    soak = _Soak(_Peer(), "ws", 1, Path("."))
    for index, sid in enumerate(ids):
        session = _Session(index, sid)
        soak.sessions.append(session)
        soak.by_id[sid] = session
        soak.handles.append(_Handle(sid))
    soak.on_state(ConnectionState(State.CONNECTED))
    return soak


def _outcome(path: RecoveryPath, previous: str, new: str | None = None) -> RecoveryOutcome:
    return RecoveryOutcome(
        path=path,
        planned=path,
        previous_session_id=previous,
        session_id=new if new is not None else previous,
        continuity=Continuity.LOST if path is RecoveryPath.NEW_SESSION else Continuity.KEPT,
        probe=Probe.ACTIVE,
    )


def _recover(soak: _Soak, *outcomes: RecoveryOutcome, cut_off: bool = False) -> None:
    soak.on_state(ConnectionState(State.RECONNECTING, attempt=1, retry_in=0.0))
    soak.on_state(ConnectionState(State.RECOVERING))
    for outcome in outcomes:
        soak.on_outcome(outcome)
    if not cut_off:
        soak.on_state(ConnectionState(State.CONNECTED))


def kinds(soak: _Soak) -> list[str]:
    return [v.kind for v in soak.report.violations]


def test_a_clean_recovery_is_no_violation() -> None:
    soak = _soak("a", "b")
    _recover(soak, _outcome(RecoveryPath.RESUME, "a"), _outcome(RecoveryPath.REPLAY, "b"))
    assert soak.report.violations == []


def test_a_replay_reported_as_a_resume_is_caught() -> None:
    soak = _soak("a", "b")
    soak.on_update(UpdateEvent("a", AgentMessageChunk(content=TextContent(text="old")), replay=True))
    _recover(soak, cut_off=True)  # the load replayed "a", then the link dropped before any report
    _recover(soak, _outcome(RecoveryPath.RESUME, "a"), _outcome(RecoveryPath.RESUME, "b"))
    assert kinds(soak) == ["callback"]
    assert "replayed updates reported as resume" in soak.report.violations[0].detail


def test_a_replacement_the_app_never_heard_of_is_caught() -> None:
    soak = _soak("a", "b")
    soak.handles[0].session_id = "a2"  # session/new replaced "a" during a recovery that was cut off
    _recover(soak, cut_off=True)
    _recover(soak, _outcome(RecoveryPath.RESUME, "a2"), _outcome(RecoveryPath.RESUME, "b"))
    details = [v.detail for v in soak.report.violations]
    assert any("unknown to the app" in d for d in details), details
    assert any("the app learnt a" in d for d in details), details


def test_a_missing_or_second_callback_is_caught() -> None:
    soak = _soak("a", "b")
    _recover(soak, _outcome(RecoveryPath.RESUME, "a"), _outcome(RecoveryPath.RESUME, "a"))
    details = [v.detail for v in soak.report.violations]
    assert any("a second callback" in d for d in details), details
    assert any("session 1 got 0 callbacks" in d for d in details), details


def test_a_repeated_state_is_caught() -> None:
    soak = _soak("a")
    soak.on_state(ConnectionState(State.CONNECTED))
    assert kinds(soak) == ["repeated_state"]


def _turn(transcript: Transcript, text: str, reply: str | None = None) -> None:
    transcript.add_user_prompt([TextContent(text=text)])
    transcript.apply(AgentMessageChunk(content=TextContent(text=reply if reply is not None else f"echo: {text}")))
    transcript.end_turn()


def test_transcript_checks_catch_lost_and_garbled_turns() -> None:
    soak = _soak("a")
    session, handle = soak.sessions[0], soak.handles[0]
    for text in ("short s0-1", "short s0-2", "short s0-3"):
        session.finished.append((text, "short"))
    _turn(handle.transcript, "short s0-1")
    _turn(handle.transcript, "short s0-3", reply="echo: something else")
    soak.check_transcript(session, handle)
    details = " | ".join(v.detail for v in soak.report.violations)
    assert "1 of 3 finished turns missing (first 'short s0-2', last 'short s0-2')" in details
    assert "the reply to 'short s0-3'" in details


def test_transcript_checks_catch_a_repeated_turn() -> None:
    soak = _soak("a")
    session, handle = soak.sessions[0], soak.handles[0]
    session.finished.append(("short s0-1", "short"))
    _turn(handle.transcript, "short s0-1")
    _turn(handle.transcript, "short s0-1")
    soak.check_transcript(session, handle)
    assert [v.detail for v in soak.report.violations] == ["session 0: turns repeated: ['short s0-1']"]


def test_transcript_check_waits_for_the_replay_window_to_close() -> None:
    soak = _soak("a")
    session, handle = soak.sessions[0], soak.handles[0]
    session.finished.append(("short s0-1", "short"))
    _turn(handle.transcript, "short s0-1")
    handle.transcript.begin_replay()  # mid-replay the transcript is being rebuilt: not judged
    soak.check_transcript(session, handle)
    assert soak.report.violations == []


def test_a_lost_turn_is_reported_once_not_at_every_later_check() -> None:
    soak = _soak("a")
    session, handle = soak.sessions[0], soak.handles[0]
    session.finished.append(("short s0-1", "short"))
    for _ in range(3):
        soak.check_transcript(session, handle)
    assert len(soak.report.violations) == 1


def test_two_prompts_fused_into_one_message_are_caught_once() -> None:
    soak = _soak("a")
    session, handle = soak.sessions[0], soak.handles[0]
    session.finished.append(("/slow s0-2", "long"))
    handle.transcript.add_user_prompt([TextContent(text="/slow s0-1/slow s0-2")])  # a v1 run left unsplit
    soak.check_transcript(session, handle)
    soak.check_transcript(session, handle)
    assert [v.detail for v in soak.report.violations] == [
        "session 0: prompts fused into one message: ['/slow s0-1', '/slow s0-2']"
    ]


def _prompt(text: str, request_id: int = 1) -> dict[str, object]:
    params = {"sessionId": "a", "prompt": [{"type": "text", "text": text}]}
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}


def test_a_prompt_sent_twice_is_caught_unless_the_first_send_never_left() -> None:
    soak = _soak("a")
    soak.on_wire_send(1, _prompt("short s0-1"))
    soak.on_wire_refused(_prompt("short s0-1"))  # the transport: no byte of it left
    soak.on_wire_send(2, _prompt("short s0-1"))  # sent again once the client is back: right
    assert soak.report.violations == []
    soak.on_wire_send(3, _prompt("short s0-1"))  # the second send was taken: this one is a resend
    assert kinds(soak) == ["prompt_resent"]


def test_a_prompt_called_not_sent_that_the_agent_received_is_caught() -> None:
    soak = _soak("a")
    soak.on_wire_send(1, _prompt("short s0-1"))
    soak.on_wire_refused(_prompt("short s0-1"))  # "not sent", but its bytes reached the agent
    soak.on_wire_send(1, _prompt("short s0-2", 2))
    soak.not_sent.add("short s0-2")  # the transport took it, and the app heard "not sent"
    soak.on_wire_send(1, _prompt("short s0-3", 3))  # an ordinary prompt
    soak.check_receipts(collections.Counter({"short s0-1": 1, "short s0-2": 1, "short s0-3": 1}))
    details = [v.detail for v in soak.report.violations]
    assert kinds(soak) == ["not_sent_received", "not_sent_received"], details
    assert "'short s0-1' (1x) but its send was refused" in details[0]
    assert "the app was told 'short s0-2' was not sent" in details[1]


def test_a_prompt_the_agent_received_twice_is_caught() -> None:
    soak = _soak("a")
    soak.on_wire_send(1, _prompt("short s0-1"))
    soak.check_receipts(collections.Counter({"short s0-1": 2}))
    assert kinds(soak) == ["received_twice"]
