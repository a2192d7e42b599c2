"""Import time: how long ``import acp_client`` takes, next to the official SDK's ``import acp``.

    python benchmarks/import_time.py [--quick] [--rounds R]

Each figure is the time of the import statement alone, in a fresh interpreter (so no module is
cached; interpreter start-up is not counted), the median over R rounds: wall time, and the CPU time
(``time.process_time``) the import used, which a busy machine stretches much less; the candidates
take turns, round after round. ``acp_client (no msgspec)`` hides the speed extra (``import msgspec``
fails), as for a user who ran ``pip install acp-reconnect``.

Target (issue 22): ``import acp_client`` within 0.3x the official SDK's import time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from _common import environment, fmt_ratio, median, table

_SNIPPET = """\
import sys, time
{prelude}
start, cpu = time.perf_counter(), time.process_time()
import {module}
print(time.perf_counter() - start, time.process_time() - cpu)
"""

_HIDE_MSGSPEC = 'sys.modules["msgspec"] = None; sys.modules["msgspec.json"] = None'

#: (row label, module, prelude)
CANDIDATES = (
    ("acp_client", "acp_client", ""),
    ("acp_client (no msgspec)", "acp_client", _HIDE_MSGSPEC),
    ("acp (official SDK 0.12.1)", "acp", ""),
)
OFFICIAL = CANDIDATES[-1][0]


TARGET = 0.3
#: The children may write and read bytecode caches, as an installed package has them (with
#: PYTHONDONTWRITEBYTECODE set, a source tree would be compiled again on every import while the
#: official SDK's site-packages loads its cached bytecode).
_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _once(module: str, prelude: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one import in a fresh interpreter."""
    code = _SNIPPET.format(module=module, prelude=prelude)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_ENV)
    wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="import time of acp_client vs the official ACP SDK")
    parser.add_argument("--quick", action="store_true", help="a tiny run (CI smoke test)")
    parser.add_argument("--rounds", type=int, help="fresh interpreters per candidate (default 15; --quick: 2)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 15)
    times: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in CANDIDATES}
    for _label, module, prelude in CANDIDATES:  # warm-up: the file system cache, the bytecode caches
        _once(module, prelude)
    for _ in range(rounds):
        for label, module, prelude in CANDIDATES:
            times[label].append(_once(module, prelude))
    official = median([wall for wall, _ in times[OFFICIAL]])
    official_cpu = median([cpu for _, cpu in times[OFFICIAL]])
    rows = []
    for label, _, _ in CANDIDATES:
        walls = [wall for wall, _ in times[label]]
        value, cpu = median(walls), median([cpu for _, cpu in times[label]])
        ours = label != OFFICIAL
        rows.append(
            [
                label,
                f"{value * 1000:.1f}",
                f"{min(walls) * 1000:.1f}-{max(walls) * 1000:.1f}",
                fmt_ratio(value / official) if ours else "",
                f"{cpu * 1000:.1f}",
                fmt_ratio(cpu / official_cpu) if ours else "",
                ("yes" if cpu <= TARGET * official_cpu else "NO") if ours else "",
            ]
        )
    print()
    print(f"import time: median of {rounds} fresh interpreter(s) per module, alternating")
    print(environment())
    if args.quick:
        print("--quick: a smoke run, too short for the figures to mean much")
    print()
    headers = ["module", "ms", "range", "vs official", "CPU ms", "CPU vs official", "target met (CPU)"]
    print(table(headers, rows, align="lrrrrrl"))
    print()
    print(f"target (issue 22): import acp_client within {TARGET:g}x the official SDK's import time (on CPU time)")


if __name__ == "__main__":
    main()
