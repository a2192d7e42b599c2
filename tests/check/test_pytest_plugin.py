"""The pytest plugin: inert without ``--acp-agent``; with it, one test item per check, in a real pytest run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.check._support import reference_stdio

pytestmark = pytest.mark.timeout(240)


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    (tmp_path / "test_nothing.py").write_text("def test_own():\n    pass\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "acp_client.check.pytest_plugin", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        timeout=200,
        cwd=tmp_path,
        env=env,
        check=False,
    )


def test_inert_without_acp_agent(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "-q", "test_nothing.py")
    assert done.returncode == 0, done.stdout
    assert "1 passed" in done.stdout and "acp-check" not in done.stdout


def test_checks_run_as_items_and_a_failure_shows_the_evidence(tmp_path: Path) -> None:
    target = reference_stdio(tmp_path / "store", "load-unknown-ok")
    done = _pytest(tmp_path, "-v", "test_nothing.py", "--acp-agent", target, "-k", "load or fresh or test_own or http")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "acp-check::new.fresh-id PASSED" in out
    assert "acp-check::load.unknown FAILED" in out
    assert "acp-check::load.replays-once PASSED" in out
    assert "acp-check::http.session-header SKIPPED" in out
    assert "test_nothing.py::test_own PASSED" in out
    assert "status.unknown" not in out  # -k deselected it
    assert "false continuity" in out and '"method":"session/load"' in out
    assert "Traceback" not in out


def test_an_unreachable_agent_fails_each_item_with_one_message(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "-q", "--acp-agent", "stdio:/no/such/agent", "-k", "fresh or unknown", "test_nothing.py")
    assert done.returncode == 1
    assert done.stdout.count("cannot check stdio:/no/such/agent") >= 4
