"""Helpers for the end-to-end recovery tests: a callback recorder and a recording agent (the waits
and the retry policy are the shared ones of ``tests/_support.py``; the wire recorder is
:class:`acp_client.testing.RecordingConnector`).

Everything here waits by polling a condition against a deadline (never a fixed sleep), and fails
with a message that says what was awaited and what was seen instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from acp_client import Callbacks, ConnectionState, RecoveryOutcome, State, TurnInterrupted, UpdateEvent
from acp_client.testing.reference_agent import AgentConnection, ReferenceAgent, SendCallable
from tests._support import DEADLINE, eventually

__all__ = [
    "Journal",
    "agent_text",
    "is_idle",
    "Recorder",
    "RecordingAgent",
    "text_of",
]


def text_of(blocks: Any) -> str:
    """The text of a sequence of content blocks (``TextContent`` values or wire dicts)."""
    parts: list[str] = []
    for block in blocks:
        text = block.get("text") if isinstance(block, dict) else getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


def agent_text(events: Iterable[UpdateEvent]) -> str:
    """The text of the ``agent_message_chunk`` updates among ``events``, joined."""
    return "".join(
        text_of([getattr(event.update, "content", None)])
        for event in events
        if event.update.kind == "agent_message_chunk"
    )


def is_idle(event: UpdateEvent) -> bool:
    """Whether ``event`` is a v2 ``state_update`` to ``idle``."""
    return event.update.kind == "state_update" and getattr(event.update, "state", None) == "idle"


class Journal:
    """One ordered log shared by the app callbacks and the agent (both run on the test's loop)."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def add(self, entry: str) -> None:
        self.entries.append(entry)

    def index(self, entry: str) -> int:
        return self.entries.index(entry)


class Recorder:
    """Records what the client tells the app: states, recovery outcomes, updates, interruptions.

    ``Recorder().callbacks()`` gives the :class:`~acp_client.Callbacks` of :class:`~acp_client.AcpClient`.
    """

    def __init__(self, journal: Journal | None = None) -> None:
        self.journal = journal if journal is not None else Journal()
        self.states: list[ConnectionState] = []
        self.outcomes: list[RecoveryOutcome] = []
        self.by_callback: dict[str, list[RecoveryOutcome]] = {
            "resume": [],
            "replay": [],
            "new_session": [],
            "recovery_failed": [],
        }
        self.events: list[UpdateEvent] = []
        self.interrupted: list[TurnInterrupted] = []
        self.state_times: list[tuple[float, ConnectionState]] = []

    def callbacks(self, **extra: Any) -> Callbacks:
        def outcome(kind: str) -> Callable[[RecoveryOutcome], None]:
            def record(value: RecoveryOutcome) -> None:
                self.journal.add(f"on_{kind}")
                self.by_callback[kind].append(value)
                self.outcomes.append(value)

            return record

        def state(value: ConnectionState) -> None:
            self.states.append(value)
            self.state_times.append((time.monotonic(), value))

        def interrupted(value: TurnInterrupted) -> None:
            self.journal.add("on_turn_interrupted")
            self.interrupted.append(value)

        return Callbacks(
            on_resume=outcome("resume"),
            on_replay=outcome("replay"),
            on_new_session=outcome("new_session"),
            on_recovery_failed=outcome("recovery_failed"),
            on_state_change=state,
            on_update=self.events.append,
            on_turn_interrupted=interrupted,
            **extra,
        )

    async def outcome(self, number: int = 1, *, timeout: float = DEADLINE) -> RecoveryOutcome:
        """The ``number``-th recovery outcome (1-based), waiting for it, and the client back to
        ``connected`` afterwards."""

        def done() -> bool:
            if self.states and self.states[-1].is_terminal:
                raise AssertionError(f"the client ended {self.states[-1]} ({self.states[-1].cause})")
            return len(self.outcomes) >= number and bool(self.states) and self.states[-1].state is State.CONNECTED

        await eventually(
            done,
            timeout=timeout,
            what=lambda: f"recovery outcome #{number} (states so far: {[str(s) for s in self.states]})",
        )
        return self.outcomes[number - 1]

    def kinds(self) -> list[State]:
        return [state.state for state in self.states]

    def assert_no_repeated_states(self) -> None:
        for before, after in zip(self.states, self.states[1:], strict=False):
            assert before != after, f"state {after} published twice in a row: {[str(s) for s in self.states]}"


class RecordingAgent(ReferenceAgent):
    """The reference agent, recording every inbound request and notification per connection.

    ``received`` holds ``(connection id, method, params)`` in arrival order; a :class:`Journal`
    (if set) gets ``"agent <- METHOD"`` entries too.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.received: list[tuple[str, str, Any]] = []
        self.journal: Journal | None = None

    def connect(self, send: SendCallable) -> AgentConnection:
        connection = super().connect(send)
        original = connection.handle

        async def handle(message: Any) -> None:
            if isinstance(message, dict) and isinstance(message.get("method"), str):
                self.received.append((connection.id, message["method"], message.get("params")))
                if self.journal is not None:
                    self.journal.add(f"agent <- {message['method']}")
            await original(message)

        connection.handle = handle  # type: ignore[method-assign]
        return connection

    def methods(self, connection_id: str | None = None) -> list[str]:
        """The methods received (on one connection, or on all), in order."""
        return [method for cid, method, _ in self.received if connection_id is None or cid == connection_id]

    def connection_ids(self) -> list[str]:
        """The connections that sent anything, in order of their first message."""
        seen: dict[str, None] = {}
        for cid, _, _ in self.received:
            seen.setdefault(cid, None)
        return list(seen)

    def count(self, method: str) -> int:
        return sum(1 for _, name, _ in self.received if name == method)

    def params_of(self, method: str) -> list[Any]:
        return [params for _, name, params in self.received if name == method]
