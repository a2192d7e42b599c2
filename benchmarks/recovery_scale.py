"""Recovery at scale: N tracked sessions on one link, the link drops, all N recover (resume).

    python benchmarks/recovery_scale.py [--quick] [--sizes 100,1000,10000] [--transport all|websocket|http]
        [--agent process|inprocess|both] [--concurrency C] [--rounds R]

One client tracks N idle sessions on one link to the reference agent, reached directly on loopback,
either in a process of its own (``--agent process``: ``_farm.py`` with one instance; the target is
measured this way) or in this process, on the client's event loop (``--agent inprocess``: no
process switch per round trip, so the wall time is the CPU of both sides, one after the other —
what a quiet machine with one core would show). Each round the agent drops every connection (the
client sees a reset; the sessions stay in the agent's memory), and the client reconnects,
re-initializes, probes each session with ``session/status`` and resumes it (``session/resume``),
``recovery_concurrency`` sessions at a time. Per transport and N:

* ``recovery s``: wall time from the drop until the client is ``connected`` again with every one of
  the N outcomes reported (median of the rounds);
* ``ms/session``: that over N — flat from row to row when recovery is linear in N;
* ``client CPU s`` / ``agent CPU s``: CPU this process / the agent's process spent in that time
  (the wall figure stretches on a busy machine, these much less; in process: the two together,
  under ``client CPU s``);
* ``in flight``: the most recovery requests the client had sent and not yet seen answered at any
  moment (the bound ``recovery_concurrency`` puts on what the agent is sent at once);
* ``TCP``: TCP connections the agent accepted during one recovery (Streamable HTTP/1.1: the POSTs
  share pooled keep-alive connections; each open SSE stream holds one);
* ``KiB/session``: memory this process holds per idle tracked session (``tracemalloc``: what
  creating the N sessions left allocated, over N; not measured in process, where the agent's
  memory is this process's too);
* ``CPU vs WS``: the client CPU of the recovery over the WebSocket row's for the same N (the aim: an
  HTTP recovery within 1.5x WebSocket's client CPU).

The ``HTTP reattach`` rows are another failure: the network between client and agent fails (a
:class:`~acp_client.testing.FaultProxy` in front of the agent resets every connection) but the agent
keeps its HTTP connection (``resumable_streams``), so the client reattaches its SSE streams with
``Last-Event-ID`` — one ``GET`` per open stream (the connection stream and up to
``max_session_streams`` session streams), no request per session, the client ``connected``
throughout. ``recovery s`` there is the time from the cut until the agent has answered every
stream's reattachment (the benchmark asks it every 10 ms). They do not replace the probe-and-resume
rows: an agent that lost the connection, or any WebSocket drop, takes that path.

Targets: 10,000 sessions recover in <= 3 s on WebSocket and <= 6 s on HTTP, linear in N;
<= 5 KiB per idle tracked session; concurrency bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import time
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

from _common import Farm, environment, farm, fmt_ratio, median, table

from acp_client import AcpClient, Callbacks, ConnectionState, RecoveryOutcome, RecoveryPath, RetryPolicy, State
from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer, SessionStore
from acp_client.transports import HttpConnector, connector_for

POLICY = RetryPolicy(first_attempt_delay=0.0, initial_delay=0.05, max_delay=0.5, jitter=False, reset_after=0.0)
RECOVERY_METHODS = frozenset({"session/status", "session/resume", "session/load", "session/new"})
TARGET_SECONDS = {"WebSocket": 3.0, "HTTP": 6.0}
#: The row of a network cut the agent survives (streams reattached; no floor of its own).
_REATTACH = "HTTP reattach"
TARGET_KIB = 5.0
_CREATE_AT_ONCE = 64
_DEADLINE = 300.0
#: Streams an HTTP link keeps besides its connection stream (the connector's default).
_SESSION_STREAMS: int = HttpConnector.__init__.__kwdefaults__["max_session_streams"]
_POLL = 0.01


class InFlight:
    """A connector wrapper that counts the recovery requests sent and not yet answered."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.now = 0
        self.peak = 0
        self._waiting: set[Any] = set()

    @property
    def target(self) -> str:
        return str(self.inner.target)

    async def connect(self) -> Any:
        transport = await self.inner.connect()
        counter = self
        waiting: set[Any] = set()
        self._waiting = waiting

        class Counted:
            @property
            def info(self) -> Any:
                return transport.info

            async def send(self, message: Any) -> None:
                if type(message) is dict and message.get("method") in RECOVERY_METHODS and "id" in message:
                    waiting.add(message["id"])
                    counter.now = len(waiting)
                    counter.peak = max(counter.peak, counter.now)
                await transport.send(message)

            async def receive(self) -> Any:
                message = await transport.receive()
                if type(message) is dict and "method" not in message:
                    waiting.discard(message.get("id"))
                    counter.now = len(waiting)
                return message

            async def aclose(self) -> None:
                await transport.aclose()

        return Counted()


