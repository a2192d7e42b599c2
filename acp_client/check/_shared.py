"""What the checks of one run share: one agent process (or connection) reused, and scenarios run once.

Spawning an agent is most of what a check costs (seconds for a real agent, tens of seconds on a
loaded machine), so the checks that need nothing but a working link and sessions of their own run,
one after the other, on the run's *shared link*: the preflight's own, kept open. A check that
needs isolation (a second instance, a link closed as after a drop, a restart) opens fresh links of
its own. The shared link is retired, and the next check that asks gets a fresh one, whenever a
check ended badly on it (a fail, a hang, a flood, an exit): what one check did to the agent never
decides another's verdict.

Scenarios that several checks judge (the replay after a restart, the cancelled turn and the turns
after it) run once, in the first check that needs them; the others read the same wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from ._link import MAX_ENTRIES, CheckFailed, Link, WireLog
from ._protocol import Handshake, initialize
from ._target import AgentHost, Target

logger = logging.getLogger(__name__)

#: A shared link that has kept this many inbound messages is replaced before the next check (a link
#: keeps at most ``MAX_ENTRIES``: a check must never wait on a link that has stopped keeping updates).
_FRESH_AFTER: Final = MAX_ENTRIES // 2
#: How long ending the shared agent may take (the stdio transport's TERM-then-KILL included).
_CLOSE_LIMIT: Final = 15.0


class Inconclusive(CheckFailed):
    """The check could not observe what it needs (an agent too slow to start, say): ``skip``, never ``fail``."""


class RunState:
    """The run's shared link and its scenarios."""

    def __init__(self, target: Target, *, timeout: float, proposed: int) -> None:
        self.target = target
        self.timeout = timeout
        self.proposed = proposed
        self.preflight_log = WireLog()
        self._host: AgentHost | None = None
        self._link: Link | None = None
        self.handshake: Handshake | None = None
        self._scenarios: dict[str, asyncio.Future[Any]] = {}
        #: Sessions of the shared link that no check has used yet (``session/new`` costs seconds with
        #: some agents: the checks that only need a fresh, idle session take one of these first).
        self.idle_sessions: list[str] = []

    async def start(self) -> Handshake:
        """Open and initialize the shared link (the preflight).

        Raises:
            CheckFailed: The agent could not be reached or initialized.
        """
        await self._open(self.preflight_log)
        assert self.handshake is not None
        return self.handshake

    async def _open(self, log: WireLog) -> Link:
        host = AgentHost(self.target, log, timeout=self.timeout, proposed=self.proposed)
        self._host = host
        link, self.handshake = await open_initialized(host, self.proposed)
        self._link = link
        return link

    async def link(self, log: WireLog, version: int) -> Link:
        """The shared link, recording into ``log`` from now on (a fresh one when the last was retired).

        Raises:
            Inconclusive: A fresh agent did not start or initialize in time.
            CheckFailed: It initialized in another version, or answered ``initialize`` with an error.
        """
        link = self._link
        if link is not None and not link.closed and len(link.inbound) < _FRESH_AFTER:
            link.log = log
            return link
        await self.retire()
        try:
            link = await self._open(log)
        except CheckFailed:
            await self.retire()
            raise
        assert self.handshake is not None
        if self.handshake.version != version:
            raise CheckFailed(f"a fresh agent agreed on protocol version {self.handshake.version}, not {version}")
        return link

    def kill(self) -> None:
        """SIGKILL the shared agent (a restart of a stdio agent kills every process)."""
        if self._host is not None:
            self._host.kill()

    async def retire(self) -> None:
        """End the shared link; the next check that asks gets a fresh one."""
        host, self._host, self._link = self._host, None, None
        self.idle_sessions.clear()
        if host is None:
            return
        try:
            await asyncio.wait_for(host.aclose(), _CLOSE_LIMIT)
        except asyncio.TimeoutError:
            logger.warning("ending the shared agent took longer than %g s: killing it", _CLOSE_LIMIT)
            host.kill()

    def is_shared(self, link: Link) -> bool:
        return link is self._link

    async def scenario(self, key: str, run: Callable[[], Awaitable[Any]]) -> Any:
        """The outcome of the scenario ``key``, run once by the first caller (its exception, if it raised)."""
        future = self._scenarios.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._scenarios[key] = future
            try:
                future.set_result(await run())
            except asyncio.CancelledError:
                future.set_exception(CheckFailed(f"the {key} scenario was cut off by its check's time limit"))
                raise
            except Exception as exc:
                future.set_exception(exc)
        return await asyncio.shield(future)

    async def aclose(self) -> None:
        await self.retire()
        for future in self._scenarios.values():
            if future.done() and not future.cancelled():
                with contextlib.suppress(BaseException):
                    future.exception()


async def open_initialized(host: AgentHost, proposed: int) -> tuple[Link, Handshake]:
    """A fresh link of ``host``, initialized.

    Raises:
        Inconclusive: The agent could not be reached, or did not answer ``initialize``, in time: an
            agent slow to start (a loaded machine) breaks no rule, so the check cannot say.
        CheckFailed: It could not be spawned, or answered ``initialize`` with an error or nonsense.
    """
    try:
        link = await host.open()
    except CheckFailed as exc:
        if "within" in exc.finding:
            raise Inconclusive(f"cannot check: the agent did not start in time ({exc.finding})") from None
        raise
    try:
        return link, await initialize(link, proposed)
    except CheckFailed as exc:
        if not link.closed and exc.finding.startswith("initialize was not answered"):
            raise Inconclusive(f"cannot check: the agent did not start in time ({exc.finding})") from None
        raise
