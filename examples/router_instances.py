"""What the router knows of each agent instance: a kept link for its probes, whether it answers,
and the copies of sessions it must close when it answers again.

Probes reuse links: each instance has at most one probe link (an ``AcpClient`` of its own, kept
open), and every ``session/status`` the router asks goes over it; a link is opened again only when
the last one broke. ``connects`` and ``probes`` count what that costs.

An instance that does not answer is **silent**, not absent. It counts as **gone** only on proof:

* its connection is refused (the process is not there), or
* it stayed silent for ``home_wait`` seconds in a row — and, with a shared store, no replica heard
  it within that time either (the instance's liveness record, renewed by every replica that hears
  it, expired).

An instance whose process restarted answers ``initialize`` on a new link with the new process's
answer: it is back, its memory is new (the sessions it held are ``inactive`` or unknown there), and
the router routes to it again as to any instance that answers.

A session moved away from an instance that was given up may still be in that instance's memory
when it comes back (a paused process wakes up): the router remembers such copies (``left``) and,
while any is left, asks the instance every ``sweep`` seconds (every 5 s while its connection is
refused: a process that comes back there is a new one); as soon as it answers, every copy it
reports ``active`` is closed (``session/close``) unless the session has come home there again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence

from acp_client import AcpClient, State, Timeouts
from acp_client.clock import SystemClock, fail_after
from acp_client.exceptions import AcpError, CapabilityNotSupported, ConnectError, RequestTimeout, RpcError
from acp_client.pool import Endpoint, InstanceAnswer, Probe
from acp_client.types import Implementation

logger = logging.getLogger("router")

#: The session id the router asks about when it only wants to hear an instance (-32002 is an answer).
LIVENESS_PROBE = "router-liveness-check"
_CLIENT_INFO = Implementation(name="acp-router-probe", version="1")
CLOCK = SystemClock()
#: Seconds between two looks at an instance that refuses connections and holds stale copies.
_REFUSED_SWEEP = 5.0


def refused(exc: BaseException) -> bool:
    """Whether a connect error was a refusal (nothing listens: the process is not there)."""
    seen: BaseException | None = exc
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:
        if isinstance(seen, ConnectionRefusedError) or getattr(seen, "errno", None) == errno.ECONNREFUSED:
            return True
        visited.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    return "connection refused" in str(exc).lower() or "connect call failed" in str(exc).lower()


class Instance:
    """One agent instance as the router sees it."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.client: AcpClient | None = None
        self._connecting = asyncio.Lock()
        #: The agent's identity from ``initialize`` on the last probe link (name, version).
        self.identity: tuple[str, str] | None = None
        #: ``time.monotonic()`` of its last answer, and of the first unanswered probe since then.
        self.heard: float | None = None
        self.silent_since: float | None = None
        #: Its last connect was refused (until a connect succeeds).
        self.refused = False
        self.failure: str | None = None
        #: Links opened to it, and status probes sent to it.
        self.connects = 0
        self.probes = 0
        #: Sessions moved away from it while it was given up: closed when it answers again.
        self.left: set[str] = set()
        self.sweeper: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Instance({self.endpoint.name})"

    # -- the probe link --------------------------------------------------------------------------

    async def _link(self, timeout: float) -> AcpClient:
        """The kept probe link, opened (connect + ``initialize``) when there is none or it broke."""
        async with self._connecting:
            client = self.client
            if client is not None and client.state.state is State.CONNECTED:
                return client
            self.client = None
            if client is not None:
                await _quietly(client.aclose())
            client = AcpClient(
                self.endpoint.url,
                retry=None,
                client_info=_CLIENT_INFO,
                timeouts=Timeouts(connect=timeout, request=None),
                keep_transcripts=False,
            )
            self.connects += 1
            try:
                await client.connect()
            except BaseException as exc:
                await _quietly(client.aclose())
                if isinstance(exc, ConnectError) and refused(exc):
                    self.refused = True
                raise
            info = client.agent_info
            identity = (info.name, info.version) if info is not None else ("", "")
            if self.identity is not None and identity != self.identity:
                logger.warning("%s answers as another agent now: %s (was %s)", self, identity, self.identity)
            self.identity = identity
            self.refused = False
            self.client = client
            return client

    def _answered(self) -> None:
        self.heard = time.monotonic()
        self.silent_since = None
        self.failure = None

    def _unanswered(self, started: float, why: str) -> None:
        if self.silent_since is None:
            self.silent_since = started
        self.failure = why

    async def status(self, session_id: str, timeout: float) -> InstanceAnswer:
        """``session/status`` over the kept link, within ``timeout`` (connect included); an
        instance that cannot answer is ``unreachable``, never an error."""
        started = time.monotonic()
        try:
            with fail_after(CLOCK, timeout):
                client = await self._link(timeout)
                self.probes += 1
                record = await client.session_status(session_id)
        except TimeoutError:
            error = RequestTimeout("session/status", timeout)
            self._unanswered(started, f"no answer within {timeout:g} s")
            return InstanceAnswer(self.endpoint, Probe.UNREACHABLE, elapsed=time.monotonic() - started, error=error)
        except (RpcError, CapabilityNotSupported) as exc:  # it answered, just not with a status
            self._answered()
            return InstanceAnswer(self.endpoint, Probe.UNREACHABLE, elapsed=time.monotonic() - started, error=exc)
        except AcpError as exc:
            self._unanswered(started, "connection refused" if self.refused else str(exc))
            return InstanceAnswer(self.endpoint, Probe.UNREACHABLE, elapsed=time.monotonic() - started, error=exc)
        self._answered()
        return InstanceAnswer(
            self.endpoint,
            record.status or Probe.INACTIVE,  # no status word: as an unknown one
            raw_status=record.raw_status,
            state=record.state,
            agent=client.agent_info,
            elapsed=time.monotonic() - started,
        )

    async def close_copy(self, session_id: str, timeout: float) -> bool:
        """``session/close`` for a copy of ``session_id`` here: ``True`` once it is not in memory."""
        try:
            with fail_after(CLOCK, timeout):
                client = await self._link(timeout)
                await client.close_session(session_id)
        except (TimeoutError, AcpError) as exc:
            logger.warning("could not close the stale copy of %s on %s: %s", session_id, self, exc)
            return False
        return True

    # -- what the router decides on ----------------------------------------------------------------

    def gone(self, home_wait: float, *, heard_elsewhere: bool = False) -> str | None:
        """Why this instance counts as gone (proof), or ``None`` while it may only be slow."""
        if self.refused:
            return "its connection is refused"
        if self.silent_since is None or heard_elsewhere:
            return None
        silent = time.monotonic() - self.silent_since
        if silent >= home_wait:
            return f"silent for {silent:.1f} s (no answer, no liveness record)"
        return None

    def usable(self) -> bool:
        """Whether new work may go here: it is not known to refuse or to be silent."""
        return not self.refused and self.silent_since is None

    def note_failure(self, exc: BaseException) -> None:
        """A link of an editor could not reach this instance (evidence for placement)."""
        started = time.monotonic()
        if isinstance(exc, ConnectError) and refused(exc):
            self.refused = True
        self._unanswered(started, str(exc) or type(exc).__name__)

    async def aclose(self) -> None:
        if self.sweeper is not None:
            self.sweeper.cancel()
        if self.client is not None:
            await _quietly(self.client.aclose())
            self.client = None