class Separate:
    """The agent in a process of its own (``_farm.py``, one instance)."""

    where = "process"

    def __init__(self, agent: Farm) -> None:
        self._agent = agent
        self.port = agent.ports[0]

    async def drop(self) -> None:
        await asyncio.to_thread(self._agent.drop)

    async def cut(self) -> None:
        await asyncio.to_thread(self._agent.cut)

    def reattached(self) -> int:
        return self._agent.reattached()

    def cpu(self) -> float | None:
        return self._agent.cpu()

    def tcp(self) -> int:
        return self._agent.tcp()


class InProcess:
    """The agent on this process's event loop (its CPU is this process's)."""

    where = "in process"

    def __init__(self, server: ReferenceServer, proxy: FaultProxy | None = None) -> None:
        self._server = server
        self._proxy = proxy
        self.port = proxy.port if proxy is not None else server.port
        self._cut_at = 0

    async def drop(self) -> None:
        await self._server.drop_connections()

    async def cut(self) -> None:
        assert self._proxy is not None
        self._cut_at = len(self._server.requests)
        await self._proxy.cut()

    def reattached(self) -> int:
        records = self._server.requests[self._cut_at :]
        return sum(1 for r in records if r.method == "GET" and r.status == 200 and r.header("last-event-id"))

    def cpu(self) -> float | None:
        return None

    def tcp(self) -> int:
        return self._server.tcp_connections


@contextlib.asynccontextmanager
async def in_process(resumable: bool = False) -> AsyncIterator[InProcess]:
    server = ReferenceServer(ReferenceAgent(name="instance-0", store=SessionStore()), resumable_streams=resumable)
    await server.start()
    try:
        if not resumable:
            yield InProcess(server)
            return
        async with FaultProxy("127.0.0.1", server.port) as proxy:
            yield InProcess(server, proxy)
    finally:
        await server.aclose()


async def _create(client: AcpClient, count: int, *, prompted: int = 0) -> None:
    """Open ``count`` sessions; the first ``prompted`` are opened first and prompted once (so their
    session streams carry an event id: a stream without one cannot be reattached, its break is a drop)."""
    gate = asyncio.Semaphore(_CREATE_AT_ONCE)

    async def one(prompt: bool) -> None:
        async with gate:
            handle = await client.new_session("/tmp/acp-scale")
            if prompt:
                await handle.prompt("hello")

    await asyncio.gather(*(one(True) for _ in range(prompted)))
    await asyncio.gather(*(one(False) for _ in range(count - prompted)))


