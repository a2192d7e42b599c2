"""README / docs/first-integration.md: an editable install of this checkout is one mypy follows
(issue 20). A real virtual environment, a real ``pip install -e`` of a copy of the project, and a
real ``mypy --strict`` of an app that imports ``acp_client`` from it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.peers.typescript_sdk import cache_root

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300

APP = """
from acp_client import AcpClient
from acp_client.sync import StateEvent, SyncEvent


def state_of(event: SyncEvent) -> str:
    return str(event.payload) if isinstance(event, StateEvent) else ""


client: AcpClient = AcpClient("ws://127.0.0.1:1/acp")
"""


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def test_mypy_finds_an_editable_install(tmp_path: Path) -> None:
    project = tmp_path / "checkout"
    shutil.copytree(ROOT / "acp_client", project / "acp_client", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    venv = tmp_path / "venv"
    # The venv sees this environment's packages (the dependencies, pip); pip builds the editable
    # install with the build-system requirements of pyproject.toml, as a user's pip does.
    assert (
        _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], tmp_path).returncode
        == 0
    )
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(project)]
    installed = _run(pip, tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    app = tmp_path / "app"
    app.mkdir()
    (app / "plugin.py").write_text(APP, encoding="utf-8")
    checked = _run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(cache_root() / "mypy"),  # shared by the suite's runs: what changed is checked again
            "--python-executable",
            str(python),
            "plugin.py",
        ],
        app,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Success: no issues found" in checked.stdout
