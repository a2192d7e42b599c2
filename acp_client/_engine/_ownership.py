"""A client's ownership of its stored sessions, in a :class:`~acp_client.store.SharedSessionStore`.

Two halves, one per thread:

- :class:`FencedStore`, on the store bridge's worker thread, holds the leases this client owns, so
  every write carries the fence of its lease as it is when the write runs (calls run in the order
  the client issued them). A session not held is not written, a new one is written with
  ``save_owned``; a refused write drops the lease and reaches :class:`Ownership` through the
  bridge's error handler.
- :class:`Ownership`, on the event loop, claims on connect the owner's sessions and the adoptable
  ones; then a task on the client's clock renews every lease each third of its duration (sooner
  after a failure), adopts sessions whose owner's lease expired (unless the app opted out), and a
  clean close releases the leases. A session the client lost (fenced out, not renewed, or its lease
  ran out on the client's clock) is handed to ``on_ownership_lost`` once, and no longer tracked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from .._recovery._recoverer import capabilities
from .._util._delivery import call_app
from .._util._logging import get_logger
from .._util._tasks import TaskSet
from ..clock import Clock
from ..exceptions import AcpError, SessionOwnershipLost, SessionStoreError, SessionStoreFenced
from ..state import OwnershipLost
from ..store._bridge import StoreBridge, write_turn
from ..store.base import Lease, SharedSessionStore, StoredSession

if TYPE_CHECKING:
    from .._sessions._table import Tracked
    from ._engine import Engine

logger = get_logger("acp_client.store")

#: How long a lease lasts unless renewed (seconds): how long a dead owner's sessions wait.
DEFAULT_LEASE_DURATION: Final = 30.0

#: A lease is renewed this many times in its duration (so one or two failed renewals are retried
#: before it can run out).
RENEWALS_PER_LEASE: Final = 3

#: The end of each lease a client never sends in: a session-scoped request goes only while less than
#: ``duration * (1 - LEASE_SAFETY_MARGIN)`` has passed, on the client's monotonic clock, since its
#: last successful renewal *started*; the rest covers the request's way to the agent, scheduling, and
#: the drift between this host's clock and the store's (a 30 s lease: 7.5 s).
LEASE_SAFETY_MARGIN: Final = 0.25


def default_owner() -> str:
    """This process's default owner name: host, pid and a random suffix (never shared by two clients)."""
    host = socket.gethostname() or "host"
    name = f"{host}:{os.getpid()}:{secrets.token_hex(4)}"
    return "".join(char if char.isprintable() else "?" for char in name)[:200]


