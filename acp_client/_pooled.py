"""Several instances of one agent in one client: recovery at home, and failover (DESIGN.md §5).

An :class:`~acp_client.AcpClient` given several endpoints keeps one link per instance — a
:class:`~acp_client._supervisor.Supervisor` with its own connector (cookies shared), opened
lazily — and remembers each session's *home*: the instance it lives on. Sessions are placed by the
placement policy when created; every call for a session goes to its home's link.

Recovery, per session:

* After a drop the home link reconnects under the retry policy and probes the session there, like
  a single-endpoint client (same decision table, same callbacks).
* When the home does not have the session in memory (``inactive``: another instance may have it
  active; -32002), or stays unreachable past ``failover_delay`` (on the injected
  clock), the session is first taken out of the home link's recovery (so that link can no longer
  resume or load it, even if it comes back meanwhile); then every instance is asked
  ``session/status`` at once (:func:`acp_client.pool.locate_many`, over the live links where there
  are some) and :meth:`acp_client.pool.Location.route` picks the one instance: resume where it is
  active, replay where it is inactive (home first), or a new session placed by the policy.
  Nothing reachable: the session goes back to its home link, and the failover is tried again
  after another ``failover_delay``.
* A session is therefore recovered by exactly one routine at a time, and a route names one
  instance: ``session/load`` / ``session/resume`` for one session never go to two instances.

Outcomes and :class:`~acp_client.state.RecoveryContext` carry ``endpoint``: the instance's name.

The links themselves (and where calls wait) are :mod:`acp_client._pool_links`.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import weakref
from collections.abc import Callable
from typing import Any

import attrs

from . import _recovery
from ._connection import Connection
from ._pool_links import Link, PoolLinks
from ._recoverer import Recoverer, capabilities_of
from ._sessions import SessionTable, Tracked
from ._supervisor import _RECOVERING_ON
from .clock import Clock
from .config import Callbacks, check_instance
from .exceptions import AcpError, ClientClosed, ConnectionLost, TransportError
from .pool import Endpoint, Location, PlacementFunction, Presence, Route, RouteKind, _endpoints, placement_policy
from .state import ConnectionState, Probe, RecoveryOutcome, RecoveryPath, State
from .transports.base import Connector
from .types import InitializeResponse

__all__ = ["PoolRecoverer", "PoolRecovery", "PoolSpec", "pool_spec"]

logger = logging.getLogger("acp_client.reconnect")

#: The instance a recovery runs on (read by the ``decide_recovery`` wrapper).
_ENDPOINT: contextvars.ContextVar[str | None] = contextvars.ContextVar("acp_pool_endpoint", default=None)

#: How many times a failover asks the instances again because its answers went stale.
_REASKS = 3

_PRESENCE_PROBE = {"active": Probe.ACTIVE, "inactive": Probe.INACTIVE, "unknown": Probe.NOT_FOUND}


@attrs.frozen
class PoolSpec:
    """What a client facing several instances is given (checked by the client)."""

    endpoints: tuple[Endpoint, ...]
    connectors: tuple[Connector, ...]
    placement: PlacementFunction
    failover_delay: float


def pool_spec(
    endpoint: object,
    placement: object,
    failover_delay: float,
    connector: Callable[[str | Connector], Connector],
) -> PoolSpec | None:
    """The pool an :class:`~acp_client.AcpClient` was given, or ``None`` for one endpoint (a
    string, a connector, or a list of one URL or connector).

    Raises:
        ConfigurationError: A bad endpoint list, duplicate names, or an unknown placement.
    """
    if not isinstance(endpoint, list | tuple):
        check_instance("endpoint", endpoint, (str, Connector))
        return None
    if len(endpoint) == 1 and isinstance(endpoint[0], str | Connector):
        return None
    endpoints = _endpoints(endpoint)
    connectors = tuple(e.connector if e.connector is not None else connector(e.url) for e in endpoints)
    policy = placement_policy(placement)  # type: ignore[arg-type]
    return PoolSpec(endpoints, connectors, policy, float(failover_delay))


class PoolRecoverer(Recoverer):
    """The recoverer of a pooled client: a probe answer it already has (the home's, or a
    fan-out's) is used instead of asking again, and the app's ``decide_recovery`` sees the
    instance."""

    def __init__(self, *args: Any, callbacks: Callable[[], Callbacks], **kwargs: Any) -> None:
        super().__init__(*args, callbacks=lambda: self._with_endpoint(callbacks()), **kwargs)
        self.known: dict[Tracked, tuple[Probe, str | None, Any]] = {}

    @staticmethod
    def _with_endpoint(callbacks: Callbacks) -> Callbacks:
        decide = callbacks.decide_recovery
        if decide is None:
            return callbacks

        def decide_here(context: Any) -> Any:
            return decide(attrs.evolve(context, endpoint=_ENDPOINT.get()))

        return attrs.evolve(callbacks, decide_recovery=decide_here)

    async def probe(self, conn: Connection, tracked: Tracked) -> tuple[Probe, str | None, Any]:
        """``session/status`` for one session over ``conn`` (the answer is not kept)."""
        return await super()._probe(conn, tracked)

    async def _probe(self, conn: Connection, tracked: Tracked) -> tuple[Probe, str | None, Any]:
        known = self.known.pop(tracked, None)
        return known if known is not None else await super()._probe(conn, tracked)

    async def report(self, outcome: RecoveryOutcome) -> None:
        await self._report(outcome)


class PoolRecovery:
    """Recovers the sessions of a pooled client: at home after a reconnect, elsewhere when the
    home does not have them or stays away (the :class:`~acp_client._pool_links.LinkHooks` of
    its links).

    Args:
        links: The client's links.
        table: The client's sessions.
        recoverer: Probes and runs the steps of one session over one connection.
        placement: Where a new session goes.
        failover_delay: Seconds a home may stay unreachable before its sessions move.
        concurrency: How many sessions recover at once.
        clock: Time source.
        version: The negotiated protocol version.
        probe_timeout: Seconds each instance gets to answer a fan-out.
        on_outcomes: Told the outcomes reported after each recovery round at home and each
            round of moves (an empty list after a round a drop cut off): the session store keeps
            in step.
    """

    def __init__(
        self,
        links: PoolLinks,
        *,
        table: SessionTable,
        recoverer: PoolRecoverer,
        placement: PlacementFunction,
        failover_delay: float,
        concurrency: int,
        clock: Clock,
        version: Callable[[], int],
        probe_timeout: float,
        on_outcomes: Callable[[list[RecoveryOutcome]], None] | None = None,
    ) -> None:
        self.links = links
        self._on_outcomes = on_outcomes
        self._sweeper: asyncio.Future[None] | None = None
        self._guards: weakref.WeakKeyDictionary[Tracked, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._table = table
        self._recoverer = recoverer
        self._placement = placement
        self._failover_delay = failover_delay
        self._concurrency = concurrency
        self._clock = clock
        self._version = version
        self._probe_timeout = probe_timeout
        links.hooks = self

    # -- hooks ----------------------------------------------------------------------------------------

    def closing(self) -> None:
        for link in self.links.links:
            self._disarm(link)

    # -- drops and recovery at home -------------------------------------------------------------------

    def _sessions_of(self, link: Link) -> list[Tracked]:
        return [t for t in self._table.live() if self.links.homes.get(t) is link and t not in self.links.moving]

    def state_changed(self, link: Link, state: ConnectionState) -> None:
        """The failover timer runs from the drop until the link is connected again (a recovery
        that drops again does not restart it); a link that gives up moves its sessions now."""
        if state.state in (State.CONNECTED, State.CLOSED):
            self._disarm(link)
        elif state.state in (State.RECONNECTING, State.SUSPENDED) and self._sessions_of(link):
            self._arm(link)
        elif state.state is State.FAILED and not self.links.closing:
            self._disarm(link)
            self._move(link, "its link failed")

    def dropped(self, link: Link, cause: TransportError) -> None:
        """The link dropped: its sessions' turns fail (the agent had the prompt), windows close,
        and the failover timer starts."""
        for tracked in self._sessions_of(link):
            if tracked.turn is not None:
                tracked.turn.finish(ConnectionLost("session/prompt", may_have_executed=True, cause=cause))
            self._table.close_window(tracked)
        self._arm(link)

    def _arm(self, link: Link) -> None:
        if link.failover_timer is None and not self.links.closing:
            link.failover_timer = self._clock.call_later(self._failover_delay, lambda: self._expired(link))

    def _disarm(self, link: Link) -> None:
        if link.failover_timer is not None:
            link.failover_timer.cancel()
            link.failover_timer = None

    def _expired(self, link: Link) -> None:
        link.failover_timer = None
        if self.links.closing or link.state.state is State.CONNECTED:
            return  # back
        if link.state.state is State.RECOVERING:  # back, recovering its sessions: see how that ends
            self._arm(link)
            return
        self._move(link, f"unreachable for {self._failover_delay:g}s")

    def _move(self, link: Link, reason: str) -> None:
        """Take the link's sessions out of its recovery (first), then fail them over."""
        sessions = self._sessions_of(link)
        if not sessions:
            return
        self.links.moving.update(sessions)
        self.links.publish()
        self.links.spawn(self._failover(sessions, link, reason))

    async def recover(self, link: Link, conn: Connection, init: InitializeResponse) -> None:
        """The home link is back: recover its sessions there; those the home does not know move."""
        await self._close_left_here(link, conn, init)
        sessions = self._sessions_of(link)
        if not sessions:
            return
        version = self._version()
        caps = capabilities_of(init, version)
        semaphore = asyncio.Semaphore(self._concurrency)
        elsewhere: list[Tracked] = []

        async def one(tracked: Tracked) -> RecoveryOutcome | None:
            async with semaphore:
                if tracked in self.links.moving:
                    return None
                if tracked in self.links.left_behind:
                    await self._close_elsewhere(tracked, link)
                if _recovery.should_probe(caps):
                    answer = await self._recoverer.probe(conn, tracked)
                    # Not in memory here: another instance may have it active, so ask them all.
                    if answer[0] in (Probe.NOT_FOUND, Probe.INACTIVE) and len(self.links.links) > 1:
                        elsewhere.append(tracked)
                        self.links.moving.add(tracked)  # out of this link's hands before anything else
                        return None
                    self._recoverer.known[tracked] = answer
                token = _ENDPOINT.set(link.endpoint.name)
                try:
                    outcome = await self._recoverer.recover_session(conn, tracked, caps)
                finally:
                    _ENDPOINT.reset(token)
                return attrs.evolve(outcome, endpoint=link.endpoint.name)

        results = await asyncio.gather(*(one(tracked) for tracked in sessions), return_exceptions=True)
        for tracked in sessions:
            self._recoverer.known.pop(tracked, None)
        for result in results:
            if isinstance(result, ConnectionLost | TransportError | asyncio.CancelledError):
                self.links.moving.difference_update(elsewhere)
                self._store([])  # a session renamed before the drop is renamed in the store too
                raise result
            if isinstance(result, BaseException):
                logger.error("recovering a session raised", exc_info=result)
        reported = [result for result in results if isinstance(result, RecoveryOutcome)]
        for outcome in reported:
            await self._recoverer.report(outcome)
        self._store(reported)
        if elsewhere:
            self.links.publish()
            self.links.spawn(self._failover(elsewhere, link, f"not in memory on {link.endpoint}"))

    def _store(self, outcomes: list[RecoveryOutcome]) -> None:
        if self._on_outcomes is not None:
            self._on_outcomes(outcomes)

    # -- sessions without a home (restored from a store) ------------------------------------------------

    def _homeless(self) -> list[Tracked]:
        return [t for t in self._table.live() if t not in self.links.homes]

    async def adopt(self, *, patient: bool = True) -> None:
        """Find the sessions tracked without a home — restored from a store: the client does not
        know where they are now — with one fan-out, and recover each where its route says, before
        the client counts as connected.

        ``patient``: a session no reachable instance has in memory while some instance is
        unreachable (it may be there, its home) is neither replayed nor replaced yet. Those, and
        the ones no instance could take, are tried again in the background after
        ``failover_delay`` — as a session whose home stays away is — and then take the route as
        it is; the instances that were unreachable then close their copy when they are back."""
        sessions = self._homeless()
        if not sessions:
            return
        self.links.moving.update(sessions)  # calls for them wait, as during a move
        self.links.publish()
        try:
            left = await self._place_located(sessions, None, "restored from the store", patient=patient)
        except BaseException:
            self._give_back(sessions)
            raise
        if not left or self.links.closing:
            self._give_back(sessions)
            return
        self._give_back([t for t in sessions if t not in left])  # the others keep waiting
        self.links.spawn(self._adopt_later())

    async def _adopt_later(self) -> None:
        await self._clock.sleep(self._failover_delay)
        if not self.links.closing:
            await self.adopt(patient=False)  # and again after each delay while no instance answers

    # -- failover -----------------------------------------------------------------------------------------

    async def _failover(self, sessions: list[Tracked], home: Link, reason: str) -> None:
        logger.info("moving %d session(s) off %s: %s", len(sessions), home.endpoint, reason)
        try:
            retry = await self._place_located(sessions, home, reason)
        finally:
            self._give_back([t for t in sessions if t in self.links.moving])
        if retry and not self.links.closing:
            self._arm(home)  # nothing usable now: the home keeps them, another failover later

    async def _place_located(
        self, sessions: list[Tracked], home: Link | None, reason: str, *, patient: bool = False
    ) -> list[Tracked]:
        """One fan-out for ``sessions``, then each recovered where its route says; returns those
        no instance could take now (``patient``: and those it would replay or replace while an
        instance is unreachable)."""
        located = await self.links.locate_many([t.session_id for t in sessions])
        semaphore = asyncio.Semaphore(self._concurrency)
        retry: list[Tracked] = []
        reported: list[RecoveryOutcome] = []

        async def one(tracked: Tracked) -> None:
            location = located[tracked.session_id]
            if patient and location.unreachable and location.route().kind is not RouteKind.RESUME:
                retry.append(tracked)
                return
            async with semaphore, self._guard(tracked):
                if not await self._move_one(tracked, home, location, reason, reported):
                    retry.append(tracked)

        try:
            await asyncio.gather(*(one(tracked) for tracked in sessions))
        finally:  # once per round, not per session: the store goes over every record each time
            self._store(reported)
        return retry

    def _give_back(self, sessions: list[Tracked]) -> None:
        self.links.moving.difference_update(sessions)
        self.links.notify()
        self.links.publish()

    async def _close_elsewhere(self, tracked: Tracked, target: Link, location: Location | None = None) -> list[str]:
        """Close a session everywhere but ``target`` before attaching it there, so one session
        runs on one instance (DESIGN.md §5): where ``location`` (a fan-out's answers) has it
        active, and on the instances it was left behind on (asked now, unless ``location`` has
        their answer), over the live link or a connection of its own (that instance's link may
        still be waiting out its backoff). Best effort, where ``session/close`` is advertised;
        returns the instances that closed it. Left-behind instances that cannot be reached stay
        marked: they are closed when their link comes back, or by the sweep."""
        session_id = tracked.session_id
        self._unmark(tracked, target)
        marked = self.links.left_behind.get(tracked)
        if location is None and marked:
            location = (await self.links.locate_many([session_id], only=list(marked)))[session_id]
        if location is None:
            return []
        closed: list[str] = []
        for answer in location.answers:
            link = self.links.link(answer.endpoint)
            if link is target or answer.presence is Presence.UNREACHABLE:
                continue
            if answer.presence is Presence.ACTIVE:
                if not await self.links.close_copy(link, session_id):
                    continue
                closed.append(link.endpoint.name)
            self._unmark(tracked, link)
        return closed

    def _mark(self, tracked: Tracked, links: list[Link]) -> None:
        """``links`` may still hold ``tracked`` in memory: close it there once they answer — when
        their link is back, or by a sweep every ``failover_delay``."""
        if not links:
            return
        self.links.left_behind.setdefault(tracked, set()).update(links)
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.ensure_future(self._sweep())
            self.links.spawn(self._sweeper)

    def _unmark(self, tracked: Tracked, link: Link) -> None:
        """``link`` no longer holds a copy of ``tracked`` (closed, or it is the session's home)."""
        marked = self.links.left_behind.get(tracked)
        if marked is not None:
            marked.discard(link)
            if not marked:
                del self.links.left_behind[tracked]

    async def _sweep(self) -> None:
        """Every ``failover_delay``, close the copies still left behind — over the instance's live
        link, or a connection of its own (the client may keep no link there, or one waiting out
        its backoff) — until none is left. Each session under its guard: a move cannot attach it
        there meanwhile."""
        while not self.links.closing and self.links.left_behind:
            await self._clock.sleep(self._failover_delay)
            pending = [(t, link) for t, marked in self.links.left_behind.items() for link in marked]
            for tracked, link in pending:
                async with self._guard(tracked):
                    still = link in self.links.left_behind.get(tracked, ())
                    if still and await self.links.close_copy(link, tracked.session_id):
                        self._unmark(tracked, link)

    def _guard(self, tracked: Tracked) -> asyncio.Lock:
        """Held while a session moves, and while a sweep closes one of its copies."""
        guard = self._guards.get(tracked)
        if guard is None:
            guard = self._guards[tracked] = asyncio.Lock()
        return guard

    async def _close_left_here(self, link: Link, conn: Connection, init: InitializeResponse) -> None:
        """The link is back: close the sessions that moved off it while it was away."""
        for tracked, marked in list(self.links.left_behind.items()):
            if link in marked and await self.links.close_copy(link, tracked.session_id, over=(conn, init)):
                logger.info("closed the copy of %s left behind on %s", tracked.session_id, link.endpoint)
                self._unmark(tracked, link)

    def _target(self, location: Location, home: Link | None) -> tuple[Route, Link] | None:
        """The route for a fan-out's answers, and the link it names (placed, for a new session)."""
        route = location.route(home=home.endpoint if home is not None else None)
        if route.kind is RouteKind.UNAVAILABLE:
            return None
        if route.kind is RouteKind.NEW_SESSION:
            candidates = tuple(self.links.link(endpoint).endpoint for endpoint in route.candidates)
            return route, self.links.link(self._placement(candidates, self.links.session_counts()))
        assert route.endpoint is not None
        return route, self.links.link(route.endpoint)

    async def _move_one(
        self, tracked: Tracked, home: Link | None, location: Location, reason: str, reported: list[RecoveryOutcome]
    ) -> bool:
        """Recover one session on the instance its route names (its outcome, once reported, is
        added to ``reported``); ``False`` to try again later. ``home`` is where it lived
        (``None``: unknown, a session restored from a store).

        The answers are as old as the fan-out: when the target's link had to be waited for and
        some instance was unreachable then, that instance may be back holding the session, so
        the instances are asked again before anything is attached (and again, up to
        :data:`_REASKS` times, while the world keeps moving)."""
        for asked in itertools.count():
            targeted = self._target(location, home)
            if targeted is None:
                return False
            route, target = targeted
            waited = not target.connected
            try:
                conn = await self.links.ensure(target, wait=self._probe_timeout)
            except ClientClosed:
                return True
            except AcpError as exc:
                logger.info("cannot move %s to %s: %s", tracked.session_id, target.endpoint, exc)
                return False
            if not (waited and location.unreachable):
                break
            if asked == _REASKS:
                return False
            location = (await self.links.locate_many([tracked.session_id]))[tracked.session_id]
        probe = Probe.NOT_FOUND
        raw: str | None = None
        state: Any = None
        if route.endpoint is not None:
            answer = location.answer(route.endpoint)
            probe, raw, state = _PRESENCE_PROBE[answer.presence.value], answer.raw_status, answer.state
        sup = target.supervisor
        assert sup is not None
        caps = capabilities_of(sup.init_result, self._version())
        closed = await self._close_elsewhere(tracked, target, location)
        self._recoverer.known[tracked] = (probe, raw, state)
        token = _ENDPOINT.set(target.endpoint.name)
        recovering = _RECOVERING_ON.set(conn)
        try:
            outcome = await self._recoverer.recover_session(conn, tracked, caps)
        except (ConnectionLost, TransportError) as exc:
            logger.info("%s dropped while %s moved there: %s", target.endpoint, tracked.session_id, exc)
            return False
        finally:
            self._recoverer.known.pop(tracked, None)
            _RECOVERING_ON.reset(recovering)
            _ENDPOINT.reset(token)
        if outcome.path is not RecoveryPath.ABANDON:
            self.links.homes[tracked] = target
        if outcome.path in (RecoveryPath.RESUME, RecoveryPath.REPLAY):  # who may still hold it: closed once back
            away = [self.links.link(e) for e in location.unreachable]
            self._mark(tracked, away if home is None else [home] if home in away else [])  # home unknown: any
        self.links.moving.discard(tracked)
        self.links.notify()
        self.links.publish()
        note = (
            f"moved from {home.endpoint} ({reason}): {route.reason}"
            if home is not None
            else f"{reason}: {route.reason}"
        )
        if closed:
            note += f"; closed the stale copies on {', '.join(closed)} first"
        outcome = attrs.evolve(outcome, endpoint=target.endpoint.name, notes=(*outcome.notes, note))
        reporting = _RECOVERING_ON.set(conn)
        try:
            await self._recoverer.report(outcome)
        finally:
            _RECOVERING_ON.reset(reporting)
        reported.append(outcome)
        return True
