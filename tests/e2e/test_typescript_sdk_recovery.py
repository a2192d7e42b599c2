"""The three recovery paths against the official TypeScript SDK's server (2.4.0), on Node.

The peer (``tests/peers/typescript_sdk.py``) answers ``session/status`` with the SDK spelling
(``open`` / ``saved`` / -32002), over WebSocket and Streamable HTTP (HTTP/1.1 only), v1 and v2.
Its controls: ``drop()`` (sockets die, sessions stay open) → resume; ``restart()`` (memory
forgotten, store kept) → replay; ``evict(id)`` + ``drop()`` → new session.

Over HTTP this server answers ``session/load`` / ``session/resume`` on one SSE stream while the
replayed updates travel on the session's stream, so the answer can overtake them; the replay
tests prompt right after the recovery callback to check that none of that history is taken
for live output (duplicates) or lost.
"""

from __future__ import annotations

import asyncio

import pytest

from acp_client import AcpClient, ConnectionLost, RecoveryPath, SessionHandle
from acp_client.state import Probe
from acp_client.testing import RecordingConnector
from acp_client.transports import connector_for
from tests._support import FAST_RETRY, eventually
from tests.e2e._support import Recorder, agent_text, is_idle, text_of
from tests.peers.typescript_sdk import TypeScriptSdkPeer

pytestmark = [pytest.mark.parametrize("version", [1, 2]), pytest.mark.parametrize("transport", ["ws", "http"])]


def _client(
    peer: TypeScriptSdkPeer, transport: str, version: int, recorder: Recorder
) -> tuple[AcpClient, RecordingConnector]:
    wire = RecordingConnector(connector_for(peer.ws_url if transport == "ws" else peer.http_url))
    return AcpClient(wire, protocol_version=version, retry=FAST_RETRY, callbacks=recorder.callbacks()), wire


def _text(handle: SessionHandle) -> str:
    """The current segment of the transcript (what the agent holds) with trailing blanks trimmed per
    line (this agent's live chunks end in a space, its stored history does not)."""
    return "\n".join(line.rstrip() for line in handle.transcript.segments[-1].text().split("\n"))


def _recovery_methods(wire: RecordingConnector) -> list[str]:
    """What the client sent on the last link, replies to agent requests left out."""
    return [method for method in wire.sent_methods(len(wire.transports) - 1) if method != "<response>"]


async def test_drop_resumes(typescript_sdk_peer: TypeScriptSdkPeer, transport: str, version: int) -> None:
    peer = typescript_sdk_peer
    recorder = Recorder()
    client, wire = _client(peer, transport, version, recorder)
    async with client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("hello")

        await asyncio.to_thread(peer.drop)
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.RESUME
        assert outcome.probe is Probe.ACTIVE
        assert outcome.raw_status == "open"
        assert outcome.steps == (("session/resume", "ok"),)
        assert outcome.session_id == session.session_id
        assert recorder.by_callback["resume"] == [outcome]
        assert _recovery_methods(wire) == ["initialize", "session/status", "session/resume"]
        assert "replayFrom" not in wire.messages("session/resume")[-1]["params"]
        if version == 2:
            assert outcome.state is not None and outcome.state.state == "idle"
        assert (await handle.prompt("again")).stop_reason == "end_turn"
        await eventually(
            lambda: _text(handle) == "user: hello\nagent: echo: hello\nuser: again\nagent: echo: again",
            what=lambda: f"both turns in the transcript, got {_text(handle)!r}",
        )
        assert not any(event.replay for event in recorder.events)
        assert peer.sessions()[session.session_id]["turns"] == 2


async def test_restart_replays(typescript_sdk_peer: TypeScriptSdkPeer, transport: str, version: int) -> None:
    peer = typescript_sdk_peer
    recorder = Recorder()
    client, wire = _client(peer, transport, version, recorder)
    async with client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("hello")
        await handle.prompt("second")
        live_events = len(recorder.events)

        await asyncio.to_thread(peer.restart)
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.REPLAY
        assert outcome.probe is Probe.INACTIVE
        assert outcome.raw_status == "saved"
        assert outcome.session_id == session.session_id
        assert recorder.by_callback["replay"] == [outcome]
        if version == 1:
            assert outcome.steps == (("session/load", "ok"),)
            assert _recovery_methods(wire) == ["initialize", "session/status", "session/load"]
        else:
            assert outcome.steps == (("session/resume+replayFrom", "ok"),)
            assert _recovery_methods(wire) == ["initialize", "session/status", "session/resume"]
            assert wire.messages("session/resume")[-1]["params"]["replayFrom"] == {"type": "start"}
        # Prompt at once: replayed history still in flight must not turn into live duplicates.
        assert (await handle.prompt("third")).stop_reason == "end_turn"
        expected = "user: hello\nagent: echo: hello\nuser: second\nagent: echo: second\nuser: third\nagent: echo: third"
        await eventually(
            lambda: _text(handle) == expected,
            what=lambda: f"three turns without duplicates, got {_text(handle)!r}",
        )
        history = [event for event in recorder.events[live_events:] if event.replay]
        assert history, "no update was marked as replay"
        assert {event.update.kind for event in history} >= {"agent_message" if version == 2 else "agent_message_chunk"}
        assert peer.sessions()[session.session_id]["turns"] == 3


