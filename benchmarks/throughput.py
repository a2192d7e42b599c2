"""Session-update throughput: how many ``session/update`` notifications per second reach the app.

    python benchmarks/throughput.py [--quick] [--updates N] [--rounds R] [--speed both|with|without]
        [--mode warm|cold|both]

One prompt to a FAST local agent (``_fast_agent.py``, its own process) streams ``N``
``agent_message_chunk`` updates and then answers. For each client below, the figure is
``N / (time from sending the prompt until the prompt call returned with all N updates delivered
to the app)``, the median over R rounds (the clients take turns, round after round, so drift
hits all of them alike). Transport: WebSocket and Streamable HTTP (HTTP/1.1, cleartext).

Clients:

* ``acp_client on_update``: this SDK, ``AcpClient(callbacks=Callbacks(on_update=...))``, default settings (typed
  decoding, transcript kept).
* ``acp_client updates()``: the same, consuming ``SessionHandle.updates()`` in another task.
* ``official SDK 0.12.1``: ``agent-client-protocol``'s ``ClientSideConnection`` over
  ``acp.ws.create_websocket_stream`` / ``acp.http.create_http_stream``; its
  ``session_update`` callback counts (the SDK validates each update with pydantic).
* ``acp_client on_update, otel ...``: the ``on_update`` client with telemetry ``off``
  (``Telemetry(enabled=False)``: the client runs exactly as without the ``otel`` extra, no hook
  installed), ``API, no SDK`` (the extra installed, no SDK configured: the global no-op providers,
  the default of an app that installs the extra and configures nothing), and ``SDK, in-memory``
  (the OpenTelemetry SDK exporting every span and metric to memory). A table after the main one
  compares them with ``off``. Rows whose package is missing (the API, the SDK) are left out.
* ``raw``: no SDK. ``websockets`` + ``json.loads`` for WebSocket; ``httpx`` streaming + split on
  blank lines + ``json.loads`` for HTTP. A plain function is called per update. The floor of
  what any client on these libraries can do.

The ``speed`` extra (msgspec) decodes frames faster; a user who runs ``pip install acp-reconnect``
does not have it. ``--speed with`` measures the SDK as installed, ``--speed without`` hides msgspec
from it (the import fails, as if the extra were not installed), and ``--speed both`` (the default)
runs each in its own process and prints one table. Official SDK and raw rows are measured again
in each process, so every ratio compares clients that ran side by side, round after round.

Two harness modes (``--mode``; ``both`` prints one table each):

* ``warm`` (the default): one agent for every client; each client connects once, runs a warm-up
  prompt, then its R measured prompts on the same connection.
* ``cold``: every measured prompt is a client's first, on a connection of its own, to an agent
  process of its own started for it (what a script that connects, prompts once and exits sees; an
  independent harness measured this way). The clients still take turns, round after round.

Targets, per transport and mode: with the extra, >= 0.8x raw on both (the goal); without it, >= 3x the
official SDK (the floor). Every client runs on default settings: WebSocket compression is negotiated as
by default (permessage-deflate; the agent accepts it, as hypercorn and uvicorn do).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any, cast

import httpx
from _common import environment, fast_agent, fmt_rate, fmt_ratio, median, table
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect


def _hide_the_speed_extra(argv: list[str]) -> None:
    """For ``--speed without``: make ``import msgspec`` fail before acp_client is imported."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--speed", default="both")
    if early.parse_known_args(argv)[0].speed == "without":
        sys.modules["msgspec"] = None  # type: ignore[assignment]
        sys.modules["msgspec.json"] = None  # type: ignore[assignment]


_hide_the_speed_extra(sys.argv[1:])

from acp_client import AcpClient, Callbacks, SessionHandle, Telemetry, Timeouts, UpdateEvent  # noqa: E402  (after hiding the extra)
from acp_client._codec import _jsonrpc  # noqa: E402  (after hiding the extra)

