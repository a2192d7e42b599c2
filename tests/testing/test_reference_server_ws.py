"""The reference server over WebSocket, with a raw ``websockets`` client."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from acp_client import AcpClient, RecoveryPath
from acp_client.testing.reference_agent import ReferenceAgent, ReferenceServer
from tests._support import FAST_RETRY, eventually, within
from tests.peers.reference import ReferenceTls

from ._raw import TIMEOUT, WsPeer, updates


@pytest_asyncio.fixture
async def ws_connect() -> AsyncIterator[Any]:
    opened: list[WsPeer] = []

    async def connect(url: str, **kwargs: Any) -> WsPeer:
        peer = WsPeer(await websockets.connect(url, open_timeout=TIMEOUT, **kwargs))
        opened.append(peer)
        return peer

    yield connect
    for peer in opened:
        await peer.aclose()


async def test_handshake_headers_and_a_v1_turn(reference_server: ReferenceServer, ws_connect: Any) -> None:
    peer = await ws_connect(reference_server.ws_url)
    headers = peer.ws.response.headers
    assert len(headers["acp-connection-id"]) == 32
    assert headers["set-cookie"] == f"acp_affinity={reference_server.instance_id}; Path=/; HttpOnly"
    result = await peer.initialize(1)
    assert result["agentCapabilities"]["sessionCapabilities"]["status"] == {}
    session_id = await peer.new_session()
    start = len(peer.messages)
    response = await peer.prompt(session_id, "hello there")
    assert response["result"] == {"stopReason": "end_turn"}
    assert [u["content"]["text"] for u in updates(peer.messages[start:])] == ["echo: ", "hello ", "there"]
    assert reference_server.connection_count == 1
    record = reference_server.requests[-1]
    assert (record.transport, record.status, record.path) == ("websocket", 101, "/acp")


async def test_cookie_sent_back_is_recorded(reference_server: ReferenceServer, ws_connect: Any) -> None:
    cookie = f"acp_affinity={reference_server.instance_id}"
    await ws_connect(reference_server.ws_url, additional_headers={"Cookie": cookie})
    assert reference_server.requests[-1].header("cookie") == cookie


async def test_v2_turn_over_websocket(reference_server: ReferenceServer, ws_connect: Any) -> None:
    peer = await ws_connect(reference_server.ws_url)
    await peer.initialize(2)
    session_id = await peer.new_session()
    start = len(peer.messages)
    response = await peer.prompt(session_id, "hi")
    assert response["result"]["messageId"].startswith("msg_")
    await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("stopReason") == "end_turn",
        start=start,
    )


async def test_binary_frames_are_ignored_and_bad_json_answered(
    reference_server: ReferenceServer, ws_connect: Any
) -> None:
    peer = await ws_connect(reference_server.ws_url)
    await peer.ws.send(b'{"jsonrpc":"2.0","id":99,"method":"initialize","params":{}}')
    await peer.ws.send("{oops")
    error = await peer.wait_for(lambda m: "error" in m)
    assert error["error"]["code"] == -32700
    await peer.initialize(1)
    assert not any(m.get("id") == 99 for m in peer.messages)


async def test_drop_connections_resets_sockets_and_keeps_sessions(
    reference_agent: ReferenceAgent, reference_server: ReferenceServer, ws_connect: Any
) -> None:
    peer = await ws_connect(reference_server.ws_url)
    await peer.initialize(1)
    session_id = await peer.new_session()
    await reference_server.drop_connections()
    with pytest.raises(ConnectionClosed) as closed:
        await asyncio.wait_for(peer.ws.recv(), TIMEOUT)
    assert closed.value.rcvd is None  # no close frame: an abrupt drop
    assert reference_server.connection_count == 0
    again = await ws_connect(reference_server.ws_url)
    await again.initialize(1)
    assert (await again.result("session/status", {"sessionId": session_id}))["status"] == "active"
    assert (await again.prompt(session_id, "x"))["error"]["code"] == -32602  # must resume first
    await again.result("session/resume", {"sessionId": session_id, "cwd": "/work/project", "mcpServers": []})
    assert (await again.prompt(session_id, "x"))["result"]["stopReason"] == "end_turn"


async def test_restart_makes_sessions_inactive(reference_server: ReferenceServer, ws_connect: Any) -> None:
    peer = await ws_connect(reference_server.ws_url)
    await peer.initialize(1)
    session_id = await peer.new_session()
    await peer.prompt(session_id, "before restart")
    await reference_server.restart()
    await eventually(lambda: peer.closed)
    again = await ws_connect(reference_server.ws_url)
    await again.initialize(1)
    assert (await again.result("session/status", {"sessionId": session_id}))["status"] == "inactive"
    start = len(again.messages)
    await again.result("session/load", {"sessionId": session_id, "cwd": "/work/project", "mcpServers": []})
    assert [u["content"]["text"] for u in updates(again.messages[start:])] == ["before restart", "echo: before restart"]


async def test_a_server_restart_alone_is_a_restart_the_client_recovers_from(reference_server: ReferenceServer) -> None:
    """``ReferenceServer.restart()`` needs no cut after it: it ends every connection, so a client recovers (a replay
    from the store) and its next prompt works. The agent's half of it is ``ReferenceAgent.lose_memory()``, named for
    what it does alone (no ``restart`` there to call by mistake and leave a client on a dead session)."""
    assert not hasattr(ReferenceAgent, "restart")
    async with AcpClient(reference_server.ws_url, retry=FAST_RETRY) as client:
        session = await client.new_session("/work/project")
        await within(session.prompt("before restart"))
        await reference_server.restart()
        await eventually(lambda: bool(client.recovery_outcomes), what="the recovery after the restart")
        result = await within(session.prompt("after restart"))
        assert result.stop_reason == "end_turn"
        assert [outcome.path for outcome in client.recovery_outcomes] == [RecoveryPath.REPLAY]
        assert "user: before restart" in session.transcript.text()


async def test_refused_handshakes_get_503_until_the_window_ends(
    reference_server: ReferenceServer, ws_connect: Any
) -> None:
    reference_server.refuse_connections(0.3)
    assert reference_server.refusing
    with pytest.raises(InvalidStatus) as refused:
        await websockets.connect(reference_server.ws_url, open_timeout=TIMEOUT)
    assert refused.value.response.status_code == 503
    assert int(refused.value.response.headers["retry-after"]) >= 1
    assert reference_server.requests[-1].status == 503
    await eventually(lambda: not reference_server.refusing)
    peer = await ws_connect(reference_server.ws_url)
    assert (await peer.initialize(1))["protocolVersion"] == 1


async def test_wrong_path_is_rejected(reference_server: ReferenceServer) -> None:
    with pytest.raises(InvalidStatus) as rejected:
        await websockets.connect(reference_server.ws_url.replace("/acp", "/nope"), open_timeout=TIMEOUT)
    assert rejected.value.response.status_code == 404


async def test_wss_with_the_test_ca(
    reference_tls_server: ReferenceServer, reference_tls: ReferenceTls, ws_connect: Any
) -> None:
    assert reference_tls_server.ws_url.startswith("wss://127.0.0.1:")
    context = ssl.create_default_context(cafile=reference_tls.ca_file)
    peer = await ws_connect(reference_tls_server.ws_url, ssl=context)
    assert "Secure" in peer.ws.response.headers["set-cookie"]
    assert (await peer.initialize(2))["protocolVersion"] == 2


async def test_agent_requests_over_websocket(reference_server: ReferenceServer, ws_connect: Any) -> None:
    peer = await ws_connect(reference_server.ws_url)
    peer.handlers["fs/read_text_file"] = lambda params: {"content": json.dumps(params["path"])}
    await peer.initialize(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    assert (await peer.prompt(session_id, "/read /a/b"))["result"]["stopReason"] == "end_turn"
    assert "".join(u["content"]["text"] for u in updates(peer.messages[start:])) == 'read /a/b: "/a/b"'
