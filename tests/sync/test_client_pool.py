"""``SyncAcpClient`` over several instances: the endpoint list and pool options pass through."""

from __future__ import annotations

from acp_client.pool import Endpoint, Pool
from acp_client.sync import SyncAcpClient
from acp_client.testing import MemoryConnector, ReferenceAgent


def test_a_sync_client_places_sessions_over_several_instances() -> None:
    agents = [ReferenceAgent(name="agent-a"), ReferenceAgent(name="agent-b")]
    endpoints = [
        Endpoint(f"memory://{n}", n, connector=MemoryConnector(a, name=n))
        for n, a in zip(("a", "b"), agents, strict=True)
    ]
    with SyncAcpClient(Pool(endpoints, placement="round_robin", failover_delay=1.0), retry=None) as client:
        first = client.new_session("/tmp")
        second = client.new_session("/tmp")
        assert first.prompt("hello").stop_reason == "end_turn"
        assert second.prompt("hello").stop_reason == "end_turn"
    assert first.session_id in agents[0].sessions and second.session_id in agents[1].sessions
