"""Where the recovery time goes, per transport: a phase breakdown of recoveries after a cut.

    python benchmarks/recovery_phases.py [--rounds R] [--sessions N] [--peer python_sdk|reference]
        [--load] [--quick]

One client with N sessions (default 4) against a real peer behind a fault proxy; each round cuts
every connection and times, from the client's own wire (a connector wrapper) and its states:

* ``notice``: the cut -> the client leaves ``connected``.
* ``backoff``: the retry policy's announced wait (``retry_in``), subtracted from ``net``.
* ``connect``: the client leaves ``connected`` -> ``initialize`` sent, less ``backoff`` (the
  WebSocket handshake; nothing on the wire yet for Streamable HTTP).
* ``init``: ``initialize`` sent -> its answer received. On Streamable HTTP the transport's
  ``send(initialize)`` returns once the connection stream (a GET) is open, so this covers the
  POST, the answer and that GET.
* ``recover``: the first recovery request (probe, resume or load) sent -> the last answer.
* ``report``: the last answer -> ``connected`` (outcomes built, callbacks run).
* ``net``: the client leaves ``connected`` -> ``connected`` again, less ``backoff``.
* ``tcp``: TCP connections the proxy accepted during the recovery.
* ``cpu``: CPU time spent from the cut to ``connected``, by this process (the client, and the
  fault proxy) and by the peer's server process (``python_sdk`` only; from ``/proc``, so averaged
  over the rounds). Under a loaded machine the wall-clock phases stretch; these do not.

Transports: WebSocket, Streamable HTTP/1.1 and HTTP/2 with prior knowledge (h2c). The peer is the
official-Python-SDK agent (no ``session/status``: the client resumes directly, or loads with
``--load``) or the reference agent (in this process: probe, then resume).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import environment, table

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from acp_client import AcpClient, Callbacks, ConnectionState, RetryPolicy, State  # noqa: E402
from acp_client.testing import FaultProxy  # noqa: E402
from acp_client.transports import connector_for  # noqa: E402
from tests.e2e._soak import _PythonSdkPeer, _ReferencePeer, percentile  # noqa: E402

POLICY = RetryPolicy(first_attempt_delay=0.0, initial_delay=0.05, max_delay=0.5, jitter=False, reset_after=0.0)


def _cpu_of(pid: int | None) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far, from ``/proc``."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


RECOVERY_METHODS = frozenset({"session/status", "session/resume", "session/load", "session/new"})


class Wire:
    """Timestamps of what the client sends and receives, per link."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.links = 0
        self.events: list[tuple[float, int, str, str]] = []  # (t, link, "send"/"recv", method)
        self.methods: dict[tuple[int, Any], str] = {}

    @property
    def target(self) -> str:
        return str(self.inner.target)

    async def connect(self) -> Any:
        transport = await self.inner.connect()
        self.links += 1
        wire, link = self, self.links

        class Watched:
            @property
            def info(self) -> Any:
                return transport.info

            async def send(self, message: Any) -> None:
                if isinstance(message, dict) and "method" in message and "id" in message:
                    wire.methods[(link, message["id"])] = message["method"]
                    wire.events.append((time.perf_counter(), link, "send", message["method"]))
                await transport.send(message)

            async def receive(self) -> Any:
                message = await transport.receive()
                if isinstance(message, dict) and "method" not in message and "id" in message:
                    method = wire.methods.get((link, message["id"]), "?")
                    wire.events.append((time.perf_counter(), link, "recv", method))
                return message

            async def aclose(self) -> None:
                await transport.aclose()

        return Watched()


