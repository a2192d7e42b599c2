"""The soak over real transports (issue 12, item 4): WebSocket and Streamable HTTP, against the
official-Python-SDK agent and the reference agent, through a fault proxy, with the invariants of
``tests/e2e/_soak.py`` checked as it runs.

The default budget is a few seconds per peer and transport, so CI runs it; set ``ACP_SOAK_SECONDS``
for a longer soak (``python -m pytest -m soak``), ``ACP_SOAK_SEED`` to replay another fault schedule.
``benchmarks/soak.py --faults 500`` runs the long one and prints the figures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e._soak import run_soak

SOAK_SECONDS = float(os.environ.get("ACP_SOAK_SECONDS", "4"))
SOAK_SEED = int(os.environ.get("ACP_SOAK_SEED", "12"))


@pytest.mark.soak
@pytest.mark.timeout(SOAK_SECONDS + 240)
@pytest.mark.parametrize("transport", ["ws", "http"])
@pytest.mark.parametrize("peer", ["python_sdk", "reference"])
async def test_soak_over_real_transports(peer: str, transport: str, tmp_path: Path) -> None:
    report = await run_soak(peer, transport, seed=SOAK_SEED, seconds=SOAK_SECONDS, workdir=tmp_path)
    print(report.format())
    assert sum(report.faults.values()) > 0, report.format()
    assert report.prompts["finished"] > 0, report.format()
    assert report.final_state == "connected", report.format()
    assert not report.violations, report.format()
