"""The reference server over Streamable HTTP, with a raw ``httpx`` client and SSE parsing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from acp_client.testing.reference_agent import ReferenceAgent, ReferenceServer
from tests._support import eventually
from tests.peers.reference import ReferenceTls

from ._raw import TIMEOUT, HttpPeer, is_response, updates

JSON = {"content-type": "application/json"}


@pytest_asyncio.fixture
async def http_peers() -> AsyncIterator[Any]:
    clients: list[httpx.AsyncClient] = []
    peers: list[HttpPeer] = []

    async def make(server: ReferenceServer, *, http2: bool = False, verify: Any = True) -> HttpPeer:
        client = httpx.AsyncClient(http1=not http2, http2=http2, verify=verify, timeout=TIMEOUT)
        clients.append(client)
        peer = HttpPeer(client, server.http_url)
        peers.append(peer)
        return peer

    yield make
    for peer in peers:
        await peer.aclose()
    for client in clients:
        await client.aclose()


def _initialize(request_id: int = 0, version: int = 1) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {"protocolVersion": version}}
    )


async def test_initialize_answers_200_with_connection_id_and_cookie(
    reference_server: ReferenceServer, http_peers: Any
) -> None:
    peer = await http_peers(reference_server)
    result = await peer.initialize(1)
    assert result["protocolVersion"] == 1
    response = peer.last_post
    assert response is not None and response.http_version == "HTTP/1.1"
    assert response.headers["content-type"] == "application/json"
    assert response.headers["set-cookie"] == f"acp_affinity={reference_server.instance_id}; Path=/; HttpOnly"
    assert peer.connection_id and reference_server.connection_count == 1
    # the client's cookie jar sends it back
    await peer.open_stream()
    assert reference_server.requests[-1].header("cookie") == f"acp_affinity={reference_server.instance_id}"


async def test_h2c_prior_knowledge(reference_server: ReferenceServer, http_peers: Any) -> None:
    peer = await http_peers(reference_server, http2=True)
    await peer.initialize(2)
    assert peer.last_post is not None and peer.last_post.http_version == "HTTP/2"
    stream = await peer.open_stream()
    session_id = (await peer.result("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
    assert stream.messages[-1]["result"] == {"sessionId": session_id}
    assert {r.http_version for r in reference_server.requests} == {"2"}


async def test_https_negotiates_h2_with_alpn(
    reference_tls_server: ReferenceServer, reference_tls: ReferenceTls, http_peers: Any
) -> None:
    assert reference_tls_server.http_url.startswith("https://127.0.0.1:")
    peer = await http_peers(reference_tls_server, http2=True, verify=reference_tls.client_context())
    await peer.initialize(1)
    assert peer.last_post is not None and peer.last_post.http_version == "HTTP/2"
    assert peer.last_post.headers["set-cookie"].endswith("; Secure")
    http11 = await http_peers(reference_tls_server, verify=reference_tls.client_context())
    await http11.initialize(1)
    assert http11.last_post is not None and http11.last_post.http_version == "HTTP/1.1"


async def test_status_codes(reference_server: ReferenceServer) -> None:
    url = reference_server.http_url
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        ok = await client.post(url, content=_initialize(), headers=JSON)
        connection = {"acp-connection-id": ok.headers["acp-connection-id"]}

        async def post(body: Any, **headers: str) -> httpx.Response:
            content = body if isinstance(body, str) else json.dumps(body)
            return await client.post(url, content=content, headers={**JSON, **headers})

        status_request = {"jsonrpc": "2.0", "id": 5, "method": "session/status", "params": {"sessionId": "s"}}
        prompt = {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "session/prompt",
            "params": {"sessionId": "sess_unknown", "prompt": []},
        }
        assert (
            await client.post(url, content=_initialize(), headers={"content-type": "text/plain"})
        ).status_code == 415
        assert (await post(_initialize(), accept="text/html")).status_code == 406
        assert (await post(status_request)).status_code == 400  # no connection id
        assert (await post(status_request, **{"acp-connection-id": "nope"})).status_code == 404
        assert (await post(prompt, **connection)).status_code == 400  # no session id on a session-scoped POST
        assert (await post(prompt, **connection, **{"acp-session-id": "sess_unknown"})).status_code == 404
        assert (await post(prompt, **connection, **{"acp-session-id": "sess_other"})).status_code == 400  # mismatch
        assert (await post([status_request], **connection)).status_code == 501
        assert (await post("{broken", **connection)).status_code == 400
        assert (await post({"jsonrpc": "2.0", "id": 1}, **connection)).status_code == 400
        assert (await client.get(url, headers={**connection, "accept": "application/json"})).status_code == 406
        assert (await client.get(url, headers={"accept": "text/event-stream"})).status_code == 400
        assert (
            await client.get(url, headers={"accept": "text/event-stream", "acp-connection-id": "x"})
        ).status_code == 404
        unknown_session = {**connection, "accept": "text/event-stream", "acp-session-id": "sess_unknown"}
        assert (await client.get(url, headers=unknown_session)).status_code == 404
        assert (await client.delete(url)).status_code == 400
        assert (await client.delete(url, headers={"acp-connection-id": "x"})).status_code == 404
        assert (await client.put(url, content="{}", headers=JSON)).status_code == 405
        assert (
            await client.post(url.replace("/acp", "/other"), content=_initialize(), headers=JSON)
        ).status_code == 404
        accepted = await post(status_request, **connection)
        assert accepted.status_code == 202 and accepted.content == b""
        assert (await client.delete(url, headers=connection)).status_code == 202
        assert (await post(status_request, **connection)).status_code == 404
    assert reference_server.connection_count == 0


async def test_connection_stream_and_session_stream(reference_server: ReferenceServer, http_peers: Any) -> None:
    peer = await http_peers(reference_server)
    await peer.initialize(1)
    connection_stream = await peer.open_stream()
    session_id = (await peer.result("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
    assert connection_stream.messages[-1]["result"] == {"sessionId": session_id}
    session_stream = await peer.open_stream(session_id)
    response = await peer.prompt(session_id, "over http")
    assert response["result"] == {"stopReason": "end_turn"}
    assert [m.get("method", "answer") for m in session_stream.messages] == ["session/update"] * 3 + ["answer"]
    assert "".join(u["content"]["text"] for u in updates(session_stream.messages)) == "echo: over http"
    assert len(connection_stream.messages) == 1
    post = reference_server.requests[-1]
    assert post.method == "POST" and post.header("acp-session-id") == session_id and post.status == 202


async def test_v2_turn_over_http(reference_server: ReferenceServer, http_peers: Any) -> None:
    peer = await http_peers(reference_server, http2=True)
    await peer.initialize(2)
    await peer.open_stream()
    session_id = (await peer.result("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
    session_stream = await peer.open_stream(session_id)
    response = await peer.prompt(session_id, "v2 over http")
    assert response["result"]["messageId"].startswith("msg_")
    await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("stopReason") == "end_turn"
    )
    kinds = [u["sessionUpdate"] for u in updates(session_stream.messages)]
    assert kinds == ["user_message", "state_update"] + ["agent_message_chunk"] * 3 + ["state_update"]
    assert session_stream.messages[0] is response


async def test_keepalive_comments_when_idle(reference_agent: ReferenceAgent, http_peers: Any) -> None:
    async with ReferenceServer(reference_agent, keepalive_interval=0.05) as server:
        peer = await http_peers(server)
        await peer.initialize(1)
        stream = await peer.open_stream()
        await eventually(lambda: len(stream.comments) >= 3)
        assert set(stream.comments) == {": keepalive"}
        assert stream.messages == []


async def test_load_without_session_header_replays_on_the_connection_stream(
    reference_agent: ReferenceAgent, reference_server: ReferenceServer, http_peers: Any
) -> None:
    first = await http_peers(reference_server)
    await first.initialize(1)
    await first.open_stream()
    session_id = (await first.result("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
    await first.open_stream(session_id)
    await first.prompt(session_id, "remember")
    await reference_server.restart()
    second = await http_peers(reference_server)
    await second.initialize(1)
    stream = await second.open_stream()
    status = await second.result("session/status", {"sessionId": session_id})
    assert status == {"status": "inactive"}
    response = await second.request("session/load", {"sessionId": session_id, "cwd": "/w", "mcpServers": []})
    assert response["result"] == {"sessionId": session_id}
    load = stream.messages[-3:]
    assert [u["sessionUpdate"] for u in updates(load)] == ["user_message_chunk", "agent_message_chunk"]
    assert load[-1] is response  # replay before the answer, on one stream
    session_stream = await second.open_stream(session_id)
    assert (await second.prompt(session_id, "after load"))["result"]["stopReason"] == "end_turn"
    assert len(updates(session_stream.messages)) == 3


async def test_session_header_dialect_on_status_load_and_resume(
    reference_agent: ReferenceAgent, reference_server: ReferenceServer, http_peers: Any
) -> None:
    first = await http_peers(reference_server)
    await first.initialize(1)
    await first.open_stream()
    session_id = (await first.result("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
    await first.open_stream(session_id)
    await first.prompt(session_id, "one")
    reference_agent.lose_memory()
    # a client that sends Acp-Session-Id on status/load and listens on the session stream first
    second = await http_peers(reference_server)
    await second.initialize(1)
    connection_stream = await second.open_stream()
    session_stream = await second.open_stream(session_id)  # accepted: the agent knows the session
    assert session_stream.status == 200
    status = await second.result("session/status", {"sessionId": session_id}, session_id=session_id)
    assert status == {"status": "inactive"}
    response = await second.request(
        "session/load", {"sessionId": session_id, "cwd": "/w", "mcpServers": []}, session_id=session_id
    )
    assert [m.get("method", "answer") for m in session_stream.messages] == [
        "answer",
        "session/update",
        "session/update",
        "answer",
    ]
    assert session_stream.messages[-1] is response
    assert connection_stream.messages == []
    # a status POST with the header for a session the agent does not know is still a JSON-RPC answer
    unknown = await second.request("session/status", {"sessionId": "sess_gone"}, session_id="sess_gone")
    assert unknown["error"]["code"] == -32002


async def test_permission_round_trip_over_http(reference_server: ReferenceServer, http_peers: Any) -> None:
    peer = await http_peers(reference_server)
    peer.handlers["session/request_permission"] = lambda params: {
        "outcome": {"outcome": "selected", "optionId": "allow"}
    }
    await peer.initialize(1)
    await peer.open_stream()
    session_id = (await peer.result("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
    session_stream = await peer.open_stream(session_id)
    assert (await peer.prompt(session_id, "/permission"))["result"]["stopReason"] == "end_turn"
    assert session_stream.messages[0]["method"] == "session/request_permission"
    assert "".join(u["content"]["text"] for u in updates(session_stream.messages)) == "permission: selected allow"
    answer_post = next(
        r
        for r in reference_server.requests
        if r.method == "POST" and r.status == 202 and r.header("acp-session-id") == session_id
    )
    assert answer_post is not None


async def test_drop_connections_ends_streams_and_forgets_connection_ids(
    reference_server: ReferenceServer, http_peers: Any
) -> None:
    peer = await http_peers(reference_server)
    await peer.initialize(1)
    stream = await peer.open_stream()
    session_id = (await peer.result("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
    await reference_server.drop_connections()
    await eventually(stream.ended.is_set)
    assert isinstance(stream.error, httpx.TransportError)  # a reset, not a clean end of stream
    assert reference_server.connection_count == 0
    with pytest.raises(AssertionError, match="404"):
        await peer.request("session/status", {"sessionId": session_id})
    fresh = await http_peers(reference_server)
    await fresh.initialize(1)
    await fresh.open_stream()
    assert (await fresh.result("session/status", {"sessionId": session_id}))["status"] == "active"


async def test_refuse_connections_answers_503_with_retry_after(
    reference_server: ReferenceServer, http_peers: Any
) -> None:
    reference_server.refuse_connections(0.3)
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        refused = await client.post(reference_server.http_url, content=_initialize(), headers=JSON)
        assert refused.status_code == 503
        assert int(refused.headers["retry-after"]) >= 1
    await eventually(lambda: not reference_server.refusing)
    peer = await http_peers(reference_server)
    assert (await peer.initialize(1))["protocolVersion"] == 1


async def test_health_endpoint_for_load_balancers(reference_agent: ReferenceAgent) -> None:
    reference_agent.name = "agent-h"
    async with ReferenceServer(reference_agent) as server, httpx.AsyncClient(timeout=TIMEOUT) as client:
        health = server.http_url.replace("/acp", "/health")
        ok = await client.get(health)
        assert ok.status_code == 200
        assert ok.json() == {"status": "ok", "agent": "agent-h", "instance": server.instance_id}
        server.refuse_connections(5)
        refused = await client.get(health)
        assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
        assert (await client.post(health, content=_initialize(), headers=JSON)).status_code == 404
    async with ReferenceServer(reference_agent, path="/health") as server, httpx.AsyncClient(timeout=TIMEOUT) as client:
        # an ACP endpoint at /health is the ACP endpoint (a GET without a connection id), not the check
        assert (await client.get(server.http_url)).status_code == 400


async def test_stalled_agent_accepts_posts_but_never_answers(
    reference_agent: ReferenceAgent, reference_server: ReferenceServer, http_peers: Any
) -> None:
    peer = await http_peers(reference_server)
    await peer.initialize(1)
    stream = await peer.open_stream()
    reference_agent.stall()
    request_id = peer.next_id()
    await peer.send_request(request_id, "session/list", {})
    await eventually(lambda: reference_agent.stalled_requests == 1)
    reference_agent.stall(False)
    await peer.result("session/list", {})
    assert not any(is_response(m, request_id) for m in stream.messages)
