"""Helpers of the router's fault tests: reference agents as processes (to pause with SIGSTOP, kill
and restart on their port), the router in this process, and a status poller that watches every
instance for a session ``active`` on two of them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import attrs
from websockets.asyncio.server import serve

from acp_client.pool import Endpoint, Probe
from acp_client.testing import SessionStore
from tests._support import eventually
from tests.examples._chat_support import EXAMPLES, _env

sys.path.insert(0, str(EXAMPLES))
from router import Router
from router_instances import Instance
from router_store import MemoryHomes, StoreHomes, open_store

_START_TIMEOUT = 30.0


class AgentProcess:
    """``python -m acp_client.testing.reference_agent --serve`` on a port it keeps across restarts."""

    def __init__(self, name: str, store: Path) -> None:
        self.name = name
        self.store = store
        self.port = 0
        self.url = ""
        self.process: asyncio.subprocess.Process | None = None
        self.paused = False

    async def start(self) -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "acp_client.testing.reference_agent",
            "--serve",
            "--store",
            str(self.store),
            "--name",
            self.name,
            "--port",
            str(self.port),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=_env(),
        )
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), _START_TIMEOUT)).decode()
        assert line.startswith("ws:"), line
        self.url = line.split()[1]
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        self.process = process

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)
        self.paused = False

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            if self.paused:
                self.resume()
            self.process.kill()
            await self.process.wait()

    async def restart(self) -> None:
        await self.kill()
        await self.start()

    def history(self, session_id: str) -> list[str]:
        """The texts of the session's history in the agents' shared store."""
        stored = SessionStore(self.store).load(session_id)
        return [entry.text for entry in stored.history] if stored is not None else []


@contextlib.asynccontextmanager
async def agents(tmp_path: Path, names: Sequence[str] = ("a", "b", "c")) -> AsyncIterator[list[AgentProcess]]:
    """Reference agents sharing one store directory, killed at the end."""
    processes = [AgentProcess(f"agent-{name}", tmp_path / "agent-store") for name in names]
    try:
        await asyncio.gather(*(agent.start() for agent in processes))
        yield processes
    finally:
        for agent in processes:
            await agent.kill()


def homes_factory(store: str | None, owner: str = "router-1") -> Callable[[Sequence[Endpoint]], MemoryHomes]:
    """The router's homes: in memory (``store=None``), or in a shared store (SQLite path or PostgreSQL URL)."""
    if store is None:
        return MemoryHomes
    shared = open_store(store)

    def homes(endpoints: Sequence[Endpoint]) -> MemoryHomes:
        return StoreHomes(endpoints, shared, owner=owner, lease=30, claim_wait=5)

    return homes


@contextlib.asynccontextmanager
async def routing(
    urls: Sequence[str], *, store: str | None = None, **options: float
) -> AsyncIterator[tuple[Router, str]]:
    """The router in this process on a loopback port: ``(router, ws_url)``."""
    router = Router(urls, homes=homes_factory(store), **options)  # type: ignore[arg-type]
    await router.homes.start()
    try:
        async with serve(router.handle, "127.0.0.1", 0) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            yield router, f"ws://127.0.0.1:{port}/acp"
            for editor in list(router.editors):
                await editor.close()
    finally:
        await router.aclose()


@attrs.define
class Poller:
    """Asks every instance ``session/status`` for the watched sessions, round after round, each
    over a kept link of its own (a paused instance simply gives no answer), and records every
    round in which two instances answered ``active`` for one session."""

    agents: Sequence[AgentProcess]
    timeout: float = 0.3
    sessions: set[str] = attrs.field(factory=set)
    rounds: int = 0
    #: (time.monotonic(), session id, the instances that answered active) for each round with two or more.
    doubles: list[tuple[float, str, tuple[str, ...]]] = attrs.field(factory=list)
    _probes: dict[str, Instance] = attrs.field(factory=dict)
    _stop: bool = False

    async def round(self) -> bool:
        if self._stop:
            return True
        for agent in self.agents:
            if agent.name not in self._probes or self._probes[agent.name].endpoint.url != agent.url:
                self._probes[agent.name] = Instance(Endpoint(agent.url, name=agent.name))
        for session_id in list(self.sessions):
            answers = await asyncio.gather(*(p.status(session_id, self.timeout) for p in self._probes.values()))
            active = tuple(a.endpoint.name for a in answers if a.probe is Probe.ACTIVE)
            if len(active) > 1:
                self.doubles.append((time.monotonic(), session_id, active))
        self.rounds += 1
        return False

    def longest_double(self, every: float) -> float:
        """The longest run of consecutive rounds with a session active twice, in seconds (a run's
        span plus one round's pace: how long it may have lasted unseen at its ends)."""
        longest = 0.0
        start = previous = None
        for when, _, _ in self.doubles:
            if previous is None or when - previous > every + 2 * self.timeout + 0.2:
                start = when
            previous = when
            assert start is not None
            longest = max(longest, when - start + every)
        return longest

    @contextlib.asynccontextmanager
    async def running(self, every: float = 0.05) -> AsyncIterator[Poller]:
        task = asyncio.ensure_future(eventually(self.round, timeout=600, every=every, what="the poller to stop"))
        try:
            yield self
        finally:
            self._stop = True
            await task
            for probe in self._probes.values():
                await probe.aclose()
