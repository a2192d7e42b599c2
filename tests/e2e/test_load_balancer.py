"""Behind a real load balancer (issue 11, docs/many-instances.md): HAProxy in front of two reference agents.

::

    AcpClient ──► FaultProxy ──► HAProxy ──┬──► agent-a (ReferenceServer)
      (one URL)     (cuts)      roundrobin  └──► agent-b (ReferenceServer)
                                cookie SERVERID insert, health checks, redispatch

Over WebSocket and Streamable HTTP (HTTP/1.1 to HAProxy), with today's single-URL client:

* repeated drops between the client and HAProxy (fault-proxy cuts, an HAProxy restart) always come
  back to the instance holding the session — the cookie jar keeps the affinity cookie — and
  resume it there; the other instance never hears of the session;
* when that instance dies, HAProxy sends the client to the other one and the probe there decides:
  separate stores → -32002 → a new session; one shared store → ``inactive`` → replay. The cookie
  then names the new instance, so the next drop comes back to it.

Which instance served is read from ``initialize``'s ``agentInfo.name`` and from the cookie.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import pytest_asyncio

from acp_client import AcpClient, RecoveryPath
from acp_client.state import Probe
from acp_client.testing import FaultProxy, ReferenceServer, SessionStore
from tests._support import FAST_RETRY, eventually
from tests.e2e._support import Recorder, RecordingAgent
from tests.peers.haproxy import Haproxy, HaproxyFactory
from tests.peers.reference import FaultProxyFactory

pytestmark = pytest.mark.parametrize("transport", ["ws", "http"])

NAMES = ("a", "b")


@attrs.define
class Cluster:
    """Two reference agents behind HAProxy, behind a fault proxy."""

    agents: dict[str, RecordingAgent]
    servers: dict[str, ReferenceServer]
    lb: Haproxy
    front: FaultProxy

    def url(self, transport: str) -> str:
        return self.front.url(self.lb.url("ws" if transport == "ws" else "http"))

    def client(self, transport: str, recorder: Recorder, **kwargs: Any) -> AcpClient:
        options = {} if transport == "ws" else {"http2": False}
        callbacks = recorder.callbacks()
        return AcpClient(
            self.url(transport), retry=FAST_RETRY, transport_options=options, callbacks=callbacks, **kwargs
        )

    @staticmethod
    def instance(client: AcpClient) -> str:
        """``a`` or ``b``: the instance the client's current connection reached."""
        assert client.agent_info is not None
        return client.agent_info.name.removeprefix("agent-")

    def cookie(self, client: AcpClient, transport: str) -> str | None:
        """The ``SERVERID`` value in the client's cookie jar."""
        header = client.cookies.header_for(self.url(transport)) or ""
        values = dict(part.strip().split("=", 1) for part in header.split(";") if "=" in part)
        return values.get("SERVERID")

    def loads_and_resumes(self, name: str, session_id: str) -> list[str]:
        """The ``session/load`` / ``session/resume`` calls instance ``name`` received for ``session_id``."""
        return [
            method
            for _, method, params in self.agents[name].received
            if method in ("session/load", "session/resume")
            and isinstance(params, dict)
            and params.get("sessionId") == session_id
        ]


ClusterFactory = Callable[..., Awaitable[Cluster]]


@pytest_asyncio.fixture
async def cluster(haproxy: HaproxyFactory, fault_proxy: FaultProxyFactory, tmp_path: Path) -> AsyncIterator[Any]:
    servers: list[ReferenceServer] = []

    async def make(*, shared_store: bool) -> Cluster:
        shared = SessionStore(tmp_path / "shared-store") if shared_store else None
        agents = {
            name: RecordingAgent(name=f"agent-{name}", store=shared or SessionStore(tmp_path / f"store-{name}"))
            for name in NAMES
        }
        started = {}
        for name, agent in agents.items():
            server = ReferenceServer(agent)
            await server.start()
            servers.append(server)
            started[name] = server
        lb = await haproxy({name: server.port for name, server in started.items()})
        front = await fault_proxy(lb.port)
        return Cluster(agents, started, lb, front)

    yield make
    for server in servers:
        await server.aclose()


async def test_repeated_drops_come_back_to_the_instance_holding_the_session(transport: str, cluster: Any) -> None:
    lab: Cluster = await cluster(shared_store=False)
    recorder = Recorder()
    async with lab.client(transport, recorder) as client:
        home = lab.instance(client)
        other = "b" if home == "a" else "a"
        assert lab.cookie(client, transport) == home
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("hello there")

        drops = [lab.front.cut, lab.front.cut, lab.lb.restart, lab.front.cut, lab.front.cut]
        for number, drop in enumerate(drops, start=1):
            await drop()
            outcome = await recorder.outcome(number)
            assert outcome.path is RecoveryPath.RESUME, (number, outcome)
            assert outcome.probe is Probe.ACTIVE
            assert outcome.session_id == session.session_id
            assert lab.instance(client) == home, f"drop {number} landed on the other instance"
            assert lab.cookie(client, transport) == home

        assert (await handle.prompt("still here")).stop_reason == "end_turn"
        assert "agent: echo: still here" in handle.transcript.text()
    assert lab.loads_and_resumes(home, session.session_id) == ["session/resume"] * len(drops)
    assert lab.loads_and_resumes(other, session.session_id) == []
    assert session.session_id not in lab.agents[other].sessions  # separate stores: never heard of it
    assert "Server agents/" not in lab.lb.log()  # no instance was ever marked down


@pytest.mark.parametrize("shared_store", [False, True], ids=["separate-stores", "shared-store"])
async def test_when_the_home_instance_dies_the_client_lands_on_the_other(
    transport: str, shared_store: bool, cluster: Any
) -> None:
    lab: Cluster = await cluster(shared_store=shared_store)
    recorder = Recorder()
    async with lab.client(transport, recorder) as client:
        home = lab.instance(client)
        other = "b" if home == "a" else "a"
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("remember me")

        await lab.servers[home].aclose()  # the instance holding the session dies
        outcome = await recorder.outcome(1)

        assert lab.instance(client) == other
        assert lab.cookie(client, transport) == other  # HAProxy moved the affinity cookie
        if shared_store:
            assert outcome.probe is Probe.INACTIVE
            assert outcome.path is RecoveryPath.REPLAY
            assert outcome.session_id == session.session_id
            assert outcome.replayed_updates >= 2
            assert "user: remember me" in handle.transcript.text()
        else:
            assert outcome.probe is Probe.UNKNOWN
            assert outcome.path is RecoveryPath.NEW_SESSION
            assert outcome.session_id != session.session_id
            assert outcome.session_id in lab.agents[other].sessions
        current = outcome.session_id
        assert current is not None
        # Its health checks fail too (the client got there first, by HAProxy's redispatch).
        await eventually(lambda: f"Server agents/{home} is DOWN" in lab.lb.log(), what=lab.lb.log)

        # The next drop comes back to the instance that now holds the session.
        await lab.front.cut()
        again = await recorder.outcome(2)
        assert again.path is RecoveryPath.RESUME and again.session_id == current
        assert lab.instance(client) == other
        assert (await client.session(current).prompt("after failover")).stop_reason == "end_turn"
    expected = ["session/load", "session/resume"] if shared_store else ["session/resume"]
    assert lab.loads_and_resumes(other, current) == expected
