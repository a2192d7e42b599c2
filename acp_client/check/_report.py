"""The report: one result per check, as JSON (``--json``), JUnit XML (``--junit``) and a summary."""

from __future__ import annotations

import json
import re
from typing import Any, Final
from xml.etree import ElementTree

import attrs

from ..display import UNSAFE_CHARACTERS, printable
from ._context import Status

STATUSES: tuple[Status, ...] = ("pass", "fail", "warn", "skip")

# What JSON output escapes beyond json.dumps (which escapes only C0 with ensure_ascii=False): C1,
# bidi and format characters, separators, so that a terminal showing the report acts on none.
_UNSAFE_IN_JSON: Final = re.compile(UNSAFE_CHARACTERS)
# The two characters XML 1.0 forbids that printable() keeps (non-characters).
_NOT_XML: Final = re.compile("[\ufffe\uffff]")


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # a UTF-16 surrogate pair, as JSON spells it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _xml(text: str, *, one_line: bool = False) -> str:
    """``text`` as XML 1.0 character data can hold it, shown as :func:`printable` shows it."""
    return _NOT_XML.sub(lambda match: f"\\u{ord(match.group()):04x}", printable(text, one_line=one_line))


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
        return {**attrs.asdict(self), "seconds": round(self.seconds, 3)}


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
        """The report as JSON: the agent's text exactly, with every control character escaped."""
        return _UNSAFE_IN_JSON.sub(_json_escape, json.dumps(self.to_json(), indent=2, ensure_ascii=False))

    def junit(self) -> str:
        """JUnit XML: a ``testcase`` per check; ``fail`` fails, ``skip`` is skipped, ``warn`` passes with output.

        Well-formed whatever the agent sent: its text is shown as :func:`~acp_client.display.printable`
        shows it (attributes on one line), with XML's other forbidden characters escaped too.
        """
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
            ElementTree.SubElement(properties, "property", {"name": name, "value": _xml(value, one_line=True)})
        for check in self.checks:
            case = ElementTree.SubElement(
                suite, "testcase", {"classname": "acp.conformance", "name": check.id, "time": f"{check.seconds:.3f}"}
            )
            if check.status == "fail":
                message = _xml(check.finding, one_line=True)
                failure = ElementTree.SubElement(case, "failure", {"message": message, "type": check.source})
                failure.text = _xml(f"rule: {check.rule}\n{check.evidence}")
            elif check.status == "skip":
                ElementTree.SubElement(case, "skipped", {"message": _xml(check.finding, one_line=True)})
            elif check.status == "warn":
                out = ElementTree.SubElement(case, "system-out")
                out.text = _xml(f"WARN: {check.evidence}")
        ElementTree.indent(suite)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(suite, encoding="unicode") + "\n"
