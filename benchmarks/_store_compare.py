"""``benchmarks/store.py``'s side-by-side section: SQLite and PostgreSQL doing the same store work.

Each store gets the same records (the restore benchmark's: two MCP servers, config options, a
mode, a title) for one endpoint. Per operation, ``count`` calls one after another on one thread
(as the client's store thread makes them): ``save`` (new records), ``save_transcript`` (a
conversation of a few turns), ``get``, ``touch``, ``claim`` (one session's lease) and ``load`` (the
whole endpoint, fewer rounds). ``restore`` is what a client does before its first probe: open the
store (PostgreSQL: connect, identify the schema, start the pool) + ``load`` + decode the MCP
servers, of ``sessions`` stored sessions, median of ``rounds`` opens.

PostgreSQL is a throwaway server this benchmark starts (``acp_client.testing.postgres``; the tests'
fixture uses the same code), on a Unix socket, with ``fsync`` off: the figures are the client's
and the protocol's cost, not a disk's. Both columns are wall time measured in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import fmt_ms, median, table

from acp_client.store import PostgresSessionStore, SqliteSessionStore, StoredSession, endpoint_key
from acp_client.testing.postgres import TemporaryPostgres
from acp_client.types import EnvVariable, McpServerHttp, McpServerStdio

URL = "wss://agent.example/acp"
#: The targets of issue 21 for restoring 1,000 sessions.
TARGETS = {"SQLite": 0.100, "PostgreSQL": 0.200}

_SERVERS = (
    McpServerStdio(name="fs", command="/usr/bin/mcp-fs", args=("--root", "/work"), env=(EnvVariable("TOKEN", "t"),)),
    McpServerHttp(name="search", url="https://mcp.example/search"),
)
_CONVERSATION = [
    {"format": 2, "dropped": 0},
    {"segment": "s", "began": "created", "lost": False},
    *({"role": "user" if i % 2 == 0 else "agent", "text": "x" * 200, "messageId": f"m{i}"} for i in range(8)),
]


def _record(index: int, prefix: str = "session") -> StoredSession:
    return StoredSession.from_mcp_servers(
        endpoint_key(URL),
        f"{prefix}-{index:05d}",
        f"/work/project-{index % 37}",
        _SERVERS,
        mode_id="code",
        config_options={"reasoning": "high", "tools": True},
        title=f"Conversation {index}",
    )


def _rate(calls: int, run: Callable[[int], object]) -> float:
    started = time.perf_counter()
    for index in range(calls):
        run(index)
    return calls / (time.perf_counter() - started)


def operations(store: Any, count: int) -> dict[str, float]:
    """Calls per second of each operation on ``store`` (a fresh one)."""
    key = endpoint_key(URL)
    records = [_record(index, "op") for index in range(count)]
    rates = {"save": _rate(count, lambda i: store.save(records[i]))}
    rates["save_transcript"] = _rate(count, lambda i: store.save_transcript(key, records[i].session_id, _CONVERSATION))
    rates["get"] = _rate(count, lambda i: store.get(key, records[i].session_id))
    rates["touch"] = _rate(count, lambda i: store.touch(key, records[i].session_id))
    rates["claim"] = _rate(count, lambda i: store.claim(key, [records[i].session_id], "bench", duration=30))
    rates[f"load ({count:,} sessions)"] = _rate(max(3, count // 50), lambda i: store.load(key))
    return rates


def restore(open_store: Callable[[], Any], rounds: int) -> float:
    """Median seconds of open + load + decode."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        store = open_store()
        for session in store.load(endpoint_key(URL)):
            session.decoded_mcp_servers()
        times.append(time.perf_counter() - started)
        store.close()
    return median(times)


def compare(directory: Path, *, sessions: int, count: int, rounds: int) -> None:
    """Print the side-by-side table (both stores, the same work)."""
    with TemporaryPostgres() as server:
        openers: dict[str, Callable[[str], Any]] = {
            "SQLite": lambda name: SqliteSessionStore(directory / f"{name}.db"),
            "PostgreSQL": lambda name: PostgresSessionStore(server.dsn(server.create_database(name))),
        }
        rates: dict[str, dict[str, float]] = {}
        restored: dict[str, float] = {}
        for kind, make in openers.items():
            with make("ops") as store:
                rates[kind] = operations(store, count)
            with make("restore") as store:
                for index in range(sessions):
                    store.save(_record(index))
            reopen: Callable[[], Any]
            if kind == "SQLite":
                reopen = lambda: SqliteSessionStore(directory / "restore.db")  # noqa: E731
            else:
                reopen = lambda: PostgresSessionStore(server.dsn("restore"))  # noqa: E731
            restored[kind] = restore(reopen, rounds)
    names = list(next(iter(rates.values())))
    rows = [
        [
            name,
            *(f"{rates[kind][name]:,.0f}" for kind in openers),
            f"{rates['SQLite'][name] / rates['PostgreSQL'][name]:.1f}x",
        ]
        for name in names
    ]
    rows.append(
        [
            f"restore {sessions:,} sessions, ms",
            *(fmt_ms(restored[kind]) for kind in openers),
            f"{restored['PostgreSQL'] / restored['SQLite']:.1f}x",
        ]
    )
    print(table(["store operation (calls/s)", "SQLite", "PostgreSQL", "SQLite/PostgreSQL"], rows))
    print()
    for kind, target in TARGETS.items():
        holds = "holds" if restored[kind] < target else "DOES NOT hold"
        print(
            f"target (issue 21): {kind} restores {sessions:,} sessions in < {target * 1000:.0f} ms: {holds} "
            f"(median {fmt_ms(restored[kind])} ms)"
        )
