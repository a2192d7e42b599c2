"""Helpers shared by the benchmark scripts: statistics, tables, the fast agent subprocess.

Benchmarks print figures; they never assert speed.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

__all__ = [
    "FARM",
    "FAST_AGENT",
    "Farm",
    "ServingProcess",
    "environment",
    "farm",
    "fast_agent",
    "serving",
    "fmt_ms",
    "fmt_rate",
    "fmt_ratio",
    "median",
    "table",
]

FAST_AGENT = Path(__file__).with_name("_fast_agent.py")
FARM = Path(__file__).with_name("_farm.py")
_START_TIMEOUT = 15.0
_FARM_START_TIMEOUT = 120.0


def median(values: Sequence[float]) -> float:
    """The median (``nan`` for no values)."""
    return statistics.median(values) if values else float("nan")


def fmt_rate(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.0f}"


def fmt_ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


def fmt_ratio(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}x"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, align: str | None = None) -> str:
    """A plain-text table. ``align``: one ``l``/``r`` per column (default: first left, others right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(cell).ljust(width) if how == "l" else str(cell).rjust(width)
            for cell, width, how in zip(cells, widths, align, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def environment() -> str:
    """One line describing where the figures were taken."""
    from importlib import metadata

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "-"

    return (
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPU(s); websockets {version('websockets')}, httpx {version('httpx')}, "
        f"agent-client-protocol {version('agent-client-protocol')}"
    )


@contextlib.contextmanager
def serving(argv: Sequence[str], what: str, *, start_timeout: float = _START_TIMEOUT) -> Iterator[ServingProcess]:
    """Run a helper script that prints ``READY <words>`` once it serves and stops when its stdin
    closes; yields the process and the words. It stops when this block ends.

    Raises:
        RuntimeError: It exited, or said something else, or nothing within ``start_timeout``.
    """
    process = subprocess.Popen([sys.executable, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + start_timeout
        line = ""
        while not line:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                raise RuntimeError(f"{what} did not start (exit code {process.poll()})")
            ready, _, _ = select.select([process.stdout], [], [], remaining)
            if ready:
                line = process.stdout.readline()
                if not line:
                    raise RuntimeError(f"{what} exited early (exit code {process.wait()})")
        word, *words = line.split()
        if word != "READY":
            raise RuntimeError(f"unexpected line from {what}: {line!r}")
        yield ServingProcess(process, words)
    finally:
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@attrs.frozen
class ServingProcess:
    """A helper script that serves: its process (stdin and stdout are pipes) and what it said after
    ``READY``."""

    process: subprocess.Popen[str]
    words: list[str]


@contextlib.contextmanager
def fast_agent(updates: int) -> Iterator[int]:
    """Run ``_fast_agent.py`` in a subprocess; yields its port. It stops when this block ends."""
    with serving([str(FAST_AGENT), "--updates", str(updates)], "the fast agent") as served:
        [port] = served.words
        yield int(port)


class Farm:
    """The running ``_farm.py``: its instances' ports; asks it for its CPU and TCP figures, and to drop."""

    def __init__(self, process: subprocess.Popen[str], ports: list[int]) -> None:
        self.process = process
        self.ports = ports

    def _ask(self, command: str, answer: str) -> list[str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line.startswith(answer):
            raise RuntimeError(f"the farm answered {command!r} with {line!r}")
        return line.split()[1:]

    def cpu(self) -> float:
        """CPU seconds the farm has used so far."""
        return float(self._ask("cpu", "CPU ")[0])

    def tcp(self) -> int:
        """TCP connections the farm's instances accepted so far."""
        return int(self._ask("tcp", "TCP ")[0])

    def drop(self) -> None:
        """Every instance drops every connection (returns once they did; blocking: call it from a thread
        while a client's loop runs)."""
        self._ask("drop", "DROPPED")

    def cut(self) -> None:
        """Every ``--resumable`` instance's proxy resets its connections; the instances keep theirs (blocking)."""
        self._ask("cut", "CUT")

    def reattached(self) -> int:
        """Streams reopened with ``Last-Event-ID`` since the last :meth:`cut`."""
        return int(self._ask("reattached", "REATTACHED ")[0])


@contextlib.contextmanager
def farm(instances: int, latency_ms: float = 0.0, *, resumable: bool = False) -> Iterator[Farm]:
    """Run ``_farm.py`` (``instances`` reference agents, ``latency_ms`` one-way delay; ``resumable``:
    resumable streams behind fault proxies); yields it. It stops when this block ends."""
    argv = [str(FARM), "--instances", str(instances), "--latency", str(latency_ms)]
    if resumable:
        argv.append("--resumable")
    with serving(argv, "the farm", start_timeout=_FARM_START_TIMEOUT) as served:
        yield Farm(served.process, [int(port) for port in served.words])
