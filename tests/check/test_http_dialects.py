"""``http.session-header`` tells the two official servers' ``Acp-Session-Id`` conventions apart.

The Python SDK 0.12.1 server (the header only where session-scoped; 404 for a session the
connection has not established) and the TypeScript SDK 2.4.0 server (the header on every POST
naming a session; 400 without) each pass with their convention named; the reference server accepts
both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_client.check import Settings, Target, run_checks, select
from tests.check._support import serving
from tests.peers.python_sdk import PythonSdkPeer
from tests.peers.typescript_sdk import TypeScriptSdkPeer

pytestmark = pytest.mark.timeout(120)


async def _finding(url: str, tmp_path: Path) -> tuple[str, str]:
    settings = Settings(Target(url), cwd=str(tmp_path), timeout=10.0)
    report = await run_checks(settings, select(["http.session-header"]))
    (result,) = report.checks
    return result.status, result.evidence.split("\n", 1)[0]


async def test_python_sdk_server(python_sdk_peer: PythonSdkPeer, tmp_path: Path) -> None:
    status, finding = await _finding(python_sdk_peer.http_url, tmp_path)
    assert (status, finding) == (
        "pass",
        "Acp-Session-Id: header only where session-scoped; 404 for a session not established here "
        "(Python SDK convention)",
    )


async def test_typescript_sdk_server(typescript_sdk_peer: TypeScriptSdkPeer, tmp_path: Path) -> None:
    status, finding = await _finding(typescript_sdk_peer.http_url, tmp_path)
    assert (status, finding) == (
        "pass",
        "Acp-Session-Id: header on every POST naming a session; 400 without (TypeScript SDK convention)",
    )


async def test_reference_server_accepts_both(tmp_path: Path) -> None:
    async with serving() as server:
        status, finding = await _finding(server.http_url, tmp_path)
    assert (status, finding) == (
        "pass",
        "Acp-Session-Id: the header is accepted and not required (both conventions work)",
    )


async def test_not_http_skips(tmp_path: Path) -> None:
    async with serving() as server:
        status, finding = await _finding(server.ws_url, tmp_path)
    assert (status, finding) == ("skip", "not a Streamable HTTP target")