class FencedStore:
    """The shared store as one client sees it: a plain :class:`~acp_client.store.SessionStore` for
    the bridge, every write fenced with this client's lease (``endpoint``: the client's key)."""

    def __init__(self, store: SharedSessionStore, endpoint: str, owner: str, duration: float) -> None:
        self.store = store
        self.endpoint = endpoint
        self.owner = owner
        self.duration = duration
        #: Written on the worker thread only.
        self.held: dict[str, Lease] = {}
        #: Never written again, even with a new ``save``.
        self.lost: set[str] = set()
        #: Who holds a session this client lost, as the refusal said.
        self.holders: dict[str, str] = {}

    @property
    def path(self) -> str:
        return str(getattr(self.store, "path", ""))

    def _fenced(self, session_id: str, write: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        lease = self.held.get(session_id)
        if lease is None:
            return None
        try:
            return write(*args, fence=lease.fence, **kwargs)
        except SessionStoreFenced as exc:
            self.lose(session_id, exc.holder)
            raise

    def lose(self, session_id: str, holder: str | None = None) -> None:
        self.held.pop(session_id, None)
        self.lost.add(session_id)
        if holder is not None:
            self.holders[session_id] = holder

    def load(self, endpoint: str) -> list[StoredSession]:
        return [record for record in self.store.load(endpoint) if record.session_id in self.held]

    def get(self, endpoint: str, session_id: str) -> StoredSession | None:
        return self.store.get(endpoint, session_id)

    def load_transcript(self, endpoint: str, session_id: str) -> tuple[dict[str, Any], ...]:
        return self.store.load_transcript(endpoint, session_id)

    def save(self, session: StoredSession) -> None:
        session_id = session.session_id
        if session_id in self.held:
            self._fenced(session_id, self.store.save, session)
        elif session_id not in self.lost:
            try:
                self.held[session_id] = self.store.save_owned(session, self.owner, duration=self.duration)
            except SessionStoreFenced as exc:
                self.lose(session_id, exc.holder)
                raise

    def delete(self, endpoint: str, session_id: str) -> bool:
        deleted = bool(self._fenced(session_id, self.store.delete, endpoint, session_id))
        self.held.pop(session_id, None)
        return deleted

    def rename(
        self, endpoint: str, old_session_id: str, new_session_id: str, *, when: datetime | None = None
    ) -> StoredSession | None:
        renamed: StoredSession | None = self._fenced(
            old_session_id, self.store.rename, endpoint, old_session_id, new_session_id, when=when
        )
        if renamed is not None and renamed.lease is not None:
            self.held.pop(old_session_id, None)
            self.held[new_session_id] = renamed.lease
        return renamed

    def touch(self, endpoint: str, session_id: str, *, when: datetime | None = None) -> bool:
        return bool(self._fenced(session_id, self.store.touch, endpoint, session_id, when=when))

    def save_transcript(self, endpoint: str, session_id: str, entries: Sequence[Mapping[str, Any]]) -> bool:
        return bool(self._fenced(session_id, self.store.save_transcript, endpoint, session_id, entries))

    def save_turn(
        self, endpoint: str, session_id: str, entries: Sequence[Mapping[str, Any]], *, when: datetime
    ) -> bool:
        return bool(self._fenced(session_id, write_turn, self.store, endpoint, session_id, entries, when=when))

    def renew(self) -> list[str]:
        """Renew every lease of the owner at once; the sessions lost."""
        renewed = self.store.renew(self.endpoint, self.owner, duration=self.duration)
        fresh = {lease.session_id: lease for lease in renewed}
        lost = [session_id for session_id in self.held if session_id not in fresh]
        for session_id in lost:
            self.lose(session_id)
        for session_id in self.held:
            self.held[session_id] = fresh[session_id]
        return lost

    def candidates(self) -> tuple[list[StoredSession], list[StoredSession]]:
        """``(the owner's sessions, the adoptable others)``, read only."""
        own = [
            record
            for record in self.store.load(self.endpoint)
            if record.lease is not None and record.lease.owner == self.owner
        ]
        mine = {record.session_id for record in own}
        return own, [record for record in self.store.adoptable(self.endpoint) if record.session_id not in mine]

    def claim(self, session_ids: Sequence[str]) -> list[str]:
        """Claim ``session_ids``; the ones now held."""
        leases = self.store.claim(self.endpoint, list(session_ids), self.owner, duration=self.duration)
        for lease in leases:
            self.held[lease.session_id] = lease
            self.lost.discard(lease.session_id)
        return [lease.session_id for lease in leases]

    def adoptable(self) -> list[StoredSession]:
        """The endpoint's sessions nobody holds (this client's own lost ones left out)."""
        return [record for record in self.store.adoptable(self.endpoint) if record.session_id not in self.held]

    def release(self) -> int:
        held, self.held = list(self.held), {}
        return self.store.release(self.endpoint, self.owner, held) if held else 0


class Ownership:
    """The loop's half; ``decide()`` is the app's ``decide_adoption`` (``None``: adopt every one)."""

    def __init__(
        self,
        bridge: StoreBridge,
        fenced: FencedStore,
        *,
        clock: Clock,
        auto_adopt: bool,
        decide: Callable[[], Callable[[StoredSession], Any] | None],
    ) -> None:
        self.bridge = bridge
        self.fenced = fenced
        self.owner = fenced.owner
        self.duration = fenced.duration
        self.renew_interval = fenced.duration / RENEWALS_PER_LEASE
        self._clock = clock
        self.auto_adopt = auto_adopt
        self._decide = decide
        self._engine: Engine | None = None
        self._task: asyncio.Task[None] | None = None
        self._renewed_at = clock.monotonic()
        self._reported: set[str] = set()
        self._closed = False
        #: Recoveries of sessions the renewal task adopted, running in the background.
        self._recoveries = TaskSet("session ownership", self._crashed)
        self._adopting = asyncio.Lock()
        #: The renewal running now (shared by the renewal task and every send waiting for one).
        self._renewing: asyncio.Future[None] | None = None

    def bind(self, engine: Engine) -> None:
        assert engine.persistence is not None
        self._engine = engine
        engine.persistence.ownership = self
        engine.lease_check = self.check
        engine.recoverer.gate = self.may_recover

    def owned(self) -> list[str]:
        """The sessions this client holds now and tracks: a session claimed on the worker thread
        is listed from the moment ``client.session(id)`` accepts it, never before."""
        if self._engine is None:
            return []
        table, held = self._engine.table, dict(self.fenced.held)  # a copy: the worker thread writes it
        return sorted(sid for sid in held if (tracked := table.get(sid)) is not None and tracked.session_id == sid)

    def sendable_for(self) -> float:
        """Seconds left on this client's clock before its leases are too close to their end to send in."""
        margin = self.duration * LEASE_SAFETY_MARGIN
        return self._renewed_at + self.duration - margin - self._clock.monotonic()

    async def check(self, session_id: str) -> None:
        """Before a session-scoped request is sent (and before a turn is reported as ended): the
        lease must be live on this client's clock, with the margin, else the leases are renewed
        first. A session never stored under a lease (its first write failed) passes. Raises
        ``SessionOwnershipLost``: the session is another client's now, or its lease could not be
        renewed in time (nothing is sent).
        """
        if session_id in self._reported or session_id in self.fenced.lost:
            raise self._lost_error(session_id)
        if session_id not in self.fenced.held or self.sendable_for() > 0:
            return
        try:
            await self._renew_for_send()
        except SessionStoreError as exc:
            if session_id in self._reported:
                raise self._lost_error(session_id) from exc
            raise SessionOwnershipLost(
                session_id,
                f"session {session_id}: the lease of {self.owner} could not be renewed ({exc}); not sent",
                owner=self.owner,
            ) from exc
        if session_id in self._reported or session_id not in self.fenced.held:
            raise self._lost_error(session_id)

    async def may_recover(self, tracked: Tracked) -> bool:
        """Whether a reconnect's recovery may send for ``tracked`` (see :meth:`check`; a loss was told)."""
        try:
            await self.check(tracked.session_id)
        except SessionOwnershipLost as exc:
            logger.info("not recovering session %s: %s", tracked.session_id, exc)
            return False
        return True

    def _lost_error(self, session_id: str) -> SessionOwnershipLost:
        holder = self.fenced.holders.get(session_id)
        by = f" (held by {holder!r} now)" if holder is not None else ""
        return SessionOwnershipLost(
            session_id,
            f"session {session_id}: {self.owner} no longer owns it{by}",
            owner=self.owner,
            holder=holder,
        )

    async def _renew_for_send(self) -> None:
        """Wait for a renewal under way (it may have failed before the store came back), then, if
        the lease is still too close to its end, run a new one."""
        running = self._renewing
        if running is not None and not running.done():
            with contextlib.suppress(SessionStoreError):
                await asyncio.shield(running)
            if self.sendable_for() > 0:
                return
        await self.renew_now()

    async def renew_now(self) -> None:
        """Renew every lease now, one renewal shared by every caller waiting (``SessionStoreError``)."""
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew())
        await asyncio.shield(self._renewing)

    async def _renew(self) -> None:
        started = self._clock.monotonic()  # the store's lease runs from when it got the statement: no earlier
        try:
            lost = await self.bridge.run(self.fenced.renew)
        except SessionStoreError as exc:
            self._renewal_failed(exc)
            raise
        self._renewed_at = max(self._renewed_at, started)
        for session_id in lost:
            self.lost(session_id, None, "its lease was taken over by another client")

    async def candidates(self) -> list[StoredSession]:
        """On connect, before anything is written: the owner's sessions (an explicit ``owner=``
        taking them back after a restart), then the adoptable ones the policy adopts."""
        own, adoptable = await self.bridge.run(self.fenced.candidates)
        if not self.auto_adopt:
            return own
        return [*own, *await self._chosen(adoptable)]

    async def take(self, records: Sequence[StoredSession]) -> list[str]:
        """Claim ``records`` (one transaction) and start renewing; the ids now held."""
        started = self._clock.monotonic()
        held = await self.bridge.run(self.fenced.claim, [record.session_id for record in records])
        self._renewed_at = started
        if self._task is None and not self._closed:
            self._task = asyncio.ensure_future(self._run())
        return held

    async def _chosen(self, candidates: list[StoredSession]) -> list[StoredSession]:
        """The candidates the app's ``decide_adoption`` adopts (all of them without one)."""
        decide = self._decide()
        if decide is None:
            return candidates
        return [record for record in candidates if await call_app(decide, record, what="decide_adoption") is True]

    async def _run(self) -> None:
        delay = self.renew_interval
        while True:
            await self._clock.sleep(delay)
            try:
                await self.renew_now()
            except SessionStoreError:
                delay = self._retry_in()
                continue
            delay = self.renew_interval
            if self.auto_adopt:
                try:
                    await self.adopt_expired()
                except SessionStoreError as exc:
                    logger.warning("session store: looking for sessions to adopt failed: %s", exc)

    def _renewal_failed(self, error: SessionStoreError) -> None:
        """Once the lease ran out on this client's clock, the sessions may be another client's: lost."""
        left = self._renewed_at + self.duration - self._clock.monotonic()
        if left <= 0:
            logger.error("session store: leases of %s ran out while renewals failed (%s)", self.owner, error)
            for session_id in list(self.fenced.held):
                self.fenced.lose(session_id)
                self.lost(session_id, None, f"its lease ran out while renewing failed ({error})")
            self._renewed_at = self._clock.monotonic()
            return
        logger.warning("session store: renewing the leases of %s failed (%s); retrying", self.owner, error)

    def _retry_in(self) -> float:
        """After a failed renewal: sooner than usual, within the lease."""
        left = self._renewed_at + self.duration - self._clock.monotonic()
        if left <= 0:
            return self.renew_interval
        return max(min(self.renew_interval / 4, left), 0.001)

    async def adopt_expired(self) -> list[str]:
        candidates = await self.bridge.run(self.fenced.adoptable)
        if not candidates:
            return []
        return await self.adopt(await self._chosen(candidates), wait=False)

    async def adopt(self, records: Sequence[StoredSession], *, wait: bool = True) -> list[str]:
        """Claim ``records``, track the ones claimed, and recover them (``wait=False``: in the
        background, so that the renewal task never waits for a recovery)."""
        async with self._adopting:
            wanted = {record.session_id: record for record in records if record.session_id not in self.fenced.held}
            if not wanted:
                return []
            claimed = set(await self.bridge.run(self.fenced.claim, list(wanted)))
            # As read before the claim: the record says who held it (the outcome's note).
            fresh = [record for record in records if record.session_id in claimed and record.session_id in wanted]
            engine = self._engine
            if not fresh or engine is None or engine.persistence is None:
                return [record.session_id for record in fresh]
            tracked = await engine.persistence.track_stored(fresh)
            if wait:
                await asyncio.gather(*(self._recover(engine, item) for item in tracked))
            else:
                for item in tracked:
                    self._recoveries.spawn(self._recover(engine, item, quietly=True))
            return [item.session_id for item in tracked]

    def _crashed(self, error: BaseException) -> None:
        if self._engine is not None:
            self._engine.crashed(error)

    @staticmethod
    async def _recover(engine: Engine, tracked: Tracked, *, quietly: bool = False) -> None:
        """Recover an adopted session like any other (a link that is down recovers it when it is
        back). ``quietly``: a drop or a closed client is logged."""
        record = tracked.stored
        holder = record.lease.owner if record is not None and record.lease is not None else None
        reason = f"adopted from {holder}" if holder is not None else "adopted (nobody held it)"
        try:
            link = await engine.links.link_for(tracked, "session/resume")
            engine.emit(lambda o: o.settled(tracked, link))
            conn, init = link.connection, engine.init
            if conn is None or init is None:
                return
            caps, where = capabilities(init, engine.version), engine.links.endpoint_of(tracked)
            outcome = await engine.recoverer.recover_session(conn, tracked, caps, endpoint=where, reason=reason)
            await engine.recoverer.report(outcome)
            engine.recovered([outcome], False)
        except AcpError as exc:
            if not quietly:
                raise
            logger.info("recovering adopted session %s stopped: %s", tracked.session_id, exc)

    def lost(self, session_id: str, holder: str | None, reason: str) -> None:
        """Once per session: logged, handed to ``on_ownership_lost``."""
        if session_id in self._reported:
            return
        self._reported.add(session_id)
        logger.warning("session store: %s lost session %s: %s", self.owner, session_id, reason)
        engine = self._engine
        if engine is None:
            return
        tracked = engine.table.get(session_id)
        if tracked is not None:  # stop tracking it; nothing to delete: it is the new owner's now
            tracked.stored = None
            if tracked.turn is not None:  # the running turn fails with the typed error, never "ended"
                tracked.turn.finish(self._lost_error(session_id))
            engine.untrack(tracked.session_id)
        lost = OwnershipLost(session_id=session_id, owner=self.owner, holder=holder, reason=reason)
        engine.dispatcher.deliver(engine.callbacks.on_ownership_lost, lost, what="on_ownership_lost")

    def refused(self, error: SessionStoreFenced) -> None:
        """A queued write was refused (fenced): the session is lost."""
        holder = f" by {error.holder!r}" if error.holder is not None else ""
        self.lost(error.session_id, error.holder, f"a write was refused: the session is held{holder} now")

    async def aclose(self) -> None:
        """Stop renewing; release every lease held once the queued writes ran."""
        if self._closed:
            return
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._renewing is not None:
            await asyncio.gather(self._renewing, return_exceptions=True)
        await self._recoveries.aclose()
        try:
            await self.bridge.flush()
            await self.bridge.run(self.fenced.release)
        except SessionStoreError as exc:
            logger.warning("session store: releasing the leases of %s failed: %s", self.owner, exc)
