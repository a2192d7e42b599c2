"""``benchmarks/router_probes.py``: the router's status probes and connects per attach.

Figures, and one fact they must show: after the first attaches the router's probes reuse its kept
links (no connect per attach), and prompting costs no probe.
"""

from __future__ import annotations

from tests.benchmarks._run import rows, run


def test_router_probes_print_probes_and_connects_per_attach() -> None:
    output = run("router_probes.py")
    assert "status probes and connects per attach" in output
    found = {cells[0]: cells for cells in rows(output, ("first attaches", "later attaches", "prompts"))}
    assert sorted(found) == ["first attaches", "later attaches", "prompts"], output
    first, later, prompts = found["first attaches"], found["later attaches"], found["prompts"]
    assert int(first[3]) == 3, first  # one probe link per instance, opened once
    assert int(later[2]) == 3 * int(later[1]) and int(later[3]) == 0, later  # reused: no connect per attach
    assert int(prompts[2]) == 0 and int(prompts[3]) == 0, prompts