async def _quietly(closing: Awaitable[object]) -> None:
    with contextlib.suppress(AcpError):
        await closing


class Instances:
    """Every instance, the probes over their kept links, and the sweep of stale copies.

    Args:
        endpoints: The instances.
        probe_timeout: Seconds one probe (connect included) may take.
        home_wait: Seconds a silent instance is waited for before it counts as gone.
        sweep: Seconds between two attempts to reach an instance that holds stale copies.
        home_of: Where a session lives now (the store's answer), to never close a session at home.
        heard_elsewhere: Whether another replica heard an instance recently (a shared store's
            liveness record); ``None``: no shared store.
        heard: Called when an instance answers (a shared store renews its liveness record).
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        *,
        probe_timeout: float,
        home_wait: float,
        sweep: float,
        home_of: Callable[[str], Awaitable[Endpoint | None]],
        heard_elsewhere: Callable[[Endpoint], Awaitable[bool]] | None = None,
        heard: Callable[[Endpoint], Awaitable[None]] | None = None,
    ) -> None:
        self.by_name = {endpoint.name: Instance(endpoint) for endpoint in endpoints}
        self.probe_timeout = probe_timeout
        self.home_wait = home_wait
        self.sweep = sweep
        self._home_of = home_of
        self._heard_elsewhere = heard_elsewhere
        self._heard = heard
        #: Stale copies closed, as (session id, instance name, seconds from first sighting to closed).
        self.closed_copies: list[tuple[str, str, float]] = []
        self._tasks: set[asyncio.Task[bool]] = set()

    def __getitem__(self, endpoint: Endpoint | str) -> Instance:
        return self.by_name[endpoint if isinstance(endpoint, str) else endpoint.name]

    def __iter__(self) -> Iterator[Instance]:
        return iter(self.by_name.values())

    @property
    def connects(self) -> int:
        return sum(instance.connects for instance in self.by_name.values())

    @property
    def probes(self) -> int:
        return sum(instance.probes for instance in self.by_name.values())

    async def status(self, instance: Instance, session_id: str) -> InstanceAnswer:
        answer = await instance.status(session_id, self.probe_timeout)
        if answer.probe is not Probe.UNREACHABLE and self._heard is not None:
            await self._heard(instance.endpoint)
        return answer

    async def ask_all(self, session_id: str) -> list[InstanceAnswer]:
        """Every instance's answer for ``session_id``, at once."""
        return list(await asyncio.gather(*(self.status(i, session_id) for i in self.by_name.values())))

    async def gone(self, instance: Instance) -> str | None:
        """Proof that ``instance`` is gone, or ``None``."""
        heard = False
        if self._heard_elsewhere is not None and not instance.refused and instance.silent_since is not None:
            heard = await self._heard_elsewhere(instance.endpoint)
        return instance.gone(self.home_wait, heard_elsewhere=heard)

    async def wait_for(self, home: Instance, session_id: str) -> InstanceAnswer | str:
        """Ask a home that did not answer again until it answers (its answer) or is proven gone
        (the proof, a string). Bounded: a silent home is gone after ``home_wait`` seconds."""
        while True:
            answer = await self.status(home, session_id)
            if answer.probe is not Probe.UNREACHABLE or home.silent_since is None:
                return answer  # it answered (an error answer too: it is there, and says what it can)
            proof = await self.gone(home)
            if proof is not None:
                return proof
            logger.info("waiting for %s, home of %s: %s", home, session_id, home.failure)
            if answer.elapsed < self.probe_timeout / 2:  # it failed fast (refused, reset): pace the retries
                await asyncio.sleep(min(self.sweep, self.probe_timeout))

    # -- stale copies ------------------------------------------------------------------------------

    def left_behind(self, instance: Instance, session_id: str) -> None:
        """``session_id`` moved away from ``instance`` while it was given up: close the copy
        there as soon as it answers."""
        instance.left.add(session_id)
        if instance.sweeper is None or instance.sweeper.done():
            instance.sweeper = asyncio.ensure_future(self._sweep(instance))

    async def _sweep(self, instance: Instance) -> None:
        while instance.left:
            for session_id in list(instance.left):
                answer = await self.status(instance, session_id)
                if answer.probe is Probe.UNREACHABLE:
                    break  # still away: try again after a pause
                asked = time.monotonic() - answer.elapsed
                instance.left.discard(session_id)
                home = await self._home_of(session_id)
                if answer.probe is Probe.ACTIVE and home != instance.endpoint:
                    await self.close_stale(instance, session_id, since=asked)
            if instance.left:
                # Nothing listening there: the process that held the copies is gone, and whatever
                # listens next is a new one (nothing in memory), so there is no hurry. A silent
                # instance (paused, cut off) may wake with its copies any moment: keep the pace.
                await asyncio.sleep(max(self.sweep, _REFUSED_SWEEP) if instance.refused else self.sweep)

    async def close_stale(self, instance: Instance, session_id: str, *, since: float) -> bool:
        """Close a copy of ``session_id`` that is ``active`` on an instance that is not its home."""
        closed = await instance.close_copy(session_id, self.probe_timeout)
        took = time.monotonic() - since
        if closed:
            self.closed_copies.append((session_id, instance.endpoint.name, took))
            logger.warning("closed a stale copy of %s on %s (not its home; %.3f s)", session_id, instance, took)
        return closed

    def close_stale_soon(self, instance: Instance, session_id: str) -> None:
        """:meth:`close_stale` in the background (a status answer does not wait for it)."""
        task = asyncio.ensure_future(self.close_stale(instance, session_id, since=time.monotonic()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for instance in self.by_name.values():
            await instance.aclose()
