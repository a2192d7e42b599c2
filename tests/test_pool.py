"""``acp_client.pool``: endpoints, placement, ``locate()`` and the pool's routing.

``locate()`` runs over memory connectors (a fake clock for its timeouts) and against real
reference servers over WebSocket and Streamable HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from acp_client import AcpClient
from acp_client.exceptions import CapabilityNotSupported, ConfigurationError, ConnectError, RequestTimeout
from acp_client.pool import (
    Endpoint,
    FewestSessions,
    InstanceAnswer,
    Location,
    Probe,
    RoundRobin,
    RouteKind,
    locate,
    locate_many,
    placement_policy,
)
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent, ReferenceServer, SessionStore
from tests._farm import Farm

#: This module's farm: ``a`` and ``b`` share one store, ``c`` has its own.
pytestmark = pytest.mark.farm(shared=("a", "b"))


async def new_session_on(connector: MemoryConnector) -> tuple[AcpClient, str]:
    client = AcpClient(connector, retry=None)
    await client.connect()
    handle = await client.new_session("/tmp")
    await client.prompt(handle.session_id, "hello")
    return client, handle.session_id


# -- locate over memory connectors -------------------------------------------------------------------


async def test_locate_reports_every_instance_answer(farm: Farm) -> None:
    client, session_id = await new_session_on(farm.connectors["a"])
    try:
        farm.connectors["c"].refuse()
        extra = Endpoint("memory://d", "d", MemoryConnector(ReferenceAgent(name="agent-d"), name="d"))
        location = await locate(session_id, [*farm.endpoints, extra], timeout=5)
    finally:
        await client.aclose()
    presences = {answer.endpoint.name: answer.probe for answer in location.answers}
    assert presences == {"a": Probe.ACTIVE, "b": Probe.INACTIVE, "c": Probe.UNREACHABLE, "d": Probe.UNKNOWN}
    assert [answer.endpoint.name for answer in location.answers] == ["a", "b", "c", "d"]  # the order given
    assert location.active == (farm.endpoints[0],) and location.inactive == (farm.endpoints[1],)
    assert location.unknown == (extra,) and location.unreachable == (farm.endpoints[2],)
    assert location.answer("a").raw_status == "active"
    assert location.answer("a").agent is not None and location.answer("a").agent.name == "agent-a"
    assert isinstance(location.answer("c").error, ConnectError)
    assert location.answer("b").error is None
    route = location.route(home="b")
    assert (route.kind, route.endpoint) == (RouteKind.RESUME, farm.endpoints[0])


async def test_locate_has_no_side_effects(farm: Farm) -> None:
    client, session_id = await new_session_on(farm.connectors["a"])
    await client.aclose()
    farm.agents["a"].lose_memory()  # stored, not in memory, on a and b
    location = await locate(session_id, farm.endpoints)
    assert location.active == () and location.inactive == tuple(farm.endpoints[:2])
    for agent in farm.agents.values():
        snapshot = agent.sessions.get(session_id)
        assert snapshot is None or (not snapshot.in_memory and snapshot.attached_connections == 0)
        assert agent.connection_count == 0  # every probe link was closed
    route = location.route(home="b")
    assert (route.kind, route.endpoint) == (RouteKind.REPLAY, farm.endpoints[1])  # home is back: replay there
    assert location.route().endpoint in (farm.endpoints[0], farm.endpoints[1])


async def test_locate_v2_carries_the_foreground_state(farm: Farm) -> None:
    client, session_id = await new_session_on(farm.connectors["a"])
    try:
        location = await locate(session_id, farm.endpoints[:1], protocol_version=2)
    finally:
        await client.aclose()
    answer = location.answer("a")
    assert answer.probe is Probe.ACTIVE
    assert answer.state is not None and answer.state.state == "idle"


async def test_an_instance_without_session_status_is_unreachable(farm: Farm) -> None:
    farm.agents["c"].advertise_status = False
    location = await locate("sess_nope", farm.endpoints)
    assert [a.probe for a in location.answers] == [Probe.UNKNOWN, Probe.UNKNOWN, Probe.UNREACHABLE]
    assert isinstance(location.answer("c").error, CapabilityNotSupported)
    route = location.route()
    assert route.kind is RouteKind.NEW_SESSION and route.endpoint is None
    assert route.candidates == tuple(farm.endpoints[:2])


async def test_each_instance_has_its_own_timeout_on_the_injected_clock(farm: Farm) -> None:
    client, session_id = await new_session_on(farm.connectors["a"])
    await client.aclose()
    farm.agents["b"].stall()  # reads requests, never answers
    location = await farm.clock.run(locate(session_id, farm.endpoints, timeout=3.0, clock=farm.clock))
    stalled = location.answer("b")
    assert stalled.probe is Probe.UNREACHABLE and isinstance(stalled.error, RequestTimeout)
    assert stalled.elapsed == pytest.approx(3.0)
    assert location.answer("a").probe is Probe.ACTIVE and location.answer("a").elapsed < 3.0
    assert location.answer("c").probe is Probe.UNKNOWN
    assert location.elapsed == pytest.approx(3.0)  # concurrent: the slowest instance, not the sum


async def test_locate_is_concurrent() -> None:
    """Every instance is asked at once: ten instances that each answer after 1 s take 1 s."""
    clock = FakeClock()
    agents = [ReferenceAgent(name=f"agent-{i}", clock=clock) for i in range(10)]

    class Slow(MemoryConnector):
        async def connect(self):  # type: ignore[no-untyped-def]
            await clock.sleep(1.0)
            return await super().connect()

    endpoints = [Endpoint(f"memory://{i}", connector=Slow(agent, name=str(i))) for i, agent in enumerate(agents)]
    location = await clock.run(locate("sess_x", endpoints, clock=clock))
    assert all(answer.probe is Probe.UNKNOWN for answer in location.answers)
    assert location.elapsed == pytest.approx(1.0)


async def test_locate_many_asks_every_session_over_one_link_per_instance(farm: Farm) -> None:
    first, on_a = await new_session_on(farm.connectors["a"])
    second, on_c = await new_session_on(farm.connectors["c"])
    try:
        before = {name: connector.connects for name, connector in farm.connectors.items()}
        located = await locate_many([on_a, on_c, "sess_nowhere", on_a], farm.endpoints, timeout=5)
    finally:
        await first.aclose()
        await second.aclose()
    assert list(located) == [on_a, on_c, "sess_nowhere"]  # distinct ids, in order
    assert {name: connector.connects - before[name] for name, connector in farm.connectors.items()} == {
        "a": 1,
        "b": 1,
        "c": 1,
    }
    presences = {sid: [a.probe.value for a in location.answers] for sid, location in located.items()}
    assert presences == {
        on_a: ["active", "inactive", "unknown"],
        on_c: ["unknown", "unknown", "active"],
        "sess_nowhere": ["unknown", "unknown", "unknown"],
    }
    assert located[on_c].route().endpoint == farm.endpoints[2]
    assert await locate_many([], farm.endpoints) == {}


async def test_a_slow_close_keeps_the_answer() -> None:
    """The answer is taken before the link closes: a close that hangs costs at most the timeout."""
    clock = FakeClock()
    agent = ReferenceAgent(clock=clock)

    class SlowClose(MemoryConnector):
        async def connect(self):  # type: ignore[no-untyped-def]
            transport = await super().connect()
            close = transport.aclose

            async def aclose() -> None:
                await clock.sleep(100.0)
                await close()

            transport.aclose = aclose  # type: ignore[method-assign]
            return transport

    location = await clock.run(locate("sess_x", [SlowClose(agent, name="slow")], timeout=3.0, clock=clock))
    assert location.answers[0].probe is Probe.UNKNOWN and location.answers[0].elapsed < 1.0
    assert location.elapsed == pytest.approx(3.0)


async def test_a_failing_connector_is_a_bug_not_an_answer(farm: Farm) -> None:
    class Broken(MemoryConnector):
        async def connect(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("connector bug")

    with pytest.raises(RuntimeError, match="connector bug"):
        await locate("s", [*farm.endpoints, Broken(ReferenceAgent(), name="broken")])
    assert all(agent.connection_count == 0 for agent in farm.agents.values())  # the others were closed


async def test_locate_checks_its_arguments(farm: Farm) -> None:
    with pytest.raises(ConfigurationError, match="at least one"):
        await locate("s", [])
    with pytest.raises(ConfigurationError, match="distinct"):
        await locate("s", ["ws://h/acp", "ws://h/acp"])
    with pytest.raises(ConfigurationError, match="timeout"):
        await locate("s", farm.endpoints, timeout=0)
    with pytest.raises(ConfigurationError, match="protocol_version"):
        await locate("s", farm.endpoints, protocol_version=7)
    location = await locate("s", ["gopher://nowhere"])
    assert location.answers[0].probe is Probe.UNREACHABLE
    assert isinstance(location.answers[0].error, ConfigurationError)


# -- locate against real reference servers ---------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_locate_over_the_network(scheme: str, tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "shared")
    agents = [ReferenceAgent(name="agent-a", store=store), ReferenceAgent(name="agent-b", store=store)]
    async with ReferenceServer(agents[0]) as a, ReferenceServer(agents[1]) as b, ReferenceServer(ReferenceAgent()) as c:
        urls = [server.ws_url if scheme == "ws" else server.http_url for server in (a, b, c)]
        async with AcpClient(urls[0], retry=None) as client:
            handle = await client.new_session(str(tmp_path))
            location = await locate(handle.session_id, urls, timeout=10)
            assert [answer.probe for answer in location.answers] == [
                Probe.ACTIVE,
                Probe.INACTIVE,
                Probe.UNKNOWN,
            ]
            assert [answer.agent.name for answer in location.answers if answer.agent] == [
                "agent-a",
                "agent-b",
                "acp-reference-agent",
            ]
            assert not agents[1].sessions[handle.session_id].in_memory  # b was only asked
        await a.aclose()  # the instance holding it dies
        location = await locate(handle.session_id, urls, timeout=10)
        assert location.unreachable == (location.answers[0].endpoint,)
        assert location.route(home=urls[0]).endpoint == location.answers[1].endpoint
        assert location.route(home=urls[0]).kind is RouteKind.REPLAY


# -- endpoints, placement, the pool ------------------------------------------------------------------------


def test_endpoint_values() -> None:
    connector = MemoryConnector(ReferenceAgent(), name="x")
    assert Endpoint.of("ws://h/acp") == Endpoint("ws://h/acp", "ws://h/acp")
    from_connector = Endpoint.of(connector)
    assert from_connector.url == "memory://x" and from_connector.open() is connector
    assert Endpoint("ws://h/acp", "h1") != Endpoint("ws://h/acp", "h2")
    assert Endpoint("memory://x", connector=connector) == Endpoint("memory://x")  # the connector is not identity
    assert str(Endpoint("ws://h/acp", "h1")) == "h1"
    with pytest.raises(ConfigurationError):
        Endpoint("ftp://h").open()


def test_placement_policies() -> None:
    e = [Endpoint(f"ws://h{i}/acp", f"h{i}") for i in range(3)]
    rr = RoundRobin()
    assert [rr(e, {}).name for _ in range(4)] == ["h0", "h1", "h2", "h0"]
    fewest = FewestSessions()
    assert fewest(e, {e[0]: 2, e[1]: 1, e[2]: 1}) == e[1]
    assert isinstance(placement_policy("round_robin"), RoundRobin)
    assert isinstance(placement_policy("fewest_sessions"), FewestSessions)
    with pytest.raises(ConfigurationError):
        placement_policy("random")  # type: ignore[arg-type]


def _location(session_id: str, endpoints: Sequence[Endpoint], *presences: Probe) -> Location:
    answers = tuple(
        InstanceAnswer(endpoint, presence, elapsed=float(index))
        for index, (endpoint, presence) in enumerate(zip(endpoints, presences, strict=True))
    )
    return Location(session_id, answers)


def test_the_route_uses_the_home() -> None:
    a, b, c = endpoints = Endpoint.many(["ws://a/acp", "ws://b/acp", "ws://c/acp"])
    N, U, X, A = Probe.INACTIVE, Probe.UNKNOWN, Probe.UNREACHABLE, Probe.ACTIVE
    assert _location("s", endpoints, N, N, N).route(home=c).endpoint == c  # home is back
    assert _location("s", endpoints, N, N, X).route(home=c).endpoint == a  # home gone: first inactive
    assert _location("s", endpoints, N, A, N).route(home=c).endpoint == b  # active beats home
    new = _location("s", endpoints, U, X, U).route(home=c)
    assert (new.kind, new.endpoint, new.candidates) == (RouteKind.NEW_SESSION, None, (a, c))
    assert _location("s", endpoints, X, X, X).route(home=c).kind is RouteKind.UNAVAILABLE
