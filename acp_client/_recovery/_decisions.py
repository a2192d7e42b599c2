"""The recovery decisions, in one table: what instances said to ``session/status`` → where the
session goes and the steps to run there.

Pure and table-driven (no asyncio, no I/O), as ``docs/many-instances.md`` draws them. First, **where**: given
each instance's answer (one instance for a single-endpoint client, every instance after a
fan-out), :func:`route` picks the one instance and the path:

=========================================  ===========  =============================================
answers                                    route        the one instance that gets the call
=========================================  ===========  =============================================
``active`` somewhere                       resume       the home instance if active, else the first
                                                        active one
else ``inactive`` somewhere                replay       the home instance if inactive (it is back),
                                                        else the first inactive one
else ``unknown`` (-32002) on every         new session  none yet: the placement policy picks among
reachable instance                                      the reachable instances (``candidates``)
no usable answer anywhere (unreachable,    unavailable  none: a group tries again later; one instance
not probed)                                             falls back (below)
=========================================  ===========  =============================================

"First" means first in ``order`` (default: the instances' own order). A route names at most one
instance: a session is never loaded on two instances by one decision, and never loaded anywhere
while another instance reports it active.

Then, **how**, on that instance (:func:`decide`):

========================  ===========  =====================  =====================================
route                     path         v1 steps               v2 steps
========================  ===========  =====================  =====================================
resume (``active``)       resume       session/resume         session/resume (no replayFrom)
replay (``inactive``,     replay       session/load           session/resume + replayFrom start
  ``saved``, any other)
new session (-32002)      new session  session/new            session/new
========================  ===========  =====================  =====================================

Without a usable answer (no ``session/status``, or the probe failed) the client falls back: resume
if advertised, else load (v1) if advertised, else a new session. A path whose method is not
advertised degrades, and says so: resume → load (a replay) → new; replay (v1) → resume without
history → new. Any step may still fail with -32002 (the probe is only a snapshot): the next step is
then always a new session.

A refusal other than -32002 (-32601 from an agent that advertises ``session/resume`` but does not
serve it, -32602, -32603, a timeout) never goes straight to a new session while a step that keeps
the conversation is left: a refused resume tries ``session/load`` (v1, when advertised), a refused
replay tries a resume without history, and only then a new session (docs/agents-conformance.md).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from typing import Generic, TypeVar

import attrs

from ..state import Probe, RecoveryPath

#: An instance, as the caller names it (an :class:`~acp_client.location.Endpoint`, an index).
E = TypeVar("E")


class RouteKind(str, enum.Enum):
    """What to do with the session."""

    RESUME = "resume"
    REPLAY = "replay"
    NEW_SESSION = "new_session"
    UNAVAILABLE = "unavailable"


@attrs.frozen
class Route(Generic[E]):
    """Where one session goes: the one instance to resume or load it on (``endpoint``), or, for a
    new session, the reachable instances a policy may choose from (``candidates``, in preference
    order); ``reason`` says it in words."""

    kind: RouteKind
    endpoint: E | None = None
    candidates: tuple[E, ...] = ()
    reason: str = ""


def route(answers: Sequence[tuple[E, Probe]], home: E | None = None, order: Sequence[E] | None = None) -> Route[E]:
    """Where one session goes, from each instance's answer (the first table of the module).
    ``home``: where it lived, if known; ``order``: preference (default: the order of ``answers``;
    those missing from it come after, in their own order).

    Raises:
        ValueError: ``home`` or an instance in ``order`` is not one of ``answers``.
    """
    instances = [instance for instance, _ in answers]
    if home is not None and home not in instances:
        raise ValueError(f"home {home!r} is not one of the instances")
    preferred = list(dict.fromkeys(order if order is not None else ()))
    if any(instance not in instances for instance in preferred):
        raise ValueError(f"order {list(order or ())} names an instance that is not one of the answers")
    ranked = preferred + [instance for instance in instances if instance not in preferred]
    said = dict(answers)

    def having(probe: Probe) -> list[E]:
        return [instance for instance in ranked if said[instance] is probe]

    def named(instance: E) -> str:
        return "home" if instance == home else f"instance {instance}"

    active = having(Probe.ACTIVE)
    if active:
        chosen = home if home in active else active[0]
        others = [instance for instance in active if instance != chosen]
        extra = f" (also reported active on {', '.join(map(str, others))})" if others else ""
        return Route(RouteKind.RESUME, chosen, reason=f"active on {named(chosen)}: resume there{extra}")
    inactive = having(Probe.INACTIVE)
    if inactive:
        chosen = home if home in inactive else inactive[0]
        return Route(RouteKind.REPLAY, chosen, reason=f"inactive on {named(chosen)}: replay there only")
    reachable = having(Probe.UNKNOWN)
    if not reachable:
        return Route(RouteKind.UNAVAILABLE, reason="no instance reachable")
    unreachable = len(instances) - len(reachable)
    note = f" ({unreachable} unreachable)" if unreachable else ""
    return Route(
        RouteKind.NEW_SESSION,
        candidates=tuple(reachable),
        reason=f"unknown on every reachable instance{note}: new session",
    )


class Step(str, enum.Enum):
    """One wire call of a recovery."""

    RESUME = "session/resume"
    RESUME_REPLAY = "session/resume+replayFrom"
    LOAD = "session/load"
    NEW = "session/new"


class StepFailure(str, enum.Enum):
    """How a step failed, as far as the decision cares."""

    NOT_FOUND = "not_found"  # the agent does not know the session (-32002, or another spelling of it)
    REFUSED = "refused"  # another JSON-RPC error: try the next option


@attrs.frozen
class Capabilities:
    """The recovery-relevant part of what the agent advertised."""

    status: bool = False
    resume: bool = False
    load: bool = False  # v1 only


@attrs.frozen
class Decision:
    """The path the table picks, the calls to try in order (the first that succeeds decides the
    path taken), and why they differ from the table."""

    path: RecoveryPath
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = ()


def path_of(step: Step) -> RecoveryPath:
    """The path a successful ``step`` amounts to."""
    return {Step.RESUME: RecoveryPath.RESUME, Step.NEW: RecoveryPath.NEW_SESSION}.get(step, RecoveryPath.REPLAY)


#: By (path, v1): the calls that carry out a path, in the order a refusal moves down them, each with
#: the capability it needs (``session/new``, which needs none, always ends the chain).
_CHAINS: dict[tuple[RecoveryPath, bool], tuple[tuple[Step, str], ...]] = {
    (RecoveryPath.RESUME, True): ((Step.RESUME, "resume"), (Step.LOAD, "load")),
    (RecoveryPath.RESUME, False): ((Step.RESUME, "resume"),),
    (RecoveryPath.REPLAY, True): ((Step.LOAD, "load"), (Step.RESUME, "resume")),
    (RecoveryPath.REPLAY, False): ((Step.RESUME_REPLAY, "resume"), (Step.RESUME, "resume")),
}

#: Why a chain starts elsewhere than the path's own call: keyed by (path, v1, first step left).
_DEGRADED = {
    (RecoveryPath.RESUME, True, Step.LOAD): "session/resume not advertised: replaying with session/load instead",
    (RecoveryPath.RESUME, True, None): "neither session/resume nor session/load advertised: starting a new session",
    (RecoveryPath.RESUME, False, None): "neither session/resume nor session/load advertised: starting a new session",
    (RecoveryPath.REPLAY, True, Step.RESUME): "session/load not advertised: resuming without history",
    (RecoveryPath.REPLAY, True, None): "neither session/load nor session/resume advertised: starting a new session",
    (RecoveryPath.REPLAY, False, None): "session/resume not advertised: starting a new session",
}


def steps_for(path: RecoveryPath, caps: Capabilities, version: int) -> tuple[tuple[Step, ...], tuple[str, ...]]:
    """The calls that carry out ``path`` given what is advertised (ending with :attr:`Step.NEW`;
    none for :attr:`RecoveryPath.ABANDON`), with notes on degradations."""
    if path is RecoveryPath.ABANDON:
        return (), ()
    v1 = version == 1
    steps = [step for step, needs in _CHAINS.get((path, v1), ()) if getattr(caps, needs)]
    note = _DEGRADED.get((path, v1, steps[0] if steps else None))
    return (*steps, Step.NEW), (note,) if note else ()


@functools.lru_cache(maxsize=128)  # pure, and asked again for every session of a recovery
def decide(probe: Probe, caps: Capabilities, version: int, *, replay_cut_off: bool = False) -> Decision:
    """The path and steps for a session given one instance's answer (the module's tables).

    ``replay_cut_off``: a drop cut the last replay off, so the client's history is incomplete: a
    session the agent may still have is replayed again rather than resumed without history.
    """
    if replay_cut_off and probe is not Probe.UNKNOWN:
        steps, notes = steps_for(RecoveryPath.REPLAY, caps, version)
        if steps[0] is not Step.NEW:
            return Decision(RecoveryPath.REPLAY, steps, ("the last replay was cut off: replaying again", *notes))
    kind = route([(0, probe)]).kind
    if kind is not RouteKind.UNAVAILABLE:
        path = RecoveryPath(kind.value)
        return Decision(path, *steps_for(path, caps, version))
    # No usable answer: try resume if advertised, else load, else new.
    if caps.resume:
        path = RecoveryPath.RESUME
    elif version == 1 and caps.load:
        path = RecoveryPath.REPLAY
    else:
        path = RecoveryPath.NEW_SESSION
    steps, notes = steps_for(path, caps, version)
    reason = "status not advertised" if probe is Probe.NOT_PROBED else "status probe failed"
    return Decision(path, steps, (f"{reason}: fallback to {path.value}", *notes))


def next_step(steps: tuple[Step, ...], index: int, failure: StepFailure) -> int | None:
    """After ``steps[index]`` failed, the index of the step to try next (``None``: give up): a
    -32002 jumps straight to the new session, any other refusal moves down the chain."""
    if steps[index] is Step.NEW:
        return None
    if failure is StepFailure.NOT_FOUND:
        return len(steps) - 1
    return index + 1 if index + 1 < len(steps) else None


def hop_note(failed: Step, failure: StepFailure, detail: str, following: Step | None) -> str:
    """One line for the outcome's notes: ``failed`` did not work (``detail``: what the agent said,
    quoted short: ``-32602 'Unknown sessionId'``), and what is tried next (``None``: nothing)."""
    why = f": not found ({detail})" if failure is StepFailure.NOT_FOUND else f" refused: {detail}"
    then = f"trying {following.value}" if following is not None else "nothing left to try"
    return f"{failed.value}{why}; {then}"
