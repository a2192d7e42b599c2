"""Each fault knob of the reference agent makes exactly the checks it should fail (or warn, or skip).

The table pins, per fault and protocol version, every check whose status is not ``pass`` (over
WebSocket, in process; ``http.session-header`` skips off HTTP and is left out). A fault's side
effects are pinned too: ``reuse-session-id`` hands an old session (with its history) to the
replay checks, ``hang-status`` stalls the status probe of ``initialize.capabilities``,
``status-attaches`` makes the probe after a restart load the session (so it is active).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from acp_client.check import Settings, Target, run_checks, select
from acp_client.testing.reference_agent import FAULTS
from tests.check._support import ALL_IDS, reference_stdio, run_on_server, serving

pytestmark = pytest.mark.timeout(120)

_NOTHING_ADVERTISED = dict.fromkeys(
    [
        "status.unknown",
        "status.no-side-effects",
        "status.cheap",
        "status.after-restart",
        "load.unknown",
        "load.replays-once",
        "load.message-ids",
        "resume.no-replay",
        "resume.unknown",
        "timestamps.zoned",
        "session-object.shape",
        "restart.persists",
        "load.live-ids",
    ],
    "skip",
)
_STATUS_HANGS = dict.fromkeys(
    ["initialize.capabilities", "status.unknown", "status.no-side-effects", "status.cheap", "status.after-restart"],
    "fail",
)

#: fault -> {check id: status} for every check that does not pass, in v1 and in v2 (unless told).
EXPECTED: dict[str, dict[str, str]] = {
    "load-unknown-ok": {"load.unknown": "fail", "not-found.code": "warn"},
    "resume-unknown-ok": {"resume.unknown": "fail", "not-found.code": "warn"},
    "replay-without-ids": {"load.message-ids": "warn", "load.live-ids": "skip"},  # v2: fail (below)
    "replay-new-ids": {"load.message-ids": "fail"},
    "replay-twice": {"load.replays-once": "fail"},
    "replay-drops-last": {"load.replays-once": "fail"},
    "replay-on-resume": {"resume.no-replay": "fail"},
    "ignore-cancel": {"cancel.honoured": "fail", "cancel.next-turn": "skip"},
    "answer-notifications": {"notification.unanswered": "fail"},
    "reuse-session-id": {"new.fresh-id": "fail", "load.replays-once": "fail", "load.message-ids": "fail"},
    "resume-not-found": {"initialize.capabilities": "fail", "resume.no-replay": "skip", "resume.unknown": "skip"},
    "no-capabilities": {"initialize.capabilities": "warn", **_NOTHING_ADVERTISED},
    "naive-timestamps": {"timestamps.zoned": "warn"},
    "sparse-session-objects": {"session-object.shape": "fail"},
    "status-attaches": {"status.no-side-effects": "fail", "status.after-restart": "fail"},
    "status-active-after-restart": {"status.after-restart": "fail"},
    "status-unknown-no-data": {"status.unknown": "fail"},
    "status-always-active": {"status.unknown": "fail", "status.after-restart": "fail", "not-found.code": "warn"},
    "slow-status": {"status.cheap": "warn"},
    "hang-status": {**_STATUS_HANGS, "not-found.code": "warn"},
    "unknown-method-internal": {"method.unknown": "fail"},
    "not-found-internal": {"status.unknown": "fail", "not-found.code": "warn"},
    # v1: live user messages are the client's own prompts, with no id to compare (v2: below).
    "live-without-ids": {"load.live-ids": "fail", "load.message-ids": "skip"},
    "pre-prompt-chunk": {},
    "cancel-owes-next-turn": {"cancel.honoured": "fail", "cancel.next-turn": "fail"},
    # Hostile text is data: no check fails on it (the report shows it made printable).
    "escapes": {},
    "escape-ids": {},
}
EXPECTED_V2: dict[str, dict[str, str]] = {
    "replay-without-ids": {"load.message-ids": "fail", "load.live-ids": "skip"},  # v2 requires messageId
    "live-without-ids": {"load.live-ids": "fail"},
    # v2 replays through session/resume with replayFrom: not-found.code asks the plain resume (refused).
    "load-unknown-ok": {"load.unknown": "fail"},
    # v2 replays through session/resume: with resume refused, nothing can be replayed.
    "resume-not-found": {
        "initialize.capabilities": "fail",
        "load.unknown": "skip",
        "load.replays-once": "skip",
        "load.message-ids": "skip",
        "resume.no-replay": "skip",
        "resume.unknown": "skip",
        "restart.persists": "skip",
        "load.live-ids": "skip",
    },
}


def test_every_fault_is_pinned() -> None:
    assert set(EXPECTED) == set(FAULTS)


#: The checks a fault makes wait for an answer that never comes, and what they then find: they run
#: with a short timeout (a hang is a hang, on a loaded machine too), the other checks with the usual one.
HANGS = {"hang-status": ([*_STATUS_HANGS, "not-found.code"], "session/status was not answered within")}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_fault_fails_exactly_its_checks(fault: str, version: int, tmp_path: Path) -> None:
    hung, finding = HANGS.get(fault, ([], ""))
    async with serving([fault]) as server:
        report = await run_on_server(
            server,
            "ws",
            tmp_path,
            version=version,
            timeout=2.0,
            only=[i for i in ALL_IDS if i not in hung] if hung else (),
        )
        checks = list(report.checks)
        if hung:
            waited = await run_on_server(server, "ws", tmp_path, version=version, timeout=0.5, only=hung)
            assert all(finding in check.finding for check in waited.checks), [c.finding for c in waited.checks]
            assert waited.exit_status == 1, [(c.id, c.status, c.evidence) for c in waited.checks]
            checks += waited.checks
    found = {c.id: c.status for c in checks if c.status != "pass" and c.id != "http.session-header"}
    expected = EXPECTED_V2.get(fault, EXPECTED[fault]) if version == 2 else EXPECTED[fault]
    details = "\n".join(f"{c.id}: {c.status}: {c.evidence}" for c in checks if c.id in found)
    assert found == expected, details
    if not hung:
        assert report.exit_status == (1 if "fail" in expected.values() else 0)


async def test_a_failing_check_shows_the_wire(tmp_path: Path) -> None:
    async with serving(["load-unknown-ok"]) as server:
        report = await run_on_server(server, "ws", tmp_path, only=["load.unknown"])
    (result,) = report.checks
    finding, *wire = result.evidence.split("\n")
    assert finding == "session/load of an unknown id succeeded: false continuity (the history is gone)"
    assert wire[0].startswith('A > {"jsonrpc":"2.0","id":') and '"method":"session/load"' in wire[0]
    assert wire[1].startswith("A < ") and '"result":{}' in wire[1]
    assert result.rule.startswith("session/load (v1)")
    assert "ACP schema" in result.source


async def test_a_turn_over_before_the_cancel_reached_it_is_inconclusive_not_a_failure(tmp_path: Path) -> None:
    # The reference agent's ordinary echo turn is over in a few chunks: the cancel crosses its
    # end on the wire and the agent rightly answers end_turn, with nothing streamed after the
    # cancel. That says nothing about the agent's cancel (warn), while one that ignores the
    # cancel and goes on streaming fails (the ignore-cancel pin above).
    target = Target(reference_stdio(tmp_path / "store"))
    settings = Settings(target, cwd=str(tmp_path), timeout=3.0, cancel_prompt="a short turn")
    report = await run_checks(settings, select(["cancel.honoured"]))
    [check] = report.checks
    assert check.status == "warn", check
    assert "inconclusive" in check.finding


#: The checks of the restart scenario, for an agent that keeps nothing across a restart.
_FORGETS = {
    "status.after-restart": "pass",
    "restart.persists": "warn",
    "load.replays-once": "skip",
    "load.message-ids": "skip",
    "load.live-ids": "skip",
}


@pytest.mark.parametrize(
    ("fault", "spelled", "after_restart"),
    [
        (None, "error -32002", "pass"),
        ("not-found-internal", "error -32603 ('Internal error')", "skip"),
    ],
    ids=["-32002", "-32603"],
)
async def test_an_agent_that_keeps_nothing_across_a_restart_is_told_so_whatever_its_code(
    fault: str | None, spelled: str, after_restart: str, tmp_path: Path
) -> None:
    # The reference agent over stdio without a store: a restart loses every session. Spelled -32002
    # or otherwise, that is one finding (restart.persists warns, with the rule), the checks that need
    # a replay cannot check, and the exit status does not depend on the spelling.
    argv = [sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio"]
    argv += ["--fault", fault] if fault else []
    settings = Settings(Target("stdio:" + shlex.join(argv)), cwd=str(tmp_path), timeout=5.0)
    report = await run_checks(settings, select(list(_FORGETS)))
    found = {c.id: c.status for c in report.checks}
    assert found == {**_FORGETS, "status.after-restart": after_restart}, [c.evidence for c in report.checks]
    persists = report.result("restart.persists")
    assert persists.finding.startswith("sessions do not survive a restart: after it, session/load answered " + spelled)
    assert "cannot check" in report.result("load.replays-once").finding
    assert report.exit_status == 0


async def test_unadvertised_methods_spelling_unknown_as_internal_errors_are_not_taken_for_working(
    tmp_path: Path,
) -> None:
    # An agent that routes no session/load, session/resume or session/status and answers them, like any
    # unknown method, with -32603 "Unknown method: <name>": the methods do not work (no warn that they
    # are not advertised); the fault is the code for an unknown method, named by method.unknown.
    argv = [sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio", "--no-load", "--no-resume"]
    argv += ["--no-status", "--fault", "unknown-method-internal"]
    settings = Settings(Target("stdio:" + shlex.join(argv)), cwd=str(tmp_path), timeout=5.0)
    report = await run_checks(settings, select(["initialize.capabilities", "method.unknown"]))
    capabilities, unknown = report.checks
    assert capabilities.status == "pass", capabilities.evidence
    assert "unknown methods answer error -32603, not -32601 (see method.unknown)" in capabilities.finding
    assert unknown.status == "fail"
    assert unknown.finding.startswith(
        "a method no agent routes (acp_check/no_such_method) answered error -32603 ('Unknown method: "
    )
