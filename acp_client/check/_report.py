"""The report: one result per check, as JSON (``--json``), JUnit XML (``--junit``) and a summary."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

import attrs

from ._context import Status

__all__ = ["CheckResult", "Report"]

STATUSES: tuple[Status, ...] = ("pass", "fail", "warn", "skip")


@attrs.frozen
class CheckResult:
    """One check's result.

    Attributes:
        id: The check's stable id.
        status: ``pass``, ``fail``, ``warn`` or ``skip``.
        rule: The rule it checks.
        source: Where the rule comes from.
        evidence: What was found (first line), then the wire excerpt that shows it.
        seconds: How long the check took.
    """

    id: str
    status: Status
    rule: str
    source: str
    evidence: str
    seconds: float

    @property
    def finding(self) -> str:
        return self.evidence.split("\n", 1)[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "rule": self.rule,
            "source": self.source,
            "evidence": self.evidence,
            "seconds": round(self.seconds, 3),
        }


@attrs.frozen
class Report:
    """The whole run.

    Attributes:
        target: The target as given.
        protocol_version: The version the checks ran in.
        agent: ``{"name", "version"}`` from ``initialize``.
        capabilities: The capability object as the agent sent it.
        checks: The results, in check order.
        seconds: How long the whole run took (the preflight included).
    """

    target: str
    protocol_version: int
    agent: dict[str, Any]
    capabilities: dict[str, Any]
    checks: tuple[CheckResult, ...]
    seconds: float = 0.0

    @property
    def summary(self) -> dict[str, int]:
        return {status: sum(1 for c in self.checks if c.status == status) for status in STATUSES}

    @property
    def exit_status(self) -> int:
        """0 when no check failed, 1 when one did."""
        return 1 if any(c.status == "fail" for c in self.checks) else 0

    def result(self, check_id: str) -> CheckResult:
        return next(c for c in self.checks if c.id == check_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "protocolVersion": self.protocol_version,
            "agent": dict(self.agent),
            "capabilities": self.capabilities,
            "checks": [check.to_json() for check in self.checks],
            "summary": self.summary,
            "seconds": round(self.seconds, 3),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False)

    def junit(self) -> str:
        """JUnit XML: a ``testcase`` per check; ``fail`` fails, ``skip`` is skipped, ``warn`` passes with output."""
        summary = self.summary
        suite = ElementTree.Element(
            "testsuite",
            {
                "name": "acp-reconnect check",
                "tests": str(len(self.checks)),
                "failures": str(summary["fail"]),
                "errors": "0",
                "skipped": str(summary["skip"]),
                "time": f"{self.seconds or sum(c.seconds for c in self.checks):.3f}",
            },
        )
        properties = ElementTree.SubElement(suite, "properties")
        agent = f"{self.agent.get('name')} {self.agent.get('version')}"
        for name, value in (("target", self.target), ("protocolVersion", str(self.protocol_version)), ("agent", agent)):
            ElementTree.SubElement(properties, "property", {"name": name, "value": value})
        for check in self.checks:
            case = ElementTree.SubElement(
                suite, "testcase", {"classname": "acp.conformance", "name": check.id, "time": f"{check.seconds:.3f}"}
            )
            if check.status == "fail":
                failure = ElementTree.SubElement(case, "failure", {"message": check.finding, "type": check.source})
                failure.text = f"rule: {check.rule}\n{check.evidence}"
            elif check.status == "skip":
                ElementTree.SubElement(case, "skipped", {"message": check.finding})
            elif check.status == "warn":
                out = ElementTree.SubElement(case, "system-out")
                out.text = f"WARN: {check.evidence}"
        ElementTree.indent(suite)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(suite, encoding="unicode") + "\n"
