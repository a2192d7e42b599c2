"""The recovery decision table, exhaustively: every probe answer x capability set x protocol
version x what the next step answers (the README's recovery table)."""

from __future__ import annotations

import itertools

import pytest

from acp_client._recovery._decisions import (
    Capabilities,
    Probe,
    RecoveryPath,
    Step,
    StepFailure,
    decide,
    hop_note,
    next_step,
    path_of,
    steps_for,
)

R, RR, L, N = Step.RESUME, Step.RESUME_REPLAY, Step.LOAD, Step.NEW

# (probe, resume advertised, load advertised) -> (planned path, steps), written out by hand from
# the README's recovery table rather than computed, so the test is an independent statement of the table.
V1 = {
    (Probe.ACTIVE, True, True): (RecoveryPath.RESUME, (R, L, N)),  # resume refused -> load keeps history
    (Probe.ACTIVE, True, False): (RecoveryPath.RESUME, (R, N)),
    (Probe.ACTIVE, False, True): (RecoveryPath.RESUME, (L, N)),  # degrade: resume -> load
    (Probe.ACTIVE, False, False): (RecoveryPath.RESUME, (N,)),
    (Probe.INACTIVE, True, True): (RecoveryPath.REPLAY, (L, R, N)),  # load refused -> resume w/o history
    (Probe.INACTIVE, False, True): (RecoveryPath.REPLAY, (L, N)),
    (Probe.INACTIVE, True, False): (RecoveryPath.REPLAY, (R, N)),  # degrade: replay -> resume w/o history
    (Probe.INACTIVE, False, False): (RecoveryPath.REPLAY, (N,)),
    (Probe.UNKNOWN, True, True): (RecoveryPath.NEW_SESSION, (N,)),
    (Probe.UNKNOWN, True, False): (RecoveryPath.NEW_SESSION, (N,)),
    (Probe.UNKNOWN, False, True): (RecoveryPath.NEW_SESSION, (N,)),
    (Probe.UNKNOWN, False, False): (RecoveryPath.NEW_SESSION, (N,)),
}
V2 = {
    (Probe.ACTIVE, True): (RecoveryPath.RESUME, (R, N)),
    (Probe.ACTIVE, False): (RecoveryPath.RESUME, (N,)),
    (Probe.INACTIVE, True): (RecoveryPath.REPLAY, (RR, R, N)),  # replay refused -> resume w/o history
    (Probe.INACTIVE, False): (RecoveryPath.REPLAY, (N,)),
    (Probe.UNKNOWN, True): (RecoveryPath.NEW_SESSION, (N,)),
    (Probe.UNKNOWN, False): (RecoveryPath.NEW_SESSION, (N,)),
}
# Without a usable probe: resume if advertised, else load (v1), else new.
FALLBACK_V1 = {
    (True, True): (RecoveryPath.RESUME, (R, L, N)),
    (True, False): (RecoveryPath.RESUME, (R, N)),
    (False, True): (RecoveryPath.REPLAY, (L, N)),
    (False, False): (RecoveryPath.NEW_SESSION, (N,)),
}
FALLBACK_V2 = {True: (RecoveryPath.RESUME, (R, N)), False: (RecoveryPath.NEW_SESSION, (N,))}

PROBES = list(Probe)
BOOLS = (False, True)


def expected(
    probe: Probe, status: bool, resume: bool, load: bool, version: int
) -> tuple[RecoveryPath, tuple[Step, ...]]:
    if probe in (Probe.NOT_PROBED, Probe.UNREACHABLE):
        return FALLBACK_V1[(resume, load)] if version == 1 else FALLBACK_V2[resume]
    return V1[(probe, resume, load)] if version == 1 else V2[(probe, resume)]


def run(steps: tuple[Step, ...], answers: dict[Step, StepFailure | None]) -> tuple[Step | None, list[Step]]:
    """Simulate the supervisor's loop: returns the step that succeeded (None: gave up) and the calls."""
    calls: list[Step] = []
    index: int | None = 0
    while index is not None:
        step = steps[index]
        calls.append(step)
        failure = answers.get(step)
        if failure is None:
            return step, calls
        index = next_step(steps, index, failure)
    return None, calls


CASES = [
    (probe, status, resume, load, version)
    for probe, status, resume, load, version in itertools.product(PROBES, BOOLS, BOOLS, BOOLS, (1, 2))
    # A probe answer exists only when the capability is advertised; without it the client does not probe.
    if (probe is Probe.NOT_PROBED) != status
]


@pytest.mark.parametrize(("probe", "status", "resume", "load", "version"), CASES)
def test_decision_table(probe: Probe, status: bool, resume: bool, load: bool, version: int) -> None:
    caps = Capabilities(status=status, resume=resume, load=load)
    assert caps.status is status  # the recoverer probes only when session/status is advertised
    decision = decide(probe, caps, version)
    want_path, want_steps = expected(probe, status, resume, load, version)
    assert decision.path is want_path
    assert decision.steps == want_steps
    # Never a method whose capability is absent.
    assert resume or (Step.RESUME not in decision.steps and Step.RESUME_REPLAY not in decision.steps)
    assert (load and version == 1) or Step.LOAD not in decision.steps
    # Any degradation or fallback is explained.
    first = decision.steps[0]
    if path_of(first) is not decision.path or probe in (Probe.NOT_PROBED, Probe.UNREACHABLE):
        assert decision.notes


