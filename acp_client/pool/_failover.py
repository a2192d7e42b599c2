"""Recovery of a pooled client's sessions: at home, and failover (docs/many-instances.md).

After a drop the home link recovers its sessions with the core's round. A session the home does
not have in memory (``inactive``, -32002), or whose home stays unreachable past ``failover_delay``,
is first taken out of the home's recovery; then one fan-out asks every instance and
:meth:`~acp_client.location.Location.route` names the one instance that recovers it (nothing
reachable: it goes back home, tried again after another delay). So one routine at a time recovers
a session, and ``session/load`` / ``session/resume`` never go to two instances.

A session restored from a store is asked of its recorded home first, for its id alone
(:meth:`~acp_client.pool._links.PoolLinks.locate_at_home`); until placed, only that home may speak
for it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any, Protocol

import attrs

from .._link._links import LinkKit
from .._recovery._probing import Live
from .._recovery._recoverer import Answer, capabilities, each
from .._rpc._connection import Connection
from .._sessions._table import Tracked
from .._util._logging import get_logger
from ..exceptions import AcpError, ClientClosed, ConnectionLost, TransportError
from ..location import Endpoint, Location, Route, RouteKind
from ..state import ConnectionState, Probe, RecoveryOutcome, RecoveryPath, State
from ..types import InitializeResponse
from ._link import Link, placed
from ._placement import PlacementFunction

logger = get_logger("acp_client.reconnect")

#: How many times a failover asks the instances again because its answers went stale.
_REASKS = 3


class _Links(Protocol):
    """What the failover needs of :class:`~acp_client.pool._links.PoolLinks`."""

    links: list[Link]

    @property
    def kit(self) -> LinkKit: ...

    @property
    def closing(self) -> bool: ...

    def link(self, endpoint: Endpoint | str) -> Link: ...

    def notify(self) -> None: ...

    def publish(self) -> None: ...

    def spawn(self, coro: Any) -> asyncio.Future[Any]: ...

    def session_counts(self) -> dict[Endpoint, int]: ...

    def recorded(self, tracked: Tracked) -> Link | None: ...

    async def ensure(self, link: Link, *, wait: float | None = None) -> Connection: ...

    async def close_copy(self, link: Link, session_id: str, *, over: Live | None = None) -> bool: ...

    async def locate_at_home(self, sessions: Sequence[Tracked], *, patient: bool = False) -> dict[str, Location]: ...

    async def locate_many(
        self, session_ids: Sequence[str], *, only: Sequence[Link] | None = None
    ) -> dict[str, Location]: ...


class Failover:
    """Recovers the sessions of a pooled client (see the module docstring)."""

    def __init__(self, links: _Links, *, placement: PlacementFunction, failover_delay: float) -> None:
        kit = links.kit
        self.links = links
        self._sweeper: asyncio.Future[Any] | None = None
        self._table, self._recoverer, self._clock, self._version = kit.table, kit.recoverer, kit.clock, kit.version
        self._placement = placement
        self._failover_delay = failover_delay

    def closing(self) -> None:
        for link in self.links.links:
            self._disarm(link)

    def _sessions_of(self, link: Link) -> list[Tracked]:
        return [t for t in self._table.live() if placed(t).home is link and not placed(t).moving]

    def state_changed(self, link: Link, state: ConnectionState) -> None:
        """The failover timer runs from the drop until the link is connected again (a recovery
        that drops again does not restart it); a link that gives up moves its sessions now."""
        if state.state in (State.CONNECTED, State.CLOSED):
            self._disarm(link)
            link.failed_moves = 0
        elif state.state in (State.RECONNECTING, State.SUSPENDED) and self._sessions_of(link):
            self._arm(link)
        elif state.state is State.FAILED and not self.links.closing:
            self._disarm(link)
            self._move(link, "its link failed")

    def dropped(self, link: Link, cause: TransportError) -> None:
        """The one drop rule for the link's sessions, and the failover timer starts."""
        self._table.dropped(cause, self._sessions_of(link))
        self._arm(link)

    def failed(self, link: Link, error: BaseException) -> None:
        """The link's supervisor crashed: its sessions' turns fail with ``error`` (they move once
        the link's state says it failed)."""
        for tracked in self._table.live():  # moving ones too: the failed state may have started their move
            if placed(tracked).home is link and tracked.turn is not None:
                tracked.turn.finish(error)

    def _arm(self, link: Link) -> None:
        if link.failover_timer is None and not self.links.closing:
            link.failover_due = self._clock.monotonic() + self._failover_delay
            link.failover_timer = self._clock.call_later(self._failover_delay, lambda: self._expired(link))

    def _disarm(self, link: Link) -> None:
        if link.failover_timer is not None:
            link.failover_timer.cancel()
        link.failover_timer = link.failover_due = None

    def _expired(self, link: Link) -> None:
        link.failover_timer = link.failover_due = None
        if self.links.closing or link.state.state is State.CONNECTED:
            return  # back
        if link.state.state is State.RECOVERING:  # back, recovering its sessions: see how that ends
            self._arm(link)
            return
        self._move(link, f"unreachable for {self._failover_delay:g}s")

    def _move(self, link: Link, reason: str) -> None:
        """Take the link's sessions out of its recovery (first), then fail them over."""
        sessions = self._sessions_of(link)
        if sessions:
            self._start_moving(sessions, link, reason)

    def _start_moving(self, sessions: list[Tracked], home: Link, reason: str) -> None:
        _moving(sessions, True)
        self.links.publish()
        self.links.spawn(self._failover(sessions, home, reason))

    async def recover(self, link: Link, conn: Connection, init: InitializeResponse) -> None:
        """The home link is back: the core's recovery round for its sessions there; those the
        home does not have in memory move."""
        await self._close_left_here(link, conn, init)
        assert link.supervisor is not None
        moved: list[Tracked] = []

        async def elsewhere(tracked: Tracked, answer: Answer | None) -> bool:
            where = placed(tracked)
            if answer is None:  # a moving session is not this round's; a copy elsewhere is closed first
                if not where.moving and where.left_behind:
                    await self._close_elsewhere(tracked, link)
                return where.moving
            if answer.probe not in (Probe.UNKNOWN, Probe.INACTIVE) or len(self.links.links) < 2:
                return False
            moved.append(tracked)  # not in memory here: another instance may have it active
            where.moving = True  # out of this link's hands before anything else
            return True

        try:
            await self.links.kit.recover_round(
                link.supervisor,
                conn,
                init,
                sessions=self._sessions_of(link),
                endpoint=link.endpoint.name,
                screen=elsewhere,
            )
        except BaseException:
            _moving(moved, False)
            raise
        if moved:
            self._start_moving(moved, link, f"not in memory on {link.endpoint}")

    def homeless(self) -> list[Tracked]:
        return [t for t in self._table.live() if placed(t).home is None]

    async def adopt(self, *, patient: bool = True) -> None:
        """Recover the sessions restored from a store (no home) where their routes say, before the
        client counts as connected.

        ``patient``: a session no reachable instance has in memory while some instance is
        unreachable, or whose recorded home is unreachable, waits; those, and the ones no instance
        could take, are tried again after ``failover_delay``, then take the route as it is."""
        sessions = self.homeless()
        if not sessions:
            return
        _moving(sessions, True)  # calls for them wait, as during a move
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

    async def _failover(self, sessions: list[Tracked], home: Link, reason: str) -> None:
        logger.info("moving %d session(s) off %s: %s", len(sessions), home.endpoint, reason)
        try:
            retry = await self._place_located(sessions, home, reason)
            if retry and not self.links.closing:  # nothing usable now: the home keeps them, another failover later
                home.failed_moves += 1
                self._arm(home)
        finally:
            self._give_back([t for t in sessions if placed(t).moving])

    async def _place_located(
        self, sessions: list[Tracked], home: Link | None, reason: str, *, patient: bool = False
    ) -> list[Tracked]:
        """One fan-out for ``sessions``, then each recovered where its route says; returns those
        no instance could take now (``patient``: and those :meth:`adopt` leaves waiting).
        ``home``: where they lived (``None``: restored, asked of their recorded home first)."""
        if home is None:
            located = await self.links.locate_at_home(sessions, patient=patient)
        else:  # the home was asked already (its recovery round), or stays away: every instance now
            located = await self.links.locate_many([t.session_id for t in sessions])
        retry: list[Tracked] = []
        reported: list[RecoveryOutcome] = []

        async def one(tracked: Tracked) -> None:
            location = located[tracked.session_id]
            recorded = self.links.recorded(tracked) if home is None else None
            waits = location.unreachable and location.route().kind is not RouteKind.RESUME
            if patient and (waits or (recorded is not None and recorded.endpoint in location.unreachable)):
                retry.append(tracked)
                return
            async with placed(tracked).guard:
                if not await self._move_one(tracked, home, location, reason, reported):
                    retry.append(tracked)

        try:
            failed = [r for r in await each(sessions, self.links.kit.concurrency, one) if isinstance(r, BaseException)]
            if failed:
                raise failed[0]
        finally:  # once per round, not per session: the store goes over every record each time
            self.links.kit.recovered(reported, False)
        return retry

    def _give_back(self, sessions: list[Tracked]) -> None:
        _moving(sessions, False)
        self.links.notify()
        self.links.publish()

    async def _close_elsewhere(self, tracked: Tracked, target: Link, location: Location | None = None) -> list[str]:
        """Close a session everywhere but ``target`` before attaching it there (one session runs on
        one instance): where ``location`` has it active, and where it was left behind. Best effort;
        returns the instances that closed it. Unreachable ones stay marked (closed when their link
        is back, or by the sweep).

        A copy claimed ``active`` while ``target`` claims it too is never closed (unless the session
        moved off that instance: a copy left behind there is stale): one claim is false, and closing
        on it could close the real conversation. The outcome reports the conflict (``also_active``)."""
        session_id = tracked.session_id
        marked = placed(tracked).left_behind
        marked.discard(target)
        asked = {answer.endpoint.name for answer in location.answers} if location is not None else set()
        unasked = [link for link in marked if link.endpoint.name not in asked]
        if unasked:  # they held it: asking them reveals nothing new
            more = (await self.links.locate_many([session_id], only=unasked))[session_id]
            answers = (*location.answers, *more.answers) if location is not None else more.answers
            location = Location(session_id, answers, more.elapsed)
        if location is None:
            return []
        closed: list[str] = []
        for answer in location.answers:
            link = self.links.link(answer.endpoint)
            if link is target or answer.probe is Probe.UNREACHABLE:
                continue
            if answer.probe is Probe.ACTIVE:
                claimed = any(a.endpoint == target.endpoint and a.probe is Probe.ACTIVE for a in location.answers)
                if claimed and link not in marked:
                    continue  # conflicting claims: close nothing (see above); a copy it left there is stale
                if not await self.links.close_copy(link, session_id):
                    continue
                closed.append(link.endpoint.name)
            marked.discard(link)
        return closed

    def _mark(self, tracked: Tracked, links: list[Link]) -> None:
        """``links`` may still hold ``tracked`` in memory: close it there once they answer (their
        link is back, or a sweep every ``failover_delay``)."""
        placed(tracked).left_behind.update(links)
        if placed(tracked).left_behind and (self._sweeper is None or self._sweeper.done()):
            self._sweeper = self.links.spawn(self._sweep())

    async def _sweep(self) -> None:
        """Close the copies still left behind every ``failover_delay`` until none is left, each
        under its session's guard (a move cannot attach it there meanwhile)."""
        while not self.links.closing and any(placed(t).left_behind for t in self._table):
            await self._clock.sleep(self._failover_delay)
            pending = [(t, link) for t in self._table for link in list(placed(t).left_behind)]
            for tracked, link in pending:
                async with placed(tracked).guard:
                    still = link in placed(tracked).left_behind
                    if still and await self.links.close_copy(link, tracked.session_id):
                        placed(tracked).left_behind.discard(link)

    async def _close_left_here(self, link: Link, conn: Connection, init: InitializeResponse) -> None:
        """The link is back: close the sessions that moved off it while it was away."""
        for tracked in list(self._table):
            left_behind = placed(tracked).left_behind
            if link in left_behind and await self.links.close_copy(link, tracked.session_id, over=(conn, init)):
                logger.info("closed the copy of %s left behind on %s", tracked.session_id, link.endpoint)
                left_behind.discard(link)

    def _target(self, location: Location, home: Link | None) -> tuple[Route[Endpoint], Link] | None:
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
        """Recover one session where its route names (its outcome added to ``reported``); ``False``
        to try again later. ``home``: where it lived (``None``: restored from a store).

        When the target had to be waited for while some instance was unreachable, that instance
        may be back holding the session: the instances are asked again (up to :data:`_REASKS` times)."""
        prefer = home if home is not None else self.links.recorded(tracked)  # a restored one: its recorded home
        for asked in itertools.count():
            targeted = self._target(location, prefer)
            if targeted is None:
                return False
            route, target = targeted
            waited = not target.connected
            try:
                conn = await self.links.ensure(target, wait=self.links.kit.timeouts.probe)
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
        answer = Answer(Probe.UNKNOWN)
        if route.endpoint is not None:
            said = location.answer(route.endpoint)
            others = tuple(e.name for e in location.active if e != route.endpoint)
            conflict = f"conflicting claims: also active on {', '.join(others)}; no copy closed" if others else None
            answer = Answer(said.probe, said.raw_status, said.state, note=conflict, also_active=others)
        sup = target.supervisor
        assert sup is not None
        caps = capabilities(sup.init_result, self._version())
        closed = await self._close_elsewhere(tracked, target, location)
        placed(tracked).attaching = target  # what the target sends about it counts from now on
        try:
            with sup.recovering(conn):
                outcome = await self._recoverer.recover_session(
                    conn, tracked, caps, answer=answer, endpoint=target.endpoint.name
                )
        except (ConnectionLost, TransportError) as exc:
            logger.info("%s dropped while %s moved there: %s", target.endpoint, tracked.session_id, exc)
            return False
        finally:
            placed(tracked).attaching = None
        if outcome.path is not RecoveryPath.ABANDON:
            placed(tracked).home = target
        if outcome.path in (RecoveryPath.RESUME, RecoveryPath.REPLAY):  # who may still hold it: closed once back
            away = [self.links.link(e) for e in location.unreachable]
            self._mark(tracked, away if home is None else [home] if home in away else [])  # home unknown: any
        placed(tracked).moving = False
        self.links.notify()
        self.links.publish()
        note = (
            f"moved from {home.endpoint} ({reason}): {route.reason}"
            if home is not None
            else f"{reason}: {route.reason}"
        )
        if closed:
            note += f"; closed the stale copies on {', '.join(closed)} first"
        outcome = attrs.evolve(outcome, notes=(*outcome.notes, note))
        with sup.recovering(conn):
            await self._recoverer.report(outcome)
        reported.append(outcome)
        return True


def _moving(sessions: list[Tracked], moving: bool) -> None:
    for tracked in sessions:
        placed(tracked).moving = moving
