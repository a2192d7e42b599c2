"""Fixtures of the end-to-end recovery tests (real servers on loopback, real transports).

* ``reference_agent`` is overridden here with a :class:`~tests.e2e._support.RecordingAgent`, so
  the ``reference_server`` / ``reference_tls_server`` fixtures (``tests/peers/reference.py``) serve
  an agent that records every request it receives, per connection.
* ``target`` (parametrized by ``transport``): the reference server behind a
  :class:`~acp_client.testing.FaultProxy`, and how to reach it on one transport: ``ws``
  (WebSocket), ``h2c`` (Streamable HTTP, HTTP/2 prior knowledge), ``http1`` (Streamable HTTP,
  HTTP/1.1), ``h2-tls`` (Streamable HTTP over TLS, HTTP/2 chosen by ALPN) or ``wss``
  (WebSocket over TLS).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import pytest_asyncio

from acp_client import AcpClient, TlsConfig
from acp_client.testing import FaultProxy, ReferenceServer
from tests._support import FAST_RETRY
from tests.e2e._support import Recorder, RecordingAgent
from tests.peers.reference import FaultProxyFactory, ReferenceTls


@pytest_asyncio.fixture
async def reference_agent() -> RecordingAgent:
    return RecordingAgent()


@attrs.frozen
class Target:
    """The reference server behind a fault proxy, reached over one transport.

    Attributes:
        transport: ``ws``, ``h2c``, ``http1``, ``h2-tls`` or ``wss``.
        server: The reference server (its ``requests`` log and controls).
        agent: The recording agent it serves.
        proxy: The fault proxy the client goes through (``cut``, ``blackhole``, ``refuse``).
        url: The client's endpoint (through the proxy).
        options: ``transport_options`` for the client.
        tls: The client's TLS settings (the test CA), when the server uses TLS.
        http_version: The HTTP version the server must see (``"2"``, ``"1.1"``), ``None`` for WS.
    """

    transport: str
    server: ReferenceServer
    agent: RecordingAgent
    proxy: FaultProxy
    url: str
    options: dict[str, Any]
    tls: TlsConfig | None
    http_version: str | None

    def client(self, recorder: Recorder, *, protocol_version: int = 1, **kwargs: Any) -> AcpClient:
        options = {**self.options, **kwargs.pop("transport_options", {})}
        kwargs.setdefault("retry", FAST_RETRY)
        return AcpClient(
            self.url,
            protocol_version=protocol_version,
            transport_options=options,
            tls=self.tls,
            callbacks=recorder.callbacks(decide_recovery=kwargs.pop("decide_recovery", None)),
            **kwargs,
        )

    def http_requests(self, since: int = 0) -> list[Any]:
        return [record for record in self.server.requests[since:] if record.transport == "http"]


TRANSPORTS = ("ws", "h2c", "http1", "h2-tls", "wss")


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> str:
    """The transport under test; tests parametrize it (``@pytest.mark.parametrize("transport", ...)``)."""
    return str(getattr(request, "param", "ws"))


@pytest.fixture
def _target_server(transport: str, request: pytest.FixtureRequest) -> ReferenceServer:
    name = "reference_tls_server" if transport in ("h2-tls", "wss") else "reference_server"
    server = request.getfixturevalue(name)
    assert isinstance(server, ReferenceServer)
    return server


@pytest_asyncio.fixture
async def target(
    transport: str, _target_server: ReferenceServer, fault_proxy: FaultProxyFactory, request: pytest.FixtureRequest
) -> Target:
    server = _target_server
    proxy = await fault_proxy(server)
    agent = server.agent
    assert isinstance(agent, RecordingAgent)
    tls: TlsConfig | None = None
    options: dict[str, Any]
    if transport == "ws":
        url, options, version = proxy.url(server.ws_url), {}, None
    elif transport == "h2c":
        url, options, version = proxy.url(server.http_url), {"http2": True}, "2"
    elif transport == "http1":
        url, options, version = proxy.url(server.http_url), {"http2": False}, "1.1"
    elif transport in ("h2-tls", "wss"):
        reference_tls: ReferenceTls = request.getfixturevalue("reference_tls")
        tls = TlsConfig(ca_file=reference_tls.ca_file)
        if transport == "wss":
            url, options, version = proxy.url(server.ws_url), {}, None
        else:
            url, options, version = proxy.url(server.http_url), {}, "2"
    else:  # pragma: no cover - a typo in a parametrization
        raise AssertionError(f"unknown transport {transport!r}")
    return Target(transport, server, agent, proxy, url, options, tls, version)
