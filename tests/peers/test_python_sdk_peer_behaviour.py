"""The Python SDK peer's agent behaviour over WebSocket: permission requests, a slow prompt until
cancelled, load and resume, list and close."""

from __future__ import annotations

from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from tests.peers._py_wire import (
    CWD,
    Message,
    echo_turn,
    initialize,
    new_session,
    prompt_params,
    texts,
    updates,
    ws_link,
)
from tests.peers.python_sdk import PythonSdkPeer

# -- agent behaviour (over WebSocket) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reply"),
    [
        ({"outcome": {"outcome": "selected", "optionId": "allow"}}, "echo: permission selected allow"),
        ({"outcome": {"outcome": "selected", "optionId": "reject"}}, "echo: permission selected reject"),
        ({"outcome": {"outcome": "cancelled"}}, "echo: permission cancelled"),
    ],
    ids=["allow", "reject", "cancelled"],
)
async def test_permission_request(python_sdk_peer: PythonSdkPeer, answer: Message, reply: str) -> None:
    async with connect(python_sdk_peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        session_id = await new_session(link)
        response, seen = await link.call(
            "session/prompt", prompt_params(session_id, "/permission"), on_request=lambda _request: answer
        )
        assert response["result"] == {"stopReason": "end_turn"}
        (request,) = [m for m in seen if m.get("method") == "session/request_permission"]
        params = request["params"]
        assert params["sessionId"] == session_id
        assert params["toolCall"]["status"] == "pending"
        assert {(o["optionId"], o["kind"]) for o in params["options"]} == {
            ("allow", "allow_once"),
            ("reject", "reject_once"),
        }
        assert "".join(texts(seen)) == reply


async def test_slow_prompt_until_cancel(python_sdk_peer: PythonSdkPeer) -> None:
    async with connect(python_sdk_peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        session_id = await new_session(link)
        ticks = 0

        async def cancel_after_two_ticks(message: Message) -> None:
            nonlocal ticks
            if message.get("method") == "session/update":
                ticks += 1
                if ticks == 2:
                    await link.notify("session/cancel", {"sessionId": session_id})

        response, seen = await link.call(
            "session/prompt", prompt_params(session_id, "/slow"), on_message=cancel_after_two_ticks
        )
        assert response["result"] == {"stopReason": "cancelled"}
        assert texts(seen)[:2] == ["tick 1 ", "tick 2 "]


async def test_load_replays_resume_attaches(python_sdk_peer: PythonSdkPeer) -> None:
    async with connect(python_sdk_peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        session_id = await new_session(link)
        await echo_turn(link, session_id, "one")
        await echo_turn(link, session_id, "two")

    async with connect(python_sdk_peer.ws_url) as ws:  # the agent still has it in memory
        link = ws_link(ws)
        await initialize(link)
        refused, _ = await link.call("session/prompt", prompt_params(session_id, "not attached yet"))
        assert refused["error"]["code"] == -32002
        assert refused["error"]["data"] == {"sessionId": session_id}
        loaded, seen = await link.call("session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
        assert loaded["result"] == {"sessionId": session_id}
        assert [(u["sessionUpdate"], u["content"]["text"]) for u in updates(seen)] == [
            ("user_message_chunk", "one"),
            ("agent_message_chunk", "echo: one"),
            ("user_message_chunk", "two"),
            ("agent_message_chunk", "echo: two"),
        ]
        await echo_turn(link, session_id, "three")

    async with connect(python_sdk_peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        resumed, seen = await link.call("session/resume", {"sessionId": session_id, "cwd": CWD})
        assert resumed["result"] == {"sessionId": session_id}
        assert seen == []
        await echo_turn(link, session_id, "four")


async def test_list_close_and_no_status(python_sdk_peer: PythonSdkPeer, tmp_path: Path) -> None:
    cwd_a, cwd_b = str(tmp_path / "a"), str(tmp_path / "b")
    async with connect(python_sdk_peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        first, second = await new_session(link, cwd_a), await new_session(link, cwd_b)
        listed, _ = await link.call("session/list", {"cwd": cwd_a})
        assert [(s["sessionId"], s["cwd"]) for s in listed["result"]["sessions"]] == [(first, cwd_a)]
        everything, _ = await link.call("session/list", {})
        assert {first, second} <= {s["sessionId"] for s in everything["result"]["sessions"]}

        status, _ = await link.call("session/status", {"sessionId": first})
        assert status["error"]["code"] == -32601

        closed, _ = await link.call("session/close", {"sessionId": first})
        assert closed["result"] == {}
        listed, _ = await link.call("session/list", {"cwd": cwd_a})
        assert listed["result"]["sessions"] == []
        gone, _ = await link.call("session/prompt", prompt_params(first, "hello?"))
        assert gone["error"]["code"] == -32002
        for method in ("session/load", "session/resume"):
            gone, _ = await link.call(method, {"sessionId": first, "cwd": cwd_a, "mcpServers": []})
            assert gone["error"] == {"code": -32002, "message": "Resource not found", "data": {"sessionId": first}}
        await echo_turn(link, second, "still here")
