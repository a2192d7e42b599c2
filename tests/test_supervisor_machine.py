"""The supervisor state machine (``tests/_machine.py``) run as a test: drops, refusals, agent
restarts and evictions, and app requests at random, under its invariants."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests._machine import MAX_EXAMPLES, SupervisorMachine

SupervisorMachine.TestCase.settings = settings(
    max_examples=MAX_EXAMPLES,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSupervisorMachine = SupervisorMachine.TestCase
