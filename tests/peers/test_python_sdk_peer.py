"""Smoke tests of the official-Python-SDK peer fixtures, with raw ``websockets`` / ``httpx`` (not our client).

Besides proving the fixtures work, several tests pin behaviours of the SDK's Streamable HTTP server
(0.12.1 under hypercorn) that our client has to live with; each says so in its docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection, connect

from tests.peers.python_sdk import PythonSdkPeer

TIMEOUT = 10.0
CWD = "/home/user/project"

Message = dict[str, Any]
Make = Callable[..., PythonSdkPeer]


# -- JSON-RPC over a message link (WebSocket, stdio) ----------------------------------------------------


class Link:
    """Whole JSON-RPC messages over one link; ``call`` waits for the answer and keeps what came before."""

    def __init__(self, send: Callable[[str], Awaitable[None]], recv: Callable[[], Awaitable[str]]) -> None:
        self._send = send
        self._recv = recv
        self._next_id = 0

    async def send(self, message: Message) -> None:
        await self._send(json.dumps(message))

    async def recv(self) -> Message:
        message: Message = json.loads(await asyncio.wait_for(self._recv(), TIMEOUT))
        return message

    async def notify(self, method: str, params: Message) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def call(
        self,
        method: str,
        params: Message | None = None,
        *,
        on_request: Callable[[Message], Message] | None = None,
        on_message: Callable[[Message], Awaitable[None]] | None = None,
    ) -> tuple[Message, list[Message]]:
        """Send a request; return (its response, the other messages received meanwhile, in order).

        ``on_request`` answers agent->client requests (its return value is the ``result``);
        ``on_message`` is awaited for each other message as it arrives.
        """
        request_id = self._next_id
        self._next_id += 1
        request: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = params
        await self.send(request)
        seen: list[Message] = []
        while True:
            message = await self.recv()
            if message.get("id") == request_id and "method" not in message:
                return message, seen
            seen.append(message)
            if "method" in message and "id" in message and on_request is not None:
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": on_request(message)})
            if on_message is not None:
                await on_message(message)


def ws_link(ws: ClientConnection) -> Link:
    async def recv() -> str:
        data = await ws.recv()
        assert isinstance(data, str), "the SDK sends text frames"
        return data

    return Link(ws.send, recv)


async def initialize(link: Link, protocol_version: int = 1) -> Message:
    response, seen = await link.call("initialize", {"protocolVersion": protocol_version, "clientCapabilities": {}})
    assert seen == []
    result: Message = response["result"]
    return result


async def new_session(link: Link, cwd: str = CWD) -> str:
    response, _ = await link.call("session/new", {"cwd": cwd, "mcpServers": []})
    session_id: str = response["result"]["sessionId"]
    return session_id


def prompt_params(session_id: str, text: str) -> Message:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def updates(messages: list[Message], kind: str | None = None) -> list[Message]:
    found = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
    return [u for u in found if kind is None or u["sessionUpdate"] == kind]


def texts(messages: list[Message], kind: str = "agent_message_chunk") -> list[str]:
    return [u["content"]["text"] for u in updates(messages, kind)]


async def echo_turn(link: Link, session_id: str, text: str) -> None:
    response, seen = await link.call("session/prompt", prompt_params(session_id, text))
    assert response["result"] == {"stopReason": "end_turn"}
    assert len(texts(seen)) == 3
    assert "".join(texts(seen)) == f"echo: {text}"


def assert_capabilities(result: Message) -> None:
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert set(caps["sessionCapabilities"]) == {"list", "resume", "close"}  # no "status"
    assert result["agentInfo"]["name"] == "acp-python-sdk-peer"


# -- Streamable HTTP helpers ---------------------------------------------------------------------------


class SseStream:
    """The ``data:`` messages of one SSE response, read in the background."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._pump()) if response.status_code == 200 else None

    async def _pump(self) -> None:
        async for line in self.response.aiter_lines():
            if line.startswith("data:"):
                await self._queue.put(json.loads(line[5:]))

    async def next(self) -> Message:
        return await asyncio.wait_for(self._queue.get(), TIMEOUT)

    async def until_response(self, request_id: int) -> tuple[Message, list[Message]]:
        seen: list[Message] = []
        while True:
            message = await self.next()
            if message.get("id") == request_id and "method" not in message:
                return message, seen
            seen.append(message)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await self._task


