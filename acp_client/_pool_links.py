"""The links of a client facing several instances of one agent (DESIGN.md §5).

One link per instance — a :class:`~acp_client._supervisor.Supervisor` over that instance's
connector (the client's cookie store shared by all), started when first needed — plus where each
session lives (its *home*), which sessions are being moved, and the client's state as the
aggregate of its links. The recovery across instances (:mod:`acp_client._pooled`) plugs in
through :class:`LinkHooks`.

Calls for a session wait here, not in a link's queue, while the session moves or its home
reconnects: after a move they go to the new home.

The client's state is the aggregate of the links that matter (those homing a session, or else
the first one started): ``connected`` when all of them are, ``recovering`` while sessions move,
else the state of the first one that is not connected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from ._connection import Connection
from ._sessions import SessionTable, Tracked
from ._supervisor import _RECOVERING_ON, Supervisor
from .clock import Clock, TimerHandle, move_on_after
from .config import QueueOptions
from .exceptions import AcpError, ClientClosed, ConnectionLost, TransportClosed, TransportError
from .pool import Endpoint, Location, PlacementFunction, RouteKind, _close_copy, _locate_many
from .state import LEGAL_TRANSITIONS, ConnectionState, State
from .transports.base import Connector
from .types import InitializeResponse

__all__ = ["Link", "LinkHooks", "PoolLinks", "SupervisorFactory"]

logger = logging.getLogger("acp_client.reconnect")

#: How a link is made: ``(connector, recover, on_drop, on_state) -> Supervisor``.
SupervisorFactory = Callable[
    [
        Connector,
        Callable[[Connection, Any], Any],
        Callable[[TransportError], None],
        Callable[[ConnectionState], None],
    ],
    Supervisor,
]


class LinkHooks(Protocol):
    """What the recovery across instances is told of each link."""

    async def recover(self, link: Link, conn: Connection, init: InitializeResponse) -> None: ...

    def dropped(self, link: Link, cause: TransportError) -> None: ...

    def state_changed(self, link: Link, state: ConnectionState) -> None: ...

    def closing(self) -> None: ...


class Link:
    """One instance: its endpoint, its supervisor (none until first needed), its last state."""

    def __init__(self, endpoint: Endpoint, connector: Connector) -> None:
        self.endpoint = endpoint
        self.connector = connector
        #: The endpoint a probe or a one-off close connects with: this link's connector (the
        #: client's headers, TLS, cookies and transport options), equal to ``endpoint``.
        self.probe_endpoint = (
            endpoint if endpoint.connector is not None else attrs.evolve(endpoint, connector=connector)
        )
        self.supervisor: Supervisor | None = None
        self.state = ConnectionState(State.CONNECTING)
        self.starting: asyncio.Future[None] | None = None
        self.failover_timer: TimerHandle | None = None

    @property
    def connected(self) -> bool:
        sup = self.supervisor
        return sup is not None and self.state.state is State.CONNECTED and sup.connection is not None

    @property
    def usable(self) -> bool:
        """Has a supervisor that may still connect (not failed or closed)."""
        return self.supervisor is not None and not self.state.is_terminal


def _live(link: Link) -> tuple[Connection, InitializeResponse] | None:
    """The link's connection and what its instance answered to ``initialize``, when connected."""
    sup = link.supervisor
    if link.connected and sup is not None and sup.connection is not None and sup.init_result is not None:
        return sup.connection, sup.init_result
    return None


