"""The WebSocket transport against the official ACP Python SDK's server (an independent peer)."""

from __future__ import annotations

import asyncio

import pytest

from acp_client.transports import TlsConfig
from acp_client.transports.websocket import WebSocketConnector, WebSocketTransport
from tests.peers.python_sdk import PythonSdkPeer
from tests.transports._ws_support import connect

# --------------------------------------------------------------------------------------------
# The official ACP Python SDK's server as an independent peer


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "tests", "version": "0"}},
}


@pytest.mark.parametrize("secure", [False, True], ids=["ws", "wss"])
async def test_initialize_against_the_python_sdk_server(
    python_sdk_peer: PythonSdkPeer, opened: list[WebSocketTransport], secure: bool
) -> None:
    if secure:
        connector = WebSocketConnector(python_sdk_peer.wss_url, tls=TlsConfig(ca_file=python_sdk_peer.ca_file))
    else:
        connector = WebSocketConnector(python_sdk_peer.ws_url)
    transport = await connect(connector, opened)
    assert transport.info.connection_id  # the SDK names the connection in its 101 answer
    await transport.send(INITIALIZE)
    answer = await asyncio.wait_for(transport.receive(), 10)
    assert isinstance(answer, dict)
    assert answer["id"] == 0
    assert answer["result"]["protocolVersion"] == 1
    assert answer["result"]["agentCapabilities"]["loadSession"] is True
    # A request the agent does not know comes back as a JSON-RPC error on the same link.
    await transport.send({"jsonrpc": "2.0", "id": 1, "method": "no/such_method", "params": {}})
    error = await asyncio.wait_for(transport.receive(), 10)
    assert isinstance(error, dict)
    assert error["id"] == 1
    assert error["error"]["code"] == -32601
