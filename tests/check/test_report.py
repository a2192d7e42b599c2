"""The report's forms: JSON, JUnit XML, the text printer (plain, and with rich), the summary and exit status."""

from __future__ import annotations

import io
import json
from xml.etree import ElementTree

from acp_client.check import CheckResult, Report
from acp_client.check._output import Printer


def _report(*statuses: str) -> Report:
    checks = tuple(
        CheckResult(f"c.{i}", status, "the rule", "JSON-RPC 2.0", f"finding {i}\nA > {{}}\nA < {{}}", 0.25)  # type: ignore[arg-type]
        for i, status in enumerate(statuses)
    )
    return Report("stdio:agent", 1, {"name": "a", "version": "1"}, {"loadSession": True}, checks)


def test_summary_and_exit_status() -> None:
    assert _report("pass", "warn", "skip").exit_status == 0
    assert _report("pass", "fail").exit_status == 1
    assert _report("pass", "fail", "warn", "skip", "pass").summary == {"pass": 2, "fail": 1, "warn": 1, "skip": 1}


def test_json_round_trips_with_the_documented_keys() -> None:
    data = json.loads(_report("fail").dumps())
    assert data["checks"] == [
        {
            "id": "c.0",
            "status": "fail",
            "rule": "the rule",
            "source": "JSON-RPC 2.0",
            "evidence": "finding 0\nA > {}\nA < {}",
            "seconds": 0.25,
        }
    ]


def test_junit_marks_failures_skips_and_warnings() -> None:
    suite = ElementTree.fromstring(_report("pass", "fail", "skip", "warn").junit().split("\n", 1)[1])
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "1")
    cases = list(suite.iter("testcase"))
    assert [c.get("name") for c in cases] == ["c.0", "c.1", "c.2", "c.3"]
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == "finding 1" and "A > {}" in (failure.text or "")
    assert cases[2].find("skipped") is not None
    out = cases[3].find("system-out")
    assert out is not None and (out.text or "").startswith("WARN: finding 3")


def test_plain_printer_shows_evidence_only_for_fail_and_warn() -> None:
    stream = io.StringIO()
    printer = Printer(stream, color=False)
    report = _report("pass", "fail")
    for result in report.checks:
        printer.result(result)
    printer.summary(report)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "PASS  c.0                        0.25 s  finding 0"
    assert lines[1].startswith("FAIL  c.1") and lines[2] == "      rule (JSON-RPC 2.0): the rule"
    assert lines[3:5] == ["      A > {}", "      A < {}"]
    assert lines[-1] == "1 pass, 1 fail, 0 warn, 0 skip in 0.0 s"


def test_rich_printer_when_asked() -> None:
    stream = io.StringIO()
    printer = Printer(stream, color=True, verbose=True)
    printer.result(_report("warn").checks[0])
    text = stream.getvalue()
    assert "WARN" in text and "finding 0" in text and "A > {}" in text
