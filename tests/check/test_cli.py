"""The command line as users run it: ``acp-reconnect check`` / ``python -m acp_client.check``.

Exit statuses, ``--json`` (the report's exact shape), ``--junit``, ``-v``, ``--only`` / ``--skip``,
and ``--restart-cmd`` restarting a real reference server process between phases.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import pytest

from acp_client.check._cli import main
from tests.check._support import ALL_IDS, reference_stdio

pytestmark = pytest.mark.timeout(240)

RESTART = Path(__file__).with_name("restart_server.py")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_client.check", *args],
        capture_output=True,
        text=True,
        timeout=200,
        env=_env(),
        check=False,
    )


def test_json_report_has_the_documented_shape(tmp_path: Path) -> None:
    target = reference_stdio(tmp_path / "store")
    done = _check(target, "--json", "--only", "new.fresh-id", "--only", "status.unknown", "--protocol-version", "2")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert list(report) == ["target", "protocolVersion", "agent", "capabilities", "checks", "summary", "seconds"]
    assert report["target"] == target
    assert report["protocolVersion"] == 2
    assert report["agent"]["name"] == "acp-reference-agent" and set(report["agent"]) == {"name", "version"}
    assert "session" in report["capabilities"]
    assert [c["id"] for c in report["checks"]] == ["new.fresh-id", "status.unknown"]
    for check in report["checks"]:
        assert list(check) == ["id", "status", "rule", "source", "evidence", "seconds"]
        assert check["status"] == "pass" and isinstance(check["seconds"], float)
    assert report["checks"][1]["source"] == "session/status proposal"
    assert report["summary"] == {"pass": 2, "fail": 0, "warn": 0, "skip": 0}
    assert report["seconds"] >= sum(check["seconds"] for check in report["checks"])


def test_a_failing_check_exits_1_and_junit_records_it(tmp_path: Path) -> None:
    target = reference_stdio(tmp_path / "store", "load-unknown-ok")
    junit = tmp_path / "report.xml"
    skipped = ["cancel.honoured", "cancel.next-turn", "status.cheap"]
    done = _check(target, *(f"--skip={name}" for name in skipped), "--junit", str(junit))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("FAIL  load.unknown") for line in lines)
    assert any(line.startswith("PASS  new.fresh-id") for line in lines)
    assert "cancel.honoured" not in done.stdout
    # load.unknown fails; not-found.code warns (the success is no -32002 either); http.session-header skips.
    assert re.fullmatch(rf"{len(ALL_IDS) - 6} pass, 1 fail, 1 warn, 1 skip in \d+\.\d s", lines[-1]), lines[-1]
    suite = ElementTree.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("failures") == "1" and suite.get("skipped") == "1"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert len(cases) == len(ALL_IDS) - 3
    failure = cases["load.unknown"].find("failure")
    assert failure is not None and "false continuity" in (failure.get("message") or "")
    assert cases["http.session-header"].find("skipped") is not None


def test_verbose_shows_the_wire_of_passing_checks(tmp_path: Path) -> None:
    target = reference_stdio(tmp_path / "store")
    quiet = _check(target, "--only", "status.unknown")
    loud = _check(target, "--only", "status.unknown", "-v")
    assert quiet.returncode == loud.returncode == 0
    assert '"method":"session/status"' not in quiet.stdout
    assert '"method":"session/status"' in loud.stdout and "-32002" in loud.stdout


def test_usage_errors_exit_2() -> None:
    unknown = _check("stdio:true", "--only", "no.such-check")
    assert unknown.returncode == 2 and "unknown check id 'no.such-check'" in unknown.stderr
    scheme = _check("ftp://example.com/acp")
    assert scheme.returncode == 2 and "unsupported target" in scheme.stderr
    assert "Traceback" not in unknown.stderr + scheme.stderr


def test_the_console_script_entry_takes_a_check_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = reference_stdio(tmp_path / "store")
    assert main(["check", target, "--only", "new.fresh-id", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [c["status"] for c in report["checks"]] == ["pass"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def restartable_server(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A reference server process on a fixed port, and the shell command that restarts it."""
    pidfile, port, store = tmp_path / "server.pid", _free_port(), tmp_path / "store"
    command = shlex.join([sys.executable, str(RESTART), str(pidfile), str(port), str(store)])
    subprocess.run(command, shell=True, check=True, env=_env(), timeout=60)
    try:
        yield port, command
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_restart_cmd_restarts_a_network_agent_between_phases(restartable_server: tuple[int, str], scheme: str) -> None:
    port, command = restartable_server
    url = f"{scheme}://127.0.0.1:{port}/acp"
    only = ["--only", "status.after-restart", "--only", "load.replays-once", "--only", "load.message-ids"]
    done = _check(url, "--restart-cmd", command, "--json", *only)
    assert done.returncode == 0, done.stdout + done.stderr
    checks = json.loads(done.stdout)["checks"]
    assert [c["status"] for c in checks] == ["pass", "pass", "pass"], checks
    assert "restart command" in checks[0]["evidence"] or checks[0]["evidence"].startswith("after a restart")
    without = _check(url, "--json", *only)
    assert without.returncode == 0
    skipped = json.loads(without.stdout)["checks"]
    assert {c["status"] for c in skipped} == {"skip"}
    assert skipped[0]["evidence"] == "needs an agent restart: pass --restart-cmd CMD for a network target"


def test_sessions_are_created_in_cwd(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = _check(reference_stdio(tmp_path / "store"), "--only", "new.fresh-id", "--cwd", str(work), "-v")
    assert done.returncode == 0, done.stderr
    assert f'"method":"session/new","params":{{"cwd":"{work}"' in done.stdout
    missing = _check(reference_stdio(tmp_path / "store"), "--cwd", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "is not a directory" in missing.stderr