async def measure(
    url: str, sessions: int, rounds: int, concurrency: int, agent: Separate | InProcess, *, reattach: bool = False
) -> dict[str, Any]:
    """One client with ``sessions`` tracked sessions; ``rounds`` drops (``reattach``: network cuts the
    agent survives); the figures."""
    options = {"http2": False} if url.startswith("http") else {}
    wire = InFlight(connector_for(url, **options))
    outcomes: list[RecoveryOutcome] = []
    states: list[ConnectionState] = []
    # Set by the callbacks when the round is over: waiting on it costs nothing while the client
    # works (a polling loop would add CPU in proportion to the wall time, to the client's figure).
    recovered = asyncio.Event()

    def done() -> bool:
        return (
            len(outcomes) >= sessions
            and any(s.state is not State.CONNECTED for s in states)
            and states[-1].state is State.CONNECTED
        )

    def outcome(value: RecoveryOutcome) -> None:
        outcomes.append(value)
        if done():
            recovered.set()

    def state(value: ConnectionState) -> None:
        states.append(value)
        if done():
            recovered.set()

    callbacks = Callbacks(
        on_resume=outcome,
        on_replay=outcome,
        on_new_session=outcome,
        on_recovery_failed=outcome,
        on_state_change=state,
    )
    client = AcpClient(wire, retry=POLICY, callbacks=callbacks, recovery_concurrency=concurrency)
    figures: dict[str, Any] = {"wall": [], "cpu": [], "agent_cpu": [], "tcp": [], "peak": []}
    async with client:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        await _create(client, sessions, prompted=min(sessions, _SESSION_STREAMS) if reattach else 0)
        gc.collect()
        figures["kib"] = (tracemalloc.get_traced_memory()[0] - before) / sessions / 1024
        tracemalloc.stop()
        for _ in range(rounds):
            outcomes.clear()
            states.clear()
            recovered.clear()
            wire.peak = 0
            tcp, agent_cpu = agent.tcp(), agent.cpu()
            start, cpu = time.perf_counter(), time.process_time()
            if reattach:
                await _reattach(agent, 1 + min(sessions, _SESSION_STREAMS))
                if outcomes or states:
                    raise SystemExit(f"a reattach became a reconnect: {len(outcomes)} outcomes, {states[-1:]}")
            else:
                await agent.drop()
                try:
                    await asyncio.wait_for(recovered.wait(), _DEADLINE)
                except asyncio.TimeoutError:
                    raise SystemExit(
                        f"no recovery of {sessions} sessions: {len(outcomes)} outcomes, {states[-1:]}"
                    ) from None
            figures["wall"].append(time.perf_counter() - start)
            figures["cpu"].append(time.process_time() - cpu)
            after = agent.cpu()
            figures["agent_cpu"].append(after - agent_cpu if after is not None and agent_cpu is not None else None)
            figures["tcp"].append(agent.tcp() - tcp)
            figures["peak"].append(wire.peak)
            paths = {outcome.path for outcome in outcomes}
            if not reattach and (paths != {RecoveryPath.RESUME} or len(outcomes) != sessions):
                raise SystemExit(f"expected {sessions} resumes, got {len(outcomes)}: {sorted(p.value for p in paths)}")
    return figures