async def _measure(peer: Any, transport: str, rounds: int, sessions: int) -> dict[str, list[float]]:
    async with FaultProxy("127.0.0.1", peer.port) as proxy:
        scheme_url = peer.url("ws" if transport == "ws" else "http")
        options = {"http2": transport == "h2c"} if transport != "ws" else {}
        wire = Wire(connector_for(proxy.url(scheme_url), **options))
        states: list[tuple[float, ConnectionState]] = []
        on_state = Callbacks(on_state_change=lambda s: states.append((time.perf_counter(), s)))
        client = AcpClient(wire, retry=POLICY, callbacks=on_state)
        keys = ("notice", "backoff", "connect", "init", "recover", "report", "net")
        figures: dict[str, list[float]] = {k: [] for k in keys}
        figures["tcp"] = []
        figures["cpu_client"] = []
        figures["cpu_server"] = []
        server_pid = getattr(getattr(peer, "process", None), "pid", None)
        async with client:
            handles = []
            for _ in range(sessions):
                created = await client.new_session("/tmp/acp-phases")
                handles.append(client.session(created.session_id))
            await asyncio.gather(*(h.prompt("hello") for h in handles))
            for _ in range(rounds + 1):  # the first one warms up
                states.clear()
                before = proxy.total_connections
                link = wire.links + 1
                cpu = time.process_time()
                server_cpu = _cpu_of(server_pid)
                cut = time.perf_counter()
                await proxy.cut()
                deadline = time.monotonic() + 30
                while not (states and states[-1][1].state is State.CONNECTED and len(states) > 1):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no recovery: {[str(s) for _, s in states]}")
                    await asyncio.sleep(0.002)
                figures["cpu_client"].append(time.process_time() - cpu)
                server_after = _cpu_of(server_pid)
                if server_cpu is not None and server_after is not None:
                    figures["cpu_server"].append(server_after - server_cpu)
                left = next(t for t, s in states if s.state is not State.CONNECTED)
                back = states[-1][0]
                backoff = sum(s.retry_in or 0.0 for _, s in states if s.state is State.RECONNECTING)
                link = wire.links  # the link that recovered
                mine = [e for e in wire.events if e[1] == link]
                init_sent = next(t for t, _, d, m in mine if d == "send" and m == "initialize")
                init_recv = next(t for t, _, d, m in mine if d == "recv" and m == "initialize")
                recovery = [e for e in mine if e[3] in RECOVERY_METHODS]
                first = min(t for t, _, d, _ in recovery if d == "send")
                last = max(t for t, _, d, _ in recovery if d == "recv")
                figures["notice"].append(left - cut)
                figures["backoff"].append(backoff)
                figures["connect"].append(init_sent - left - backoff)
                figures["init"].append(init_recv - init_sent)
                figures["recover"].append(last - first)
                figures["report"].append(back - last)
                figures["net"].append(back - left - backoff)
                figures["tcp"].append(float(proxy.total_connections - before))
                await asyncio.gather(*(h.prompt("again") for h in handles))
                await asyncio.sleep(0.1)
        for values in figures.values():
            del values[:1]  # the warm-up (the reference peer reports no server CPU)
        return figures


async def _main(args: argparse.Namespace) -> None:
    rows = []
    for transport in ("ws", "http1", "h2c"):
        with tempfile.TemporaryDirectory(prefix="acp-phases-") as workdir:
            if args.peer == "python_sdk":
                peer: Any = _PythonSdkPeer(Path(workdir), ("--no-resume",) if args.load else ())
            else:
                peer = _ReferencePeer()
            await peer.start()
            try:
                figures = await _measure(peer, transport, args.rounds, args.sessions)
            finally:
                await peer.aclose()
        row = [transport]
        for key in ("notice", "connect", "init", "recover", "report", "net"):
            values = figures[key]
            row.append(f"{statistics.median(values) * 1000:.1f} / {percentile(values, 99) * 1000:.1f}")
        row.append(f"{statistics.median(figures['tcp']):.0f}")
        for key in ("cpu_client", "cpu_server"):
            values = figures[key]
            row.append(f"{statistics.fmean(values) * 1000:.1f}" if values else "n/a")
        rows.append(row)
    print()
    print(
        f"recovery phases after a cut, {args.peer} peer{' (load)' if args.load else ''}, "
        f"{args.sessions} sessions, {args.rounds} rounds; ms, median / p99"
    )
    print(environment())
    print()
    headers = ["transport", "notice", "connect", "init", "recover", "report", "net", "tcp", "cpu client", "cpu server"]
    print(table(headers, rows, align="lrrrrrrrrr"))
    print("cpu: ms per recovery (mean), cut -> connected; the client's process includes the fault proxy")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="where the recovery time goes, per transport")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--peer", choices=("python_sdk", "reference"), default="python_sdk")
    parser.add_argument("--load", action="store_true", help="the SDK peer without session/resume (recovery loads)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = 2
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