class PoolLinks:
    """The links of a client facing several instances, and where each session lives.

    Args:
        endpoints: The instances, in preference order.
        connectors: One connector per endpoint.
        placement: Where new sessions go.
        table: The client's sessions.
        make_supervisor: Builds one link's supervisor.
        emit_state: Publishes the client's (aggregate) state.
        queue: How session calls wait while their session has no usable link.
        clock: Time source.
        version: The negotiated protocol version.
        probe_timeout: Each instance's time for the fan-out.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        connectors: Sequence[Connector],
        *,
        placement: PlacementFunction,
        table: SessionTable,
        make_supervisor: SupervisorFactory,
        emit_state: Callable[[ConnectionState], None],
        queue: QueueOptions,
        clock: Clock,
        version: Callable[[], int],
        probe_timeout: float,
    ) -> None:
        self.links = [Link(endpoint, connector) for endpoint, connector in zip(endpoints, connectors, strict=True)]
        self._placement = placement
        self._table = table
        self._make_supervisor = make_supervisor
        self._emit_state = emit_state
        self._queue = queue
        self._clock = clock
        self._version = version
        self._probe_timeout = probe_timeout
        self.homes: dict[Tracked, Link] = {}
        self.moving: set[Tracked] = set()
        #: The instances a session moved off while they were unreachable: they may still hold it
        #: in memory, and it is closed there before it is attached again (DESIGN.md §5).
        self.left_behind: dict[Tracked, set[Link]] = {}
        self._state = ConnectionState(State.CONNECTING)
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.hooks: LinkHooks | None = None

    # -- state ----------------------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def closing(self) -> bool:
        return self._closing

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def publish(self) -> None:
        """The aggregate state: the links that matter, the first one not connected decides."""
        if self._state.is_terminal:
            return
        homed = {id(link) for link in self.homes.values()}
        # A link being started (or whose start failed) does not count yet.
        started = [link for link in self.links if link.supervisor is not None and link.starting is None]
        relevant = [link for link in started if id(link) in homed] or started[:1]
        if not relevant:
            return
        if self.moving:
            new = ConnectionState(State.RECOVERING)
        else:
            waiting = [link.state for link in relevant if link.state.state is not State.CONNECTED]
            new = waiting[0] if waiting else ConnectionState(State.CONNECTED)
            if new.is_terminal:  # a home whose link gave up: its sessions move when an instance answers
                new = ConnectionState(State.SUSPENDED, attempt=1, retry_in=0.0, cause=new.cause)
        self._set(new)

    def _set(self, new: ConnectionState) -> None:
        old = self._state
        if new == old or old.is_terminal:
            return
        if old.state is State.SUSPENDED and new.state is State.RECONNECTING:  # still down: say so
            new = ConnectionState(State.SUSPENDED, new.attempt, new.retry_in, new.cause)
        if new.state not in LEGAL_TRANSITIONS[old.state]:  # links and moves interleave: bridge
            bridge = State.RECOVERING if new.state is State.CONNECTED else State.RECONNECTING
            if bridge in LEGAL_TRANSITIONS[old.state] and new.state in LEGAL_TRANSITIONS[bridge]:
                reconnecting = bridge is State.RECONNECTING
                attempt, retry_in = (1, 0.0) if reconnecting else (None, None)
                self._set(ConnectionState(bridge, attempt=attempt, retry_in=retry_in))
                old = self._state
            if new.state not in LEGAL_TRANSITIONS[old.state]:
                return
        self._state = new
        self._emit_state(new)

    def fail(self, error: BaseException) -> None:
        """The client cannot go on (no instance answered, or its store cannot be read)."""
        self._set(ConnectionState(State.FAILED, cause=str(error)))

    def close(self) -> None:
        """Mark the pool closed (before its links close)."""
        self._closing = True
        if self.hooks is not None:
            self.hooks.closing()
        self._set(ConnectionState(State.CLOSED, cause="closed by the app"))
        self.notify()

    async def aclose(self) -> None:
        self.close()
        tasks = [task for task in self._tasks if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for link in self.links:
            if link.supervisor is not None:
                await link.supervisor.aclose()

    def spawn(self, coro: Any) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    async def _warm(self, link: Link) -> None:
        try:
            await self.ensure(link)
        except AcpError as exc:
            logger.debug("no link to %s yet: %s", link.endpoint, exc)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("pool task failed", exc_info=task.exception())

    # -- links ------------------------------------------------------------------------------------------

    def link(self, endpoint: Endpoint | str) -> Link:
        for link in self.links:
            if endpoint in (link.endpoint, link.endpoint.name, link.endpoint.url):
                return link
        raise KeyError(str(endpoint))

    def _new_supervisor(self, link: Link) -> Supervisor:
        async def recover(conn: Connection, init: Any) -> None:
            if self.hooks is not None:
                await self.hooks.recover(link, conn, init)

        def on_state(state: ConnectionState) -> None:
            link.state = state
            if self.hooks is not None:
                self.hooks.state_changed(link, state)
            self.notify()
            self.publish()

        def on_drop(cause: TransportError) -> None:
            if self.hooks is not None:
                self.hooks.dropped(link, cause)

        link.state = ConnectionState(State.CONNECTING)
        return self._make_supervisor(link.connector, recover, on_drop, on_state)

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
            await self._until_changed(wait, f"{link.endpoint} is reconnecting")

    async def _start(self, link: Link) -> None:
        loop = asyncio.get_running_loop()
        starting = link.starting = loop.create_future()
        sup = link.supervisor = self._new_supervisor(link)
        try:
            await sup.start()
        except BaseException as exc:
            if not starting.done():
                starting.set_result(None)
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

    async def start(self) -> None:
        """Connect the first instance that answers (in the order given).

        Raises:
            AcpError: No instance could be connected (the last error).
        """
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
        raise ClientClosed("not connected")

    def live(self) -> dict[Endpoint, tuple[Connection, InitializeResponse]]:
        """The connected links with what their instance answered to ``initialize``."""
        return {link.endpoint: live for link in self.links if (live := _live(link)) is not None}

    async def place(self) -> Link:
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
                await self.ensure(link, wait=self._queue.max_age)
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
        counts = {link.endpoint: 0 for link in self.links}
        for tracked, link in self.homes.items():
            if not tracked.abandoned and self._table.get(tracked.session_id) is tracked:
                counts[link.endpoint] += 1
        return counts

    async def attach_link(self, tracked: Tracked, *, known: bool) -> Supervisor:
        """Where an app's ``session/load`` / ``session/resume`` goes: a session the client
        tracks stays home; another goes where a fan-out finds it (active, else inactive), else to
        the first connected instance (which will answer -32002)."""
        if known and tracked in self.homes:
            return await self.session_link(tracked, "session/resume")
        location = (await self.locate_many([tracked.session_id]))[tracked.session_id]
        route = location.route()
        found = route.endpoint if route.kind in (RouteKind.RESUME, RouteKind.REPLAY) else None
        link = self.link(found) if found is not None else self._link_of(self.primary)
        await self.ensure(link, wait=self._queue.max_age)
        self.bind(tracked, link)
        assert link.supervisor is not None
        return link.supervisor

    def _link_of(self, supervisor: Supervisor) -> Link:
        return next(link for link in self.links if link.supervisor is supervisor)

    def bind(self, tracked: Tracked, link: Link) -> None:
        self.homes[tracked] = link
        self.publish()

    def home(self, tracked: Tracked) -> Link:
        return self.homes.get(tracked) or self.links[0]

    def forget(self, tracked: Tracked) -> None:
        self.homes.pop(tracked, None)
        self.left_behind.pop(tracked, None)
        self.publish()

    # -- session calls -----------------------------------------------------------------------------------

    async def _until_changed(self, limit: float, what: str) -> None:
        """Wait for the next change of a link or a session's home, at most ``limit`` seconds.

        Raises:
            TransportClosed: Nothing changed in time.
        """
        with move_on_after(self._clock, limit):
            await self._changed.wait()
            return
        raise TransportClosed(f"{what} after {limit:g}s")

    async def session_link(self, tracked: Tracked, method: str) -> Supervisor:
        """The supervisor to send a session's call to: its home's, once the session is not moving
        and the home is connected (waiting like queued requests do).

        Raises:
            ConnectionLost: Queuing is off, or the wait outlived ``QueueOptions.max_age``.
            ClientClosed: The client closed.
        """
        home = self.home(tracked)
        if _RECOVERING_ON.get() is not None and home.state.state is State.RECOVERING and home.supervisor is not None:
            # A callback of the home's own recovery: its link is the one being recovered (waiting
            # for the recovery would wait for the callback). Any other call waits as usual.
            return home.supervisor
        deadline = self._clock.monotonic() + self._queue.max_age
        while True:
            if self._closing:
                raise ClientClosed("the client is closed")
            link = self.home(tracked)
            if tracked not in self.moving and link.connected and link.supervisor is not None:
                return link.supervisor
            if tracked not in self.moving and not link.usable and link.starting is None:
                await self.ensure(link)  # never started, or failed: start it (raises if it cannot)
                continue
            if not self._queue.enabled:
                raise ConnectionLost(method, may_have_executed=False)
            left = deadline - self._clock.monotonic()
            try:
                if left <= 0:
                    raise TransportClosed("still recovering")
                await self._until_changed(left, "still recovering")
            except TransportClosed as exc:
                raise ConnectionLost(method, may_have_executed=False, cause=exc) from exc

    async def close_copy(
        self, link: Link, session_id: str, *, over: tuple[Connection, InitializeResponse] | None = None
    ) -> bool:
        """``session/close`` one session on one instance — over ``over``, the link's live
        connection, or a connection of its own (the link may be waiting out its backoff, or
        recovering) — within the probe timeout. ``True`` when the instance no longer has it in
        memory; never raises for the instance's failure."""
        over = over or _live(link)
        return await _close_copy(
            session_id,
            link.probe_endpoint,
            timeout=self._probe_timeout,
            protocol_version=self._version(),
            clock=self._clock,
            live={link.endpoint: over} if over is not None else {},
        )

    async def locate_many(
        self,
        session_ids: Sequence[str],
        *,
        timeout: float | None = None,
        warm: bool = False,
        only: Sequence[Link] | None = None,
    ) -> dict[str, Location]:
        """Every instance's answer for each session, over the live links where there are some
        (a fresh link, closed again, elsewhere). ``warm``: also start a link to every instance
        that has none, in the background, so the next fan-out finds them live. ``only``: ask
        these instances, not all."""
        if warm:
            for link in self.links:
                if link.supervisor is None and link.starting is None and not self._closing:
                    self.spawn(self._warm(link))
        return await _locate_many(
            session_ids,
            [link.probe_endpoint for link in (self.links if only is None else only)],
            timeout=timeout or self._probe_timeout,
            protocol_version=self._version(),
            clock=self._clock,
            connect_options={},
            live=self.live(),
        )
