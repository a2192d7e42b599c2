"""The fan-out decision: each instance's probe answer + the session's home → where it goes.

Pure (no asyncio, no I/O), after DESIGN.md §5. Given what every instance of one agent said to
``session/status`` for one session:

=========================================  ===========  =============================================
answers                                    route        the one instance that gets the call
=========================================  ===========  =============================================
``active`` somewhere                       resume       the home instance if active, else the first
                                                        active one
else ``inactive`` somewhere                replay       the home instance if inactive (it is back),
                                                        else the first inactive one
else ``unknown`` (-32002) on every         new session  none yet: the placement policy picks among
reachable instance                                      the reachable instances (``candidates``)
every instance unreachable                 unavailable  none: try again later
=========================================  ===========  =============================================

"First" means first in ``order`` (default: the instances' own order; a caller may pass the order
in which the answers arrived). Whatever the answers, a route names at most one instance for
``session/load`` / ``session/resume``: a session is never loaded on two instances by one decision,
and never loaded anywhere while another instance reports it active.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

__all__ = ["Presence", "Route", "RouteKind", "route"]


class Presence(str, enum.Enum):
    """One instance's answer about one session.

    ``ACTIVE``: in memory there (wire ``active`` / ``open``). ``INACTIVE``: known and resumable,
    not in memory (``inactive``, ``saved`` or an unrecognized value). ``UNKNOWN``: the instance
    answered -32002. ``UNREACHABLE``: no usable answer (could not connect or initialize in time,
    the probe failed or timed out, or the instance does not offer ``session/status``).
    """

    ACTIVE = "active"
    INACTIVE = "inactive"
    UNKNOWN = "unknown"
    UNREACHABLE = "unreachable"


class RouteKind(str, enum.Enum):
    """What to do with the session."""

    RESUME = "resume"
    REPLAY = "replay"
    NEW_SESSION = "new_session"
    UNAVAILABLE = "unavailable"


@attrs.frozen
class Route:
    """The decision for one session.

    Attributes:
        kind: Resume, replay, new session, or unavailable (nothing reachable).
        instance: For resume and replay: the index of the one instance to call. ``None``
            otherwise.
        candidates: For a new session: the indices of the reachable instances the placement
            policy may choose from (in ``order``). Empty otherwise.
        reason: The decision in words (for logs and outcome notes).
    """

    kind: RouteKind
    instance: int | None = None
    candidates: tuple[int, ...] = ()
    reason: str = ""


def _pick(indices: list[int], home: int | None) -> int:
    return home if home is not None and home in indices else indices[0]


def route(answers: Sequence[Presence], home: int | None = None, order: Sequence[int] | None = None) -> Route:
    """Decide where one session goes.

    Args:
        answers: Each instance's answer, by instance index.
        home: The index of the instance the session lived on, if known.
        order: The preference order of the instance indices (default ``0, 1, 2...``); "first"
            in the table above means first in this order. Indices missing from ``order`` come
            after it, in their own order.

    Raises:
        ValueError: ``home`` or an index in ``order`` is out of range.
    """
    count = len(answers)
    if home is not None and not 0 <= home < count:
        raise ValueError(f"home {home} is not an instance index (0..{count - 1})")
    preferred = list(dict.fromkeys(order if order is not None else ()))
    if any(not 0 <= index < count for index in preferred):
        raise ValueError(f"order {list(order or ())} names an index outside 0..{count - 1}")
    ranked = preferred + [index for index in range(count) if index not in preferred]

    def having(presence: Presence) -> list[int]:
        return [index for index in ranked if answers[index] is presence]

    active = having(Presence.ACTIVE)
    if active:
        chosen = _pick(active, home)
        where = "home" if chosen == home else f"instance {chosen}"
        extra = f" (also reported active on {sorted(set(active) - {chosen})})" if len(active) > 1 else ""
        return Route(RouteKind.RESUME, chosen, reason=f"active on {where}: resume there{extra}")
    inactive = having(Presence.INACTIVE)
    if inactive:
        chosen = _pick(inactive, home)
        where = "home" if chosen == home else f"instance {chosen}"
        return Route(RouteKind.REPLAY, chosen, reason=f"inactive on {where}: replay there only")
    reachable = having(Presence.UNKNOWN)
    if reachable:
        unreachable = count - len(reachable)
        note = f" ({unreachable} unreachable)" if unreachable else ""
        return Route(
            RouteKind.NEW_SESSION,
            candidates=tuple(reachable),
            reason=f"unknown on every reachable instance{note}: new session",
        )
    return Route(RouteKind.UNAVAILABLE, reason="no instance reachable")
