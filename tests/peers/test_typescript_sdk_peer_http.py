"""The TypeScript SDK peer over Streamable HTTP (raw ``httpx``): which POST needs ``Acp-Session-Id``,
which SSE stream carries which answer, the status codes, drops."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.peers._ts_wire import CWD, MESSAGE_ID, TIMEOUT, http_peer, initialize_params, is_idle, text_of
from tests.peers.typescript_sdk import TypeScriptSdkPeer

# ---------------------------------------------------------------------------------------------
# Streamable HTTP smoke tests


async def test_http_v1_routing_and_lifecycle(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with http_peer(typescript_sdk_peer.http_url) as acp:
        init = await acp.initialize(1)
        assert init["result"]["agentCapabilities"]["sessionCapabilities"]["status"] == {}
        conn = await acp.open_stream()
        assert conn.http_version == "HTTP/1.1"

        # session/new: no session header; answered on the connection stream.
        new, _ = await acp.call(conn, "session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]

        # Anything whose params carry a sessionId needs Acp-Session-Id (400 without it) ...
        missing = await acp.post(acp.request("session/status", {"sessionId": session_id}))
        assert (missing.status_code, missing.text) == (400, "Missing Acp-Session-Id")
        mismatched = await acp.post(acp.request("session/status", {"sessionId": session_id}), "sess_other")
        assert (mismatched.status_code, mismatched.text) == (400, "Mismatched Acp-Session-Id")
        # ... and is answered on that session's stream, which buffers until it is opened.
        status_request = acp.request("session/status", {"sessionId": session_id})
        assert (await acp.post(status_request, session_id)).status_code == 202
        session = await acp.open_stream(session_id)
        status, _ = await session.until_response(status_request["id"])
        assert status["result"] == {"status": "open"}

        answer, updates = await acp.call(
            session,
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "a b"}]},
            session_id,
        )
        assert answer["result"] == {"stopReason": "end_turn"}
        assert "".join(text_of(u["params"]["update"]) for u in updates) == "echo: a b "

        # session/list (no sessionId in params) stays connection-scoped.
        listed, _ = await acp.call(conn, "session/list", {})
        assert session_id in [s["sessionId"] for s in listed["result"]["sessions"]]
        # An unknown session's stream opens fine (no 404); the -32002 answer comes on it.
        nope = await acp.open_stream("sess_nope")
        unknown, _ = await acp.call(nope, "session/status", {"sessionId": "sess_nope"}, "sess_nope")
        assert unknown["error"] == {"code": -32002, "message": "Resource not found", "data": {"sessionId": "sess_nope"}}

        # Restart: the old connection id is gone, streams end.
        typescript_sdk_peer.restart()
        assert isinstance(await conn.end(), httpx.HTTPError)
        gone = await acp.post(acp.request("session/list", {}))
        assert (gone.status_code, gone.text) == (404, "Unknown Acp-Connection-Id")

    async with http_peer(typescript_sdk_peer.http_url) as acp:
        await acp.initialize(1)
        conn = await acp.open_stream()
        session = await acp.open_stream(session_id)
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "saved"}
        # session/load: needs the session header; replay on the session stream, answer on the connection stream.
        load = acp.request("session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
        loaded_post = await acp.post(load, session_id)
        assert loaded_post.status_code == 202
        loaded, before = await conn.until_response(load["id"])
        assert before == []
        assert loaded["result"] == {"sessionId": session_id}
        replay = [await session.next(), await session.next()]
        assert [m["params"]["update"]["sessionUpdate"] for m in replay] == ["user_message_chunk", "agent_message_chunk"]
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "open"}

        typescript_sdk_peer.evict(session_id)
        evicted, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert evicted["error"]["data"] == {"sessionId": session_id}


async def test_http_v2_routing_and_lifecycle(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with http_peer(typescript_sdk_peer.http_url_v2) as acp:
        init = await acp.initialize(2)
        assert init["result"]["capabilities"] == {"session": {"status": {}}}
        conn = await acp.open_stream()
        new, _ = await acp.call(conn, "session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        session = await acp.open_stream(session_id)
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "open", "state": {"state": "idle"}}

        answer, before = await acp.call(
            session,
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "x y"}]},
            session_id,
        )
        assert before == []
        assert MESSAGE_ID.fullmatch(answer["result"]["messageId"])
        updates: list[dict[str, Any]] = []
        while not updates or not is_idle(updates[-1]):
            updates.append((await session.next())["params"]["update"])
        assert [u["sessionUpdate"] for u in updates] == [
            "user_message",
            "state_update",
            *["agent_message_chunk"] * 3,
            "state_update",
        ]
        typescript_sdk_peer.restart()

    async with http_peer(typescript_sdk_peer.http_url_v2) as acp:
        await acp.initialize(2)
        session = await acp.open_stream(session_id)
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "saved"}
        missing = await acp.post(
            acp.request("session/resume", {"sessionId": session_id, "cwd": CWD, "replayFrom": {"type": "start"}})
        )
        assert missing.status_code == 400
        # session/resume: replay, then state_update, then the answer: all on the session stream.
        resumed, replay = await acp.call(
            session,
            "session/resume",
            {"sessionId": session_id, "cwd": CWD, "mcpServers": [], "replayFrom": {"type": "start"}},
            session_id,
        )
        assert resumed["result"] == {"sessionId": session_id}
        assert [m["params"]["update"]["sessionUpdate"] for m in replay] == [
            "user_message",
            "agent_message",
            "state_update",
        ]
        assert text_of(replay[1]["params"]["update"]) == "echo: x y"


async def test_http_status_codes(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    url = typescript_sdk_peer.http_url
    async with http_peer(url) as acp:
        client = acp.client
        bad_type = await client.post(url, content=b"{}", headers={"Content-Type": "text/plain"})
        assert bad_type.status_code == 415
        not_json = await client.post(url, content=b"{", headers={"Content-Type": "application/json"})
        assert (not_json.status_code, not_json.text) == (400, "Invalid JSON")
        no_conn = await client.post(url, json=acp.request("session/list", {}))
        assert (no_conn.status_code, no_conn.text) == (400, "Missing Acp-Connection-Id")
        unknown = await client.post(url, json=acp.request("session/list", {}), headers={"Acp-Connection-Id": "nope"})
        assert (unknown.status_code, unknown.text) == (404, "Unknown Acp-Connection-Id")
        batch = await client.post(url, json=[acp.request("session/list", {})])
        assert batch.status_code == 400
        assert batch.json()["error"]["code"] == -32600
        assert batch.json()["id"] is None
        wrong_path = await client.post(url.replace("/acp", "/other"), json=acp.request("initialize", {}))
        assert wrong_path.status_code == 404
        put = await client.put(url, json={})
        assert put.status_code == 405

        await acp.initialize(1)
        headers = {"Acp-Connection-Id": acp.connection_id}
        again = await acp.post(acp.request("initialize", initialize_params(1)))
        assert (again.status_code, again.text) == (400, "Initialize not allowed on existing connection")
        not_acceptable = await client.get(url, headers={**headers, "Accept": "application/json"})
        assert not_acceptable.status_code == 406
        missing_conn_get = await client.get(url, headers={"Accept": "text/event-stream"})
        assert missing_conn_get.status_code == 400
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess_x"}}
        assert (await acp.post(cancel)).status_code == 400  # notifications too need the session header
        assert (await acp.post(cancel, "sess_x")).status_code == 202
        stream = await acp.open_stream()
        second = await client.get(url, headers={**headers, "Accept": "text/event-stream"})
        assert (second.status_code, second.text) == (409, "Outbound stream already has an active receiver")
        deleted = await client.delete(url, headers=headers)
        assert deleted.status_code == 202
        assert await stream.end() is None  # DELETE ends the streams cleanly
        deleted_again = await client.delete(url, headers=headers)
        assert deleted_again.status_code == 404


async def test_http_is_http11_only_on_cleartext(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with httpx.AsyncClient(http1=False, http2=True, timeout=TIMEOUT) as client:
        with pytest.raises(httpx.HTTPError):
            await client.post(typescript_sdk_peer.http_url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize"})


async def test_http_drop_ends_streams_but_keeps_connection(typescript_sdk_peer: TypeScriptSdkPeer) -> None:
    async with http_peer(typescript_sdk_peer.http_url) as acp:
        await acp.initialize(1)
        conn = await acp.open_stream()
        new, _ = await acp.call(conn, "session/new", {"cwd": CWD, "mcpServers": []})
        session_id = new["result"]["sessionId"]
        session = await acp.open_stream(session_id)
        typescript_sdk_peer.drop()
        assert isinstance(await conn.end(), httpx.HTTPError)
        assert isinstance(await session.end(), httpx.HTTPError)
        # A network drop leaves the server's ACP connection: the same id still works.
        conn = await acp.open_stream()
        session = await acp.open_stream(session_id)
        status, _ = await acp.call(session, "session/status", {"sessionId": session_id}, session_id)
        assert status["result"] == {"status": "open"}
        listed, _ = await acp.call(conn, "session/list", {})
        assert session_id in [s["sessionId"] for s in listed["result"]["sessions"]]
