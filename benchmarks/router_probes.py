"""What finding sessions costs ``examples/router.py``: status probes and connects per attach.

    python benchmarks/router_probes.py [--quick] [--instances N] [--attaches A] [--prompts P]

Reference agents (in this process, one shared store) behind the router (in this process too).
Editors connect to the router one after another, each reopening (``session/load``) one of a few
sessions: every attach makes the router ask every instance ``session/status``. Those probes go
over the router's kept link to each instance, so a link is opened only the first time (or after
it broke): the connects per attach fall towards zero as attaches go on, where a fresh link per
probe (``locate()``) costs one connect and one ``initialize`` per instance and attach. Steady
prompting on a session costs no probe at all.

Printed per phase: attaches (or prompts), status probes, probe-link connects, per attach, and the
median milliseconds of one attach. Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from _common import environment, fmt_ms, median, table
from websockets.asyncio.server import serve

from acp_client import AcpClient
from acp_client.testing import ReferenceAgent, ReferenceServer, SessionStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from router import Router


async def measure(instances: int, attaches: int, prompts: int) -> list[list[str]]:
    store = SessionStore()
    servers = [ReferenceServer(ReferenceAgent(name=f"agent-{i}", store=store)) for i in range(instances)]
    for server in servers:
        await server.start()
    router = Router([server.ws_url for server in servers], probe_timeout=5.0)
    rows = []
    try:
        async with serve(router.handle, "127.0.0.1", 0) as listening:
            url = f"ws://127.0.0.1:{next(iter(listening.sockets)).getsockname()[1]}/acp"
            async with AcpClient(url, retry=None) as owner:
                sessions = [await owner.new_session("/tmp/acp-bench") for _ in range(min(3, instances))]
                ids = [session.session_id for session in sessions]
            for phase, count in (("first attaches", min(instances, attaches)), ("later attaches", attaches)):
                probes, connects = router.instances.probes, router.instances.connects
                took = []
                for index in range(count):
                    async with AcpClient(url, retry=None) as editor:
                        started = time.perf_counter()
                        await editor.load_session(ids[index % len(ids)], "/tmp/acp-bench")
                        took.append(time.perf_counter() - started)
                probes, connects = router.instances.probes - probes, router.instances.connects - connects
                rows.append(_row(phase, count, probes, connects, fmt_ms(median(took))))
            probes, connects = router.instances.probes, router.instances.connects
            async with AcpClient(url, retry=None) as editor:
                session = await editor.load_session(ids[0], "/tmp/acp-bench")
                probes, connects = router.instances.probes, router.instances.connects
                for index in range(prompts):
                    await session.prompt(f"turn {index}")
                probes, connects = router.instances.probes - probes, router.instances.connects - connects
            rows.append(_row("prompts", prompts, probes, connects, "-"))
            fresh = attaches * instances  # locate(): a connect and an initialize per instance and attach
            rows.append(_row("fresh links (locate())", attaches, fresh, fresh, "-", note="per design"))
    finally:
        await router.aclose()
        for server in servers:
            await server.aclose()
    return rows


def _row(phase: str, count: int, probes: int, connects: int, ms: str, *, note: str = "measured") -> list[str]:
    return [phase, str(count), str(probes), str(connects), f"{probes / count:.2f}", f"{connects / count:.2f}", ms, note]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer attaches (a smoke run)")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--attaches", type=int, default=None, help="default 25 (--quick: 6)")
    parser.add_argument("--prompts", type=int, default=None, help="default 20 (--quick: 3)")
    args = parser.parse_args()
    attaches = args.attaches or (6 if args.quick else 25)
    prompts = args.prompts or (3 if args.quick else 20)
    rows = asyncio.run(measure(args.instances, attaches, prompts))
    print(f"examples/router.py: status probes and connects per attach over {args.instances} instances")
    print(environment())
    print()
    headers = ["phase", "count", "probes", "connects", "probes/each", "connects/each", "attach ms", ""]
    print(table(headers, rows, align="lrrrrrrl"))
    print()
    print("probes go over one kept link per instance: after the first attaches, an attach costs one")
    print("session/status per instance and no connect; prompting costs no probe")
    return 0


if __name__ == "__main__":
    sys.exit(main())
