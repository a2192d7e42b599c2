"""The recovery decision: probe answer + capabilities + protocol version → the steps to run.

Pure and table-driven (no asyncio, no I/O), after DESIGN.md §1:

========================  ===========  =====================  =====================================
probe answer              path         v1 steps               v2 steps
========================  ===========  =====================  =====================================
``active`` / ``open``     resume       session/resume         session/resume (no replayFrom)
``inactive`` / ``saved``  replay       session/load           session/resume + replayFrom start
  (or any other value)
error -32002              new session  session/new            session/new
========================  ===========  =====================  =====================================

Without the status capability the client does not probe and falls back: resume if advertised
(a -32002 then means new session), else load (v1) if advertised, else a new session. When the
chosen path's method is not advertised it degrades, and the degradation is reported: resume
without ``session/resume`` → load (a replay) → new; replay without load (v1) → resume without
history → new. Every step may still fail with -32002 (the probe is only a snapshot): the next
step is then always a new session.

A refusal other than -32002 (-32601 from an agent that advertises ``session/resume`` but does not
serve it, -32602, -32603, a timeout) never goes straight to a new session while a step that keeps
the conversation is left: a refused resume tries ``session/load`` (v1, when advertised), a refused
replay tries a resume without history, and only then a new session (DESIGN.md §6). Each hop is
described by :func:`hop_note` for the outcome record.
"""

from __future__ import annotations

import enum

import attrs

from .state import Probe, RecoveryPath

__all__ = [
    "Capabilities",
    "Decision",
    "Probe",
    "RecoveryPath",
    "Step",
    "StepFailure",
    "decide",
    "hop_note",
    "next_step",
    "path_of",
    "should_probe",
    "steps_for",
]


class Step(str, enum.Enum):
    """One wire call of a recovery."""

    RESUME = "session/resume"
    RESUME_REPLAY = "session/resume+replayFrom"
    LOAD = "session/load"
    NEW = "session/new"


class StepFailure(str, enum.Enum):
    """How a step failed, as far as the decision cares."""

    NOT_FOUND = "not_found"  # -32002: the agent does not know the session
    REFUSED = "refused"  # another JSON-RPC error: try the next option


@attrs.frozen
class Capabilities:
    """The recovery-relevant part of what the agent advertised."""

    status: bool = False
    resume: bool = False
    load: bool = False  # v1 only


@attrs.frozen
class Decision:
    """The path the table picks, and the steps that carry it out.

    Attributes:
        path: The intended path (before any degradation).
        steps: The calls to try in order; the first that succeeds decides the actual path.
        notes: Why a step differs from the table (degradations), for the outcome record.
    """

    path: RecoveryPath
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = ()


def should_probe(caps: Capabilities) -> bool:
    """Probe only when the agent advertises ``session/status``."""
    return caps.status


def path_of(step: Step, version: int) -> RecoveryPath:
    """The path a successful ``step`` amounts to."""
    if step is Step.RESUME:
        return RecoveryPath.RESUME
    if step is Step.NEW:
        return RecoveryPath.NEW_SESSION
    return RecoveryPath.REPLAY


