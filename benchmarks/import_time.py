"""Import time: how long ``import acp_client`` takes, next to the official SDK's ``import acp``.

    python benchmarks/import_time.py [--quick] [--rounds R]

Each figure is the wall time of the import statement alone, in a fresh interpreter (so no module
is cached; interpreter start-up is not counted), the median over R rounds; the candidates take
turns, round after round. ``acp_client (no msgspec)`` hides the speed extra (``import msgspec``
fails), as for a user who ran ``pip install acp-reconnect``.

Target (issue 7): ``import acp_client`` under half the official SDK's import time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from _common import environment, fmt_ratio, median, table

_SNIPPET = """\
import sys, time
{prelude}
start = time.perf_counter()
import {module}
print(time.perf_counter() - start)
"""

_HIDE_MSGSPEC = 'sys.modules["msgspec"] = None; sys.modules["msgspec.json"] = None'

#: (row label, module, prelude)
CANDIDATES = (
    ("acp_client", "acp_client", ""),
    ("acp_client (no msgspec)", "acp_client", _HIDE_MSGSPEC),
    ("acp (official SDK 0.12.1)", "acp", ""),
)
OFFICIAL = CANDIDATES[-1][0]


def _once(module: str, prelude: str) -> float:
    code = _SNIPPET.format(module=module, prelude=prelude)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="import time of acp_client vs the official ACP SDK")
    parser.add_argument("--quick", action="store_true", help="a tiny run (CI smoke test)")
    parser.add_argument("--rounds", type=int, help="fresh interpreters per candidate (default 15; --quick: 2)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 15)
    times: dict[str, list[float]] = {label: [] for label, _, _ in CANDIDATES}
    for _label, module, prelude in CANDIDATES:  # warm-up: the file system cache, .pyc files
        _once(module, prelude)
    for _ in range(rounds):
        for label, module, prelude in CANDIDATES:
            times[label].append(_once(module, prelude))
    official = median(times[OFFICIAL])
    rows = []
    for label, _, _ in CANDIDATES:
        value = median(times[label])
        ours = label != OFFICIAL
        rows.append(
            [
                label,
                f"{value * 1000:.1f}",
                f"{min(times[label]) * 1000:.1f}-{max(times[label]) * 1000:.1f}",
                fmt_ratio(value / official) if ours else "",
                ("yes" if value < 0.5 * official else "NO") if ours else "",
            ]
        )
    print()
    print(f"import time: median of {rounds} fresh interpreter(s) per module, alternating")
    print(environment())
    if args.quick:
        print("--quick: a smoke run, too short for the figures to mean much")
    print()
    print(table(["module", "ms", "range", "vs official", "target met"], rows, align="lrrrl"))
    print()
    print("target (issue 7): import acp_client < 0.50x the official SDK's import time")


if __name__ == "__main__":
    main()
