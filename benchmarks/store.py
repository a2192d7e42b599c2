"""Session store: how long restoring stored sessions adds before the first probe.

    python benchmarks/store.py [--quick] [--rounds R] [--sessions N]

A store file holds N sessions (default 1,000) for the endpoint the client connects to, and as
many again for another endpoint (so the figure includes finding this endpoint's rows among
others). Each session is realistic: two MCP servers (one with env credentials), config options, a
mode, a title, timestamps, and a stored transcript tail of the size the row names.

**What is measured.** ``restore`` = open the file (``SqliteSessionStore(path)``: identify it,
check its schema version, WAL) + ``load(endpoint_key(url))`` (every session, most recently used
first) + decode every session's MCP servers back into wire types — everything a client does with
the store before it can send the first ``session/status`` probe. Each round opens the file
afresh in this process (the OS file cache is warm after the first round: the ``first`` column is
the first open of the run). ``load`` alone is shown beside it. Transcript tails are kept apart
from the records and are not part of a restore; ``tail ms`` is reading the one tail a host draws
first (the most recently used session's).

**Through the client.** The ``AcpClient.connect()`` rows measure the same thing end to end, with
the bundled reference agent in this process over a memory link: from opening the store to the
moment the client sends its first ``session/status`` probe (``AcpClient(..., session_store=...)``:
open, load off the event loop, track every session again, start the first connection and its
recovery), against a plain ``connect()`` without a store until ``initialize`` is answered (when a
first probe could go out at the earliest). The difference is what the store adds.

**SQLite and PostgreSQL side by side** (``_store_compare.py``): calls per second of each store
operation and the restore time of the same sessions, on a throwaway PostgreSQL server the benchmark
starts and stops itself. ``--no-postgres`` leaves it out.

Target (issue 10): restoring 1,000 sessions adds under 100 ms before the first probe. Targets (issue
21): restoring 1,000 sessions under 100 ms on SQLite, under 200 ms on PostgreSQL.

**Per turn** (``_store_turns.py``): ``prompt()`` returns only once the turn's conversation is written;
the time of a turn through the client without a store, with SQLite and with PostgreSQL, and what each
store adds per turn.

**Takeover** (``_store_takeover.py``): after an owner dies (stops renewing, releases nothing),
the time until another owner has adopted (``adoptable()`` polled, one bulk ``claim()``) and recovered
(record and conversation read) its sessions: the lease expiry plus the store's own cost, both stores
side by side.

Sections run in order (``main``); each is a function printing its own table, listed in ``SECTIONS``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import environment, fmt_ms, median, table

from acp_client import AcpClient
from acp_client.store import SqliteSessionStore, StoredSession, endpoint_key
from acp_client.testing import MemoryConnector, ReferenceAgent
from acp_client.types import EnvVariable, McpServerHttp, McpServerStdio

URL = "wss://agent.example/acp"
OTHER = "stdio:agent --serve"
TARGET_SECONDS = 0.100


def build(path: Path, sessions: int, tail_bytes: int) -> None:
    servers = (
        McpServerStdio(
            name="fs", command="/usr/bin/mcp-fs", args=("--root", "/work"), env=(EnvVariable("TOKEN", "t"),)
        ),
        McpServerHttp(name="search", url="https://mcp.example/search"),
    )
    line = {"role": "agent", "text": "x" * 200, "messageId": "m"}
    per_entry = len('{"role":"agent","text":"","messageId":"m"},') + 200
    tail = tuple(line for _ in range(tail_bytes // per_entry))
    key = endpoint_key(URL)
    with SqliteSessionStore(path, max_transcript_bytes=max(tail_bytes, 1)) as store:
        for endpoint in (key, OTHER):
            for index in range(sessions):
                session_id = f"session-{index:05d}"
                store.save(
                    StoredSession.from_mcp_servers(
                        endpoint,
                        session_id,
                        f"/work/project-{index % 37}",
                        servers,
                        mode_id="code",
                        config_options={"reasoning": "high", "tools": True},
                        title=f"Conversation {index}",
                    )
                )
                if tail:
                    store.save_transcript(endpoint, session_id, tail)


def restore(path: Path) -> tuple[float, float, float, int]:
    """``(restore seconds, load seconds, first tail seconds, sessions restored)``."""
    started = time.perf_counter()
    store = SqliteSessionStore(path)
    loading = time.perf_counter()
    sessions = store.load(endpoint_key(URL))
    loaded = time.perf_counter()
    for session in sessions:
        session.decoded_mcp_servers()
    done = time.perf_counter()
    store.load_transcript(sessions[0].endpoint, sessions[0].session_id)
    tail_read = time.perf_counter() - done
    store.close()
    return done - started, loaded - loading, tail_read, len(sessions)


class _FirstProbe:
    """A connector whose links note when the first ``session/status`` goes out."""

    def __init__(self, inner: MemoryConnector) -> None:
        self.inner = inner
        self.first_probe: float | None = None
        self.probed = asyncio.Event()

    @property
    def target(self) -> str:
        return self.inner.target

    async def connect(self) -> Any:
        return _Watched(await self.inner.connect(), self)


class _Watched:
    def __init__(self, inner: Any, owner: _FirstProbe) -> None:
        self._inner, self._owner = inner, owner

    @property
    def info(self) -> Any:
        return self._inner.info

    async def send(self, message: Any) -> None:
        if self._owner.first_probe is None and isinstance(message, dict) and message.get("method") == "session/status":
            self._owner.first_probe = time.perf_counter()
            self._owner.probed.set()
        await self._inner.send(message)

    async def receive(self) -> Any:
        return await self._inner.receive()

    async def aclose(self) -> None:
        await self._inner.aclose()


async def through_client(path: Path | None) -> float:
    """Seconds from opening the store (``path``) to the first probe; without a store, from
    ``connect()`` to ``initialize`` answered."""
    connector = _FirstProbe(MemoryConnector(ReferenceAgent()))
    started = time.perf_counter()
    if path is None:
        client = AcpClient(connector, retry=None)  # type: ignore[arg-type]
        await client.connect()
        elapsed = time.perf_counter() - started
        await client.aclose()
        await connector.inner.aclose()
        return elapsed
    store = SqliteSessionStore(path)
    client = AcpClient(connector, retry=None, session_store=store, session_store_key=endpoint_key(URL))  # type: ignore[arg-type]
    connecting = asyncio.ensure_future(client.connect())
    await asyncio.wait_for(connector.probed.wait(), 60)
    assert connector.first_probe is not None
    elapsed = connector.first_probe - started
    connecting.cancel()
    await asyncio.gather(connecting, return_exceptions=True)
    await client.aclose()
    await connector.inner.aclose()
    store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, skip the 64 KiB tails")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--no-postgres", action="store_true", help="skip the SQLite/PostgreSQL comparison")
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 15)
    tails = (0, 4 * 1024) if args.quick else (0, 4 * 1024, 64 * 1024)

    print(f"Session store restore: {args.sessions:,} sessions for the endpoint (+{args.sessions:,} for another)")
    print(environment())
    rows = []
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="acp-store-bench-") as directory:
        for tail_bytes in tails:
            path = Path(directory) / f"store-{tail_bytes}.db"
            build(path, args.sessions, tail_bytes)
            size = path.stat().st_size + sum(p.stat().st_size for p in path.parent.glob(path.name + "-*"))
            results = [restore(path) for _ in range(rounds)]
            count = results[0][3]
            assert count == args.sessions, f"restored {count} sessions, expected {args.sessions}"
            total = [item[0] for item in results]
            loads = [item[1] for item in results]
            tails_read = [item[2] for item in results]
            worst = max(worst, median(total))
            rows.append(
                [
                    f"{tail_bytes // 1024} KiB tail",
                    f"{count:,}",
                    f"{size / 1e6:.1f}",
                    fmt_ms(total[0]),
                    fmt_ms(median(total)),
                    fmt_ms(max(total)),
                    fmt_ms(median(loads)),
                    fmt_ms(statistics.pstdev(total)),
                    fmt_ms(median(tails_read)),
                ]
            )
    print()
    print(
        table(
            [
                "transcript",
                "sessions",
                "file MB",
                "first ms",
                "restore ms (median)",
                "max ms",
                "load ms",
                "stdev ms",
                "tail ms",
            ],
            rows,
        )
    )
    print()
    with tempfile.TemporaryDirectory(prefix="acp-store-bench-") as directory:
        path = Path(directory) / "client.db"
        build(path, args.sessions, 0)
        plain = [asyncio.run(through_client(None)) for _ in range(rounds)]
        stored = [asyncio.run(through_client(path)) for _ in range(rounds)]
    added = median(stored) - median(plain)
    print(
        table(
            ["AcpClient.connect()", "ms (median)", "max ms"],
            [
                ["no store: connect() → initialize answered", fmt_ms(median(plain)), fmt_ms(max(plain))],
                [f"store of {args.sessions:,}: open → first probe sent", fmt_ms(median(stored)), fmt_ms(max(stored))],
                ["added by the store", fmt_ms(added), ""],
            ],
        )
    )
    worst = max(worst, added)
    print()
    holds = "holds" if worst < TARGET_SECONDS else "DOES NOT hold"
    print(
        f"target (issue 10): restoring {args.sessions:,} sessions adds < {TARGET_SECONDS * 1000:.0f} ms before the "
        f"first probe: {holds} (worst median {fmt_ms(worst)} ms)"
    )
    for section in SECTIONS:
        print()
        section(args, rounds)


def both_stores(args: argparse.Namespace, rounds: int) -> None:
    """SQLite and PostgreSQL doing the same work, side by side (``_store_compare.py``)."""
    if args.no_postgres:
        return
    from _store_compare import compare

    print(f"SQLite and PostgreSQL side by side ({args.sessions:,} sessions restored)")
    with tempfile.TemporaryDirectory(prefix="acp-store-bench-") as directory:
        compare(Path(directory), sessions=args.sessions, count=200 if args.quick else 1000, rounds=rounds)


def takeover_time(args: argparse.Namespace, rounds: int) -> None:
    """After an owner dies: until another has adopted and recovered its sessions (``_store_takeover.py``)."""
    if args.no_postgres:
        return
    from _store_takeover import takeover

    lease = 1.0 if args.quick else 2.0
    with tempfile.TemporaryDirectory(prefix="acp-store-bench-") as directory:
        takeover(Path(directory), sessions=args.sessions, lease=lease, poll=0.05, rounds=min(rounds, 3))


def turn_cost(args: argparse.Namespace, rounds: int) -> None:
    """What a turn pays for being written before ``prompt()`` returns (``_store_turns.py``)."""
    from _store_turns import turn_cost as measure

    with tempfile.TemporaryDirectory(prefix="acp-store-bench-") as directory:
        measure(Path(directory), sessions=5, turns=20 if args.quick else 100, postgres=not args.no_postgres)


#: The sections after the restore tables, in order: each ``(args, rounds) -> None`` prints its own.
SECTIONS: list[Callable[[argparse.Namespace, int], None]] = [both_stores, takeover_time, turn_cost]


if __name__ == "__main__":
    main()
