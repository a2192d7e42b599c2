"""A client wired to the in-process reference agent over memory transports, on a fake clock.

``Harness(pool=True)`` is the same client facing two instances (``a``, where every session is
placed, and ``b``): the rules the core and the pool must share are tested over both flavours
(``FLAVOURS``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from acp_client import (
    AcpClient,
    AcpError,
    Callbacks,
    ConnectionState,
    RecoveryOutcome,
    RetryPolicy,
    State,
    TurnInterrupted,
    UpdateEvent,
)
from acp_client._codec import _jsonrpc
from acp_client._codec._jsonrpc import Message
from acp_client._rpc._connection import Connection
from acp_client.location import Endpoint
from acp_client.pool import Pool
from acp_client.state import LEGAL_TRANSITIONS
from acp_client.testing import FakeClock, MemoryConnector, RecordingConnector, ReferenceAgent, inside
from acp_client.transports.memory import memory_pair

#: Backoff on the fake clock: 1, 2, 4, 8, 8, ... seconds of fake time, never suspended.
FAST_RETRY = RetryPolicy(initial_delay=1.0, max_delay=8.0, jitter=False, suspend_after=None)

#: The protocol versions a test runs under.
VERSIONS = [1, 2]

#: The two flavours of client a shared rule is tested over: one endpoint, and a pool of two.
FLAVOURS = ["single", "pool"]


def first_candidate(candidates: Any, sessions: Any) -> Any:
    """A placement that puts every new session on the first reachable instance."""
    return candidates[0]


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
    """One client + agent + clock, recording everything the client reports.

    With ``pool``, the client faces two instances, ``a`` (this agent) and ``b`` (``other``);
    ``placement`` says where new sessions go (all on ``a`` by default).
    """

    def __init__(
        self,
        *,
        protocol_version: int = 1,
        retry: RetryPolicy | None = FAST_RETRY,
        client_kwargs: dict[str, Any] | None = None,
        pool: bool = False,
        placement: Any = first_candidate,
        **agent_kwargs: Any,
    ) -> None:
        self.clock = FakeClock()
        self.agent = ReferenceAgent(clock=self.clock, **agent_kwargs)
        self.connector = HarnessConnector(self.agent)
        #: With ``pool``: the second instance (``b``), which gets no session unless ``a`` is down.
        self.other = (
            HarnessConnector(ReferenceAgent(clock=self.clock, name="agent-b", **agent_kwargs)) if pool else None
        )
        self.states: list[ConnectionState] = []
        self.outcomes: list[RecoveryOutcome] = []
        self.updates: list[UpdateEvent] = []
        self.interrupted: list[TurnInterrupted] = []
        self.log: list[str] = []
        self._connected = asyncio.Event()
        callbacks = Callbacks(
            on_state_change=self.record_state,
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
        if self.other is None:
            self.client = AcpClient(self.connector, **kwargs)
        else:
            endpoints = [Endpoint("a", connector=self.connector), Endpoint("b", connector=self.other)]
            # A test of a home's own recovery: no failover.
            pool = Pool(endpoints, placement=placement, failover_delay=3600.0)
            self.client = AcpClient(pool, **kwargs)

    def record_state(self, state: ConnectionState) -> None:
        """What the harness does with each state the client reports (a test's own callback may call it)."""
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
        if self.other is not None:
            await self.other.aclose()

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


class SwallowAnswer:
    """Swallow the answer to the next request of ``method`` and tell when it was sent."""

    def __init__(self, h: Harness, method: str) -> None:
        self.ids: set[Any] = set()
        self.method = method
        self.active = True
        self.seen = asyncio.Event()

        def sent(message: Message) -> None:
            if self.active and isinstance(message, dict) and message.get("method") == method:
                self.ids.add(message["id"])
                self.seen.set()

        def received(message: Message) -> Message | None:
            if self.active and isinstance(message, dict) and message.get("id") in self.ids:
                return None
            return message

        h.connector.on_send, h.connector.rewrite = sent, received


#: What :class:`SettingsAgent` makes the agent offer in a session's answer.
OFFER: dict[str, Any] = {
    "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]},
    "models": {
        "currentModelId": "m1",
        "availableModels": [{"modelId": "m1", "name": "M1"}, {"modelId": "m2", "name": "M2"}],
    },
    "configOptions": [
        {
            "id": "effort",
            "name": "Effort",
            "type": "select",
            "currentValue": "low",
            "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}],
        }
    ],
}
SETTERS = ("session/set_mode", "session/set_model", "session/set_config_option")


class SettingsAgent:
    """Makes the reference agent offer modes / models / config options and accept the setters."""

    def __init__(self, h: Harness) -> None:
        self.offer = dict(OFFER)
        self.methods: dict[Any, str] = {}
        self.swallow: str | None = None
        self.swallowed = asyncio.Event()
        h.connector.on_send, h.connector.rewrite = self._sent, self._received

    def _sent(self, message: Message) -> None:
        if isinstance(message, dict) and "method" in message and "id" in message:
            self.methods[message["id"]] = message["method"]

    def _received(self, message: Message) -> Message | None:
        if not isinstance(message, dict) or "method" in message:
            return message
        method = self.methods.get(message.get("id"))
        if method == self.swallow:
            self.swallowed.set()
            return None
        if method in SETTERS:
            result = {"configOptions": OFFER["configOptions"]} if method.endswith("config_option") else {}
            return {"jsonrpc": "2.0", "id": message["id"], "result": result}
        if method in ("session/new", "session/load", "session/resume") and "result" in message:
            return {**message, "result": {**message["result"], **self.offer}}
        return message


class ConnectionPair:
    """One :class:`~acp_client._rpc._connection.Connection` over a memory pair, the agent's end in the
    test's hands, on a fake clock (the connection's own tests)."""

    def __init__(self, on_request: Any = None, **kwargs: Any) -> None:
        self.clock = FakeClock()
        self.client_side, self.agent = memory_pair()
        self.notifications: list[tuple[str, Any]] = []
        self.errors: list[AcpError] = []
        self.conn = Connection(
            self.client_side,
            on_request=on_request,
            on_notification=lambda m, p: self.notifications.append((m, p)),
            on_protocol_error=self.errors.append,
            clock=self.clock,
            **kwargs,
        )
        self.conn.start()

    async def agent_receive(self) -> Any:
        return await asyncio.wait_for(self.agent.receive(), 5)

    async def answer(self, result: Any) -> None:
        request = await self.agent_receive()
        await self.agent.send(_jsonrpc.result_message(request["id"], result))
