"""The soak over real transports, with its figures (issue 12).

    python benchmarks/soak.py --faults 500 [--transport ws|http] [--peer python_sdk|reference] [--seed N]
    python benchmarks/soak.py --quick          # a few faults per transport (CI smoke test)

One client, four sessions with prompts running all the time (short echoes and long streaming
turns), against a real peer through a fault proxy: cuts, short and long blackholes, refusal
windows, agent restarts, evictions, cuts during a streaming turn and cuts during a recovery, drawn
from one seeded random source (the same ``--seed`` gives the same schedule). The invariants are
checked as it runs (see ``tests/e2e/_soak.py``). Printed per run: faults by kind, prompts resolved,
violations (each listed), recovery latency percentiles per fault kind (drop -> connected, less the
retry policy's own waits) and the resource trend (this process's memory, tasks and file descriptors;
the subprocess peer's memory).

Exits 1 when a run saw a violation (the figures are printed first), unless ``--allow-violations``.
Needs the ``dev`` extra (the official ACP Python SDK, hypercorn, trustme) and runs from a checkout
(it uses ``tests/``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from pathlib import Path

from _common import environment

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e._soak import FAULT_KINDS, PEERS, TRANSPORTS, SoakReport, percentile, run_soak  # noqa: E402


async def _main(args: argparse.Namespace) -> int:
    transports = TRANSPORTS if args.transport == "all" else (args.transport,)
    reports: list[SoakReport] = []
    print(environment())
    for transport in transports:
        with tempfile.TemporaryDirectory(prefix="acp-soak-") as workdir:
            print(f"\n== {args.peer} over {transport}: {args.faults} faults, seed {args.seed}", flush=True)
            report = await run_soak(
                args.peer,
                transport,
                seed=args.seed,
                faults=args.faults,
                seconds=args.seconds,
                workdir=Path(workdir),
                progress=(lambda line: print(line, flush=True)) if not args.quick else None,
                kinds=tuple(args.kinds.split(",")) if args.kinds else FAULT_KINDS,
            )
        reports.append(report)
        print(report.format(), flush=True)
    print()
    print("summary (recovery latency, all kinds, ms):")
    for report in reports:
        values = [x for v in report.latencies.values() for x in v]
        p50 = percentile(values, 50) * 1000 if values else float("nan")
        p99 = percentile(values, 99) * 1000 if values else float("nan")
        print(
            f"  {report.peer:<11}{report.transport:<5} faults {sum(report.faults.values()):>4}  "
            f"prompts {report.resolved:>5}  violations {len(report.violations):>3}  p50 {p50:7.1f}  p99 {p99:7.1f}"
        )
    return 1 if any(report.violations for report in reports) and not args.allow_violations else 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="a soak over real transports, with its figures")
    parser.add_argument("--faults", type=int, help="faults per transport (default 500; --quick: 6)")
    parser.add_argument("--seconds", type=float, help="stop a run after this long even if faults remain")
    parser.add_argument("--transport", choices=("all", *TRANSPORTS), default="all")
    parser.add_argument("--peer", choices=PEERS, default="python_sdk")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--kinds", help=f"comma-separated fault kinds (default all: {','.join(FAULT_KINDS)})")
    parser.add_argument("--quick", action="store_true", help="a tiny run (CI smoke test)")
    parser.add_argument("--allow-violations", action="store_true", help="exit 0 even when a run saw violations")
    args = parser.parse_args(argv)
    if args.faults is None:
        args.faults = 6 if args.quick else 500
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(level=logging.ERROR)
    sys.exit(asyncio.run(_main(args)))


if __name__ == "__main__":
    main()
