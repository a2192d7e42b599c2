"""``examples/editor_plugin.py`` runs headless: a fake editor loop over the sync facade survives a
connection cut in the middle of a turn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "editor_plugin.py"


def run_example(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("version", ["1", "2"])
def test_the_demo_survives_a_cut_mid_turn(tmp_path: Path, version: str) -> None:
    done = run_example("--protocol-version", version, "--cwd", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()

    def index(text: str) -> int:
        matches = [n for n, line in enumerate(lines) if text in line]
        assert matches, f"{text!r} not in the output:\n{done.stdout}"
        return matches[0]

    assert index("connection: connected") < index("you> hello from the editor")
    assert index("[dialog] user clicked: Allow") < index("agent> permission: selected allow")
    cut = index("[fault] cutting the connection in the middle of the answer")
    assert index("agent> echo: please explain") < cut
    recovered = index("[editor] recovered: resume")
    assert cut < index("turn interrupted by the drop") < recovered
    assert cut < index("connection: reconnecting") < index("connection: recovering") < recovered
    last = index("you> are you still there?")
    assert recovered < last < index("agent> echo: are you still there?")
    assert lines[-1] == "[editor] done: 3 turns completed, recoveries: resume"


def test_help_documents_the_example(tmp_path: Path) -> None:
    done = run_example("--help", cwd=tmp_path)
    assert done.returncode == 0
    for text in ("usage: editor_plugin.py", "--poll-ms", "--deadline", "bundled reference agent", "Exit status"):
        assert text in done.stdout
