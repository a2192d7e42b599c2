"""The continuity table (``acp_client._recovery._continuity``): what a recovery may claim, from evidence only."""

from __future__ import annotations

import pytest

from acp_client._recovery._continuity import of_replay, of_resume
from acp_client.state import Continuity, Probe


def test_a_replay_that_brought_every_completed_turn_back_is_kept() -> None:
    assert of_replay(checked=True, gap=None) == (Continuity.KEPT, None)


def test_a_replay_missing_a_completed_turn_is_lost_with_the_reason() -> None:
    continuity, note = of_replay(checked=True, gap="the replay lacks 1 completed turn: 'two'")
    assert continuity is Continuity.LOST
    assert note == "continuity lost: the replay lacks 1 completed turn: 'two'"


def test_a_replay_nothing_could_be_checked_against_is_unverified() -> None:
    continuity, note = of_replay(checked=False, gap=None)
    assert continuity is Continuity.UNVERIFIED and note is not None and "no transcript" in note


@pytest.mark.parametrize("probe", list(Probe))
def test_a_resume_by_a_new_agent_process_is_unverified_whatever_the_agent_says(probe: Probe) -> None:
    continuity, note = of_resume(probe, held_by="agent process 1 (pid 10)", now="agent process 2 (pid 11)")
    assert continuity is Continuity.UNVERIFIED
    assert note is not None and note.startswith("continuity unverified: the agent process was restarted: ")
    assert "agent process 2 (pid 11)" in note and "agent process 1 (pid 10)" in note


@pytest.mark.parametrize("probe", list(Probe))
def test_a_resume_by_a_process_started_after_the_session_was_attached_is_unverified(probe: Probe) -> None:
    """A session restored from a store was held by a process the client never saw: the one the
    client started now cannot have it in memory."""
    continuity, note = of_resume(probe, held_by=None, now="agent process 1 (pid 10)")
    assert continuity is Continuity.UNVERIFIED and note is not None and "restarted" in note


@pytest.mark.parametrize("probe", [Probe.ACTIVE, Probe.NOT_PROBED, Probe.UNREACHABLE])
def test_a_resume_by_the_same_live_process_is_kept(probe: Probe) -> None:
    assert of_resume(probe, held_by="agent process 1 (pid 10)", now="agent process 1 (pid 10)") == (
        Continuity.KEPT,
        None,
    )


@pytest.mark.parametrize("probe", [Probe.INACTIVE, Probe.UNKNOWN])
def test_the_same_process_saying_it_let_go_of_the_session_is_unverified(probe: Probe) -> None:
    continuity, note = of_resume(probe, held_by="agent process 1 (pid 10)", now="agent process 1 (pid 10)")
    assert continuity is Continuity.UNVERIFIED and note is not None and "session/status" in note


def test_without_a_known_process_only_an_active_probe_is_evidence() -> None:
    assert of_resume(Probe.ACTIVE, held_by=None, now=None) == (Continuity.KEPT, None)
    for probe in (Probe.NOT_PROBED, Probe.UNREACHABLE, Probe.INACTIVE, Probe.UNKNOWN):
        continuity, note = of_resume(probe, held_by=None, now=None)
        assert continuity is Continuity.UNVERIFIED and note is not None, probe
    # A process known before (stdio) now behind a link that names none: the probe decides.
    assert of_resume(Probe.ACTIVE, held_by="agent process 1 (pid 10)", now=None) == (Continuity.KEPT, None)


def test_continuity_is_true_only_when_kept_and_reads_as_its_value() -> None:
    assert [bool(c) for c in Continuity] == [True, False, False]
    assert [str(c) for c in Continuity] == ["kept", "lost", "unverified"]
    assert f"{Continuity.UNVERIFIED}" == "unverified" and Continuity("lost") is Continuity.LOST
    assert Continuity.KEPT.weaker(Continuity.UNVERIFIED) is Continuity.UNVERIFIED
    assert Continuity.UNVERIFIED.weaker(Continuity.LOST) is Continuity.LOST
    assert Continuity.KEPT.weaker(Continuity.KEPT) is Continuity.KEPT


def test_an_outcome_takes_a_continuity_or_its_value_never_a_bool() -> None:
    from acp_client import RecoveryOutcome, RecoveryPath

    fields = {"path": RecoveryPath.RESUME, "planned": RecoveryPath.RESUME, "previous_session_id": "s"}
    outcome = RecoveryOutcome(**fields, session_id="s", continuity="unverified", probe=Probe.NOT_PROBED)
    assert outcome.continuity is Continuity.UNVERIFIED
    with pytest.raises(ValueError, match="not a valid Continuity"):
        RecoveryOutcome(**fields, session_id="s", continuity=True, probe=Probe.NOT_PROBED)
