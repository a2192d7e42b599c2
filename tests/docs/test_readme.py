"""The README's recovery example runs as written (it starts its own agent and fault proxy)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_recovery_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    example = next(block for block in blocks if "FaultProxy" in block)
    script = tmp_path / "example.py"
    script.write_text(example, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("drop: resume, continuity=kept")  # the agent said active, over a network link
    assert lines[1].startswith("restart: replay, continuity=kept")  # every completed turn came back
    assert lines[2].startswith("evict: new_session, continuity=lost")
    assert lines[3] == "end_turn"


def test_readme_has_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'python -m pip install -e ".[dev]" && python examples/chat.py --demo' in text
    assert 'python -m pip install -e ".[dev]" && python -m pytest' in text
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
