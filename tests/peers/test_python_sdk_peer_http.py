"""Pinned quirks of the Python SDK's Streamable HTTP server: the session header rules, replays on the
connection stream, errors and DELETE, a reopened stream losing messages, strict results, unstable
methods refused by the stock server."""

from __future__ import annotations

import httpx
from websockets.asyncio.client import connect

from tests.peers._py_wire import (
    CWD,
    TIMEOUT,
    HttpAcp,
    Make,
    echo_turn,
    initialize,
    new_session,
    prompt_params,
    texts,
    updates,
    ws_link,
)
from tests.peers.python_sdk import PythonSdkPeer

# -- pinned quirks of the SDK's Streamable HTTP server ---------------------------------------------------


async def test_http_session_header_rules(python_sdk_peer: PythonSdkPeer) -> None:
    """Which POSTs need ``Acp-Session-Id``, and when the server answers 404 for a session.

    - session-scoped methods (prompt, cancel, close, set_mode, set_config_option) need the header: 400;
    - the header naming a session the connection has not seen in a ``result.sessionId``: 404 (POST or GET),
      also on ``session/load`` / ``session/resume`` for a session from another connection;
    - such a load (without the header) replays onto the CONNECTION stream, then answers there too;
    - once known, a response to any request whose params name the session (even ``session/status``'s
      error) comes on the SESSION stream, except results carrying ``sessionId`` (connection stream);
    - the client's reply to ``session/request_permission`` needs no session header.
    """
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        first = HttpAcp(client, python_sdk_peer.http_url)
        await first.initialize()
        async with first.stream() as conn_stream:
            assert await first.request(1, "session/new", {"cwd": CWD, "mcpServers": []}) == 202
            session_id = (await conn_stream.until_response(1))[0]["result"]["sessionId"]
        params = prompt_params(session_id, "hi")
        missing = await first.post({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": params})
        assert (missing.status_code, missing.json()) == (400, {"error": "Missing session id header"})
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        assert (await first.post(cancel)).status_code == 400
        unknown = await first.post({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": params}, "x")
        assert (unknown.status_code, unknown.json()) == (404, {"error": "Unknown session id"})
        async with first.stream("sess_unknown") as refused:
            assert refused.response.status_code == 404

        second = HttpAcp(client, python_sdk_peer.http_url)
        await second.initialize()
        async with second.stream(session_id) as early:
            assert early.response.status_code == 404  # not established on this connection yet
        load = {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
        assert await second.request(1, "session/load", load, session_id) == 404
        assert await second.request(2, "session/resume", {"sessionId": session_id, "cwd": CWD}, session_id) == 404
        async with second.stream() as conn_stream:
            assert await second.request(3, "session/load", load) == 202
            loaded, replay = await conn_stream.until_response(3)
            assert loaded["result"] == {"sessionId": session_id}
            assert [u["sessionUpdate"] for u in updates(replay)] == []  # no turn yet
            assert await second.request(4, "session/list", {}) == 202
            assert (await conn_stream.until_response(4))[0]["result"]["sessions"]
            async with second.stream(session_id) as session_stream:
                assert session_stream.response.status_code == 200
                assert await second.request(5, "session/status", {"sessionId": session_id}) == 202
                assert (await session_stream.until_response(5))[0]["error"]["code"] == -32601
                prompt = prompt_params(session_id, "/permission")
                assert await second.request(6, "session/prompt", prompt, session_id) == 202
                request = await session_stream.next()
                assert request["method"] == "session/request_permission"
                reply = {"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "cancelled"}}}
                assert (await second.post(reply)).status_code == 202
                done, seen = await session_stream.until_response(6)
                assert done["result"] == {"stopReason": "end_turn"}
                assert "".join(texts(seen)) == "echo: permission cancelled"
        assert await first.delete() == 202
        assert await second.delete() == 202


async def test_http_load_replays_on_connection_stream(python_sdk_peer: PythonSdkPeer) -> None:
    """On a fresh connection, ``session/load``'s replay and its answer both come on the connection stream."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as client, connect(python_sdk_peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        session_id = await new_session(link)
        await echo_turn(link, session_id, "before the drop")

        acp = HttpAcp(client, python_sdk_peer.http_url)
        await acp.initialize()
        async with acp.stream() as conn_stream:
            load = {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
            assert await acp.request(1, "session/load", load) == 202
            loaded, replay = await conn_stream.until_response(1)
        assert loaded["result"] == {"sessionId": session_id}
        assert texts(replay, "user_message_chunk") == ["before the drop"]
        assert texts(replay) == ["echo: before the drop"]
        assert await acp.delete() == 202


async def test_http_errors_and_delete(python_sdk_peer: PythonSdkPeer) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        url = python_sdk_peer.http_url
        acp = HttpAcp(client, url)
        await acp.initialize()
        headers = acp.headers()
        listing = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
        assert (await client.post(url, json=listing)).status_code == 400  # no connection id
        assert (await client.post(url, json=listing, headers={"Acp-Connection-Id": "nope"})).status_code == 404
        batch = await client.post(url, content=b"[]", headers={"Content-Type": "application/json", **headers})
        assert batch.status_code == 501
        text = await client.post(url, content=b"{}", headers={"Content-Type": "text/plain", **headers})
        assert text.status_code == 415
        garbage = await client.post(url, content=b"{nope", headers={"Content-Type": "application/json", **headers})
        assert garbage.status_code == 400
        assert (await client.get(url, headers={"Accept": "application/json", **headers})).status_code == 406
        assert (await client.put(url, headers=headers)).status_code == 405
        assert await acp.delete() == 202
        assert await acp.delete() == 404
        gone = await acp.post(listing)
        assert (gone.status_code, gone.json()) == (404, {"error": "Unknown connection id"})


async def test_http_reopened_stream_loses_messages(python_sdk_peer: PythonSdkPeer) -> None:
    """A closed SSE GET keeps consuming on the server: a re-opened stream gets only every other message.

    The SDK's ASGI adapter never notices the client went away (hypercorn drops the writes), so the old
    GET's consumer stays attached to the stream's queue until the connection is deleted, and messages go
    round-robin to it (lost) and to the new GET. No SSE ids, no replay. A client must not re-attach streams
    to a connection after a stream drop: start a new connection (initialize) and DELETE the old one.
    """
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        acp = HttpAcp(client, python_sdk_peer.http_url)
        await acp.initialize()
        async with acp.stream() as first:
            assert await acp.request(1, "session/list", {}) == 202
            await first.until_response(1)
        async with acp.stream() as second:
            for request_id in range(10, 16):
                assert await acp.request(request_id, "session/list", {}) == 202
            received = [(await second.next())["id"] for _ in range(3)]
        assert received != [10, 11, 12]  # messages in between went to the dead GET
        assert set(received) <= set(range(10, 16))
        assert await acp.delete() == 202


async def test_strict_results_make_loaded_sessions_unreachable_over_http(python_sdk_peer_factory: Make) -> None:
    """With schema-exact results (no ``sessionId`` in the load result) the HTTP server never learns the session."""
    peer = python_sdk_peer_factory(agent_args=["--strict-results"])
    async with connect(peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        session_id = await new_session(link)
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        acp = HttpAcp(client, peer.http_url)
        await acp.initialize()
        async with acp.stream() as conn_stream:
            assert await acp.request(1, "session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []}) == 202
            assert (await conn_stream.until_response(1))[0]["result"] == {}
        async with acp.stream(session_id) as session_stream:
            assert session_stream.response.status_code == 404
        assert await acp.request(2, "session/prompt", prompt_params(session_id, "hi"), session_id) == 404
        assert await acp.delete() == 202


async def test_stock_server_refuses_unstable_methods(python_sdk_peer_factory: Make) -> None:
    """As shipped, the SDK's HTTP/WS server answers -32601 to session/resume and session/close."""
    peer = python_sdk_peer_factory(agent_args=["--stock-http-server"])
    async with connect(peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        session_id = await new_session(link)
        for method in ("session/resume", "session/close"):
            response, _ = await link.call(method, {"sessionId": session_id, "cwd": CWD})
            assert response["error"]["code"] == -32601
        await echo_turn(link, session_id, "still works")
