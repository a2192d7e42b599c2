"""Recovery latency: from a drop to the session being usable again, next to a raw floor.

    python benchmarks/recovery.py [--quick] [--rounds R]

Per transport (WebSocket, Streamable HTTP/1.1) and per recovery path, against the bundled
reference agent (``acp_client.testing``, ACP v1, served on loopback by ``ReferenceServer``):

* ``resume``: the connections are cut (``ReferenceServer.drop_connections()``: TCP resets from
  its fault proxy); the agent still has the session → ``session/status`` active → ``session/resume``.
* ``replay``: the agent restarts (``ReferenceAgent.lose_memory()``: memory cleared, store kept) and the
  connections are cut → inactive → ``session/load`` (the agent replays the history).
* ``new session``: the session is evicted (``ReferenceAgent.evict()``) and the connections are cut
  → ``-32002`` → ``session/new``.

**What is measured (acp_client).** ``t0`` = just before ``drop_connections()`` is called;
``usable`` = the moment the client publishes the state ``connected`` again. The client does that
only after the new connection is initialized, the session was probed and recovered, and the app's
recovery callback (``on_resume`` / ``on_replay`` / ``on_new_session``) returned; from then on a
request goes straight to the wire (nothing is queued). ``net = usable - t0 - slept``, where
``slept`` is the backoff the retry policy asked for during this outage (the ``retry_in`` of each
``reconnecting`` state; the policy is ``first_attempt_delay=0``, jitter off, ``reset_after=0``, so
it is 0 unless an attempt failed). The path the client took is checked against the expected one.

**The floor** (same run, same loop, an identical reference server of its own, the same fault
proxy in the path): after its previous connection was cut the same way, a fresh connection with
bare ``websockets`` (bare ``httpx`` + SSE for HTTP: ``POST initialize``, ``GET`` the connection
stream) + ``initialize`` + ``session/status`` + ``session/resume`` / ``session/load`` (its replay
read) / ``session/new``, until that last answer is read. It has no drop to notice, no state
machine, no typed decoding, no transcript and no callbacks: it is what any client needs at least.

Both then run one prompt on the recovered session (the "first prompt" columns: from ``usable``
until its answer), which also keeps the two sessions' histories equal for the next replay.

Target (issue 3): ``net`` within 2x the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import logging
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from _common import environment, fmt_ms, fmt_ratio, median, table
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

from acp_client import AcpClient, Callbacks, ConnectionState, RecoveryOutcome, RetryPolicy, State, Timeouts
from acp_client.testing import ReferenceAgent, ReferenceServer

CWD = "/tmp/acp-bench"
TIMEOUT = 15.0
PATHS = ("resume", "replay", "new_session")
INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
    "clientInfo": {"name": "raw-floor", "version": "0"},
}


class Ours:
    """acp_client on one reference server, recording when it is usable again."""

    def __init__(self, server: ReferenceServer, url: str) -> None:
        self.server = server
        self.url = url
        self.states: list[tuple[float, ConnectionState]] = []
        self.outcomes: list[tuple[float, RecoveryOutcome]] = []
        self.connected = asyncio.Event()
        # reset_after=0: every outage starts its backoff afresh (the default carries it over when the
        # connection lived less than 10 s, which a benchmark loop always does).
        policy = RetryPolicy(first_attempt_delay=0.0, jitter=False, reset_after=0.0)
        self.client = AcpClient(
            url,
            retry=policy,
            timeouts=Timeouts(request=TIMEOUT),
            callbacks=Callbacks(
                on_state_change=self._on_state,
                on_resume=self._on_outcome,
                on_replay=self._on_outcome,
                on_new_session=self._on_outcome,
                on_recovery_failed=self._on_outcome,
            ),
        )

    def _on_state(self, state: ConnectionState) -> None:
        self.states.append((time.perf_counter(), state))
        if state.state is State.CONNECTED:
            self.connected.set()

    def _on_outcome(self, outcome: RecoveryOutcome) -> None:
        self.outcomes.append((time.perf_counter(), outcome))

    async def start(self) -> None:
        await self.client.connect()
        session = await self.client.new_session(CWD)
        self.handle = self.client.session(session.session_id)
        await self.handle.prompt("hello")

    async def measure(self, path: str) -> dict[str, float]:
        agent = self.server.agent
        if path == "replay":
            agent.lose_memory()
        elif path == "new_session":
            agent.evict(self.handle.session_id)
        self.states.clear()
        self.outcomes.clear()
        self.connected.clear()
        gc.collect()
        start = time.perf_counter()
        await self.server.drop_connections()
        await asyncio.wait_for(self.connected.wait(), TIMEOUT)
        usable = next(t for t, state in self.states if state.state is State.CONNECTED)
        slept = sum(state.retry_in or 0.0 for _, state in self.states if state.state is State.RECONNECTING)
        if len(self.outcomes) != 1 or self.outcomes[0][1].path.value != path:
            taken = [outcome.path.value for _, outcome in self.outcomes]
            raise RuntimeError(f"expected one {path} recovery, got {taken}")
        callback, outcome = self.outcomes[0]
        await self.handle.prompt("again")
        prompted = time.perf_counter()
        return {
            "usable": usable - start,
            "slept": slept,
            "net": usable - start - slept,
            "callback": callback - start,
            "recovery": outcome.duration,
            "prompt": prompted - usable,
        }

    async def close(self) -> None:
        await self.client.aclose()


class RawFloor:
    """The floor: bare library calls, no SDK. Subclasses speak one transport."""

    def __init__(self, server: ReferenceServer) -> None:
        self.server = server
        self.ids = itertools.count()
        self.session_id = ""

    async def connect(self) -> None:
        raise NotImplementedError

    async def call(self, method: str, params: dict[str, Any], *, session_scoped: bool = False) -> Any:
        raise NotImplementedError

    async def disconnect(self) -> None:
        raise NotImplementedError

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}

    async def start(self) -> None:
        await self.connect()
        await self.call("initialize", INITIALIZE)
        self.session_id = (await self.call("session/new", {"cwd": CWD, "mcpServers": []}))["sessionId"]
        await self.prompt("hello")

    async def prompt(self, text: str) -> None:
        params = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        await self.call("session/prompt", params, session_scoped=True)

    async def measure(self, path: str) -> dict[str, float]:
        agent = self.server.agent
        if path == "replay":
            agent.lose_memory()
        elif path == "new_session":
            agent.evict(self.session_id)
        await self.server.drop_connections()
        await self.disconnect()
        gc.collect()
        start = time.perf_counter()
        await self.connect()
        await self.call("initialize", INITIALIZE)
        session = {"sessionId": self.session_id, "cwd": CWD, "mcpServers": []}
        try:
            status = await self.call("session/status", {"sessionId": self.session_id})
        except LookupError:  # -32002
            status = None
        if path == "resume":
            assert status is not None and status["status"] == "active", status
            await self.call("session/resume", session)
        elif path == "replay":
            assert status is not None and status["status"] == "inactive", status
            await self.call("session/load", session)
        else:
            assert status is None, status
            self.session_id = (await self.call("session/new", {"cwd": CWD, "mcpServers": []}))["sessionId"]
        usable = time.perf_counter()
        await self.prompt("again")
        prompted = time.perf_counter()
        return {"floor": usable - start, "prompt": prompted - usable}


def _result(message: dict[str, Any]) -> Any:
    if "error" in message:
        if message["error"].get("code") == -32002:
            raise LookupError(message["error"].get("message"))
        raise RuntimeError(f"agent error: {message['error']}")
    return message["result"]


class RawWebSocketFloor(RawFloor):
    ws: ClientConnection | None = None

    async def connect(self) -> None:
        self.ws = await ws_connect(self.server.ws_url)

    async def call(self, method: str, params: dict[str, Any], *, session_scoped: bool = False) -> Any:
        assert self.ws is not None
        message = self.request(method, params)
        await self.ws.send(json.dumps(message))
        async for frame in self.ws:
            reply = json.loads(frame)
            if "method" not in reply and reply.get("id") == message["id"]:
                return _result(reply)
        raise ConnectionError("the agent hung up")

    async def disconnect(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None


class RawHttpFloor(RawFloor):
    def __init__(self, server: ReferenceServer) -> None:
        super().__init__(server)
        self.http: httpx.AsyncClient | None = None
        # Built once: httpx would load the CA bundle for every new client (tens of ms), which is
        # not part of any floor.
        self.ssl = ssl.create_default_context()
        self.connection_id = ""
        self.streams: dict[str | None, AsyncIterator[dict[str, Any]]] = {}

    async def connect(self) -> None:
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT), verify=self.ssl)
        self.connection_id = ""
        self.streams = {}

    def _open(self, session_id: str | None) -> AsyncIterator[dict[str, Any]]:
        assert self.http is not None
        headers = {"accept": "text/event-stream", "acp-connection-id": self.connection_id}
        if session_id is not None:
            headers["acp-session-id"] = session_id
        client, url = self.http, self.server.http_url

        async def events() -> AsyncIterator[dict[str, Any]]:
            async with client.stream("GET", url, headers=headers) as response:
                response.raise_for_status()
                buffer = b""
                async for chunk in response.aiter_bytes():
                    buffer += chunk
                    *complete, buffer = buffer.split(b"\n\n")
                    for event in complete:
                        for line in event.split(b"\n"):
                            if line.startswith(b"data:"):
                                yield json.loads(line[5:])

        return events()

    async def call(self, method: str, params: dict[str, Any], *, session_scoped: bool = False) -> Any:
        assert self.http is not None
        message = self.request(method, params)
        url = self.server.http_url
        if method == "initialize":
            answer = await self.http.post(url, json=message)
            answer.raise_for_status()
            self.connection_id = answer.headers["acp-connection-id"]
            self.streams[None] = self._open(None)
            return _result(answer.json())
        headers = {"acp-connection-id": self.connection_id}
        key: str | None = None
        if session_scoped:
            key = params["sessionId"]
            headers["acp-session-id"] = key
            if key not in self.streams:
                self.streams[key] = self._open(key)
        posted = await self.http.post(url, json=message, headers=headers)
        posted.raise_for_status()
        async for reply in self.streams[key]:
            if "method" not in reply and reply.get("id") == message["id"]:
                return _result(reply)
        raise ConnectionError("the stream ended")

    async def disconnect(self) -> None:
        for stream in self.streams.values():
            await stream.aclose()  # type: ignore[attr-defined]
        self.streams = {}
        if self.http is not None:
            await self.http.aclose()
            self.http = None


async def _transport(name: str, rounds: int) -> list[list[str]]:
    rows = []
    async with ReferenceServer(ReferenceAgent()) as ours_server, ReferenceServer(ReferenceAgent()) as floor_server:
        url = ours_server.ws_url if name == "WebSocket" else ours_server.http_url
        ours = Ours(ours_server, url)
        floor: RawFloor = RawWebSocketFloor(floor_server) if name == "WebSocket" else RawHttpFloor(floor_server)
        await ours.start()
        await floor.start()
        mine: dict[str, list[dict[str, float]]] = {path: [] for path in PATHS}
        raw: dict[str, list[dict[str, float]]] = {path: [] for path in PATHS}
        try:
            for path in PATHS:  # warm-up
                await ours.measure(path)
                await floor.measure(path)
            for _ in range(rounds):
                for path in PATHS:
                    mine[path].append(await ours.measure(path))
                    raw[path].append(await floor.measure(path))
        finally:
            await ours.close()
            await floor.disconnect()
        for path in PATHS:

            def med(runs: list[dict[str, float]], key: str) -> float:
                return median([run[key] for run in runs])

            net, floor_ms = med(mine[path], "net"), med(raw[path], "floor")
            rows.append(
                [
                    name,
                    path,
                    fmt_ms(med(mine[path], "usable")),
                    fmt_ms(med(mine[path], "slept")),
                    fmt_ms(net),
                    fmt_ms(med(mine[path], "recovery")),
                    fmt_ms(floor_ms),
                    fmt_ratio(net / floor_ms),
                    "yes" if net <= 2 * floor_ms else "NO",
                    fmt_ms(med(mine[path], "prompt")),
                    fmt_ms(med(raw[path], "prompt")),
                ]
            )
    return rows


async def _main(args: argparse.Namespace) -> None:
    rows: list[list[str]] = []
    for name in ("WebSocket", "HTTP"):
        if args.transport in ("all", name.lower()):
            rows.extend(await _transport(name, args.rounds))
    print()
    print(f"recovery latency, ACP v1, reference agent on loopback; median of {args.rounds} round(s) (after 1 warm-up)")
    print(environment())
    if args.quick:
        print("--quick: a smoke run, too short for the figures to mean much")
    print()
    headers = [
        "transport",
        "path",
        "usable ms",
        "slept ms",
        "net ms",
        "(recovery)",
        "floor ms",
        "net/floor",
        "<= 2x",
        "1st prompt ms",
        "floor prompt ms",
    ]
    print(table(headers, rows, align="llrrrrrrlrr"))
    print()
    print("usable: drop_connections() called -> client state 'connected' again (after the path's callback)")
    print("net: usable - slept (backoff asked by the retry policy); (recovery): RecoveryOutcome.duration")
    print("floor: fresh connect + initialize + session/status + resume|load|new with bare websockets / httpx")
    print("1st prompt: one prompt right after usable, until its answer (ours / floor)")
    print("target (issue 3): net within 2x the floor")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="recovery latency of acp_client vs a raw floor")
    parser.add_argument("--quick", action="store_true", help="a tiny run (CI smoke test), a few seconds")
    parser.add_argument("--rounds", type=int, help="measured recoveries per path and transport (default 9; quick: 1)")
    parser.add_argument("--transport", choices=("all", "websocket", "http"), default="all")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 9
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