CWD = "/tmp"
PROMPT_TIMEOUT = 120.0


class Bench:
    """One client under test: set up once, then :meth:`run` one prompt per round."""

    name = "?"

    def __init__(self, url: str, updates: int) -> None:
        self.url = url
        self.updates = updates
        self.count = 0

    async def setup(self) -> None:
        raise NotImplementedError

    async def prompt(self) -> None:
        """Send one prompt; return when it ended and every update reached the app."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    def deliver(self, _update: Any) -> None:
        self.count += 1

    async def run(self) -> tuple[float, float]:
        """One measured prompt: (updates per second, client CPU microseconds per update)."""
        self.count = 0
        gc.collect()
        start, cpu_start = time.perf_counter(), time.process_time()
        await asyncio.wait_for(self.prompt(), PROMPT_TIMEOUT)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        if self.count != self.updates:
            raise RuntimeError(f"{self.name}: {self.count} updates delivered, expected {self.updates}")
        return self.updates / elapsed, cpu / self.updates * 1e6


class OursListener(Bench):
    name = "acp_client on_update"

    def telemetry(self) -> Telemetry | None:
        return None  # the default

    async def setup(self) -> None:
        self.client = AcpClient(
            self.url,
            callbacks=Callbacks(on_update=self.on_update),
            timeouts=Timeouts(request=PROMPT_TIMEOUT),
            telemetry=self.telemetry(),
        )
        await self.client.connect()
        session = await self.client.new_session(CWD)
        self.handle: SessionHandle = self.client.session(session.session_id)

    def on_update(self, event: UpdateEvent) -> None:
        self.count += 1

    async def prompt(self) -> None:
        await self.handle.prompt("go")

    async def close(self) -> None:
        await self.client.aclose()


class OursTelemetryOff(OursListener):
    name = "acp_client on_update, otel off"

    def telemetry(self) -> Telemetry | None:
        return Telemetry(enabled=False)


class OursTelemetryApi(OursListener):
    name = "acp_client on_update, otel API, no SDK"

    def telemetry(self) -> Telemetry | None:
        return Telemetry()  # the global providers: no-ops until an app installs the SDK


class OursTelemetrySdk(OursListener):
    name = "acp_client on_update, otel SDK, in-memory"

    def telemetry(self) -> Telemetry | None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        tracers = TracerProvider()
        tracers.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        return Telemetry(tracer_provider=tracers, meter_provider=MeterProvider(metric_readers=[self.reader]))

    async def prompt(self) -> None:
        await super().prompt()
        self.reader.collect()  # what an exporter would do: the update counter read every export
        self.exporter.clear()


def _telemetry_benches(url: str, updates: int) -> list[Callable[[], Bench]]:
    """The telemetry rows that can run here (the API and the SDK may be missing)."""
    import importlib.util

    makers: list[Callable[[], Bench]] = [lambda: OursTelemetryOff(url, updates)]
    if importlib.util.find_spec("opentelemetry") is not None:
        makers.append(lambda: OursTelemetryApi(url, updates))
        if importlib.util.find_spec("opentelemetry.sdk") is not None:
            makers.append(lambda: OursTelemetrySdk(url, updates))
    return makers


class OursIterator(OursListener):
    name = "acp_client updates()"

    async def setup(self) -> None:
        self.client = AcpClient(self.url, timeouts=Timeouts(request=PROMPT_TIMEOUT))
        await self.client.connect()
        session = await self.client.new_session(CWD)
        self.handle = self.client.session(session.session_id)

    async def prompt(self) -> None:
        ready = asyncio.Event()

        async def consume() -> None:
            updates = cast(AsyncGenerator[UpdateEvent, None], self.handle.updates())
            first = asyncio.ensure_future(anext(updates))
            ready.set()
            await first
            self.count += 1
            async for _event in updates:
                self.count += 1
                if self.count == self.updates:
                    break
            await updates.aclose()

        consumer = asyncio.ensure_future(consume())
        await ready.wait()
        await asyncio.sleep(0)  # let the iterator subscribe before the prompt goes out
        await self.handle.prompt("go")
        await consumer


class _OfficialSink:
    """The official SDK's ``Client`` side: only ``session_update`` is needed here."""

    def __init__(self, bench: Bench) -> None:
        self._bench = bench

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self._bench.count += 1


