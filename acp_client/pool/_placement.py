"""Where a new session goes among the instances of a pool: the placement policies."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal, TypeAlias

from ..exceptions import ConfigurationError
from ..location import Endpoint

#: ``policy(candidates, sessions) -> endpoint``: picks where a new session goes. ``candidates`` are
#: the reachable endpoints (never empty); ``sessions`` counts the sessions homed on each endpoint.
#: It must return one of ``candidates``.
PlacementFunction: TypeAlias = Callable[[Sequence[Endpoint], Mapping[Endpoint, int]], Endpoint]


class RoundRobin:
    """Each new session goes to the next candidate in turn (the default policy)."""

    def __init__(self) -> None:
        self._turn = 0

    def __repr__(self) -> str:
        return "RoundRobin()"

    def __call__(self, candidates: Sequence[Endpoint], sessions: Mapping[Endpoint, int]) -> Endpoint:
        chosen = candidates[self._turn % len(candidates)]
        self._turn += 1
        return chosen


class FewestSessions:
    """Each new session goes to the candidate with the fewest sessions (ties: the first)."""

    def __repr__(self) -> str:
        return "FewestSessions()"

    def __call__(self, candidates: Sequence[Endpoint], sessions: Mapping[Endpoint, int]) -> Endpoint:
        return min(candidates, key=lambda endpoint: sessions.get(endpoint, 0))


_POLICIES: dict[str, Callable[[], PlacementFunction]] = {"round_robin": RoundRobin, "fewest_sessions": FewestSessions}


def placement_policy(policy: Literal["round_robin", "fewest_sessions"] | PlacementFunction) -> PlacementFunction:
    """The policy for a name (``"round_robin"``, ``"fewest_sessions"``) or a function, as is.

    Raises:
        ConfigurationError: An unknown name.
    """
    if callable(policy):
        return policy
    if isinstance(policy, str) and policy in _POLICIES:
        return _POLICIES[policy]()
    raise ConfigurationError(f"placement must be 'round_robin', 'fewest_sessions' or a function, not {policy!r}")