async def test_eviction_starts_a_new_session(
    typescript_sdk_peer: TypeScriptSdkPeer, transport: str, version: int
) -> None:
    peer = typescript_sdk_peer
    recorder = Recorder()
    client, wire = _client(peer, transport, version, recorder)
    async with client:
        session = await client.new_session("/work/project")
        old_id = session.session_id
        handle = client.session(old_id)
        await handle.prompt("hello")

        await asyncio.to_thread(peer.evict, old_id)
        await asyncio.to_thread(peer.drop)
        outcome = await recorder.outcome()

        assert outcome.path is RecoveryPath.NEW_SESSION
        assert outcome.probe is Probe.UNKNOWN
        assert outcome.steps == (("session/new", "ok"),)
        assert recorder.by_callback["new_session"] == [outcome]
        assert _recovery_methods(wire) == ["initialize", "session/status", "session/new"]
        assert handle.session_id == outcome.session_id != old_id
        assert client.session(old_id).session_id == outcome.session_id
        assert (await handle.prompt("fresh")).stop_reason == "end_turn"
        await eventually(
            lambda: _text(handle) == "user: fresh\nagent: echo: fresh",
            what=lambda: f"only the new turn, got {_text(handle)!r}",
        )
        sessions = peer.sessions()
        assert old_id not in sessions
        assert sessions[outcome.session_id]["turns"] == 1


async def test_drop_mid_turn_then_the_rest_arrives_live(
    typescript_sdk_peer: TypeScriptSdkPeer, transport: str, version: int
) -> None:
    """The turn outlives the link on this agent: after the resume, its remaining chunks (and, v2,
    its final idle) reach the new link. The client reported the turn interrupted and must take
    what follows as live output of that turn, not end the next turn with it."""
    peer = typescript_sdk_peer
    recorder = Recorder()
    client, wire = _client(peer, transport, version, recorder)
    peer.hold_turns()
    try:
        async with client:
            session = (await client.new_session("/work/project")).record
            handle = client.session(session.session_id)
            turn = asyncio.ensure_future(handle.prompt("cut off"))
            await eventually(lambda: peer.sessions()[session.session_id]["running"], what="the turn running")

            await asyncio.to_thread(peer.drop)
            with pytest.raises(ConnectionLost) as lost:
                await asyncio.wait_for(turn, 10)
            assert lost.value.may_have_executed
            outcome = await recorder.outcome()
            assert outcome.path is RecoveryPath.RESUME
            assert [text_of(i.prompt) for i in recorder.interrupted] == ["cut off"]
            if version == 2:
                assert outcome.state is not None and outcome.state.state == "running"
            after_recovery = len(recorder.events)

            peer.release_turns()
            await eventually(lambda: peer.sessions()[session.session_id]["turns"] == 1, what="the turn to end")
            # The rest of the cut-off turn arrives on the new link, as live output.
            await eventually(
                lambda: agent_text(recorder.events[after_recovery:]) == "echo: cut off ",
                what="the rest of the interrupted turn",
            )
            if version == 2:
                await eventually(
                    lambda: any(is_idle(event) for event in recorder.events[after_recovery:]),
                    what="the interrupted turn's idle",
                )
            assert not any(event.replay for event in recorder.events[after_recovery:])
            # The next turn ends with its own completion, and the prompt was sent twice in all.
            assert (await handle.prompt("next")).stop_reason == "end_turn"
            assert len(wire.messages("session/prompt")) == 2
            await eventually(
                lambda: _text(handle).endswith("user: next\nagent: echo: next"),
                what=lambda: f"the next turn in the transcript, got {_text(handle)!r}",
            )
    finally:
        peer.release_turns()
