"""``benchmarks/locate.py`` also measures ``AcpClient.locate()`` over a client's live links, and
the CPU a fan-out costs the client and the farm.

Figures only (nothing here asserts speed): the script exits 0 with every answer right, and both
tables have a row per transport with numbers in it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"


def test_locate_prints_the_client_fan_out_over_live_links() -> None:
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "locate.py"), "--instances", "4", "--rounds", "2", "--latency", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCHMARKS.parent,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "AcpClient.locate(): over the client's live links" in completed.stdout
    found = {}
    for line in completed.stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] in ("WebSocket", "HTTP", "WebSocket client", "HTTP client"):
            found[cells[0]] = cells
    assert sorted(found) == ["HTTP", "HTTP client", "WebSocket", "WebSocket client"]
    for cells in found.values():
        assert cells[1] == "0"
        assert all(re.fullmatch(NUMBER, cell) for cell in cells[2:4]), cells
        assert re.fullmatch(NUMBER + "x", cells[4]) and cells[8] in ("yes", "NO"), cells
        client_cpu, farm_cpu = cells[6:8]
        assert re.fullmatch(NUMBER, client_cpu) and float(client_cpu) > 0, cells  # this process did work
        assert re.fullmatch(NUMBER, farm_cpu), cells
