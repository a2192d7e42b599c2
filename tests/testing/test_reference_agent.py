"""The reference agent's behaviour, over an in-memory transport (no sockets): initialize, prompts,
``session/status``. Sessions (load, resume, list, close, fork, the store) are in
``test_reference_agent_sessions.py``; agent→client requests and cancellation in
``test_reference_agent_requests.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_client.exceptions import ConfigurationError
from acp_client.testing.clock import FakeClock
from acp_client.testing.reference_agent import ReferenceAgent, split_text

from ._raw import MemoryPeer, chunk_text, is_response, since, updates

# -- initialize -------------------------------------------------------------------------------------


async def test_initialize_v1_capabilities(connect: Any) -> None:
    peer = await connect(None)
    result = await peer.initialize(1)
    assert result["protocolVersion"] == 1
    assert result["agentInfo"]["name"] == "acp-reference-agent"
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["sessionCapabilities"] == {"resume": {}, "close": {}, "list": {}, "fork": {}, "status": {}}
    assert set(caps["promptCapabilities"]) == {"image", "audio", "embeddedContext"}
    assert "capabilities" not in result and "info" not in result


async def test_initialize_v2_capabilities(connect: Any) -> None:
    peer = await connect(None)
    result = await peer.initialize(2)
    assert result["protocolVersion"] == 2
    assert result["info"]["name"] == "acp-reference-agent"
    assert result["capabilities"]["session"] == {"resume": {}, "close": {}, "list": {}, "fork": {}, "status": {}}
    assert "agentCapabilities" not in result and "agentInfo" not in result


@pytest.mark.parametrize("proposed", [3, 99, 0, "1", None])
async def test_initialize_unknown_version_answers_latest(connect: Any, proposed: Any) -> None:
    peer = await connect(None)
    result = await peer.result("initialize", {"protocolVersion": proposed})
    assert result["protocolVersion"] == 2


async def test_toggles_hide_capabilities_and_methods(reference_agent: ReferenceAgent, connect: Any) -> None:
    reference_agent.advertise_status = False
    reference_agent.advertise_resume = False
    reference_agent.advertise_load = False
    peer = await connect(None)
    v1 = await peer.initialize(1)
    assert "loadSession" not in v1["agentCapabilities"]
    assert v1["agentCapabilities"]["sessionCapabilities"] == {"close": {}, "list": {}, "fork": {}}
    session_id = await peer.new_session()
    for method in ("session/status", "session/resume", "session/load"):
        response = await peer.request(method, {"sessionId": session_id, "cwd": "/x", "mcpServers": []})
        assert response["error"]["code"] == -32601, method
    v2 = await (await connect(None)).initialize(2)
    assert v2["capabilities"]["session"] == {"close": {}, "list": {}, "fork": {}}


async def test_requests_before_initialize_are_refused(connect: Any) -> None:
    peer = await connect(None)
    response = await peer.request("session/new", {"cwd": "/x", "mcpServers": []})
    assert response["error"]["code"] == -32600


async def test_unknown_method_and_malformed_input(connect: Any) -> None:
    peer = await connect(1)
    response = await peer.request("session/teleport", {})
    assert response["error"]["code"] == -32601
    start = len(peer.messages)
    peer.send_raw("{not json")
    parse_error = await peer.wait_for(lambda m: "error" in m, start=start)
    assert parse_error["error"]["code"] == -32700 and parse_error["id"] is None
    start = len(peer.messages)
    peer.send_raw(json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "session/list"}]))
    batch_error = await peer.wait_for(lambda m: "error" in m, start=start)
    assert batch_error["error"]["code"] == -32600
    start = len(peer.messages)
    peer.send_raw(json.dumps({"jsonrpc": "1.0", "id": 7, "method": "session/list"}))
    invalid = await peer.wait_for(lambda m: "error" in m, start=start)
    assert invalid["error"]["code"] == -32600 and invalid["id"] == 7


def test_configuration_is_checked() -> None:
    with pytest.raises(ConfigurationError):
        ReferenceAgent(chunks_per_prompt=0)
    with pytest.raises(ConfigurationError):
        ReferenceAgent(status_vocabulary="other")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        ReferenceAgent(chunk_delay=-1)


@pytest.mark.parametrize(
    ("text", "pieces", "expected"),
    [
        ("echo: hello there", 3, ["echo: ", "hello ", "there"]),
        ("echo: hello there", 1, ["echo: hello there"]),
        ("echo: a b c d", 2, ["echo: a b ", "c d"]),
        ("abc", 5, ["a", "b", "c", "", ""]),
        ("echo: x", 4, ["ec", "ho", ": ", "x"]),
    ],
)
def test_split_text(text: str, pieces: int, expected: list[str]) -> None:
    result = split_text(text, pieces)
    assert result == expected
    assert "".join(result) == text


# -- prompts ----------------------------------------------------------------------------------------


async def test_v1_prompt_streams_chunks_then_stop_reason(connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    response = await peer.prompt(session_id, "hello there")
    assert response["result"] == {"stopReason": "end_turn"}
    streamed = updates(since(peer, start))
    assert [u["sessionUpdate"] for u in streamed] == ["agent_message_chunk"] * 3
    assert [u["content"]["text"] for u in streamed] == ["echo: ", "hello ", "there"]
    ids = {u["messageId"] for u in streamed}  # v1 allows messageId (ContentChunk.messageId): one per message
    assert len(ids) == 1 and None not in ids
    # updates precede the answer
    assert peer.messages.index(response) > peer.messages.index(since(peer, start)[2])


async def test_v2_prompt_answers_message_id_then_streams_with_state_updates(connect: Any) -> None:
    peer = await connect(2)
    session_id = await peer.new_session()
    start = len(peer.messages)
    response = await peer.prompt(session_id, "hello there")
    user_message_id = response["result"]["messageId"]
    await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("state") == "idle", start=start
    )
    after = since(peer, start)
    assert after[0] is response  # acknowledged right away
    streamed = updates(after)
    kinds = [u["sessionUpdate"] for u in streamed]
    assert kinds == [
        "user_message",
        "state_update",
        "agent_message_chunk",
        "agent_message_chunk",
        "agent_message_chunk",
        "state_update",
    ]
    assert streamed[0]["messageId"] == user_message_id
    assert streamed[0]["content"] == [{"type": "text", "text": "hello there"}]
    assert streamed[1]["state"] == "running"
    agent_ids = {u["messageId"] for u in streamed[2:5]}
    assert len(agent_ids) == 1 and user_message_id not in agent_ids
    assert streamed[5] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    assert chunk_text(after) == "echo: hello there"


async def test_chunk_count_and_delay_follow_the_clock(peers: list[MemoryPeer]) -> None:
    clock = FakeClock()
    agent = ReferenceAgent(chunks_per_prompt=4, chunk_delay=30.0, clock=clock)
    peer = MemoryPeer(agent)
    peers.append(peer)
    await peer.initialize(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    request_id = peer.next_id()
    await peer.send_request(
        request_id, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "a b c d"}]}
    )
    await peer.wait_for(lambda m: m.get("method") == "session/update", start=start)
    await clock.settle()
    assert len(updates(since(peer, start))) == 1  # the rest waits for fake time
    await clock.advance(60.0)
    assert len(updates(since(peer, start))) == 3
    await clock.advance(30.0)
    response = await peer.wait_for(lambda m: is_response(m, request_id), start=start)
    assert response["result"]["stopReason"] == "end_turn"
    assert [u["content"]["text"] for u in updates(since(peer, start))] == ["echo: a ", "b ", "c ", "d"]


async def test_prompt_errors(connect: Any) -> None:
    owner = await connect(1)
    session_id = await owner.new_session()
    other = await connect(1)
    not_attached = await other.prompt(session_id, "hi")
    assert not_attached["error"]["code"] == -32602
    assert not_attached["error"]["message"] == "session not attached to this connection"
    unknown = await other.prompt("sess_nope", "hi")
    assert unknown["error"] == {"code": -32002, "message": "Resource not found", "data": {"sessionId": "sess_nope"}}
    bad = await owner.request("session/prompt", {"sessionId": session_id, "prompt": "not a list"})
    assert bad["error"]["code"] == -32602


# -- session/status ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vocabulary", "active", "inactive"), [("proposal", "active", "inactive"), ("sdk", "open", "saved")]
)
@pytest.mark.parametrize("version", [1, 2])
async def test_status_lifecycle(
    reference_agent: ReferenceAgent, connect: Any, vocabulary: str, active: str, inactive: str, version: int
) -> None:
    reference_agent.status_vocabulary = vocabulary  # type: ignore[assignment]
    peer = await connect(version)
    session_id = await peer.new_session()
    expected_active: dict[str, Any] = {"status": active}
    if version == 2:
        expected_active["state"] = {"state": "idle"}
    assert await peer.result("session/status", {"sessionId": session_id}) == expected_active
    reference_agent.lose_memory()
    assert await peer.result("session/status", {"sessionId": session_id}) == {"status": inactive}
    reference_agent.evict(session_id)
    gone = await peer.request("session/status", {"sessionId": session_id})
    assert gone["error"] == {"code": -32002, "message": "Resource not found", "data": {"sessionId": session_id}}


async def test_status_has_no_side_effects(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    reference_agent.lose_memory()
    other = await connect(1)
    for _ in range(3):
        assert (await other.result("session/status", {"sessionId": session_id}))["status"] == "inactive"
    snapshot = reference_agent.sessions[session_id]
    assert not snapshot.in_memory and snapshot.attached_connections == 0
    # still not attached: prompting is refused
    assert (await other.prompt(session_id, "hi"))["error"]["code"] == -32602


async def test_v2_status_reports_running_and_requires_action(connect: Any) -> None:
    peer = await connect(2)
    session_id = await peer.new_session()
    observer = await connect(2)
    start = len(peer.messages)
    await peer.prompt(session_id, "/permission")
    await peer.wait_for(lambda m: m.get("method") == "session/request_permission", start=start)
    status = await observer.result("session/status", {"sessionId": session_id})
    assert status == {"status": "active", "state": {"state": "requires_action"}}
    peer.handlers["session/request_permission"] = lambda params: {
        "outcome": {"outcome": "selected", "optionId": "allow"}
    }
    request = next(m for m in since(peer, start) if m.get("method") == "session/request_permission")
    await peer._answer(request)
    await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("state") == "idle", start=start
    )
    assert (await observer.result("session/status", {"sessionId": session_id}))["state"] == {"state": "idle"}