def steps_for(path: RecoveryPath, caps: Capabilities, version: int) -> tuple[tuple[Step, ...], tuple[str, ...]]:
    """The calls that carry out ``path`` given what is advertised, with notes on degradations.

    The chain always ends with :attr:`Step.NEW` (a new session needs no capability), except for
    :attr:`RecoveryPath.ABANDON`, which has no steps.
    """
    notes: list[str] = []
    steps: list[Step] = []
    if path is RecoveryPath.ABANDON:
        return (), ()
    if path is RecoveryPath.RESUME:
        if caps.resume:
            steps.append(Step.RESUME)
            if version == 1 and caps.load:
                # Refused (not -32002): the agent may still serve a load, which keeps the conversation.
                steps.append(Step.LOAD)
        elif version == 1 and caps.load:
            notes.append("session/resume not advertised: replaying with session/load instead")
            steps.append(Step.LOAD)
        else:
            notes.append("neither session/resume nor session/load advertised: starting a new session")
    elif path is RecoveryPath.REPLAY:
        if version == 1:
            if caps.load:
                steps.append(Step.LOAD)
                if caps.resume:
                    # Load refused (not -32002): resuming without history still keeps the session.
                    steps.append(Step.RESUME)
            elif caps.resume:
                notes.append("session/load not advertised: resuming without history")
                steps.append(Step.RESUME)
            else:
                notes.append("neither session/load nor session/resume advertised: starting a new session")
        elif caps.resume:
            steps.append(Step.RESUME_REPLAY)
            # Replay refused (not -32002): resume without history before giving the session up.
            steps.append(Step.RESUME)
        else:
            notes.append("session/resume not advertised: starting a new session")
    steps.append(Step.NEW)
    return tuple(steps), tuple(notes)


def decide(probe: Probe, caps: Capabilities, version: int, *, replay_cut_off: bool = False) -> Decision:
    """The table: what to do for a session given the probe answer.

    Args:
        probe: The normalized probe answer (:attr:`Probe.NOT_PROBED` when the agent does not
            advertise ``session/status``; :attr:`Probe.FAILED` when the probe errored otherwise).
        caps: What the agent advertised on the new connection.
        version: The negotiated protocol version (1 or 2).
        replay_cut_off: The session's last replay was cut off by a drop, so the client's history
            is incomplete. An agent that still has the session (``active``, or no usable probe)
            would be resumed without history; the session is replayed again instead.
    """
    if replay_cut_off and probe is not Probe.NOT_FOUND:
        steps, notes = steps_for(RecoveryPath.REPLAY, caps, version)
        if steps[0] is not Step.NEW:
            return Decision(RecoveryPath.REPLAY, steps, ("the last replay was cut off: replaying again", *notes))
    if probe is Probe.ACTIVE:
        path = RecoveryPath.RESUME
    elif probe is Probe.INACTIVE:
        path = RecoveryPath.REPLAY
    elif probe is Probe.NOT_FOUND:
        path = RecoveryPath.NEW_SESSION
    else:
        # No (usable) probe: try resume if advertised, else load, else new.
        if caps.resume:
            path = RecoveryPath.RESUME
        elif version == 1 and caps.load:
            path = RecoveryPath.REPLAY
        else:
            path = RecoveryPath.NEW_SESSION
        steps, notes = steps_for(path, caps, version)
        reason = "status not advertised" if probe is Probe.NOT_PROBED else "status probe failed"
        return Decision(path, steps, (f"{reason}: fallback to {path.value}", *notes))
    steps, notes = steps_for(path, caps, version)
    return Decision(path, steps, notes)


def next_step(steps: tuple[Step, ...], index: int, failure: StepFailure) -> int | None:
    """After ``steps[index]`` failed, the index of the step to try next (``None``: give up).

    A -32002 jumps straight to the new session; any other refusal moves down the chain.
    """
    if steps[index] is Step.NEW:
        return None
    if failure is StepFailure.NOT_FOUND:
        return len(steps) - 1
    return index + 1 if index + 1 < len(steps) else None


def hop_note(failed: Step, failure: StepFailure, detail: str, following: Step | None) -> str:
    """One line for the outcome's notes: ``failed`` did not work, and what is tried next.

    Args:
        failed: The step that failed.
        failure: How it failed.
        detail: What the agent said (the error's text), kept short by the caller.
        following: The next step (``None``: nothing is left, the session is given up).
    """
    why = "the agent does not know the session (-32002)" if failure is StepFailure.NOT_FOUND else f"refused: {detail}"
    then = f"trying {following.value}" if following is not None else "nothing left to try"
    return f"{failed.value} {why}; {then}"
