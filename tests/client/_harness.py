"""A client wired to the in-process reference agent over memory transports, on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
from acp_client._jsonrpc import Message
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent
from acp_client.transports.base import Transport, TransportInfo
from acp_client.transports.memory import MemoryTransport

FAST_RETRY = RetryPolicy(initial_delay=1.0, max_delay=8.0, jitter=False, suspend_after=None)


class RewritingTransport:
    """Wraps the client end of a link; lets a test rewrite what the agent sends."""

    def __init__(
        self,
        inner: MemoryTransport,
        rewrite: Callable[[Message], Message | None],
        on_send: Callable[[Message], None] | None = None,
    ) -> None:
        self.inner = inner
        self._rewrite = rewrite
        self._on_send = on_send

    @property
    def info(self) -> TransportInfo:
        return self.inner.info

    @property
    def sent(self) -> list[Message]:
        return self.inner.sent

    async def send(self, message: Message) -> None:
        await self.inner.send(message)
        if self._on_send is not None:
            self._on_send(message)

    async def receive(self) -> Message:
        while True:
            message = await self.inner.receive()
            rewritten = self._rewrite(message)
            if rewritten is not None:
                return rewritten

    async def aclose(self) -> None:
        await self.inner.aclose()


class RecordingConnector(MemoryConnector):
    """Records every link (so tests can see what the client sent) and can rewrite agent messages."""

    def __init__(self, agent: ReferenceAgent) -> None:
        super().__init__(agent)
        self.transports: list[MemoryTransport] = []
        self.rewrite: Callable[[Message], Message | None] | None = None
        self.on_send: Callable[[Message], None] | None = None

    async def connect(self) -> Transport:
        transport = await super().connect()
        assert isinstance(transport, MemoryTransport)
        self.transports.append(transport)
        if self.rewrite is not None or self.on_send is not None:
            return RewritingTransport(transport, self.rewrite or (lambda m: m), self.on_send)
        return transport

    def sent(self) -> list[dict[str, Any]]:
        return [m for t in self.transports for m in t.sent if isinstance(m, dict)]

    def sent_methods(self) -> list[str]:
        return [m["method"] for m in self.sent() if "method" in m]


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
        self.connector = RecordingConnector(self.agent)
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
        self.client._engine.callbacks = attrs.evolve(self.client._engine.callbacks, **changes)
