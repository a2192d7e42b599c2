"""RetryPolicy refuses bad knobs at construction, naming the option (never a hang after a drop)."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest

from acp_client.exceptions import ConfigurationError
from acp_client.retry import RetryPolicy


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"initial_delay": 10, "max_delay": 1}, "initial_delay"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"multiplier": 0}, "multiplier"),
        ({"initial_delay": math.nan}, "initial_delay"),
        ({"max_delay": math.inf}, "max_delay"),
        ({"max_elapsed": math.inf}, "max_elapsed"),
        ({"suspend_after": math.nan}, "suspend_after"),
        ({"initial_delay": -1}, "initial_delay"),
        ({"first_attempt_delay": -0.5}, "first_attempt_delay"),
        ({"reset_after": -1}, "reset_after"),
        ({"suspended_delay": math.inf}, "suspended_delay"),
        ({"max_retry_after": -1}, "max_retry_after"),
        ({"jitter": "yes"}, "jitter"),
        ({"jitter": 1}, "jitter"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -3}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": "3"}, "max_attempts"),
        ({"initial_delay": "1"}, "initial_delay"),
        ({"max_delay": None}, "max_delay"),
        ({"multiplier": True}, "multiplier"),
        ({"max_elapsed": "60"}, "max_elapsed"),
    ],
)
def test_bad_knobs_are_refused_naming_the_option(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        RetryPolicy(**options)


def test_evolve_is_validated_too() -> None:
    with pytest.raises(ConfigurationError, match="multiplier"):
        attrs.evolve(RetryPolicy(), multiplier=0.1)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"initial_delay": 0, "max_delay": 0},
        {"initial_delay": 1, "max_delay": 1, "multiplier": 1},
        {"max_attempts": 1, "max_elapsed": 0.5},
        {"suspend_after": None, "max_elapsed": None, "max_attempts": None},
        {"jitter": False, "first_attempt_delay": 2},
    ],
)
def test_sensible_knobs_are_accepted(options: dict[str, Any]) -> None:
    RetryPolicy(**options)
