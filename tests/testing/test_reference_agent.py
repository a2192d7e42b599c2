"""The reference agent's behaviour, over an in-memory transport (no sockets)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from acp_client.exceptions import ConfigurationError
from acp_client.testing.clock import FakeClock
from acp_client.testing.reference_agent import ReferenceAgent, SessionStore, split_text
from tests._support import eventually

from ._raw import MemoryPeer, RpcAnswer, chunk_text, is_response, updates


@pytest_asyncio.fixture
async def peers(reference_agent: ReferenceAgent) -> AsyncIterator[list[MemoryPeer]]:
    opened: list[MemoryPeer] = []
    yield opened
    for peer in opened:
        await peer.aclose()


@pytest_asyncio.fixture
async def connect(reference_agent: ReferenceAgent, peers: list[MemoryPeer]) -> Any:
    async def make(version: int | None = 1, agent: ReferenceAgent | None = None) -> MemoryPeer:
        peer = MemoryPeer(agent or reference_agent)
        peers.append(peer)
        if version is not None:
            await peer.initialize(version)
        return peer

    return make


def _slice(peer: MemoryPeer, start: int) -> list[dict[str, Any]]:
    return peer.messages[start:]


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
    streamed = updates(_slice(peer, start))
    assert [u["sessionUpdate"] for u in streamed] == ["agent_message_chunk"] * 3
    assert [u["content"]["text"] for u in streamed] == ["echo: ", "hello ", "there"]
    assert all("messageId" not in u for u in streamed)
    # updates precede the answer
    assert peer.messages.index(response) > peer.messages.index(_slice(peer, start)[2])


async def test_v2_prompt_answers_message_id_then_streams_with_state_updates(connect: Any) -> None:
    peer = await connect(2)
    session_id = await peer.new_session()
    start = len(peer.messages)
    response = await peer.prompt(session_id, "hello there")
    user_message_id = response["result"]["messageId"]
    await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("state") == "idle", start=start
    )
    after = _slice(peer, start)
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
    assert len(updates(_slice(peer, start))) == 1  # the rest waits for fake time
    await clock.advance(60.0)
    assert len(updates(_slice(peer, start))) == 3
    await clock.advance(30.0)
    response = await peer.wait_for(lambda m: is_response(m, request_id), start=start)
    assert response["result"]["stopReason"] == "end_turn"
    assert [u["content"]["text"] for u in updates(_slice(peer, start))] == ["echo: a ", "b ", "c ", "d"]


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
    reference_agent.restart()
    assert await peer.result("session/status", {"sessionId": session_id}) == {"status": inactive}
    reference_agent.evict(session_id)
    gone = await peer.request("session/status", {"sessionId": session_id})
    assert gone["error"] == {"code": -32002, "message": "Resource not found", "data": {"sessionId": session_id}}


async def test_status_has_no_side_effects(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    reference_agent.restart()
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
    request = next(m for m in _slice(peer, start) if m.get("method") == "session/request_permission")
    await peer._answer(request)
    await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("state") == "idle", start=start
    )
    assert (await observer.result("session/status", {"sessionId": session_id}))["state"] == {"state": "idle"}


# -- load / resume ----------------------------------------------------------------------------------


async def test_v1_load_replays_history_before_answering(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session("/home/user/project")
    await peer.prompt(session_id, "hello there")
    await peer.prompt(session_id, "second")
    reference_agent.restart()
    fresh = await connect(1)
    start = len(fresh.messages)
    response = await fresh.request(
        "session/load", {"sessionId": session_id, "cwd": "/home/user/project", "mcpServers": []}
    )
    assert response["result"] == {"sessionId": session_id}
    after = _slice(fresh, start)
    assert after[-1] is response
    replay = updates(after)
    assert [(u["sessionUpdate"], u["content"]["text"]) for u in replay] == [
        ("user_message_chunk", "hello there"),
        ("agent_message_chunk", "echo: hello there"),
        ("user_message_chunk", "second"),
        ("agent_message_chunk", "echo: second"),
    ]
    assert (await fresh.result("session/status", {"sessionId": session_id}))["status"] == "active"
    assert (await fresh.prompt(session_id, "again"))["result"]["stopReason"] == "end_turn"
    unknown = await fresh.request("session/load", {"sessionId": "sess_nope", "cwd": "/x", "mcpServers": []})
    assert unknown["error"]["code"] == -32002 and unknown["error"]["data"] == {"sessionId": "sess_nope"}


async def test_v1_resume_attaches_without_replay(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    await peer.prompt(session_id, "hello")
    other = await connect(1)
    start = len(other.messages)
    result = await other.result("session/resume", {"sessionId": session_id, "cwd": "/work/project", "mcpServers": []})
    assert result == {"sessionId": session_id}
    assert updates(_slice(other, start)) == []
    assert (await other.prompt(session_id, "x"))["result"]["stopReason"] == "end_turn"
    assert reference_agent.sessions[session_id].attached_connections == 2
    reference_agent.evict(session_id)
    gone = await other.request("session/resume", {"sessionId": session_id, "cwd": "/w", "mcpServers": []})
    assert gone["error"]["code"] == -32002


async def test_v2_resume_with_replay_from_start(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(2)
    session_id = await peer.new_session()
    start = len(peer.messages)
    user_id = (await peer.prompt(session_id, "hello there"))["result"]["messageId"]
    await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("state") == "idle", start=start
    )
    agent_id = next(u["messageId"] for u in updates(_slice(peer, start)) if u["sessionUpdate"] == "agent_message_chunk")
    reference_agent.restart()
    fresh = await connect(2)
    assert (await fresh.result("session/status", {"sessionId": session_id})) == {"status": "inactive"}
    start = len(fresh.messages)
    response = await fresh.request(
        "session/resume",
        {"sessionId": session_id, "cwd": "/work/project", "mcpServers": [], "replayFrom": {"type": "start"}},
    )
    assert response["result"] == {"sessionId": session_id}
    after = _slice(fresh, start)
    assert after[-1] is response
    assert updates(after) == [
        {"sessionUpdate": "user_message", "messageId": user_id, "content": [{"type": "text", "text": "hello there"}]},
        {
            "sessionUpdate": "agent_message",
            "messageId": agent_id,
            "content": [{"type": "text", "text": "echo: hello there"}],
        },
        {"sessionUpdate": "state_update", "state": "idle"},
    ]
    # without replayFrom: only the state snapshot
    other = await connect(2)
    start = len(other.messages)
    await other.result("session/resume", {"sessionId": session_id, "cwd": "/work/project", "mcpServers": []})
    assert updates(_slice(other, start)) == [{"sessionUpdate": "state_update", "state": "idle"}]
    bad = await other.request(
        "session/resume", {"sessionId": session_id, "cwd": "/w", "replayFrom": {"type": "message", "messageId": "x"}}
    )
    assert bad["error"]["code"] == -32602
    assert (await other.request("session/load", {"sessionId": session_id, "cwd": "/w"}))["error"]["code"] == -32601


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
        states = [u["state"] for u in updates(_slice(peer, start)) if u["sessionUpdate"] == "state_update"]
        assert states == ["running", "requires_action", "running", "idle"]
    (params,) = seen
    assert params["sessionId"] == session_id
    assert {o["optionId"] for o in params["options"]} == {"allow", "reject"}
    tool_call = params["toolCall"] if version == 1 else params["subject"]["toolCall"]
    assert tool_call["toolCallId"].startswith("call_")
    assert chunk_text(_slice(peer, start)) == "permission: selected reject"


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
        return chunk_text(_slice(peer, start))

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
    assert chunk_text(_slice(peer, start)) == "error: read failed: no file system here (code -32601)"
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
    await eventually(lambda: len(updates(_slice(peer, start))) >= 2)
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
    await eventually(lambda: any(u["sessionUpdate"] == "agent_message_chunk" for u in updates(_slice(peer, start))))
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
    await eventually(lambda: len(updates(_slice(peer, start))) >= 1)
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
    await eventually(lambda: len(updates(_slice(peer, start))) >= 1)
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
    reference_agent.restart()
    response = await peer.wait_for(lambda m: is_response(m, request_id))
    assert response["error"]["code"] == -32603


# -- list / close / fork / stall --------------------------------------------------------------------


async def test_list_filters_and_paginates(reference_agent: ReferenceAgent, connect: Any) -> None:
    reference_agent.list_page_size = 2
    peer = await connect(1)
    ids = [await peer.new_session("/a") for _ in range(3)]
    other = await peer.new_session("/b")
    await peer.prompt(ids[0], "titled session")
    first = await peer.result("session/list", {"cwd": "/a"})
    assert [s["sessionId"] for s in first["sessions"]] == ids[:2]
    assert first["sessions"][0]["title"] == "titled session"
    assert all(s["cwd"] == "/a" and "updatedAt" in s for s in first["sessions"])
    second = await peer.result("session/list", {"cwd": "/a", "cursor": first["nextCursor"]})
    assert [s["sessionId"] for s in second["sessions"]] == ids[2:]
    assert "nextCursor" not in second
    everything: list[str] = []
    cursor = None
    while True:
        page = await peer.result("session/list", {"cursor": cursor} if cursor else {})
        everything += [s["sessionId"] for s in page["sessions"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert everything == [*ids, other]
    bad = await peer.request("session/list", {"cursor": "garbage"})
    assert bad["error"]["code"] == -32602


async def test_close_keeps_the_session_stored(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    request_id = peer.next_id()
    await peer.send_request(
        request_id, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/slow"}]}
    )
    await eventually(lambda: len(updates(_slice(peer, start))) >= 1)
    assert await peer.result("session/close", {"sessionId": session_id}) == {}
    prompt_answer = await peer.wait_for(lambda m: is_response(m, request_id), start=start)
    assert prompt_answer["result"]["stopReason"] == "cancelled"
    assert (await peer.result("session/status", {"sessionId": session_id}))["status"] == "inactive"
    assert (await peer.request("session/close", {"sessionId": "sess_nope"}))["error"]["code"] == -32002


async def test_fork_copies_history(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    source = await peer.new_session("/src")
    await peer.prompt(source, "hello")
    forked = (await peer.result("session/fork", {"sessionId": source, "cwd": "/fork", "mcpServers": []}))["sessionId"]
    assert forked != source
    snapshot = reference_agent.sessions[forked]
    assert snapshot.cwd == "/fork" and snapshot.history_length == 2 and snapshot.attached_connections == 1
    assert (await peer.prompt(forked, "x"))["result"]["stopReason"] == "end_turn"
    assert reference_agent.sessions[source].history_length == 2
    assert (await peer.request("session/fork", {"sessionId": "sess_nope", "cwd": "/"}))["error"]["code"] == -32002


async def test_stall_reads_requests_but_never_answers(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    reference_agent.stall()
    request_id = peer.next_id()
    await peer.send_request(request_id, "session/status", {"sessionId": session_id})
    await eventually(lambda: reference_agent.stalled_requests == 1)
    await asyncio.sleep(0)
    assert not any(is_response(m, request_id) for m in peer.messages)
    reference_agent.stall(False)
    assert reference_agent.stalled is False
    assert (await peer.result("session/status", {"sessionId": session_id}))["status"] == "active"
    assert not any(is_response(m, request_id) for m in peer.messages)


# -- store ------------------------------------------------------------------------------------------


async def test_directory_store_survives_a_new_agent(tmp_path: Any, peers: list[MemoryPeer]) -> None:
    first_agent = ReferenceAgent(store=SessionStore(tmp_path / "store"))
    peer = MemoryPeer(first_agent)
    peers.append(peer)
    await peer.initialize(1)
    session_id = await peer.new_session("/proj")
    await peer.prompt(session_id, "remember me")
    second_agent = ReferenceAgent(store=SessionStore(tmp_path / "store"))
    fresh = MemoryPeer(second_agent)
    peers.append(fresh)
    await fresh.initialize(1)
    assert (await fresh.result("session/status", {"sessionId": session_id}))["status"] == "inactive"
    start = len(fresh.messages)
    await fresh.result("session/load", {"sessionId": session_id, "cwd": "/proj", "mcpServers": []})
    assert [u["content"]["text"] for u in updates(_slice(fresh, start))] == ["remember me", "echo: remember me"]


def test_store_rejects_unsafe_ids_and_ignores_corrupt_files(tmp_path: Any) -> None:
    store = SessionStore(tmp_path)
    assert store.load("../etc/passwd") is None
    assert "../x" not in store
    (tmp_path / "sess_broken.json").write_text("{not json")
    assert store.load("sess_broken") is None
    assert store.list() == []
    assert store.delete("../x") is False
