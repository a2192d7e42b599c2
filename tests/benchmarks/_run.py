"""Running a benchmark end to end for its tests: the script with ``--quick``, and its table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TIMEOUT = 120.0
NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"


def run(script: str, *args: str) -> str:
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=BENCHMARKS.parent,
        check=False,
    )
    assert completed.returncode == 0, f"{script} failed:\n{completed.stdout}\n{completed.stderr}"
    return completed.stdout


def rows(output: str, first_column: tuple[str, ...]) -> list[list[str]]:
    """The table rows (cells split on runs of 2+ spaces) whose first cell is in ``first_column``."""
    found = []
    for line in output.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] in first_column:
            found.append(cells)
    return found
