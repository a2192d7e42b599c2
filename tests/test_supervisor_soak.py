"""A longer randomized soak of the supervisor state machine. The default budget is small so CI still
runs it; set ACP_SOAK_SECONDS (e.g. 600) for a real soak: ``python -m pytest -m soak``."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests._machine import SupervisorMachine

SOAK_SECONDS = float(os.environ.get("ACP_SOAK_SECONDS", "5"))


@pytest.mark.soak
def test_supervisor_soak() -> None:
    deadline = time.monotonic() + SOAK_SECONDS
    rounds = 0
    while rounds == 0 or time.monotonic() < deadline:
        run_state_machine_as_test(
            SupervisorMachine,
            settings=settings(
                max_examples=25,
                stateful_step_count=60,
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
        rounds += 1
