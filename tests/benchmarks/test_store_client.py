"""``benchmarks/store.py`` also measures the restore through ``AcpClient.connect()``: from opening the
store to the first ``session/status`` probe, against a plain connect (figures, not assertions)."""

from __future__ import annotations

import re

from ._run import NUMBER, rows, run


def test_store_benchmark_measures_through_the_client() -> None:
    output = run("store.py", "--sessions", "200")
    table = rows(
        output,
        (
            "no store: connect() → initialize answered",
            "store of 200: open → first probe sent",
            "added by the store",
        ),
    )
    assert len(table) == 3, output
    for row in table:
        assert re.fullmatch("-?" + NUMBER, row[1]), row
