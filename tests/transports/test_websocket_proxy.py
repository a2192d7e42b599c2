"""The WebSocket connector resolves its proxy once per URL and environment, not on every connect."""

from __future__ import annotations

import sys

import pytest

from acp_client.testing import ReferenceAgent, ReferenceServer
from acp_client.transports import websocket
from acp_client.transports.websocket import proxy_for

pytestmark = pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="system proxy settings are not cached")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in websocket._PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    websocket._resolve_proxy.cache_clear()


def test_the_proxy_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert proxy_for("ws://agent.example:8000/acp") is None
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    assert proxy_for("ws://agent.example:8000/acp") == "http://proxy.example:3128"
    monkeypatch.setenv("no_proxy", "agent.example")
    assert proxy_for("ws://agent.example:8000/acp") is None
    monkeypatch.setenv("WS_PROXY", "http://ws-proxy.example:3128")
    monkeypatch.delenv("no_proxy")
    assert proxy_for("ws://agent.example:8000/acp") == "http://ws-proxy.example:3128"


async def test_connects_resolve_the_proxy_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = websocket.get_proxy

    def counting(uri: object) -> str | None:
        calls.append(uri)
        return real(uri)  # type: ignore[arg-type]

    monkeypatch.setattr(websocket, "get_proxy", counting)
    async with ReferenceServer(ReferenceAgent()) as server:
        connector = websocket.WebSocketConnector(server.ws_url)
        for _ in range(3):
            transport = await connector.connect()
            await transport.aclose()
    assert len(calls) == 1
