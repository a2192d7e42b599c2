"""``benchmarks/store.py`` also measures the restore through ``AcpClient.connect()``: from opening the
store to the first ``session/status`` probe, against a plain connect, and compares SQLite with
PostgreSQL operation by operation, in the takeover after an owner dies, and in what a turn pays for being
written before ``prompt()`` returns (figures, not assertions)."""

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
    # SQLite and PostgreSQL side by side (issue 21): a throwaway server the benchmark starts itself.
    operations = ("save", "save_transcript", "get", "touch", "claim", "load (200 sessions)", "restore 200 sessions, ms")
    side_by_side = rows(output, operations)
    assert [row[0] for row in side_by_side] == list(operations), output
    for row in side_by_side:
        assert re.fullmatch(NUMBER, row[1]) and re.fullmatch(NUMBER, row[2]), row
        assert re.fullmatch(NUMBER + "x", row[3]), row
    assert "target (issue 21): PostgreSQL restores 200 sessions in < 200 ms" in output
    # The takeover after an owner dies, on both stores: the lease expiry, then the store's own cost.
    phases = ("expiry ms (median)", "claim ms (median)", "recover ms (median)", "takeover ms (median)")
    takeover = rows(output, phases)
    assert [row[0] for row in takeover] == list(phases), output
    for row in takeover:
        assert re.fullmatch(NUMBER, row[1]) and re.fullmatch(NUMBER, row[2]), row
    assert all(float(cell) >= 1000 for cell in takeover[0][1:3]), takeover  # nobody adopts before the lease ends
    # Per turn: prompt() returns once the turn is written; what each store adds to a turn.
    turns = rows(output, ("no store", "SQLite", "PostgreSQL"))
    assert [row[0] for row in turns[-3:]] == ["no store", "SQLite", "PostgreSQL"], output
    for row in turns[-3:]:
        assert row[1] == "100" and all(re.fullmatch(NUMBER, cell) for cell in row[2:4]), row
    for row in turns[-2:]:
        assert re.fullmatch("-?" + NUMBER, row[4]), row
