"""The Streamable HTTP transport against the official ACP Python SDK's ASGI app (an independent peer)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from acp_client._codec._jsonrpc import request_message
from acp_client.exceptions import UnknownSession
from acp_client.transports import TlsConfig
from acp_client.transports.http import HttpConnector
from tests._support import eventually
from tests.transports._http_support import Link, Serve, collect_until_response, new_session, texts

from ._http_servers import App

# --------------------------------------------------------------------------------------------
# the official ACP Python SDK's server as an independent peer


def _official_app(sessions: set[str]) -> App:
    from acp.helpers import update_agent_message_text
    from acp.http.asgi import create_asgi_app
    from acp.schema import (
        AgentCapabilities,
        InitializeResponse,
        LoadSessionResponse,
        NewSessionResponse,
        PromptResponse,
    )

    class TinyAgent:
        """A minimal agent on the official SDK's ``Agent`` interface."""

        def __init__(self, conn: Any) -> None:
            self._conn = conn

        async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
            return InitializeResponse(
                protocol_version=protocol_version, agent_capabilities=AgentCapabilities(load_session=True)
            )

        async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
            session_id = uuid.uuid4().hex
            sessions.add(session_id)
            return NewSessionResponse(session_id=session_id)

        async def load_session(self, cwd: str, session_id: str, **_: Any) -> LoadSessionResponse:
            await self._conn.session_update(session_id, update_agent_message_text("replayed"))
            return LoadSessionResponse()

        async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
            for index in range(3):
                await self._conn.session_update(session_id, update_agent_message_text(f"chunk {index}"))
            return PromptResponse(stop_reason="end_turn")

        async def cancel(self, session_id: str, **_: Any) -> None:
            return None

    return create_asgi_app(TinyAgent)  # type: ignore[return-value]


@pytest.mark.parametrize("mode", ["http1", "h2c", "h2-tls"])
async def test_official_python_sdk_server(
    serve: Serve, link: Link, certfile: str, trusted: TlsConfig, mode: str
) -> None:
    sessions: set[str] = set()
    server = await serve(_official_app(sessions), certfile=certfile if mode == "h2-tls" else None)
    options: dict[str, Any] = {"tls": trusted} if mode == "h2-tls" else {"http2": mode == "h2c"}
    connector = HttpConnector(server.url, session_stream_retries=1, **options)
    transport = await link(connector)
    assert transport.info.http_version == ("HTTP/1.1" if mode == "http1" else "HTTP/2")
    sid = await new_session(transport)
    assert sid in sessions
    await transport.send(
        request_message(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    )
    seen = await collect_until_response(transport, 2)
    assert texts(seen) == ["chunk 0", "chunk 1", "chunk 2"]
    assert seen[-1]["result"]["stopReason"] == "end_turn"
    await transport.aclose()

    # The quirk: on a new connection, session/load does not establish the session on this server
    # (its answer carries no sessionId), so the session stream stays 404: a typed error, no hang.
    again = await link(connector)
    await again.send(request_message(1, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
    seen = await collect_until_response(again, 1)
    assert texts(seen) == ["replayed"]  # delivered on the connection stream
    await eventually(lambda: sid in again._session_errors)
    with pytest.raises(UnknownSession):
        await again.send(request_message(2, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert not again.closed
