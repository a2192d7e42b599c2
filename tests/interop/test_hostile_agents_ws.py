"""Hostile agents over WebSocket: binary frames, a close mid-request, a handshake never answered or refused."""

from __future__ import annotations

import base64
import json

import pytest

from acp_client import AcpClient, AcpError, Callbacks, ClientClosed, ConnectionLost, RequestTimeout, State, Timeouts
from acp_client.exceptions import MalformedFrame
from acp_client.transports import AuthenticationFailed, HttpStatusError, ServiceUnavailable
from tests._support import eventually, within
from tests.interop._hostile import HostileWsAgent

# --------------------------------------------------------------------------------------------------
# WebSocket specifics


async def test_ws_binary_frames_are_reported_and_ignored(ws_agent: HostileWsAgent) -> None:
    errors: list[AcpError] = []
    binary = {"binary": base64.b64encode(json.dumps({"jsonrpc": "2.0", "id": 0, "result": {}}).encode()).decode()}
    invalid_utf8 = {"binary": base64.b64encode(b"\xff\xfe\x00garbage").decode()}
    async with AcpClient(ws_agent.url, retry=None, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        result = await within(client.request("_hostile", {"before": [binary, invalid_utf8], "tag": "t"}))
        assert result == {"echo": "t"}
        assert [type(e) for e in errors] == [MalformedFrame, MalformedFrame]
        assert "binary frame" in str(errors[0])
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


async def test_ws_close_mid_request_is_connection_lost(ws_agent: HostileWsAgent) -> None:
    async with AcpClient(ws_agent.url, retry=None) as client:
        with pytest.raises(ConnectionLost) as caught:
            await within(client.request("_hostile", {"before": [{"close": 1011}]}))
        assert caught.value.may_have_executed is True
        assert "1011" in str(caught.value.cause)
        await eventually(lambda: client.state.state is State.FAILED, what="the failed state")
        with pytest.raises(ClientClosed):
            await within(client.request("_hostile", {"tag": "after"}))


async def test_ws_agent_that_never_answers_initialize_times_out() -> None:
    agent = await HostileWsAgent(silent_initialize=True).start()
    try:
        client = AcpClient(agent.url, retry=None, timeouts=Timeouts(connect=0.5))
        with pytest.raises(RequestTimeout) as caught:
            await within(client.connect())
        assert caught.value.method == "initialize"
        assert client.state.state is State.FAILED
        await client.aclose()
    finally:
        await agent.stop()


@pytest.mark.parametrize(
    ("status", "error"), [(403, AuthenticationFailed), (500, HttpStatusError), (503, ServiceUnavailable)]
)
async def test_ws_handshake_refused_is_a_typed_connect_error(status: int, error: type[AcpError]) -> None:
    agent = await HostileWsAgent(refuse_status=status).start()
    try:
        client = AcpClient(agent.url, retry=None)
        with pytest.raises(error) as caught:
            await within(client.connect())
        assert caught.value.status == status  # type: ignore[attr-defined]
        assert client.state.state is State.FAILED
        await client.aclose()
    finally:
        await agent.stop()
