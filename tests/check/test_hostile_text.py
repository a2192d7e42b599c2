"""What the agent sends never acts on the terminal or breaks a report: the text report, ``--json``,
``--junit`` and a failing target's stderr, against an agent whose every text carries escape
sequences, C1 and bidi controls (the reference agent's ``escapes`` fault); and the wire log stays
bounded in bytes against a flooding agent."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path
from xml.etree import ElementTree

import pytest

from acp_client.check import CheckResult, Report
from acp_client.check._link import WireLog, message_bytes
from acp_client.testing.reference_agent import ESCAPES
from tests.check._support import reference_stdio

pytestmark = pytest.mark.timeout(240)


def _unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal could act on."""
    return [
        f"U+{ord(char):04X}"
        for char in text
        if char not in "\n\t\u200c\u200d" and unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "acp_client.check", *args],
        capture_output=True,
        text=True,
        timeout=200,
        env=env,
        check=False,
    )


def test_a_hostile_agent_reaches_the_terminal_and_the_junit_report_only_as_visible_text(tmp_path: Path) -> None:
    # load-unknown-ok makes a check fail, so a failure's message and evidence carry agent text too.
    target = reference_stdio(tmp_path / "store", "escapes", "load-unknown-ok")
    junit = tmp_path / "report.xml"
    chosen = (
        "--only",
        "new.fresh-id",
        "--only",
        "load.unknown",
        "--only",
        "load.replays-once",
        "--only",
        "status.unknown",
    )
    done = _check(target, *chosen, "-v", "--junit", str(junit))
    assert done.returncode == 1, done.stderr
    assert _unsafe(done.stdout) == [] and _unsafe(done.stderr) == []
    assert "\\x9b2J" in done.stdout and "\\u202etxt.exe" in done.stdout  # shown, not executed
    suite = ElementTree.parse(junit).getroot()  # well-formed
    text = ElementTree.tostring(suite, encoding="unicode")
    assert _unsafe(text) == []
    assert suite.get("failures") == "1"

    as_json = _check(target, *chosen, "--json")
    assert _unsafe(as_json.stdout) == []
    report = json.loads(as_json.stdout)
    evidence = "\n".join(check["evidence"] for check in report["checks"])
    assert "\u202e" in evidence or "\x1b" in evidence  # the exact data, escaped in the JSON text


def test_a_failing_targets_stderr_is_shown_as_visible_text(tmp_path: Path) -> None:
    script = tmp_path / "dies.py"
    script.write_text(f"import sys\nsys.stderr.write({ESCAPES!r})\nsys.exit(3)\n", encoding="utf-8")
    done = _check("stdio:" + shlex.join([sys.executable, str(script)]))
    assert done.returncode == 2
    assert "pwned-title" in done.stderr
    assert _unsafe(done.stderr) == [] and _unsafe(done.stdout) == []


def test_junit_is_well_formed_whatever_the_text() -> None:
    hostile = ESCAPES + "\ufffe\uffff\ud800\U000e0041\x0b\x0c"
    checks = tuple(
        CheckResult(f"c.{status}", status, hostile, "rule source", f"{hostile}\nA < {hostile}", 0.1)  # type: ignore[arg-type]
        for status in ("pass", "fail", "warn", "skip")
    )
    report = Report(hostile, 1, {"name": hostile, "version": hostile}, {}, checks)
    suite = ElementTree.fromstring(report.junit().encode("utf-8"))
    failure = suite.find("testcase/failure")
    assert failure is not None and "\n" not in (failure.get("message") or "")
    parsed = json.loads(report.dumps())
    assert parsed["agent"]["name"] == hostile  # JSON keeps the exact text
    assert _unsafe(report.dumps()) == []


def test_the_wire_log_is_bounded_in_bytes() -> None:
    log = WireLog(max_bytes=1024 * 1024)
    flood = {"jsonrpc": "2.0", "method": "session/update", "params": {"text": "x" * 64 * 1024}}
    for _ in range(200):  # 12.8 MiB of updates
        log.add("A", "<", flood)
    assert log.bytes <= 1024 * 1024
    assert sum(message_bytes(entry.message) for entry in log.entries) == log.bytes
    assert log.dropped == 200 - len(log.entries) and log.dropped_bytes >= 11 * 1024 * 1024
    assert "bytes) after the log was full" in log.excerpt()[-1]
