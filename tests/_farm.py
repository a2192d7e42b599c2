"""The one farm of agent instances the pool tests use: reference agents over memory connectors
that watch what the client sends, a recorder of what the client reports, and the faults a property
script applies."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from hypothesis import strategies as st

from acp_client import AcpClient, Callbacks, ConnectionState, RecoveryContext, RecoveryOutcome, State
from acp_client._codec._jsonrpc import Message
from acp_client.location import Endpoint
from acp_client.pool import Pool
from acp_client.state import LEGAL_TRANSITIONS
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent, SessionStore
from acp_client.transports.base import Transport
from tests._harness import FAST_RETRY

NAMES = ("a", "b", "c")
ATTACH = ("session/load", "session/resume")


class Watched(MemoryConnector):
    """Records what the client sends on every link, and checks the pool's rule at each attach:
    ``session/load`` / ``session/resume`` never go to an instance while another reachable one has
    the session in memory."""

    def __init__(self, agent: ReferenceAgent, name: str, farm: Farm) -> None:
        super().__init__(agent, name=name)
        self.farm = farm
        self.sent: list[dict[str, Any]] = []
        self.flaky = False  # every link drops when session/status is sent on it

    async def connect(self) -> Transport:
        transport = await super().connect()
        send = transport.send

        async def watched(message: Message) -> None:
            if isinstance(message, dict) and "method" in message:
                if self.flaky and message["method"] == "session/status":
                    self.drop()
                    return
                self.sent.append(message)
                if message["method"] in ATTACH:
                    self.farm.check_attach(self._name, message["params"]["sessionId"])
            await send(message)

        transport.send = watched  # type: ignore[method-assign]
        return transport


class Farm:
    """Three instances, ``a``, ``b`` and ``c``, each with its own store unless named in ``shared``
    (those share one store), on one fake clock.

    The ``farm`` fixture (``tests/conftest.py``) makes one per test; ``@pytest.mark.farm(shared=...)``
    passes its arguments. A Hypothesis test, which needs a fresh farm per example, makes its own.

    Args:
        clock: The fake clock every agent runs on (a new one by default).
        shared: The instances that share one store.
    """

    def __init__(self, clock: FakeClock | None = None, *, shared: Sequence[str] = ()) -> None:
        self.clock = clock if clock is not None else FakeClock()
        common = SessionStore()
        self.agents = {
            name: ReferenceAgent(
                name=f"agent-{name}", store=common if name in shared else SessionStore(), clock=self.clock
            )
            for name in NAMES
        }
        self.connectors = {name: Watched(agent, name, self) for name, agent in self.agents.items()}
        self.endpoints = [Endpoint(f"memory://{n}", n, connector=self.connectors[n]) for n in NAMES]
        self.violations: list[str] = []
        self.attaches: list[tuple[str, str]] = []
        self.watching = True

    def check_attach(self, name: str, session_id: str) -> None:
        if not self.watching:  # the test's own setup (another client)
            return
        self.attaches.append((name, session_id))
        for other, agent in self.agents.items():
            reachable = not self.connectors[other].refusing
            snapshot = agent.sessions.get(session_id)
            if other != name and reachable and snapshot is not None and snapshot.in_memory:
                self.violations.append(f"attach {session_id} on {name} while in memory on {other}")

    def share(self, session_id: str, *names: str) -> None:
        record = next(a.store.load(session_id) for a in self.agents.values() if a.store.load(session_id))
        for name in names:
            self.agents[name].store.save(record)

    def attaches_of(self, session_id: str) -> list[str]:
        return [name for name, sid in self.attaches if sid == session_id]

    async def aclose(self) -> None:
        for connector in self.connectors.values():
            await connector.aclose()


class Recorder:
    def __init__(self) -> None:
        self.outcomes: list[RecoveryOutcome] = []
        self.contexts: list[RecoveryContext] = []
        self.states: list[ConnectionState] = []

    def check_states(self) -> None:
        """The aggregate state only ever moves along legal transitions, never repeating."""
        for old, new in itertools.pairwise(self.states):
            assert new.state in LEGAL_TRANSITIONS[old.state] and new != old, (old, new)

    def callbacks(self) -> Callbacks:
        def decide(context: RecoveryContext) -> None:
            self.contexts.append(context)

        record = self.outcomes.append
        return Callbacks(
            on_state_change=self.states.append,
            on_resume=record,
            on_replay=record,
            on_new_session=record,
            on_recovery_failed=record,
            decide_recovery=decide,
        )


def pooled(
    farm: Farm, recorder: Recorder, *, placement: Any = "round_robin", failover_delay: float = 5.0, **options: Any
) -> AcpClient:
    pool = Pool(farm.endpoints, placement=placement, failover_delay=failover_delay)
    return AcpClient(pool, retry=FAST_RETRY, clock=farm.clock, callbacks=recorder.callbacks(), **options)


@contextlib.asynccontextmanager
async def driven(clock: FakeClock, client: AcpClient, *, limit: float = 600.0) -> AsyncIterator[AcpClient]:
    """``async with client`` whose connect and close run on the fake clock (a restore waits on it, for a late
    replay for instance): a wait nothing would end fails with ``TimeoutError`` instead of hanging the test."""
    try:
        await clock.run(client.connect(), limit=limit)
        yield client
    finally:
        await clock.run(client.aclose(), limit=limit)


FAULTS = st.sampled_from(["drop", "refuse", "accept", "restart", "evict", "share", "wait", "prompt"])


async def apply_fault(farm: Farm, client: AcpClient | None, handles: Sequence[Any], fault: str, name: str) -> None:
    """One step of a property's script on instance ``name`` (``client``: None while no client runs)."""
    connector, agent = farm.connectors[name], farm.agents[name]
    if fault == "drop":
        connector.drop()
    elif fault == "refuse":
        connector.refuse()
        connector.drop()
    elif fault == "accept":
        connector.accept()
    elif fault == "restart":
        agent.lose_memory()
    elif fault == "evict":
        for handle in handles:
            agent.evict(handle.session_id)
    elif fault == "share":
        for handle in handles:
            if any(a.store.load(handle.session_id) for a in farm.agents.values()):
                farm.share(handle.session_id, name)
    elif fault == "prompt" and client is not None:
        live = [h for h in handles if not h.abandoned and h.endpoint == name]
        if live and client.state.state is State.CONNECTED:
            with contextlib.suppress(Exception):  # a fault may cut the turn: the rule is what counts
                await farm.clock.run(live[0].prompt("hi"), limit=5.0)


def check_one_copy_each(farm: Farm, session_ids: Iterable[str]) -> None:
    """No session is in memory on two instances (copies left behind were closed once reachable)."""
    for session_id in session_ids:
        holders = [n for n, a in farm.agents.items() if (s := a.sessions.get(session_id)) and s.in_memory]
        assert len(holders) <= 1, (session_id, holders)
