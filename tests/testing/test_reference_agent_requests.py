"""The reference agent's requests to the client (permission, fs, terminal, elicitation) and
cancellation, over an in-memory transport."""

from __future__ import annotations

from typing import Any

import pytest

from acp_client.testing.reference_agent import ReferenceAgent
from tests._support import eventually

from ._raw import RpcAnswer, chunk_text, is_response, since, updates

# -- agent → client requests -------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_permission_round_trip(connect: Any, version: int) -> None:
    peer = await connect(version)
    seen: list[dict[str, Any]] = []

    def choose(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "reject"}}

    peer.handlers["session/request_permission"] = choose
    session_id = await peer.new_session()
    start = len(peer.messages)
    response = await peer.prompt(session_id, "/permission")
    if version == 1:
        assert response["result"] == {"stopReason": "end_turn"}
    else:  # v2 acknowledges at once; the turn ends with an idle state update
        await peer.wait_for(
            lambda m: m.get("method") == "session/update" and m["params"]["update"].get("stopReason") == "end_turn",
            start=start,
        )
        states = [u["state"] for u in updates(since(peer, start)) if u["sessionUpdate"] == "state_update"]
        assert states == ["running", "requires_action", "running", "idle"]
    (params,) = seen
    assert params["sessionId"] == session_id
    assert {o["optionId"] for o in params["options"]} == {"allow", "reject"}
    tool_call = params["toolCall"] if version == 1 else params["subject"]["toolCall"]
    assert tool_call["toolCallId"].startswith("call_")
    assert chunk_text(since(peer, start)) == "permission: selected reject"


async def test_fs_terminal_and_elicitation_requests(connect: Any) -> None:
    peer = await connect(1)
    files: dict[str, str] = {"/tmp/in.txt": "file body"}
    calls: list[str] = []

    def record(method: str, result: Any) -> Any:
        def handler(params: dict[str, Any]) -> Any:
            calls.append(method)
            return result(params) if callable(result) else result

        return handler

    peer.handlers["fs/write_text_file"] = record("write", lambda p: files.__setitem__(p["path"], p["content"]) or {})
    peer.handlers["fs/read_text_file"] = record("read", lambda p: {"content": files[p["path"]]})
    created: list[dict[str, Any]] = []
    peer.handlers["terminal/create"] = record("create", lambda p: created.append(p) or {"terminalId": "term-1"})
    peer.handlers["terminal/wait_for_exit"] = record("wait", {"exitCode": 3})
    peer.handlers["terminal/output"] = record("output", {"output": "out!", "truncated": False})
    peer.handlers["terminal/release"] = record("release", {})
    peer.handlers["elicitation/create"] = record("elicit", {"action": "accept", "content": {"answer": "42"}})
    session_id = await peer.new_session()

    async def turn(text: str) -> str:
        start = len(peer.messages)
        response = await peer.prompt(session_id, text)
        assert response["result"]["stopReason"] == "end_turn"
        return chunk_text(since(peer, start))

    assert await turn("/write /tmp/out.txt some text") == "wrote /tmp/out.txt"
    assert files["/tmp/out.txt"] == "some text"
    assert await turn("/read /tmp/in.txt") == "read /tmp/in.txt: file body"
    assert await turn("/terminal ls -la /") == "terminal exited 3: out!"
    assert calls[2:6] == ["create", "wait", "output", "release"]
    assert created == [{"sessionId": session_id, "command": "ls", "args": ["-la", "/"]}]
    assert await turn("/elicit favourite number?") == 'elicitation: accept {"answer": "42"}'


async def test_client_errors_are_echoed_not_crashes(connect: Any) -> None:
    peer = await connect(1)

    def refuse(params: dict[str, Any]) -> Any:
        raise RpcAnswer(-32601, "no file system here")

    peer.handlers["fs/read_text_file"] = refuse
    session_id = await peer.new_session()
    start = len(peer.messages)
    response = await peer.prompt(session_id, "/read /etc/passwd")
    assert response["result"]["stopReason"] == "end_turn"
    assert chunk_text(since(peer, start)) == "error: read failed: no file system here (code -32601)"
    assert (await peer.prompt(session_id, "still alive"))["result"]["stopReason"] == "end_turn"


# -- cancellation -----------------------------------------------------------------------------------


async def test_v1_session_cancel_ends_slow_turn(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    request_id = peer.next_id()
    await peer.send_request(
        request_id, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/slow"}]}
    )
    await eventually(lambda: len(updates(since(peer, start))) >= 2)
    assert reference_agent.sessions[session_id].state == "running"
    await peer.notify("session/cancel", {"sessionId": session_id})
    response = await peer.wait_for(lambda m: is_response(m, request_id), start=start)
    assert response["result"] == {"stopReason": "cancelled"}
    assert reference_agent.sessions[session_id].state == "idle"
    # the partial answer is part of the history
    assert reference_agent.sessions[session_id].history_length == 2


async def test_v2_session_cancel_sends_idle_cancelled(connect: Any) -> None:
    peer = await connect(2)
    session_id = await peer.new_session()
    start = len(peer.messages)
    await peer.prompt(session_id, "/slow")
    await eventually(lambda: any(u["sessionUpdate"] == "agent_message_chunk" for u in updates(since(peer, start))))
    await peer.notify("session/cancel", {"sessionId": session_id})
    final = await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("state") == "idle", start=start
    )
    assert final["params"]["update"]["stopReason"] == "cancelled"


async def test_session_cancel_sent_as_a_request_is_tolerated(connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    request_id = peer.next_id()
    await peer.send_request(
        request_id, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/slow"}]}
    )
    await eventually(lambda: len(updates(since(peer, start))) >= 1)
    assert await peer.result("session/cancel", {"sessionId": session_id}) == {}
    response = await peer.wait_for(lambda m: is_response(m, request_id), start=start)
    assert response["result"] == {"stopReason": "cancelled"}


async def test_cancel_request_answers_32800(connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    request_id = peer.next_id()
    await peer.send_request(
        request_id, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/permission"}]}
    )
    permission = await peer.wait_for(lambda m: m.get("method") == "session/request_permission", start=start)
    await peer.notify("$/cancel_request", {"requestId": request_id})
    response = await peer.wait_for(lambda m: is_response(m, request_id), start=start)
    assert response["error"]["code"] == -32800
    # the agent withdrew its own pending request
    withdrawn = await peer.wait_for(lambda m: m.get("method") == "$/cancel_request", start=start)
    assert withdrawn["params"] == {"requestId": permission["id"]}


async def test_connection_close_stops_its_turns(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    await peer.send_request(
        peer.next_id(), "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/slow"}]}
    )
    await eventually(lambda: len(updates(since(peer, start))) >= 1)
    await peer.aclose()
    assert reference_agent.connection_count == 0
    snapshot = reference_agent.sessions[session_id]
    assert snapshot.in_memory and snapshot.state == "idle" and snapshot.attached_connections == 0


async def test_restart_answers_pending_v1_prompt(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    request_id = peer.next_id()
    await peer.send_request(
        request_id, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/slow"}]}
    )
    await eventually(lambda: reference_agent.sessions[session_id].state == "running")
    reference_agent.lose_memory()
    response = await peer.wait_for(lambda m: is_response(m, request_id))
    assert response["error"]["code"] == -32603