class Official(Bench):
    name = "official SDK 0.12.1"

    async def setup(self) -> None:
        import acp
        from acp.http import create_http_stream
        from acp.ws import create_websocket_stream

        if self.url.startswith("ws"):
            transport = await create_websocket_stream(self.url)
        else:
            transport = create_http_stream(self.url)
        self.conn = acp.connect_to_agent(_OfficialSink(self), transport)  # type: ignore[arg-type]
        await self.conn.initialize(protocol_version=1)
        session = await self.conn.new_session(cwd=CWD, mcp_servers=[])
        self.session_id = session.session_id
        self.blocks: list[Any] = [acp.text_block("go")]

    async def prompt(self) -> None:
        await self.conn.prompt(session_id=self.session_id, prompt=self.blocks)

    async def close(self) -> None:
        await self.conn.close()


class RawWebSocket(Bench):
    name = "raw websockets+json"

    async def setup(self) -> None:
        self.ws: ClientConnection = await ws_connect(self.url, max_size=None, ping_interval=None)
        self.ids = itertools.count()
        await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        self.session_id = (await self.call("session/new", {"cwd": CWD, "mcpServers": []}))["sessionId"]

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = next(self.ids)
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        deliver = self.deliver
        loads = json.loads
        async for frame in self.ws:
            message = loads(frame)
            if message.get("method") == "session/update":
                deliver(message["params"])
            elif message.get("id") == request_id:
                return message["result"]
        raise ConnectionError("the agent hung up")

    async def prompt(self) -> None:
        prompt = [{"type": "text", "text": "go"}]
        await self.call("session/prompt", {"sessionId": self.session_id, "prompt": prompt})

    async def close(self) -> None:
        await self.ws.close()


class RawHttp(Bench):
    name = "raw httpx+SSE+json"

    async def setup(self) -> None:
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(PROMPT_TIMEOUT))
        self.ids = itertools.count()
        answer = await self.http.post(self.url, json=self.request("initialize", {"protocolVersion": 1}))
        self.connection_id = answer.headers["acp-connection-id"]
        self.streams: list[Any] = []
        self.connection_events = self.open_stream(None)
        self.session_id = (await self.call("session/new", {"cwd": CWD, "mcpServers": []}, None))["sessionId"]
        self.session_events = self.open_stream(self.session_id)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}

    def open_stream(self, session_id: str | None) -> Any:
        """An async iterator of the decoded messages of one SSE stream."""
        headers = {"accept": "text/event-stream", "acp-connection-id": self.connection_id}
        if session_id is not None:
            headers["acp-session-id"] = session_id
        client = self.http

        async def events() -> Any:
            async with client.stream("GET", self.url, headers=headers) as response:
                buffer = b""
                loads = json.loads
                async for chunk in response.aiter_bytes():
                    buffer += chunk
                    *complete, buffer = buffer.split(b"\n\n")
                    for event in complete:
                        for line in event.split(b"\n"):
                            if line.startswith(b"data:"):
                                yield loads(line[5:])

        iterator = events()
        self.streams.append(iterator)
        return iterator

    async def call(self, method: str, params: dict[str, Any], session_id: str | None) -> Any:
        message = self.request(method, params)
        headers = {"acp-connection-id": self.connection_id}
        if session_id is not None:
            headers["acp-session-id"] = session_id
        posted = await self.http.post(self.url, json=message, headers=headers)
        posted.raise_for_status()
        stream = self.session_events if session_id is not None else self.connection_events
        deliver = self.deliver
        async for item in stream:
            if item.get("method") == "session/update":
                deliver(item["params"])
            elif item.get("id") == message["id"]:
                return item["result"]
        raise ConnectionError("the stream ended")

    async def prompt(self) -> None:
        prompt = [{"type": "text", "text": "go"}]
        await self.call("session/prompt", {"sessionId": self.session_id, "prompt": prompt}, self.session_id)

    async def close(self) -> None:
        for stream in self.streams:
            await stream.aclose()
        await self.http.aclose()