@pytest.mark.parametrize(("probe", "status", "resume", "load", "version"), CASES)
@pytest.mark.parametrize("later", [None, StepFailure.NOT_FOUND, StepFailure.REFUSED])
def test_later_answers(
    probe: Probe, status: bool, resume: bool, load: bool, version: int, later: StepFailure | None
) -> None:
    """The first step may still fail: -32002 always lands on a new session; another refusal
    moves down the chain; session/new failing too means giving up."""
    decision = decide(probe, Capabilities(status=status, resume=resume, load=load), version)
    first = decision.steps[0]
    succeeded, calls = run(decision.steps, {first: later} if later else {})
    if later is None:
        assert succeeded is first and calls == [first]
    elif first is Step.NEW:
        assert succeeded is None and calls == [Step.NEW]
    elif later is StepFailure.NOT_FOUND:
        assert succeeded is Step.NEW and calls == [first, Step.NEW]
    else:
        assert calls[0] is first and succeeded is decision.steps[1]
    if succeeded is not None:
        assert path_of(succeeded) is (
            RecoveryPath.RESUME
            if succeeded is Step.RESUME
            else RecoveryPath.NEW_SESSION
            if succeeded is Step.NEW
            else RecoveryPath.REPLAY
        )


def test_new_session_failing_gives_up() -> None:
    assert run((Step.NEW,), {Step.NEW: StepFailure.NOT_FOUND}) == (None, [Step.NEW])


@pytest.mark.parametrize("path", list(RecoveryPath))
@pytest.mark.parametrize("version", [1, 2])
def test_app_chosen_paths_always_end_in_new_session(path: RecoveryPath, version: int) -> None:
    for resume, load in itertools.product(BOOLS, BOOLS):
        steps, _ = steps_for(path, Capabilities(resume=resume, load=load), version)
        if path is RecoveryPath.ABANDON:
            assert steps == ()
        else:
            assert steps[-1] is Step.NEW


@pytest.mark.parametrize("version", [1, 2])
def test_refusal_never_skips_a_step_that_keeps_the_conversation(version: int) -> None:
    """An agent that advertises session/resume but answers -32601 (pydantic-acp without its unstable
    methods): with load advertised (v1) the client loads before it starts over (docs/agents-conformance.md)."""
    caps = Capabilities(status=True, resume=True, load=True)
    steps = decide(Probe.ACTIVE, caps, version).steps
    succeeded, calls = run(steps, {Step.RESUME: StepFailure.REFUSED})
    if version == 1:
        assert calls == [Step.RESUME, Step.LOAD] and succeeded is Step.LOAD
    else:
        assert calls == [Step.RESUME, Step.NEW] and succeeded is Step.NEW
    # The replay path degrades to a resume without history on refusal, in both versions.
    steps = decide(Probe.INACTIVE, caps, version).steps
    first = steps[0]
    succeeded, calls = run(steps, {first: StepFailure.REFUSED})
    assert calls == [first, Step.RESUME] and succeeded is Step.RESUME
    # -32002 still goes straight to a new session, skipping the rest of the chain.
    succeeded, calls = run(steps, {first: StepFailure.NOT_FOUND})
    assert calls == [first, Step.NEW]


def test_hop_notes_name_the_step_the_reason_and_what_follows() -> None:
    note = hop_note(Step.RESUME, StepFailure.REFUSED, "Method not found (-32601)", Step.LOAD)
    assert note == "session/resume refused: Method not found (-32601); trying session/load"
    note = hop_note(Step.LOAD, StepFailure.NOT_FOUND, "-32602 'Unknown sessionId'", Step.NEW)
    assert note == "session/load: not found (-32602 'Unknown sessionId'); trying session/new"
    assert hop_note(Step.NEW, StepFailure.REFUSED, "boom", None).endswith("nothing left to try")


@pytest.mark.parametrize("probe", [Probe.ACTIVE, Probe.INACTIVE, Probe.NOT_PROBED, Probe.UNREACHABLE])
@pytest.mark.parametrize("version", [1, 2])
def test_a_cut_off_replay_is_replayed_again(probe: Probe, version: int) -> None:
    """Issue 12: a drop during session/load left the history incomplete; the agent already holds the
    session, so the probe says active — the next recovery replays anyway, and says why."""
    caps = Capabilities(status=probe is not Probe.NOT_PROBED, resume=True, load=True)
    decision = decide(probe, caps, version, replay_cut_off=True)
    assert decision.path is RecoveryPath.REPLAY
    assert decision.steps[0] is (Step.LOAD if version == 1 else Step.RESUME_REPLAY)
    assert "cut off" in decision.notes[0]
    # -32002 still means a new session; without any way to replay, the usual table applies.
    assert decide(Probe.UNKNOWN, caps, version, replay_cut_off=True).path is RecoveryPath.NEW_SESSION
    bare = Capabilities(status=True)
    assert decide(Probe.ACTIVE, bare, version, replay_cut_off=True) == decide(Probe.ACTIVE, bare, version)
