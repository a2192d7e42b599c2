"""The links of a pooled client (docs/many-instances.md): the pool's :class:`acp_client._link._links.Links`.

One supervisor per instance, started when first needed; where each session lives is learnt from
the engine's events; :class:`~acp_client.pool._failover.Failover` recovers across instances. A
session's calls wait in one outage queue while it moves or its home reconnects.

The client's state aggregates the links that matter (those homing a session, else the first
started one not failed): ``connected`` when all are, ``recovering`` while sessions move, else the
state of the first one not connected, as it is. The link shown keeps mattering until it is
connected again or its sessions moved, so the client follows its legal sequence instead of
jumping. A failed home whose sessions no instance could take makes the client ``suspended``
(attempt: failovers that found no instance; ``retry_in``: until the next).
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable, Sequence
from typing import Any

from .._link._authority import Authority
from .._link._events import SessionEvents
from .._link._links import LinkKit
from .._link._queue import OutageQueue, Ticket
from .._link._supervisor import Supervisor
from .._recovery import _probing
from .._recovery._probing import Live
from .._rpc._connection import Connection
from .._sessions._table import Tracked
from .._util._logging import get_logger
from .._util._tasks import TaskSet
from ..clock import move_on_after
from ..exceptions import AcpError, ClientClosed, TransportClosed
from ..location import Endpoint, Location, RouteKind
from ..state import ConnectionState, State
from ..transports._security import redact_url
from ..transports.base import Connector
from ._failover import Failover
from ._link import Link, placed
from ._placement import PlacementFunction

logger = get_logger("acp_client.reconnect")

#: The app's calls that attach a session where it is found (when it lives nowhere yet).
_ATTACHING = frozenset({"session/load", "session/resume"})


class PoolLinks(SessionEvents):
    """The links of a client facing several instances, in preference order (see the module docstring)."""

    def __init__(
        self,
        kit: LinkKit,
        endpoints: Sequence[Endpoint],
        connectors: Sequence[Connector],
        *,
        placement: PlacementFunction,
        failover_delay: float,
    ) -> None:
        self.links = [Link(endpoint, connector) for endpoint, connector in zip(endpoints, connectors, strict=True)]
        self.kit = kit
        kit.subscribe(self)  # where sessions live: settled, forgotten
        self._placement = placement
        self._table = kit.table
        self._clock = kit.clock
        self._probe_timeout = kit.timeouts.probe
        self._waiting: OutageQueue[None] = OutageQueue(kit.queue, kit.clock, waiting_for="still recovering")
        #: The link whose state the client shows while it is not connected (it keeps mattering).
        self._shown: Link | None = None
        self._changed = asyncio.Event()
        self._tasks = TaskSet("the endpoint group", kit.crashed)
        self._closing = False
        self._started = False
        self._failover = Failover(self, placement=placement, failover_delay=failover_delay)

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def queued(self) -> int:
        return len(self._waiting) + sum(supervisor.queued for supervisor in self.supervisors())

    def supervisors(self) -> list[Supervisor]:
        return [link.supervisor for link in self.links if link.supervisor is not None]

    def notify(self) -> None:
        """A link or a session's home changed: waiting calls look again."""
        self._changed.set()
        self._changed = asyncio.Event()
        self._waiting.release(None)

    def publish(self) -> None:
        """The aggregate state: the links that matter, the first one not connected decides."""
        if self.kit.state.state.is_terminal:
            return
        homed = {id(placed(tracked).home) for tracked in self._table if placed(tracked).home is not None}
        # A link being started (or whose start failed) does not count yet.
        started = [link for link in self.links if link.supervisor is not None and link.starting is None]
        fallback = [link for link in started if not link.state.is_terminal][:1]
        relevant = [link for link in started if id(link) in homed] or fallback
        shown = self._shown
        if shown is not None and shown in started and shown not in relevant and not shown.connected:
            relevant.append(shown)  # still the link the client shows: it follows it back
        if not relevant:
            return
        if any(placed(tracked).moving for tracked in self._table):
            self._shown = None  # its sessions are being recovered elsewhere: that is what the client shows
            self.kit.state.set(ConnectionState(State.RECOVERING))
            return
        waiting = [link for link in relevant if link.state.state is not State.CONNECTED]
        if not waiting:
            self._shown = None
            self.kit.state.set(ConnectionState(State.CONNECTED))
            return
        link = waiting[0]
        new = link.state
        if new.is_terminal:  # a home whose link gave up: its sessions wait for the next failover
            if link.failover_due is None:
                return  # a failover is under way (or none is due): nothing to show yet
            retry_in = max(0.0, link.failover_due - self._clock.monotonic())
            attempt = max(1, link.failed_moves)
            new = ConnectionState(State.SUSPENDED, attempt=attempt, retry_in=retry_in, cause=new.cause)
        self._shown = link
        self.kit.state.set(new)

    def fail(self, error: BaseException) -> None:
        """The client cannot go on (no instance answered, its store cannot be read, a bug)."""
        self._waiting.fail(lambda method: ClientClosed(f"the client failed: {error}"))
        self.kit.state.set(ConnectionState(State.FAILED, cause=str(error)))

    def close(self) -> None:
        """Mark the pool closed (before its links close)."""
        self._closing = True
        self._failover.closing()
        self.kit.state.set(ConnectionState(State.CLOSED, cause="closed by the app"))
        self.notify()

    async def aclose(self) -> None:
        self.close()
        await self._tasks.aclose()
        for link in self.links:
            if link.supervisor is not None:
                await link.supervisor.aclose()

    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        return self._tasks.spawn(coro)

    async def _warm(self, link: Link) -> None:
        try:
            await self.ensure(link)
        except AcpError as exc:
            logger.debug("no link to %s yet: %s", link.endpoint, exc)

    def link(self, endpoint: Endpoint | str) -> Link:
        for link in self.links:
            if endpoint in (link.endpoint, link.endpoint.name, link.endpoint.url):
                return link
        raise KeyError(str(endpoint) if isinstance(endpoint, Endpoint) else redact_url(endpoint))

    def _new_supervisor(self, link: Link) -> Supervisor:
        failover = self._failover

        def on_state(state: ConnectionState) -> None:
            link.state = state
            failover.state_changed(link, state)
            self.notify()
            self.publish()

        link.state = ConnectionState(State.CONNECTING)
        sup = self.kit.supervisor(
            link.connector,
            recover=functools.partial(failover.recover, link),
            on_drop=functools.partial(failover.dropped, link),
            on_state=on_state,
            on_fail=functools.partial(failover.failed, link),
        )
        link.authority = sup.guard(
            lambda request, note: Authority(self._admits(link), link.connector.target, request, note)
        )
        return sup

    def _admits(self, link: Link) -> Callable[[str], bool]:
        """Whether ``link`` may speak for a session: the session's home, or the instance it is
        being attached to; a session the client does not track is left to the usual handling."""
        table = self._table

        def admits(session_id: str) -> bool:
            tracked = table.get(session_id)
            if tracked is None:
                return True
            where = placed(tracked)
            if where.home is None and where.attaching is None:  # restored, not placed yet: its recorded home
                return self.recorded(tracked) is link
            return where.home is link or where.attaching is link

        return admits

    def recorded(self, tracked: Tracked) -> Link | None:
        """The instance the session store recorded ``tracked`` on (``None``: none, or gone)."""
        record = tracked.stored
        if record is None or record.home is None:
            return None
        return next((link for link in self.links if link.endpoint.name == record.home), None)

    async def ensure(self, link: Link, *, wait: float | None = None) -> Connection:
        """The link's live connection: started if it never was (or failed), else awaited for at
        most ``wait`` seconds while it reconnects.

        Raises:
            ClientClosed: The client is closing.
            AcpError: The link could not connect (or not within ``wait``).
        """
        while True:
            if self._closing:
                raise ClientClosed("the client is closed")
            sup = link.supervisor
            if link.connected and sup is not None and sup.connection is not None:
                return sup.connection
            if link.starting is not None:
                await asyncio.shield(link.starting)
                continue
            if not link.usable:
                await self._start(link)
                continue
            if wait is None:
                raise TransportClosed(f"{link.endpoint} is reconnecting")
            with move_on_after(self._clock, wait):  # the next change of a link or a session's home
                await self._changed.wait()
                continue
            raise TransportClosed(f"{link.endpoint} is reconnecting after {wait:g}s")

    async def _start(self, link: Link) -> None:
        loop = asyncio.get_running_loop()
        starting = link.starting = loop.create_future()
        sup = link.supervisor = self._new_supervisor(link)
        try:
            await sup.start()
        except BaseException as exc:
            link.supervisor = None if link.supervisor is sup else link.supervisor
            link.state = ConnectionState(State.FAILED, cause=str(exc))
            raise
        finally:
            link.starting = None
            if not starting.done():
                starting.set_result(None)
            self.notify()
            self.publish()  # its states while starting did not count
        if self._closing:
            await sup.aclose()
            raise ClientClosed("the client was closed while connecting")

    async def start(self, *, restored: bool) -> None:
        """Connect the first instance that answers (in the order given); with ``restored``
        sessions (from a store), find and recover them before the client counts as connected:
        ``connecting → recovering → connected``.

        Raises:
            AcpError: No instance could be connected (the last error).
        """
        self._started = True
        homeless = self._failover.homeless() if restored else []
        for tracked in homeless:
            record = tracked.stored  # the copies the last process knew of, closed before it is attached
            names = set(record.left_behind) if record is not None else set()
            placed(tracked).left_behind.update(link for link in self.links if link.endpoint.name in names)
            placed(tracked).moving = True  # its calls wait, and the first state published is recovering
        try:
            await self._start_first()
        finally:
            for tracked in homeless:
                placed(tracked).moving = False
        if homeless:  # where each one is now (its recorded home first), then a recovery where the route says
            await self._failover.adopt()

    async def _start_first(self) -> None:
        error: BaseException | None = None
        for link in self.links:
            try:
                await self.ensure(link)
            except ClientClosed:
                raise
            except AcpError as exc:
                logger.info("instance %s unavailable: %s", link.endpoint, exc)
                error = exc
                continue
            self.publish()
            return
        assert error is not None
        self.fail(error)
        raise error

    @property
    def primary(self) -> Supervisor:
        """The link for calls that concern no session: the first connected one, else the first
        started one."""
        for link in self.links:
            if link.connected and link.supervisor is not None:
                return link.supervisor
        for link in self.links:
            if link.supervisor is not None:
                return link.supervisor
        raise ClientClosed("not connected: call connect() first")

    def live(self) -> dict[Endpoint, Live]:
        """The connected links with what their instance answered to ``initialize``."""
        return {link.endpoint: live for link in self.links if link.supervisor and (live := link.supervisor.live())}

    async def place_link(self) -> Link:
        """Where a new session goes: the policy's choice among the instances, connected; an
        instance that cannot be connected is left out and the policy asked again.

        Raises:
            AcpError: No instance could be connected (the last error).
        """
        candidates = [link.endpoint for link in self.links]
        error: BaseException | None = None
        while candidates:
            chosen = self._placement(tuple(candidates), self.session_counts())
            if chosen not in candidates:
                raise AcpError(f"the placement policy chose {chosen!r}, which is not a candidate")
            link = self.link(chosen)
            try:
                await self.ensure(link, wait=self.kit.queue.max_age)
            except ClientClosed:
                raise
            except AcpError as exc:
                error = exc
                candidates.remove(chosen)
                continue
            return link
        assert error is not None
        raise error

    def session_counts(self) -> dict[Endpoint, int]:
        homed = collections.Counter(placed(tracked).home for tracked in self._table.live())
        return {link.endpoint: homed[link] for link in self.links}

    def home(self, tracked: Tracked) -> Link:
        home = placed(tracked).home
        return home if home is not None else self.links[0]

    async def link_for(self, tracked: Tracked | None, method: str, ticket: Ticket | None = None) -> Supervisor:
        """Where a call goes: a session's to its home instance's link (waiting while it moves);
        a ``session/new`` where the placement puts it; any other to the primary link."""
        if not self._started and not self._closing:
            raise ClientClosed("not connected: call connect() first")
        if tracked is None:
            if method != "session/new":
                return self.primary
            link = await self.place_link()
        elif method in _ATTACHING and placed(tracked).home is None:
            link = await self._found(tracked)
        else:
            return await self.session_link(tracked, method, ticket)
        assert link.supervisor is not None
        return link.supervisor

    async def _found(self, tracked: Tracked) -> Link:
        """Where the app's ``session/load`` / ``session/resume`` of a session that lives nowhere
        yet goes: where its recorded home, else a fan-out, finds it (active, else inactive), else
        to the first connected instance (which will answer -32002)."""
        location = (await self.locate_at_home([tracked]))[tracked.session_id]
        recorded = self.recorded(tracked)
        route = location.route(home=recorded.endpoint.name if recorded is not None else None)
        found = route.endpoint if route.kind in (RouteKind.RESUME, RouteKind.REPLAY) else None
        link = self.link(found) if found is not None else self._link_of(self.primary)
        await self.ensure(link, wait=self.kit.queue.max_age)
        placed(tracked).attaching = link  # its replay comes from there before it settles
        return link

    def _link_of(self, supervisor: Supervisor) -> Link:
        return next(link for link in self.links if link.supervisor is supervisor)

    def settled(self, tracked: Tracked, link: Supervisor) -> None:
        placed(tracked).home = self._link_of(link)
        placed(tracked).attaching = None
        self.publish()

    def forgotten(self, tracked: Tracked) -> None:
        placed(tracked).home = None
        placed(tracked).attaching = None
        placed(tracked).left_behind.clear()
        self.publish()

    def endpoint_of(self, tracked: Tracked) -> str | None:
        home = placed(tracked).home
        return home.endpoint.name if home is not None else None

    def placement_of(self, tracked: Tracked) -> tuple[str | None, tuple[str, ...]]:
        where = placed(tracked)
        if where.home is None:
            return None, ()
        return where.home.endpoint.name, tuple(link.endpoint.name for link in where.left_behind)

    async def locate(self, session_id: str, timeout: float | None) -> Location:
        """The app's locate; it also starts a link to every instance that has none, in the
        background, so the next fan-out finds them live."""
        for link in self.links:
            if link.supervisor is None and link.starting is None and not self._closing:
                self.spawn(self._warm(link))
        return (await self._fan_out([session_id], self.links, timeout))[session_id]

    async def session_link(self, tracked: Tracked, method: str, ticket: Ticket | None = None) -> Supervisor:
        """The supervisor to send a session's call to: its home's, once the session is not moving
        and the home is connected (waiting in the outage queue, as with one endpoint).

        Raises:
            ConnectionLost: Queuing is off, or the wait outlived ``QueueOptions.max_age``.
            QueueFull: ``QueueOptions.max_size`` calls are already waiting.
            ClientClosed: The client closed.
        """
        home = self.home(tracked)
        if home.supervisor is not None and home.supervisor.in_recovery():
            # A callback of the home's own recovery: its link is the one being recovered (waiting
            # for the recovery would wait for the callback). Any other call waits as usual.
            return home.supervisor
        ticket = ticket or Ticket()
        while True:
            if self._closing:
                raise ClientClosed("the client is closed")
            link = self.home(tracked)
            if not placed(tracked).moving and link.connected and link.supervisor is not None:
                return link.supervisor
            if not placed(tracked).moving and not link.usable and link.starting is None:
                await self.ensure(link)  # never started, or failed: start it (raises if it cannot)
                continue
            await self._waiting.wait(method, ticket=ticket)

    async def close_copy(self, link: Link, session_id: str, *, over: Live | None = None) -> bool:
        """``session/close`` one session on one instance (over ``over``, the link's live connection,
        or one of its own) within the probe timeout; ``True`` when the instance no longer has it.
        Never raises for the instance's failure."""
        over = over or (link.supervisor.live() if link.supervisor is not None else None)
        settings = _probing.settings(
            [session_id],
            timeout=self._probe_timeout,
            opener=self.kit.opener,
            clock=self._clock,
            live={link.endpoint: over} if over is not None else {},
        )
        return await _probing.close_copy(link.probe_endpoint, session_id, settings)

    async def locate_at_home(self, sessions: Sequence[Tracked], *, patient: bool = False) -> dict[str, Location]:
        """Where each session is, revealing its id only where needed: a session with a recorded home
        is asked of that instance alone, for its id alone; the others only about the ids their home
        does not have active (its answer kept beside theirs, in the instances' order), and about the
        sessions without one. ``patient``: a session whose home is unreachable waits for it."""
        homes: dict[Link, list[str]] = {}
        anywhere: list[str] = []
        for tracked in sessions:
            home = self.recorded(tracked) if len(self.links) > 1 else None
            (anywhere if home is None else homes.setdefault(home, [])).append(tracked.session_id)
        at_home: dict[str, Location] = {}
        for home_answers in await asyncio.gather(*(self.locate_many(ids, only=[h]) for h, ids in homes.items())):
            at_home.update(home_answers)
        # the home has it (or, patient, is away: the session waits for it): nobody else is asked
        located = {sid: where for sid, where in at_home.items() if where.active or (patient and where.unreachable)}
        asking: list[tuple[list[str], Sequence[Link] | None]] = [(anywhere, None)] if anywhere else []
        for home, ids in homes.items():
            missing = [sid for sid in ids if sid not in located]
            if missing:
                asking.append((missing, [link for link in self.links if link is not home]))
        order = {link.endpoint.name: index for index, link in enumerate(self.links)}
        answered = await asyncio.gather(*(self.locate_many(ids, only=only) for ids, only in asking))
        for elsewhere in answered:
            for session_id, there in elsewhere.items():
                own = at_home.get(session_id)
                if own is None:
                    located[session_id] = there
                    continue
                # beside the home's own answer, in the instances' order
                merged = sorted((*own.answers, *there.answers), key=lambda a: order[a.endpoint.name])
                located[session_id] = Location(session_id, tuple(merged), own.elapsed + there.elapsed)
        return {tracked.session_id: located[tracked.session_id] for tracked in sessions}

    async def locate_many(
        self, session_ids: Sequence[str], *, only: Sequence[Link] | None = None
    ) -> dict[str, Location]:
        """Every instance's answer (``only``: these instances') for each session, within the probe
        timeout."""
        return await self._fan_out(session_ids, self.links if only is None else only, self._probe_timeout)

    async def _fan_out(
        self, session_ids: Sequence[str], links: Sequence[Link], timeout: float | None
    ) -> dict[str, Location]:
        """Over the live links where there are some (a fresh link, closed again, elsewhere)."""
        return await _probing.fan_out(
            session_ids,
            [link.probe_endpoint for link in links],
            timeout=timeout,
            opener=self.kit.opener,
            clock=self._clock,
            live=self.live(),
        )