async def _reattach(agent: Separate | InProcess, streams: int) -> None:
    """Cut the network; return once the agent answered the reattachment of ``streams`` streams."""
    await agent.cut()
    deadline = time.perf_counter() + _DEADLINE
    while agent.reattached() < streams:
        if time.perf_counter() > deadline:
            raise SystemExit(f"{agent.reattached()} of {streams} streams reattached")
        await asyncio.sleep(_POLL)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="recovery of N tracked sessions on one link")
    parser.add_argument("--quick", action="store_true", help="a smoke run (N = 20, 100; one round)")
    parser.add_argument("--sizes", default=None, help="session counts (default 100,1000,10000)")
    parser.add_argument("--transport", choices=("all", "websocket", "http"), default="all")
    parser.add_argument(
        "--agent", choices=("process", "inprocess", "both"), default="process", help="where the agent runs"
    )
    parser.add_argument("--concurrency", type=int, default=None, help="recovery_concurrency (default: the client's)")
    parser.add_argument("--rounds", type=int, default=None, help="drops per N (default 3; --quick: 1)")
    args = parser.parse_args(argv)
    sizes = [int(v) for v in (args.sizes or ("20,100" if args.quick else "100,1000,10000")).split(",")]
    rounds = args.rounds or (1 if args.quick else 3)
    concurrency = args.concurrency or _default_concurrency()
    places = ("process", "inprocess") if args.agent == "both" else (args.agent,)
    logging.basicConfig(level=logging.ERROR)
    rows = []
    cpu: dict[tuple[str, str, int], float] = {}
    for place in places:
        for name, scheme, reattach in (("WebSocket", "ws", False), ("HTTP", "http", False), (_REATTACH, "http", True)):
            if args.transport not in ("all", "http" if scheme == "http" else "websocket"):
                continue
            for sessions in sizes:
                figures, where = _run(place, scheme, sessions, rounds, concurrency, reattach=reattach)
                wall = median(figures["wall"])
                floor = TARGET_SECONDS.get(name)
                target = floor if floor is not None and sessions >= 10_000 and place == "process" else None
                cpu[(place, name, sessions)] = median(figures["cpu"])
                ws_cpu = cpu.get((place, "WebSocket", sessions))
                agent_cpu = [value for value in figures["agent_cpu"] if value is not None]
                rows.append(
                    [
                        name,
                        where,
                        f"{sessions:,}",
                        f"{wall:.3f}",
                        f"{wall / sessions * 1000:.3f}",
                        f"{median(figures['cpu']):.3f}",
                        f"{median(agent_cpu):.3f}" if agent_cpu else "(in client)",
                        f"{max(figures['peak'])}",
                        f"{median(figures['tcp']):.0f}",
                        f"{figures['kib']:.2f}" if place == "process" else "(with agent)",
                        fmt_ratio(cpu[(place, name, sessions)] / ws_cpu) if ws_cpu else "",
                        ("yes" if wall <= target else "NO") + f" (<= {target:g} s)" if target is not None else "",
                    ]
                )
                print("measured: " + "  ".join(rows[-1]), flush=True)  # a long run shows its progress
    print()
    print(f"recovery at scale: N idle sessions on one link resume after a drop (median of {rounds} round(s))")
    print(f"recovery_concurrency={concurrency}; {environment()}")
    print()
    headers = [
        "transport",
        "agent",
        "sessions",
        "recovery s",
        "ms/session",
        "client CPU s",
        "agent CPU s",
        "in flight",
        "TCP",
        "KiB/session",
        "CPU vs WS",
        "target",
    ]
    print(table(headers, rows, align="llrrrrrrrrrl"))
    print()
    print(
        f"targets: 10,000 sessions in <= {TARGET_SECONDS['WebSocket']:g} s (WebSocket) / "
        f"<= {TARGET_SECONDS['HTTP']:g} s (HTTP) with the agent in its own process, linear (ms/session flat), "
        f"<= {TARGET_KIB:g} KiB per idle tracked session, never more than recovery_concurrency recovery requests "
        f"in flight"
    )
    if args.transport != "websocket":
        print(
            f"{_REATTACH}: the network is cut, the agent keeps the connection; the client reattaches its streams "
            f"(Last-Event-ID), no request per session; recovery s = until the agent answered every reattachment"
        )


def _run(
    place: str, scheme: str, sessions: int, rounds: int, concurrency: int, *, reattach: bool
) -> tuple[dict[str, Any], str]:
    """One row's figures, with the agent where ``place`` says; and that place in words."""
    if place == "process":
        with farm(1, resumable=reattach) as running:
            agent = Separate(running)
            url = f"{scheme}://127.0.0.1:{agent.port}/acp"
            return asyncio.run(measure(url, sessions, rounds, concurrency, agent, reattach=reattach)), agent.where

    async def here() -> dict[str, Any]:
        async with in_process(reattach) as agent:
            url = f"{scheme}://127.0.0.1:{agent.port}/acp"
            return await measure(url, sessions, rounds, concurrency, agent, reattach=reattach)

    return asyncio.run(here()), InProcess.where


def _default_concurrency() -> int:
    from acp_client._engine._options import DEFAULTS

    return int(DEFAULTS["recovery_concurrency"])


if __name__ == "__main__":
    main()
