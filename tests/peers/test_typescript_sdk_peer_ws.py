"""The TypeScript SDK peer over WebSocket (raw ``websockets``): v1 and v2 lifecycles, restart and
replay, eviction, drops mid-turn, binary and malformed frames."""

from __future__ import annotations

import pytest
import websockets

from tests._support import eventually
from tests.peers._ts_wire import CWD, TIMEOUT, WsRpc, initialize_params, is_idle, text_of, ws_session
from tests.peers.typescript_sdk import TypeScriptSdkPeer

# ---------------------------------------------------------------------------------------------
# WebSocket smoke tests


async def test_ws_v1_lifecycle(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with websockets.connect(typescript_sdk_peer.ws_url, open_timeout=TIMEOUT) as ws:
        assert ws.response is not None
        assert ws.response.headers.get("Acp-Connection-Id")
        rpc = WsRpc(ws)
        init, _ = await rpc.call("initialize", initialize_params(1))
        caps = init["result"]["agentCapabilities"]
        assert init["result"]["protocolVersion"] == 1
        assert caps["loadSession"] is True
        assert caps["sessionCapabilities"] == {"resume": {}, "close": {}, "list": {}, "status": {}}

        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"] == {"status": "open"}

        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "one two three"}]}
        answer, updates = await rpc.call("session/prompt", prompt)
        assert answer["result"] == {"stopReason": "end_turn"}
        assert [u["params"]["update"]["sessionUpdate"] for u in updates] == ["agent_message_chunk"] * 3
        assert "".join(text_of(u["params"]["update"]) for u in updates) == "echo: one two three "

        listed, _ = await rpc.call("session/list", {})
        assert session_id in [s["sessionId"] for s in listed["result"]["sessions"]]
        unknown, _ = await rpc.call("session/status", {"sessionId": "sess_nope"})
        assert unknown["error"]["code"] == -32002
        assert unknown["error"]["data"] == {"sessionId": "sess_nope"}
        closed, _ = await rpc.call("session/close", {"sessionId": session_id})
        assert closed["result"] == {}
        assert typescript_sdk_peer.sessions()[session_id]["status"] == "saved"


async def test_ws_v2_lifecycle(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with ws_session(typescript_sdk_peer.ws_url_v2, 2) as (rpc, init):
        assert init["protocolVersion"] == 2
        assert init["capabilities"] == {"session": {"status": {}}}
        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"] == {"status": "open", "state": {"state": "idle"}}

        answer, before = await rpc.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi you"}]}
        )
        assert before == []  # the answer comes first
        message_id = answer["result"]["messageId"]
        updates = await rpc.updates_until(is_idle)
        assert [u["sessionUpdate"] for u in updates] == [
            "user_message",
            "state_update",
            *["agent_message_chunk"] * 3,
            "state_update",
        ]
        assert updates[0]["messageId"] == message_id
        assert updates[1]["state"] == "running"
        assert len({u["messageId"] for u in updates[2:5]}) == 1
        assert "".join(text_of(u) for u in updates[2:5]) == "echo: hi you "
        assert updates[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}


