"""The Hypothesis state machine (``tests/test_supervisor_machine.py`` runs it, ``tests/test_supervisor_soak.py``
soaks it) driving the supervisor over the in-memory transport with a fake
clock: drops, refusals, agent restarts and evictions, and app requests at random.

Invariants: every request resolves exactly once (never hangs) with a result or a typed error; no
transcript holds a message twice; only legal state transitions, never the same state twice in a
row; recovery callbacks run before any request queued during the outage is sent.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from acp_client import AcpError, QueueOptions, RetryPolicy, State
from acp_client.state import LEGAL_TRANSITIONS
from tests._harness import Harness

MAX_EXAMPLES = int(os.environ.get("ACP_MACHINE_EXAMPLES", "100"))


class SupervisorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.h: Harness | None = None
        self.calls: list[tuple[str, asyncio.Task[Any]]] = []
        self.resolved: dict[int, int] = {}
        self.counter = 0

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @property
    def harness(self) -> Harness:
        assert self.h is not None
        return self.h

    @initialize(version=st.sampled_from([1, 2]), status=st.booleans(), resume=st.booleans())
    def start(self, version: int, status: bool, resume: bool) -> None:
        policy = RetryPolicy(initial_delay=1.0, max_delay=4.0, jitter=False, suspend_after=None)
        self.h = Harness(
            protocol_version=version,
            retry=policy,
            advertise_status=status,
            advertise_resume=resume,
            chunk_delay=0.5,
            client_kwargs={"queue": QueueOptions(max_size=1000, max_age=1e6)},
        )
        self.h.connector.on_send = self._sent
        self.run(self.h.__aenter__())
        self.run(self.h.client.new_session("/work"))

    def _sent(self, message: Any) -> None:
        if isinstance(message, dict) and "method" in message:
            self.harness.log.append(f"send:{message['method']}")

    def _launch(self, label: str, coro: Any) -> None:
        index = len(self.calls)
        self.resolved[index] = 0

        async def tracked() -> Any:
            try:
                return await coro
            finally:
                self.resolved[index] += 1

        self.calls.append((label, self.loop.create_task(tracked())))

    def _handles(self) -> list[Any]:
        return [h for h in self.harness.client.sessions if not h.abandoned]

    # -- faults -----------------------------------------------------------------------------------

    @rule()
    def drop(self) -> None:
        self.harness.connector.drop()

    @rule(count=st.integers(1, 3))
    def refuse(self, count: int) -> None:
        self.harness.connector.refuse(count)

    @rule()
    def restart_agent(self) -> None:
        # A restarted agent process forgets its memory and loses its connections.
        self.harness.agent.lose_memory()
        self.harness.connector.drop("agent restarted")

    @rule(data=st.data())
    def evict(self, data: st.DataObject) -> None:
        handles = self._handles()
        if handles:
            self.harness.agent.evict(data.draw(st.sampled_from(handles)).session_id)

    @rule(seconds=st.sampled_from([0.0, 0.3, 1.0, 2.5, 10.0]))
    def time_passes(self, seconds: float) -> None:
        self.run(self.harness.clock.advance(seconds))

    # -- app requests -------------------------------------------------------------------------------

    @rule()
    def list_sessions(self) -> None:
        self._launch("list", self.harness.client.list_sessions())

    @precondition(lambda self: self.h is not None and self.h.client.agent_capabilities.supports("session/status"))
    @rule(data=st.data())
    def status(self, data: st.DataObject) -> None:
        handles = self._handles()
        if handles:
            self._launch("status", data.draw(st.sampled_from(handles)).session_status())

    @rule(data=st.data())
    def prompt(self, data: st.DataObject) -> None:
        handles = [h for h in self._handles() if not h.turn_running]
        if handles:
            self.counter += 1
            self._launch("prompt", data.draw(st.sampled_from(handles)).prompt(f"message number {self.counter}"))

    @rule()
    def new_session(self) -> None:
        if len(self._handles()) < 4:
            self._launch("new", self.harness.client.new_session("/work"))

    # -- invariants ---------------------------------------------------------------------------------

    @invariant()
    def legal_transitions_never_repeating(self) -> None:
        if self.h is None:
            return
        previous, last = State.CONNECTING, None
        for state in self.h.states:
            assert state != last, f"state repeated: {state}"
            if last is not None:
                assert state.state in LEGAL_TRANSITIONS[previous], f"{previous} -> {state}"
            previous, last = state.state, state

    @invariant()
    def resolved_at_most_once(self) -> None:
        assert all(count <= 1 for count in self.resolved.values())

    @invariant()
    def no_duplicate_transcript_messages(self) -> None:
        if self.h is None:
            return
        # Prompts are unique ("message number N"), so are their complete echoes; a partial echo
        # of an interrupted turn may look like another's, so only complete ones are compared.
        for handle in self.h.client.sessions:
            keys = [
                (m.role, m.message_id or m.text)
                for m in handle.transcript.messages
                if m.role == "user" or re.fullmatch(r"echo: message number \d+", m.text)
            ]
            assert len(keys) == len(set(keys)), handle.transcript.text()

    @invariant()
    def callbacks_before_queued_requests(self) -> None:
        if self.h is None:
            return
        log = self.h.log
        inside = False
        for entry in log:
            if entry == "state:recovering":
                inside = True
            elif entry.startswith("state:"):
                inside = False
            elif inside and entry in ("send:session/prompt", "send:session/list"):
                raise AssertionError(f"an app request was sent while recovering: {log}")

    def teardown(self) -> None:
        if self.h is None:
            self.loop.close()
            return
        h = self.h
        try:
            h.connector.accept()
            h.agent.stall(False)
            self.run(h.clock.advance(120.0))
            for label, task in self.calls:
                assert task.done(), f"{label} never resolved"
                if not task.cancelled() and task.exception() is not None:
                    assert isinstance(task.exception(), AcpError), f"{label}: {task.exception()!r}"
            assert all(count == 1 for count in self.resolved.values())
            assert h.client.state.state is State.CONNECTED, h.client.state
        finally:
            self.run(h.__aexit__(None, None, None))
            self.loop.close()