class HttpAcp:
    """One ACP connection over Streamable HTTP, spoken by hand."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self.connection_id = ""

    def headers(self, session_id: str | None = None) -> dict[str, str]:
        headers = {"Acp-Connection-Id": self.connection_id} if self.connection_id else {}
        if session_id is not None:
            headers["Acp-Session-Id"] = session_id
        return headers

    async def initialize(self) -> httpx.Response:
        response = await self.client.post(
            self.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        assert response.status_code == 200, response.text
        self.connection_id = response.headers["Acp-Connection-Id"]
        return response

    async def post(self, message: Message, session_id: str | None = None) -> httpx.Response:
        return await self.client.post(self.url, json=message, headers=self.headers(session_id))

    async def request(self, request_id: int, method: str, params: Message, session_id: str | None = None) -> int:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await self.post(message, session_id)
        return response.status_code

    @contextlib.asynccontextmanager
    async def stream(self, session_id: str | None = None) -> AsyncIterator[SseStream]:
        headers = {"Accept": "text/event-stream", **self.headers(session_id)}
        async with self.client.stream("GET", self.url, headers=headers) as response:
            stream = SseStream(response)
            try:
                yield stream
            finally:
                await stream.close()

    async def delete(self) -> int:
        response = await self.client.delete(self.url, headers=self.headers())
        return response.status_code


async def http_echo_flow(client: httpx.AsyncClient, url: str, expected_version: str) -> None:
    """initialize, session/new, one prompt; checks where each answer arrives and the HTTP version."""
    acp = HttpAcp(client, url)
    init = await acp.initialize()
    assert init.http_version == expected_version
    assert_capabilities(init.json()["result"])
    try:
        async with acp.stream() as conn_stream:
            assert conn_stream.response.http_version == expected_version
            assert await acp.request(1, "session/new", {"cwd": CWD, "mcpServers": []}) == 202
            created, _ = await conn_stream.until_response(1)
            session_id = created["result"]["sessionId"]
            async with acp.stream(session_id) as session_stream:
                assert session_stream.response.status_code == 200
                status = await acp.request(2, "session/prompt", prompt_params(session_id, "over http"), session_id)
                assert status == 202
                answer, seen = await session_stream.until_response(2)
                assert answer["result"] == {"stopReason": "end_turn"}
                assert "".join(texts(seen)) == "echo: over http"
                assert len(texts(seen)) == 3
    finally:
        assert await acp.delete() == 202


# -- the fixtures over each transport -------------------------------------------------------------------


async def test_websocket_initialize_new_prompt(python_sdk_peer: PythonSdkPeer) -> None:
    async with connect(python_sdk_peer.ws_url) as ws:
        assert ws.response is not None
        assert ws.response.headers["Acp-Connection-Id"]
        link = ws_link(ws)
        assert_capabilities(await initialize(link))
        session_id = await new_session(link)
        assert session_id.startswith("sess_")
        await echo_turn(link, session_id, "hello there")


@pytest.mark.parametrize(("http2", "version"), [(False, "HTTP/1.1"), (True, "HTTP/2")], ids=["http1", "h2c"])
async def test_streamable_http_cleartext(python_sdk_peer: PythonSdkPeer, http2: bool, version: str) -> None:
    async with httpx.AsyncClient(http1=not http2, http2=http2, timeout=TIMEOUT) as client:
        await http_echo_flow(client, python_sdk_peer.http_url, version)


async def test_streamable_http_tls_h2(python_sdk_peer: PythonSdkPeer) -> None:
    assert python_sdk_peer.https_url.startswith("https://localhost:")
    verify = ssl.create_default_context(cafile=python_sdk_peer.ca_file)
    async with httpx.AsyncClient(http2=True, verify=verify, timeout=TIMEOUT) as client:
        await http_echo_flow(client, python_sdk_peer.https_url, "HTTP/2")


async def test_tls_is_verified(python_sdk_peer: PythonSdkPeer) -> None:
    """Without the CA the certificate does not verify (so the ALPN/h2 test above really verified it)."""
    async with httpx.AsyncClient(http2=True, timeout=TIMEOUT) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.post(python_sdk_peer.https_url, json={})


async def test_websocket_over_tls(python_sdk_peer: PythonSdkPeer) -> None:
    async with connect(python_sdk_peer.wss_url, ssl=python_sdk_peer.ssl_context()) as ws:
        link = ws_link(ws)
        assert_capabilities(await initialize(link, protocol_version=2))  # v1 only: answers 1
        await echo_turn(link, await new_session(link), "secure")


def read_log(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


@contextlib.asynccontextmanager
async def stdio_agent(command: tuple[str, ...], log: Path) -> AsyncIterator[Link]:
    with log.open("ab") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    async def send(text: str) -> None:
        stdin.write(text.encode() + b"\n")
        await stdin.drain()

    async def recv() -> str:
        line = await stdout.readline()
        assert line, f"agent closed stdout; stderr:\n{read_log(log)}"
        return line.decode()

    try:
        yield Link(send, recv)
        stdin.close()
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0, read_log(log)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_stdio(python_sdk_peer: PythonSdkPeer, tmp_path: Path) -> None:
    async with stdio_agent(python_sdk_peer.stdio_command, tmp_path / "stderr.log") as link:
        assert_capabilities(await initialize(link))
        session_id = await new_session(link)
        await echo_turn(link, session_id, "over stdio")
        response, _ = await link.call("session/resume", {"sessionId": session_id, "cwd": CWD})
        assert response["result"] == {"sessionId": session_id}


async def test_stdio_capability_flags(python_sdk_peer: PythonSdkPeer, tmp_path: Path) -> None:
    command = (*python_sdk_peer.stdio_command, "--no-resume", "--no-load-session")
    async with stdio_agent(command, tmp_path / "stderr.log") as link:
        result = await initialize(link)
        assert result["agentCapabilities"]["loadSession"] is False
        assert set(result["agentCapabilities"]["sessionCapabilities"]) == {"list", "close"}
        session_id = await new_session(link)
        for method in ("session/resume", "session/load"):
            response, _ = await link.call(method, {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
            assert response["error"]["code"] == -32601


async def test_stdio_store_survives_agent_restart(python_sdk_peer: PythonSdkPeer, tmp_path: Path) -> None:
    command = python_sdk_peer.stdio_command_with_store(tmp_path / "sessions.json")
    async with stdio_agent(command, tmp_path / "stderr.log") as link:
        await initialize(link)
        session_id = await new_session(link)
        await echo_turn(link, session_id, "remember me")
    async with stdio_agent(command, tmp_path / "stderr.log") as link:
        await initialize(link)
        response, seen = await link.call("session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
        assert response["result"] == {"sessionId": session_id}
        assert texts(seen, "user_message_chunk") == ["remember me"]
        assert texts(seen) == ["echo: remember me"]
        await echo_turn(link, session_id, "again")


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


# -- restart --------------------------------------------------------------------------------------------


def refuses_connections(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


async def test_restart_forgets_sessions_keeps_ports(python_sdk_peer_factory: Make) -> None:
    peer = python_sdk_peer_factory()
    old_pid = peer.pid
    assert old_pid is not None
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        acp = HttpAcp(client, peer.http_url)
        await acp.initialize()
        async with connect(peer.ws_url) as ws:
            link = ws_link(ws)
            await initialize(link)
            session_id = await new_session(link)
            await echo_turn(link, session_id, "before restart")
            await asyncio.to_thread(peer.restart)
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), TIMEOUT)
        assert peer.pid not in (None, old_pid)
        with pytest.raises(ProcessLookupError):
            os.kill(old_pid, 0)
        stale = await acp.post({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}})
        assert stale.status_code == 404
    async with connect(peer.ws_url) as ws:  # same URL, new agent: the session is unknown
        link = ws_link(ws)
        await initialize(link)
        for method in ("session/resume", "session/load"):
            response, _ = await link.call(method, {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
            assert response["error"]["code"] == -32002

    await asyncio.to_thread(peer.stop)
    assert peer.pid is None
    assert refuses_connections(peer.http_port)
    assert refuses_connections(peer.https_port)
    await asyncio.to_thread(peer.start)
    async with connect(peer.ws_url) as ws:
        assert_capabilities(await initialize(ws_link(ws)))


async def test_restart_with_store_keeps_sessions(python_sdk_peer_factory: Make, tmp_path: Path) -> None:
    peer = python_sdk_peer_factory(store=tmp_path / "sessions.json")
    async with connect(peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        session_id = await new_session(link)
        await echo_turn(link, session_id, "persisted")
    await asyncio.to_thread(peer.restart)
    async with connect(peer.ws_url) as ws:
        link = ws_link(ws)
        await initialize(link)
        loaded, seen = await link.call("session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
        assert loaded["result"] == {"sessionId": session_id}
        assert texts(seen) == ["echo: persisted"]
        await echo_turn(link, session_id, "after restart")
