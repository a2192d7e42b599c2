"""A client wired to the in-process reference agent over memory transports, on a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from acp_client import (
    AcpClient,
    Callbacks,
    ConnectionState,
    RecoveryOutcome,
    RetryPolicy,
    State,
    TurnInterrupted,
    UpdateEvent,
)
from acp_client.state import LEGAL_TRANSITIONS
from acp_client.testing import FakeClock, MemoryConnector, RecordingConnector, ReferenceAgent, inside

#: Backoff on the fake clock: 1, 2, 4, 8, 8, ... seconds of fake time, never suspended.
FAST_RETRY = RetryPolicy(initial_delay=1.0, max_delay=8.0, jitter=False, suspend_after=None)

#: The protocol versions a test runs under.
VERSIONS = [1, 2]


class HarnessConnector(RecordingConnector):
    """A :class:`~acp_client.testing.RecordingConnector` over a memory connector to the agent, with
    that connector's fault controls at hand (``drop``, ``refuse``, ``accept``, ...)."""

    def __init__(self, agent: ReferenceAgent) -> None:
        self.memory = MemoryConnector(agent)
        super().__init__(self.memory)

    def drop(self, reason: str = "connection dropped (simulated)") -> int:
        return self.memory.drop(reason)

    def refuse(self, count: int | None = None) -> None:
        self.memory.refuse(count)

    def accept(self) -> None:
        self.memory.accept()

    @property
    def live_links(self) -> int:
        return self.memory.live_links

    @property
    def connects(self) -> int:
        return self.memory.connects

    @property
    def refused(self) -> int:
        return self.memory.refused

    async def aclose(self) -> None:
        await self.memory.aclose()


class Harness:
    """One client + agent + clock, recording everything the client reports."""

    def __init__(
        self,
        *,
        protocol_version: int = 1,
        retry: RetryPolicy | None = FAST_RETRY,
        client_kwargs: dict[str, Any] | None = None,
        **agent_kwargs: Any,
    ) -> None:
        self.clock = FakeClock()
        self.agent = ReferenceAgent(clock=self.clock, **agent_kwargs)
        self.connector = HarnessConnector(self.agent)
        self.states: list[ConnectionState] = []
        self.outcomes: list[RecoveryOutcome] = []
        self.updates: list[UpdateEvent] = []
        self.interrupted: list[TurnInterrupted] = []
        self.log: list[str] = []
        self._connected = asyncio.Event()
        callbacks = Callbacks(
            on_state_change=self._state,
            on_update=self.updates.append,
            on_resume=self._outcome,
            on_replay=self._outcome,
            on_new_session=self._outcome,
            on_recovery_failed=self._outcome,
            on_turn_interrupted=self.interrupted.append,
        )
        kwargs: dict[str, Any] = {"protocol_version": protocol_version, "retry": retry, "clock": self.clock}
        kwargs.update(client_kwargs or {})
        # A test's own callbacks are added to the recording ones.
        kwargs["callbacks"] = attrs.evolve(
            callbacks,
            **attrs.asdict(kwargs.get("callbacks") or Callbacks(), filter=lambda a, v: v is not None, recurse=False),
        )
        self.client = AcpClient(self.connector, **kwargs)

    def _state(self, state: ConnectionState) -> None:
        self.states.append(state)
        self.log.append(f"state:{state.state.value}")
        if state.state is State.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()

    def _outcome(self, outcome: RecoveryOutcome) -> None:
        self.outcomes.append(outcome)
        self.log.append(f"outcome:{outcome.path.value}")

    async def __aenter__(self) -> Harness:
        await self.client.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        await self.connector.aclose()

    async def until_connected(self, limit: float = 600.0) -> None:
        """Run the fake clock until the client is connected again."""
        await self.clock.settle()
        await self.clock.run(self._connected.wait(), limit=limit)

    async def drop_and_recover(self) -> RecoveryOutcome:
        before = len(self.outcomes)
        self.connector.drop()
        await self.clock.settle()
        await self.until_connected()
        assert len(self.outcomes) == before + 1, self.outcomes
        return self.outcomes[-1]

    def set_callbacks(self, **changes: Any) -> None:
        """Replace some of the client's callbacks from now on."""
        inside(self.client).engine.callbacks = attrs.evolve(inside(self.client).engine.callbacks, **changes)


def assert_legal(h: Harness) -> None:
    """Every state change the harness saw was a legal transition, and none repeated."""
    previous = State.CONNECTING
    last = None
    for state in h.states:
        assert state != last, f"state repeated: {state}"
        if last is not None:
            assert state.state in LEGAL_TRANSITIONS[previous], f"{previous} -> {state}"
        previous, last = state.state, state
