"""What a recovery may claim about the agent's memory of the conversation. Pure.

Continuity is a claim about the agent: that it still holds every turn the user saw. The client
claims it only from evidence (docs/conversation.md):

============  =============================================================  ============
path          evidence                                                       continuity
============  =============================================================  ============
replay        every completed turn the client holds came back                kept
replay        a completed turn is missing (or nothing came back)             lost
replay        no transcript to check the replay against                      unverified
resume        the agent process is known to be a new one (a respawned        unverified
              stdio agent), whatever the agent says
resume        ``session/status`` said ``active`` (in memory), and the        kept
              process is not known to be a new one
resume        the same live agent process held the session, and it did      kept
              not say it let go of it (no probe, or the probe failed)
resume        nothing else (no probe, the probe failed, ``inactive``)        unverified
new session   the agent lost the session                                     lost
new session   the agent gave the same id back (its own copy, maybe)          unverified
abandon       the session was given up                                       lost
============  =============================================================  ============

Which process answers is the transport's knowledge (``TransportInfo.agent_process``: ``None`` over
the network); the client compares it with the one that last attached the session.
"""

from __future__ import annotations

from ..state import Continuity, Probe

#: A claim, and the note that explains it (``None`` when the claim needs no explaining).
Verdict = tuple[Continuity, str | None]

_NO_MEMORY = {
    Probe.NOT_PROBED: "the agent offers no session/status, so it never said it kept the session in memory",
    Probe.UNREACHABLE: "the session/status probe got no usable answer, so the agent never said it kept the session",
    Probe.INACTIVE: "session/status said the session was not in memory",
    Probe.UNKNOWN: "session/status did not know the session",
}


def of_replay(*, checked: bool, gap: str | None) -> Verdict:
    """A replay: ``checked`` when it was reconciled with a transcript the client keeps; ``gap``, what
    it lacks of the completed turns the client holds (:meth:`~acp_client.transcript.ReplayReport.lacks_history`)."""
    if not checked:
        return Continuity.UNVERIFIED, "continuity unverified: no transcript is kept to check the replay against"
    if gap is not None:
        return Continuity.LOST, f"continuity lost: {gap}"
    return Continuity.KEPT, None


def of_resume(probe: Probe, *, held_by: str | None, now: str | None) -> Verdict:
    """A resume without history: ``probe`` is what ``session/status`` said before it; ``held_by`` the
    agent process that last attached the session, ``now`` the one that resumed it (``None``: not
    known, e.g. a session restored from a store, or a network link)."""
    if now is not None and now != held_by:
        holder = f" ({held_by})" if held_by is not None else ""
        return Continuity.UNVERIFIED, (
            f"continuity unverified: the agent process was restarted: {now} is not the process that held the "
            f"session{holder}, so nothing of it can still be in memory, whatever the agent says"
        )
    if probe is Probe.ACTIVE:
        return Continuity.KEPT, None
    if now is not None and probe in (Probe.NOT_PROBED, Probe.UNREACHABLE):
        return Continuity.KEPT, None  # the same live process, which never said it let go of the session
    return Continuity.UNVERIFIED, f"continuity unverified: {_NO_MEMORY[probe]}"
