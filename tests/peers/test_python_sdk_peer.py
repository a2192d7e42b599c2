"""Smoke tests of the official-Python-SDK peer fixtures, with raw ``websockets`` / ``httpx`` (not our client):
each transport, and restarts (with and without a store).

Besides proving the fixtures work, the tests in ``test_python_sdk_peer_http.py`` pin behaviours of the SDK's
Streamable HTTP server (0.12.1 under hypercorn) that our client has to live with; each says so in its docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import websockets
from websockets.asyncio.client import connect

from tests.peers._py_wire import (
    CWD,
    TIMEOUT,
    HttpAcp,
    Link,
    Make,
    assert_capabilities,
    echo_turn,
    http_echo_flow,
    initialize,
    new_session,
    texts,
    ws_link,
)
from tests.peers.python_sdk import PythonSdkPeer

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
