"""The reference agent passes every check, over stdio, WebSocket and Streamable HTTP, in v1 and v2.

"Every check" means: each one passes, except the two that do not apply to a transport, which skip
with their reason (``http.session-header`` off HTTP; nothing else skips).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_client.check import Settings, Target, run_checks
from tests.check._support import ALL_IDS, SLOW, reference_stdio, run_on_server, serving, statuses

pytestmark = pytest.mark.timeout(240)


def _expected(kind: str) -> dict[str, str]:
    expected = dict.fromkeys(ALL_IDS, "pass")
    if kind != "http":
        expected["http.session-header"] = "skip"
    return expected


def _explain(report: object) -> str:
    return "\n".join(f"{c.id}: {c.status}\n{c.evidence}" for c in report.checks if c.status != "pass")  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("kind", ["ws", "http"])
async def test_reference_agent_passes_every_check_over_the_network(kind: str, version: int, tmp_path: Path) -> None:
    async with serving() as server:
        report = await run_on_server(server, kind, tmp_path, version=version)
    assert report.protocol_version == version
    assert report.agent["name"] == "acp-reference-agent"
    assert statuses(report) == _expected(kind), _explain(report)
    assert report.exit_status == 0


@pytest.mark.parametrize("version", [1, 2])
async def test_reference_agent_passes_every_check_over_stdio(version: int, tmp_path: Path) -> None:
    settings = Settings(
        Target(reference_stdio(tmp_path / "store")),
        protocol_version=version,
        cwd=str(tmp_path),
        timeout=5.0,
        cancel_prompt=SLOW,
    )
    report = await run_checks(settings)
    assert statuses(report) == _expected("stdio"), _explain(report)
    http = report.result("http.session-header")
    assert http.evidence == "not a Streamable HTTP target"
    assert report.summary == {"pass": len(ALL_IDS) - 1, "fail": 0, "warn": 0, "skip": 1}