async def _measure_cold(
    transport: str, makers: list[Callable[[str, int], Bench]], rounds: int, updates: int
) -> dict[str, list[tuple[float, float]]]:
    """Each measured prompt a fresh client's first, to a fresh agent (the ``cold`` mode)."""
    results: dict[str, list[tuple[float, float]]] = {}
    scheme = "ws" if transport == "WebSocket" else "http"
    for _ in range(rounds):
        for make in makers:
            with fast_agent(updates) as port:
                bench = make(f"{scheme}://127.0.0.1:{port}/acp", updates)
                await bench.setup()
                try:
                    results.setdefault(bench.name, []).append(await bench.run())
                finally:
                    await bench.close()
    return results


async def _measure(benches: list[Bench], rounds: int) -> dict[str, list[tuple[float, float]]]:
    results: dict[str, list[tuple[float, float]]] = {bench.name: [] for bench in benches}
    for bench in benches:
        await bench.setup()
    try:
        for bench in benches:  # warm-up: caches, the agent's pre-encoded blob, first-call imports
            await bench.run()
        for _ in range(rounds):
            for bench in benches:
                results[bench.name].append(await bench.run())
    finally:
        for bench in benches:
            await bench.close()
    return results


#: (transport, with the speed extra?) -> the target this SDK's rows must meet, as text and as a test
TARGETS: dict[tuple[str, bool], tuple[str, Callable[[float, float, float], bool]]] = {
    ("WebSocket", True): (">= 0.80x raw", lambda rate, official, raw: rate >= 0.8 * raw),
    ("HTTP", True): (">= 0.80x raw", lambda rate, official, raw: rate >= 0.8 * raw),
    ("WebSocket", False): (">= 3.00x official", lambda rate, official, raw: rate >= 3 * official),
    ("HTTP", False): (">= 3.00x official", lambda rate, official, raw: rate >= 3 * official),
}


def _rows(
    transport: str, speed: bool, results: dict[str, list[tuple[float, float]]], mode: str = "warm"
) -> list[dict[str, Any]]:
    """JSON-ready rows: what a child process hands to the parent."""
    return [
        {"transport": transport, "speed": speed, "client": name, "runs": runs, "mode": mode}
        for name, runs in results.items()
    ]


def _report(rows: list[dict[str, Any]]) -> list[list[str]]:
    def rate_of(row: dict[str, Any]) -> float:
        return median([rate for rate, _ in row["runs"]])

    def cpu_of(row: dict[str, Any]) -> float:
        return median([cpu for _, cpu in row["runs"]])

    by_key = {(row["transport"], row["speed"], row["client"]): row for row in rows}
    out = []
    for row in rows:
        transport, speed, name = row["transport"], row["speed"], row["client"]
        raw_name = RawWebSocket.name if transport == "WebSocket" else RawHttp.name
        official_row, raw_row = by_key[(transport, speed, Official.name)], by_key[(transport, speed, raw_name)]
        official, raw = rate_of(official_row), rate_of(raw_row)
        official_cpu, raw_cpu = cpu_of(official_row), cpu_of(raw_row)
        rate, cpu = rate_of(row), cpu_of(row)
        rates = [r for r, _ in row["runs"]]
        ours = name.startswith("acp_client")
        target, met = TARGETS[(transport, speed)]
        out.append(
            [
                transport,
                "msgspec" if speed else "none",
                name,
                fmt_rate(rate),
                f"{min(rates):,.0f}-{max(rates):,.0f}",
                fmt_ratio(rate / official) if ours else "",
                fmt_ratio(rate / raw) if ours else "",
                (("yes " if met(rate, official, raw) else "NO ") + f"({target})") if ours else "",
                f"{cpu:.2f}",
                f"{official_cpu / cpu:.2f}x / {raw_cpu / cpu:.2f}x" if ours else "",
            ]
        )
    return out


