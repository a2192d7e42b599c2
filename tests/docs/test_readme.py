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


def _section(text: str, title: str) -> str:
    """The README's section under ``## title``, up to the next one."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_readme_set_up_is_two_commands_and_says_how_long_the_suite_takes() -> None:
    """One command runs the demo, one runs the tests, and the reader knows what the second costs."""
    set_up = _section((ROOT / "README.md").read_text(encoding="utf-8"), "Set up")
    commands = re.findall(r"```sh\n(.*?)```", set_up, re.S)
    assert [command.strip() for command in commands] == [
        'python -m pip install -e ".[testing]" && python examples/chat.py --demo',
        'python -m pip install -e ".[dev]" && python -m pytest',
    ]
    assert re.search(r"about 22 minutes on two cores", set_up)
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_readme_keeps_one_current_benchmark_table() -> None:
    benchmarks = _section((ROOT / "README.md").read_text(encoding="utf-8"), "Benchmarks")
    header_rows = [line for line in benchmarks.splitlines() if re.match(r"\|\s*-{3}", line)]
    assert len(header_rows) == 1, "one table of current figures"
    for stale in ("target", "session 2", "evening", "code)", "previous", "before", "was "):
        assert stale not in benchmarks.lower(), f"history in the benchmarks: {stale!r}"
