"""Fixtures: the reference agent (``acp_client.testing.reference_agent``) and the fault proxy.

* ``reference_agent``: a fresh :class:`ReferenceAgent` (in-memory store). Change its attributes
  before connecting (``reference_agent.advertise_status = False``) or use its controls
  (``restart()``, ``evict(id)``, ``stall()``).
* ``reference_server``: that agent served on a free loopback port over WebSocket and Streamable
  HTTP (``.ws_url``, ``.http_url``; ``drop_connections()``, ``restart()``,
  ``refuse_connections(s)``).
* ``fault_proxy``: a factory, ``await fault_proxy(port)`` (or ``fault_proxy(reference_server)``),
  returning a started :class:`FaultProxy`; every proxy is closed at teardown.
* ``reference_tls``: a throwaway CA and a ``127.0.0.1`` / ``localhost`` certificate (trustme),
  as files; ``reference_tls_server`` serves ``reference_agent`` with it (``wss://``, ``https://``,
  ALPN ``h2``).
* ``reference_agent_command``: the argv of a stdio reference agent with its own store directory
  (respawning the same command finds the earlier sessions).
"""

from __future__ import annotations

import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import pytest_asyncio

from acp_client.testing.proxy import FaultProxy
from acp_client.testing.reference_agent import ReferenceAgent, ReferenceServer

__all__ = [
    "FaultProxyFactory",
    "ReferenceTls",
    "fault_proxy",
    "reference_agent",
    "reference_agent_command",
    "reference_server",
    "reference_tls",
    "reference_tls_server",
]

FaultProxyFactory = Callable[..., Awaitable[FaultProxy]]


@attrs.frozen
class ReferenceTls:
    """A test CA and a server certificate for ``127.0.0.1`` and ``localhost``, as PEM files."""

    ca_file: str
    cert_file: str
    key_file: str

    def client_context(self) -> ssl.SSLContext:
        """An SSL context that trusts the test CA (ALPN: h2, http/1.1)."""
        context = ssl.create_default_context(cafile=self.ca_file)
        context.set_alpn_protocols(["h2", "http/1.1"])
        return context


@pytest_asyncio.fixture
async def reference_agent() -> ReferenceAgent:
    return ReferenceAgent()


@pytest_asyncio.fixture
async def reference_server(reference_agent: ReferenceAgent) -> AsyncIterator[ReferenceServer]:
    async with ReferenceServer(reference_agent) as server:
        yield server


@pytest_asyncio.fixture
async def fault_proxy() -> AsyncIterator[FaultProxyFactory]:
    proxies: list[FaultProxy] = []

    async def make(upstream: int | ReferenceServer, upstream_host: str = "127.0.0.1") -> FaultProxy:
        port = upstream.port if isinstance(upstream, ReferenceServer) else upstream
        proxy = FaultProxy(upstream_host, port)
        await proxy.start()
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        await proxy.aclose()


@pytest.fixture
def reference_tls(tmp_path: Path) -> ReferenceTls:
    import trustme

    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_file = tmp_path / "reference-ca.pem"
    cert_file = tmp_path / "reference-cert.pem"
    key_file = tmp_path / "reference-key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server_cert.cert_chain_pems[0].write_to_path(str(cert_file))
    for extra in server_cert.cert_chain_pems[1:]:
        extra.write_to_path(str(cert_file), append=True)
    server_cert.private_key_pem.write_to_path(str(key_file))
    return ReferenceTls(ca_file=str(ca_file), cert_file=str(cert_file), key_file=str(key_file))


@pytest_asyncio.fixture
async def reference_tls_server(
    reference_agent: ReferenceAgent, reference_tls: ReferenceTls
) -> AsyncIterator[ReferenceServer]:
    async with ReferenceServer(reference_agent, tls=(reference_tls.cert_file, reference_tls.key_file)) as server:
        yield server


@pytest.fixture
def reference_agent_command(tmp_path: Path) -> list[str]:
    store = tmp_path / "reference-agent-store"
    return [sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio", "--store", str(store)]