def _telemetry_report(rows: list[dict[str, Any]]) -> list[list[str]]:
    """Each telemetry row against the ``otel off`` row measured beside it."""
    prefix = "acp_client on_update, otel "
    off = {(r["transport"], r["speed"]): r for r in rows if r["client"] == prefix + "off"}
    out = []
    for row in rows:
        if not row["client"].startswith(prefix):
            continue
        base = off[(row["transport"], row["speed"])]
        rate, cpu = median([r for r, _ in row["runs"]]), median([c for _, c in row["runs"]])
        base_rate, base_cpu = median([r for r, _ in base["runs"]]), median([c for _, c in base["runs"]])
        out.append(
            [
                row["transport"],
                "msgspec" if row["speed"] else "none",
                row["client"][len(prefix) :],
                fmt_rate(rate),
                fmt_ratio(rate / base_rate),
                f"{cpu:.2f}",
                f"{cpu / base_cpu:.2f}x",
            ]
        )
    return out


#: The clients of the ``cold`` mode, per transport (the telemetry rows are the warm table's).
COLD: dict[str, list[Callable[[str, int], Bench]]] = {
    "WebSocket": [OursListener, OursIterator, Official, RawWebSocket],
    "HTTP": [OursListener, OursIterator, Official, RawHttp],
}


async def _measure_here(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every client on the chosen transports, in this process (msgspec as this process has it)."""
    _jsonrpc.decode_frame(b"{}")  # msgspec, if acp_client may use it, is imported with the first frame
    speed = _jsonrpc._fast_loads is not None
    rows: list[dict[str, Any]] = []
    if args.mode in ("warm", "both"):
        rows.extend(await _measure_warm(args, speed))
    if args.mode in ("cold", "both"):
        for transport, makers in COLD.items():
            if args.transport in ("all", transport.lower()):
                results = await _measure_cold(transport, makers, args.rounds, args.updates)
                rows.extend(_rows(transport, speed, results, "cold"))
    return rows


async def _measure_warm(args: argparse.Namespace, speed: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with fast_agent(args.updates) as port:
        ws_url = f"ws://127.0.0.1:{port}/acp"
        http_url = f"http://127.0.0.1:{port}/acp"
        plan: list[tuple[str, list[Callable[[], Bench]]]] = [
            (
                "WebSocket",
                [
                    lambda: OursListener(ws_url, args.updates),
                    lambda: OursIterator(ws_url, args.updates),
                    *_telemetry_benches(ws_url, args.updates),
                    lambda: Official(ws_url, args.updates),
                    lambda: RawWebSocket(ws_url, args.updates),
                ],
            ),
            (
                "HTTP",
                [
                    lambda: OursListener(http_url, args.updates),
                    lambda: OursIterator(http_url, args.updates),
                    *_telemetry_benches(http_url, args.updates),
                    lambda: Official(http_url, args.updates),
                    lambda: RawHttp(http_url, args.updates),
                ],
            ),
        ]
        for transport, makers in plan:
            if args.transport not in ("all", transport.lower()):
                continue
            results = await _measure([make() for make in makers], args.rounds)
            rows.extend(_rows(transport, speed, results))
    return rows


_ROWS_PREFIX = "ROWS "


def _measure_in_children(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``--speed both``: one child process with the extra, one without; their rows, in that order."""
    rows: list[dict[str, Any]] = []
    for speed in ("with", "without"):
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--speed",
            speed,
            "--emit-rows",
            "--updates",
            str(args.updates),
            "--rounds",
            str(args.rounds),
            "--transport",
            args.transport,
            "--mode",
            args.mode,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stdout + done.stderr)
            raise SystemExit(f"the --speed {speed} run failed (exit code {done.returncode})")
        line = next(line for line in done.stdout.splitlines() if line.startswith(_ROWS_PREFIX))
        rows.extend(json.loads(line[len(_ROWS_PREFIX) :]))
    return rows


