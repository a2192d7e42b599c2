"""Helpers of the ``acp_client.sync`` tests: the agent side on a loop thread of its own, event waits."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from acp_client.sync import EventKind, EventLoopThread, SyncEvent
from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer
from acp_client.types import TextContent

T = TypeVar("T")

#: Upper bound of every wait in these tests (they normally take milliseconds).
DEADLINE = 10.0


def next_event(events: queue.Queue[SyncEvent], kind: EventKind, *, timeout: float = DEADLINE) -> SyncEvent:
    """The next event of ``kind`` (earlier events of other kinds are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no {kind.value} event within {timeout}s")
        try:
            event = events.get(timeout=remaining)
        except queue.Empty:
            continue
        if event.kind is kind:
            return event


def drain(events: queue.Queue[SyncEvent]) -> list[SyncEvent]:
    out: list[SyncEvent] = []
    while True:
        try:
            out.append(events.get_nowait())
        except queue.Empty:
            return out


def text_of(event: SyncEvent) -> str:
    content = getattr(event.payload.update, "content", None)
    return content.text if isinstance(content, TextContent) else ""


@attrs.define
class AgentSide:
    """The reference server behind a fault proxy, on a loop thread of their own."""

    loop: EventLoopThread
    agent: ReferenceAgent
    server: ReferenceServer
    proxy: FaultProxy

    @property
    def url(self) -> str:
        return self.proxy.url(self.server.ws_url)

    def cut(self) -> None:
        self.loop.run(self.proxy.cut(), timeout=DEADLINE)

    def restart(self) -> None:
        async def restart() -> None:
            await self.proxy.cut()
            self.agent.lose_memory()

        self.loop.run(restart(), timeout=DEADLINE)

    def evict_and_cut(self, session_id: str) -> None:
        async def evict() -> None:
            self.agent.evict(session_id)
            await self.proxy.cut()

        self.loop.run(evict(), timeout=DEADLINE)

    def agent_state(self, session_id: str) -> str | None:
        async def read() -> str | None:
            snapshot = self.agent.sessions.get(session_id)
            return snapshot.state if snapshot is not None else None

        return self.loop.run(read(), timeout=DEADLINE)


def client_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(("acp-client-loop", "acp-callbacks"))]


async def _blackhole(proxy: FaultProxy, on: bool) -> None:
    await proxy.blackhole(on)


async def _never() -> None:
    import asyncio

    await asyncio.Event().wait()


def give_ident(ended: threading.Thread, to: threading.Thread) -> None:
    """Make the ended thread ``ended`` carry the ident of the running thread ``to``, the state the
    OS leaves when it gives an ended thread's ident to a new one (it often does, but not on
    demand: this forces it). ``Thread.ident`` reads the private ``_ident``."""
    assert not ended.is_alive() and to.is_alive()
    ended._ident = to.ident  # type: ignore[attr-defined]
    assert ended.ident == to.ident


def on_a_thread_with_the_ident_of(ended: threading.Thread, fn: Callable[[], T]) -> T:
    """Call ``fn`` on a new thread that has the ident of the ended thread ``ended`` (see
    :func:`give_ident`); return what it returned, or raise what it raised."""
    go = threading.Event()
    outcome: list[Any] = []

    def call() -> None:
        go.wait(DEADLINE)
        try:
            outcome.append(("returned", fn()))
        except BaseException as exc:
            outcome.append(("raised", exc))

    caller = threading.Thread(target=call, name="recycled-ident")
    caller.start()
    give_ident(ended, caller)
    go.set()
    caller.join(DEADLINE)
    assert outcome, "the call did not end"
    how, value = outcome[0]
    if how == "raised":
        raise value
    result: T = value
    return result