@pytest.mark.parametrize("version", [1, 2])
async def test_ws_restart_then_replay(typescript_sdk_peer: TypeScriptSdkPeer, version: int) -> None:
    async with ws_session(typescript_sdk_peer.ws_url, version) as (rpc, _):
        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        await rpc.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "remember"}]})
        if version == 2:
            await rpc.updates_until(is_idle)
        typescript_sdk_peer.restart()
        with pytest.raises(websockets.ConnectionClosedError):
            await rpc.recv()
    assert typescript_sdk_peer.sessions()[session_id]["status"] == "saved"

    async with ws_session(typescript_sdk_peer.ws_url, version) as (rpc, _):
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"] == {"status": "saved"}
        params = {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
        if version == 1:
            answer, replay = await rpc.call("session/load", params)
            kinds = ["user_message_chunk", "agent_message_chunk"]
        else:
            answer, replay = await rpc.call("session/resume", {**params, "replayFrom": {"type": "start"}})
            kinds = ["user_message", "agent_message", "state_update"]
        assert answer["result"] == {"sessionId": session_id}
        updates = [m["params"]["update"] for m in replay]
        assert [u["sessionUpdate"] for u in updates] == kinds
        assert [text_of(u) for u in updates[:2]] == ["remember", "echo: remember"]
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"]["status"] == "open"


@pytest.mark.parametrize("version", [1, 2])
async def test_ws_evict_gives_not_found(typescript_sdk_peer: TypeScriptSdkPeer, version: int) -> None:
    async with ws_session(typescript_sdk_peer.ws_url, version) as (rpc, _):
        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        typescript_sdk_peer.evict(session_id)
        assert session_id not in typescript_sdk_peer.sessions()
        for method, params in [
            ("session/status", {"sessionId": session_id}),
            ("session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []}),
            ("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}),
        ]:
            answer, _ = await rpc.call(method, params)
            assert answer["error"] == {
                "code": -32002,
                "message": "Resource not found",
                "data": {"sessionId": session_id},
            }, method


async def test_ws_drop_keeps_sessions_open(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
        new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        typescript_sdk_peer.drop()
        with pytest.raises(websockets.ConnectionClosedError) as info:
            await rpc.recv()
        assert info.value.rcvd is None  # abrupt: no close frame
    async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
        status, _ = await rpc.call("session/status", {"sessionId": session_id})
        assert status["result"] == {"status": "open"}
        resumed, _ = await rpc.call("session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
        assert resumed["result"] == {"sessionId": session_id}
        answer, updates = await rpc.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "again"}]}
        )
        assert answer["result"] == {"stopReason": "end_turn"}
        assert len(updates) == 3


async def test_ws_v2_drop_mid_turn_then_resume_sees_rest(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    typescript_sdk_peer.hold_turns()
    try:
        async with ws_session(typescript_sdk_peer.ws_url_v2, 2) as (rpc, _):
            new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
            session_id = new["result"]["sessionId"]
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow turn"}]}
            await rpc.call("session/prompt", prompt)
            first = await rpc.updates_until(lambda u: u["sessionUpdate"] == "state_update")
            assert [u["sessionUpdate"] for u in first] == ["user_message", "state_update"]
            assert first[-1]["state"] == "running"
            typescript_sdk_peer.drop()
            with pytest.raises(websockets.ConnectionClosedError):
                await rpc.recv()
        async with ws_session(typescript_sdk_peer.ws_url_v2, 2) as (rpc, _):
            status, _ = await rpc.call("session/status", {"sessionId": session_id})
            assert status["result"] == {"status": "open", "state": {"state": "running"}}
            answer, before = await rpc.call("session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
            assert answer["result"] == {"sessionId": session_id}
            assert [m["params"]["update"] for m in before] == [{"sessionUpdate": "state_update", "state": "running"}]
            typescript_sdk_peer.release_turns()
            rest = await rpc.updates_until(is_idle)
            assert [u["sessionUpdate"] for u in rest] == [*["agent_message_chunk"] * 3, "state_update"]
            assert "".join(text_of(u) for u in rest[:3]) == "echo: slow turn "
            assert rest[-1]["stopReason"] == "end_turn"
    finally:
        typescript_sdk_peer.release_turns()


async def test_ws_v1_drop_mid_turn_streams_rest_to_resumed_connection(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    typescript_sdk_peer.hold_turns()
    try:
        async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
            new, _ = await rpc.call("session/new", {"cwd": CWD, "mcpServers": []})
            session_id = new["result"]["sessionId"]
            await rpc.send(
                {
                    "jsonrpc": "2.0",
                    "id": 99,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "cut off"}]},
                }
            )
            await eventually(lambda: typescript_sdk_peer.sessions()[session_id]["running"])
            typescript_sdk_peer.drop()
            with pytest.raises(websockets.ConnectionClosedError):
                await rpc.recv()
        async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
            resumed, _ = await rpc.call("session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
            assert resumed["result"] == {"sessionId": session_id}
            typescript_sdk_peer.release_turns()
            # The chunks follow the session to the new connection; the prompt's answer was lost with the old one.
            chunks = [await rpc.recv() for _ in range(3)]
            assert "".join(text_of(m["params"]["update"]) for m in chunks) == "echo: cut off "
            await eventually(lambda: typescript_sdk_peer.sessions()[session_id]["turns"] == 1)
            answer, before = await rpc.call("session/status", {"sessionId": session_id})
            assert (answer["result"], before) == ({"status": "open"}, [])
    finally:
        typescript_sdk_peer.release_turns()


async def test_ws_binary_and_malformed_frames(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with ws_session(typescript_sdk_peer.ws_url, 1) as (rpc, _):
        await rpc.ws.send(b"\x00\x01 binary frames are ignored")
        await rpc.ws.send("not json")
        parse_error = await rpc.recv()
        assert parse_error["id"] is None
        assert parse_error["error"]["code"] == -32700
        await rpc.send([{"jsonrpc": "2.0", "id": 99, "method": "session/list", "params": {}}])  # type: ignore[arg-type]
        batch = await rpc.recv()
        assert batch["id"] is None
        assert batch["error"]["code"] == -32600
        listed, _ = await rpc.call("session/list", {})
        assert "sessions" in listed["result"]
