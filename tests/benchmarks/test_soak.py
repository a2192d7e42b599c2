"""The soak and recovery-phase benchmarks run end to end (``--quick``) and print their figures.

Nothing here asserts speed. What is checked: the scripts exit 0 (the soak exits 1 on any violation
of its invariants) and print every section.
"""

from __future__ import annotations

import re

from ._run import NUMBER, rows, run


def test_soak_prints_faults_resolutions_violations_latencies_and_resources() -> None:
    # Known bugs may show up: the soak tests judge them (tests/e2e/test_soak_real.py, which soaks the official
    # SDK's agent too). Here the script's sections are what counts: the in-process peer and three faults show
    # them all, in a third of the time of the default peer's six.
    output = run("soak.py", "--allow-violations", "--peer", "reference", "--faults", "3")
    for transport in ("ws", "http"):
        assert f"== reference over {transport}: 3 faults, seed 12" in output, output
    assert output.count("faults by kind: ") == 2, output
    assert output.count("prompts resolved: ") == 2, output
    assert len(re.findall(r"^violations: [0-9]+", output, re.MULTILINE)) == 2, output
    assert output.count("recovery latency (drop -> connected, less the policy's waits), ms:") == 2, output
    assert output.count("resources (first third -> last third, medians): ") == 2, output
    for transport in ("ws", "http"):
        pattern = (
            rf"reference\s+{transport}\s+faults\s+3\s+prompts\s+{NUMBER}\s+violations\s+[0-9]+\s+p50\s+{NUMBER}\s+p99"
        )
        assert re.search(pattern, output), output


def test_recovery_phases_prints_a_breakdown_per_transport() -> None:
    output = run("recovery_phases.py", "--sessions", "2")
    table = rows(output, ("ws", "http1", "h2c"))
    assert [row[0] for row in table] == ["ws", "http1", "h2c"], output
    for row in table:
        for cell in row[1:7]:
            assert re.fullmatch(rf"{NUMBER} / {NUMBER}", cell), row
