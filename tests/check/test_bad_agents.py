"""An agent that hangs, floods, sends garbage or exits during a check fails that check with evidence,
the checker goes on to the next check, it never hangs, and it never leaves a spawned agent running.

The agent is a real subprocess (``hostile_agent.py``), run through the CLI as a user runs it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.check._support import ALL_IDS

pytestmark = pytest.mark.timeout(240)

AGENT = Path(__file__).with_name("hostile_agent.py")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not running.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _run(args: list[str], timeout: float = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "acp_client.check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_hang_flood_garbage_and_exit_each_fail_their_checks_and_nothing_is_left_running(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    argv = [sys.executable, str(AGENT), "--pids", str(pids)]
    argv += ["--on", "session/status=hang", "--on", "session/list=flood", "--on", "session/resume=garbage"]
    argv += ["--on", "session/prompt=exit"]
    began = time.monotonic()
    done = _run(["stdio:" + shlex.join(argv), "--timeout", "1", "--json", "--cancel-prompt", "x"])
    elapsed = time.monotonic() - began
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    results = {check["id"]: check for check in report["checks"]}
    assert list(results) == ALL_IDS  # every check ran, in order
    # hang: the status probes are never answered.
    assert results["status.unknown"]["status"] == "fail"
    assert results["status.unknown"]["evidence"].startswith("session/status was not answered within 1 s")
    # exit: a turn makes the agent exit; the exit status and the link's end are in the evidence.
    cancel = results["cancel.honoured"]
    assert cancel["status"] == "fail" and "exit status 3" in cancel["evidence"]
    # garbage: the undecodable lines are in the evidence of the resume check that met them.
    resume = results["resume.unknown"]
    assert resume["status"] == "fail" and "undecodable frame" in resume["evidence"]
    # flood: 20000 updates and no answer to session/list; the evidence is an excerpt, not the flood.
    capabilities = results["initialize.capabilities"]
    assert capabilities["status"] == "fail"
    assert "session/list: session/list was not answered within 1 s" in capabilities["evidence"]
    assert len(capabilities["evidence"]) < 20000
    assert results["session-object.shape"]["evidence"].startswith("the link ended during the turn: ")
    # Checks the hostile methods do not touch still pass: the checker went on.
    assert results["new.fresh-id"]["status"] == "pass"
    assert results["notification.unanswered"]["status"] == "pass"
    assert elapsed < 180
    spawned = [int(line) for line in pids.read_text().split()]
    # A check that broke the shared agent (a hang, an exit, a flood) hands the next one a fresh agent,
    # and the checks that went well share one: fewer agents than checks.
    assert 2 < len(spawned) < len(ALL_IDS)
    assert [pid for pid in spawned if _alive(pid)] == []


def test_an_unreachable_target_exits_2_with_one_clear_line(tmp_path: Path) -> None:
    done = _run(["stdio:/no/such/agent --acp", "--timeout", "2"])
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("acp-reconnect check: cannot check stdio:/no/such/agent --acp: could not reach")


def test_an_agent_that_never_initializes_exits_2(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    argv = [sys.executable, str(AGENT), "--pids", str(pids), "--on", "initialize=hang"]
    done = _run(["stdio:" + shlex.join(argv), "--timeout", "1"])
    assert done.returncode == 2
    assert "initialize was not answered within 1 s" in done.stderr and "Traceback" not in done.stderr
    assert [pid for pid in map(int, pids.read_text().split()) if _alive(pid)] == []


def test_nothing_listening_exits_2() -> None:
    done = _run(["ws://127.0.0.1:9/acp", "--timeout", "2"])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "could not reach the agent" in done.stderr


def test_an_agent_slow_to_start_is_cannot_check_never_a_fail(tmp_path: Path) -> None:
    # The preflight's agent starts at once; every later one takes 3 s to answer initialize, longer
    # than --timeout: the check that needs a fresh agent cannot check, and says so.
    pids = tmp_path / "pids"
    argv = [sys.executable, str(AGENT), "--pids", str(pids), "--on", "initialize=slow-later"]
    done = _run(["stdio:" + shlex.join(argv), "--timeout", "1", "--json", "--only", "status.no-side-effects"])
    assert done.returncode == 0, done.stderr
    [check] = json.loads(done.stdout)["checks"]
    assert check["status"] == "skip", check
    assert check["evidence"].startswith("cannot check: the agent did not start in time (initialize was not answered")
    assert [pid for pid in map(int, pids.read_text().split()) if _alive(pid)] == []


def test_a_v2_proposal_refused_as_invalid_params_is_made_again_in_v1(tmp_path: Path) -> None:
    argv = [sys.executable, str(AGENT), "--on", "initialize=v1-only"]
    done = _run(["stdio:" + shlex.join(argv), "--protocol-version", "2", "--json", "--only", "new.fresh-id"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["protocolVersion"] == 1
    assert [check["status"] for check in report["checks"]] == ["pass"]


def test_one_agent_process_serves_every_check_that_needs_no_isolation(tmp_path: Path) -> None:
    # A well-behaved agent: the preflight's process serves the shared checks; resume.no-replay ends
    # it as a drop would (one more), status.no-side-effects needs a second instance, and the restart
    # scenario one after the restart. Nothing else is spawned.
    pids = tmp_path / "pids"
    argv = [sys.executable, str(AGENT), "--pids", str(pids)]
    done = _run(["stdio:" + shlex.join(argv), "--timeout", "5", "--json", "--cancel-prompt", "x"])
    assert done.returncode == 0, done.stdout + done.stderr
    spawned = [int(line) for line in pids.read_text().split()]
    assert len(spawned) == 4, spawned
    assert [pid for pid in spawned if _alive(pid)] == []