def _print_table(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    speeds = sorted({row["speed"] for row in rows}, reverse=True)
    print()
    print(f"session/update throughput: {args.updates:,} agent_message_chunk updates per prompt")
    print(environment())
    if args.speed == "with" and speeds == [False]:
        print("note: msgspec is not installed, so even --speed with ran without the speed extra")
    if args.quick:
        print("--quick: a smoke run, too short for the figures to mean much")
    headers = [
        "transport",
        "extra",
        "client",
        "updates/s",
        "range",
        "vs official",
        "vs raw",
        "target met",
        "CPU us/update",
        "CPU: vs official / raw",
    ]
    titles = {
        "warm": f"warm: one connection per client, median of {args.rounds} alternating round(s) after 1 warm-up",
        "cold": f"cold: each prompt a fresh client's first, to a fresh agent, median of {args.rounds} alternating "
        "round(s)",
    }
    for mode, title in titles.items():
        chosen = [row for row in rows if row.get("mode", "warm") == mode]
        if chosen:
            print()
            print(title)
            print(table(headers, _report(chosen), align="lllrrrrlrr"))
    telemetry = _telemetry_report([row for row in rows if row.get("mode", "warm") == "warm"])
    if telemetry:
        print()
        print("telemetry: the on_update client with telemetry off, the API without an SDK, the SDK to memory")
        print(
            table(
                ["transport", "extra", "telemetry", "updates/s", "vs off", "CPU us/update", "CPU vs off"],
                telemetry,
                align="lllrrrr",
            )
        )
    print()
    print("extra: msgspec = with the speed extra (pip install 'acp-reconnect[speed]'); none = without it")
    print("updates/s: wall clock, prompt sent -> prompt returned with every update delivered to the app")
    print("CPU us/update: this process's CPU time per update (steadier than wall clock on a busy machine)")
    print(
        "targets, in both modes: with the extra, acp_client >= 0.80x raw on both transports (the goal); "
        "without it, >= 3.00x the official SDK on both (the floor; updates/s)"
    )


async def _main(args: argparse.Namespace) -> None:
    if args.speed == "both":
        rows = _measure_in_children(args)
    else:
        rows = await _measure_here(args)
        if args.emit_rows:
            print(_ROWS_PREFIX + json.dumps(rows))
            return
    _print_table(args, rows)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="session/update throughput of acp_client vs the official SDK and raw")
    parser.add_argument("--quick", action="store_true", help="a tiny run (CI smoke test), a few seconds")
    parser.add_argument("--updates", type=int, help="updates per prompt (default 50000; --quick: 1000)")
    parser.add_argument("--rounds", type=int, help="measured prompts per client (default 5; --quick: 1)")
    parser.add_argument("--transport", choices=("all", "websocket", "http"), default="all")
    parser.add_argument(
        "--speed",
        choices=("both", "with", "without"),
        default="both",
        help="with / without the speed extra (msgspec hidden from acp_client), or both in turn (default)",
    )
    parser.add_argument(
        "--mode",
        choices=("warm", "cold", "both"),
        default="warm",
        help="warm: one agent and connection per client, after a warm-up (default); cold: every prompt a fresh "
        "client's first, to a fresh agent; both: one table each",
    )
    parser.add_argument("--emit-rows", action="store_true", help=argparse.SUPPRESS)  # a child of --speed both
    args = parser.parse_args(argv)
    if args.updates is None:
        args.updates = 1000 if args.quick else 50000
    if args.rounds is None:
        args.rounds = 1 if args.quick else 5
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
