"""The router's session homes: in this process, or in a shared session store with ownership.

``router.py --store URL`` keeps, for every session placed through any replica, one
:class:`~acp_client.store.StoredSession` under the endpoint key ``router:`` + ``pool_key(URLS)``
(``--store-key`` names it otherwise): the session id, its ``cwd``, and ``extra["home"]``, the URL
of the agent instance holding it. Nothing else — the editor keeps the conversation.

Ownership (the store's leases and fencing tokens) decides which replica acts for a session:

* A replica acts for a session (forwards a load, resume, prompt, cancel... to its home) only while
  it holds the session's lease. A new session is stored and claimed in one step (``save_owned``);
  any other session is claimed before the replica acts, waiting while another replica's lease is
  live (up to ``claim_wait``): after a replica dies, another takes its sessions over once their
  leases expire.
* The lease is renewed while an editor connected to this replica uses the session, and released
  when the last such editor goes: a clean hand-over needs no waiting.
* Every write carries the lease's fence: a replica that was paused past its leases and comes back
  finds its writes refused (``SessionStoreFenced``), forgets those sessions and closes the editors
  that used them; they reconnect and are served by the owner of the day.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from acp_client.exceptions import SessionStoreError, SessionStoreFenced
from acp_client.pool import Endpoint
from acp_client.store import Fence, SharedSessionStore, StoredSession, endpoint_key, pool_key

logger = logging.getLogger("router")


class NotOwner(Exception):
    """This replica may not act for the session now (another holds it, or the store is down)."""


def default_owner() -> str:
    return f"router-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


def open_store(url: str) -> SharedSessionStore:
    """``postgresql://...`` (or ``postgres://``): a PostgreSQL store; anything else: an SQLite file."""
    if url.startswith(("postgresql://", "postgres://")):
        from acp_client.store.postgres import PostgresSessionStore

        return PostgresSessionStore(url)
    from acp_client.store.sqlite import SqliteSessionStore

    return SqliteSessionStore(url)


def store_key(urls: Sequence[str]) -> str:
    """The endpoint key the router files its session homes under."""
    return "router:" + pool_key(urls)


class MemoryHomes:
    """Where each session lives, in this process only (the router without ``--store``)."""

    #: Whether other replicas share these homes (and the instances' liveness records).
    shared = False

    def __init__(self, endpoints: Sequence[Endpoint]) -> None:
        self.endpoints = tuple(endpoints)
        self.homes: dict[str, Endpoint] = {}
        self.on_lost: Callable[[str], None] = lambda session_id: None
        #: Seconds an instance's liveness record lasts once a replica heard it.
        self.liveness_ttl = 10.0

    def cached_home(self, session_id: str) -> str | None:
        """The name of the session's home as last read here (no I/O), if known."""
        home = self.homes.get(session_id)
        return home.name if home is not None else None

    async def heard(self, endpoint: Endpoint) -> None:
        """An instance answered this replica (with a store: renews its liveness record)."""

    async def heard_elsewhere(self, endpoint: Endpoint) -> bool:
        """Whether some replica heard the instance within ``liveness_ttl`` (its liveness record)."""
        return False

    def counts(self) -> dict[Endpoint, int]:
        sessions = dict.fromkeys(self.endpoints, 0)
        for home in self.homes.values():
            sessions[home] = sessions.get(home, 0) + 1
        return sessions

    async def acquire(self, session_id: str) -> None:
        """Make sure this router may act for ``session_id`` (always, without a store)."""

    async def home(self, session_id: str) -> Endpoint | None:
        return self.homes.get(session_id)

    async def settle(self, session_id: str, endpoint: Endpoint, cwd: str, *, new: bool) -> None:
        self.homes[session_id] = endpoint

    async def forget(self, session_id: str) -> None:
        self.homes.pop(session_id, None)

    def use(self, session_id: str) -> None:
        """An editor connection uses the session."""

    async def unuse(self, session_ids: Sequence[str]) -> None:
        """An editor connection that used these sessions is gone."""

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


@attrs.define
class _Held:
    fence: Fence
    until: float  # time.monotonic() the lease surely lasts to (renewals move it)


class StoreHomes(MemoryHomes):
    """The homes kept in a shared store, acted on under the store's leases (module docstring).

    Every instance also has a liveness record in the store (endpoint key ``self.key + ":instances"``,
    one record per instance URL, ``extra["heard"]`` the wall-clock time a replica last heard it,
    renewed at most every quarter of ``liveness_ttl``): a replica that cannot reach an instance
    another replica still hears does not count it gone. The replicas' clocks are compared, so keep
    them in sync (NTP); the record only ever delays a move.
    """

    shared = True

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        store: SharedSessionStore,
        *,
        key: str | None = None,
        owner: str | None = None,
        lease: float = 10.0,
        claim_wait: float | None = None,
    ) -> None:
        super().__init__(endpoints)
        self.store = store
        self.key = key or store_key([endpoint.url for endpoint in endpoints])
        self.owner = owner or default_owner()
        self.lease = lease
        self.claim_wait = 2 * lease + 1 if claim_wait is None else claim_wait
        self.held: dict[str, _Held] = {}
        self.users: dict[str, int] = {}
        self._by_url = {endpoint_key(endpoint.url): endpoint for endpoint in endpoints}
        self._renewer: asyncio.Task[None] | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._written: dict[str, float] = {}  # instance URL -> time.time() of our last liveness write

    # -- instances' liveness -----------------------------------------------------------------------

    async def heard(self, endpoint: Endpoint) -> None:
        now = time.time()
        if now - self._written.get(endpoint.url, 0.0) < self.liveness_ttl / 4:
            return
        self._written[endpoint.url] = now
        record = StoredSession(
            endpoint=self.key + ":instances", session_id=endpoint.url, cwd="", extra={"heard": now, "by": self.owner}
        )
        try:
            await self._call(self.store.save, record)
        except SessionStoreError as exc:
            logger.info("could not renew the liveness record of %s: %s", endpoint, exc)

    async def heard_elsewhere(self, endpoint: Endpoint) -> bool:
        try:
            record = await self._call(self.store.get, self.key + ":instances", endpoint.url)
        except SessionStoreError:
            return False  # no record to go by: this replica's own evidence decides
        heard = record.extra.get("heard") if record is not None else None
        return isinstance(heard, int | float) and time.time() - heard < self.liveness_ttl

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return asyncio.to_thread(method, *args, **kwargs)

    async def start(self) -> None:
        self._renewer = asyncio.ensure_future(self._renew_loop())

    async def aclose(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        if self.held:
            with contextlib.suppress(SessionStoreError):
                await self._call(self.store.release, self.key, self.owner, list(self.held))
        self.held.clear()

    # -- ownership ---------------------------------------------------------------------------------

    def _holds(self, session_id: str) -> Fence | None:
        held = self.held.get(session_id)
        if held is None or held.until <= time.monotonic():
            return None
        return held.fence

    async def acquire(self, session_id: str) -> None:
        """Hold the session's lease, waiting (up to ``claim_wait``) while another replica's is live.

        Raises:
            NotOwner: Another replica still holds it, the session is not stored, or the store is down.
        """
        if self._holds(session_id) is not None:
            return
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            deadline = time.monotonic() + self.claim_wait
            step = min(0.1, self.lease / 20)
            while True:
                started = time.monotonic()
                try:
                    leases = await self._call(self.store.claim, self.key, [session_id], self.owner, duration=self.lease)
                except SessionStoreError as exc:
                    raise NotOwner(f"the session store is unavailable: {exc}") from exc
                if leases:
                    self.held[session_id] = _Held(leases[0].fence, started + self.lease)
                    self.homes.pop(session_id, None)  # read the home afresh: the last owner may have moved it
                    return
                if time.monotonic() >= deadline:
                    stored = await self._call(self.store.get, self.key, session_id)
                    if stored is None:
                        raise NotOwner(f"session {session_id} is not stored")
                    holder = stored.lease.owner if stored.lease is not None else None
                    raise NotOwner(f"session {session_id} is held by {holder}")
                await asyncio.sleep(step)

    async def home(self, session_id: str) -> Endpoint | None:
        if session_id in self.homes:
            return self.homes[session_id]
        try:
            stored = await self._call(self.store.get, self.key, session_id)
        except SessionStoreError as exc:
            raise NotOwner(f"the session store is unavailable: {exc}") from exc
        if stored is None:
            return None
        endpoint = self._by_url.get(endpoint_key(str(stored.extra.get("home", ""))))
        if endpoint is not None:
            self.homes[session_id] = endpoint
        return endpoint

    async def settle(self, session_id: str, endpoint: Endpoint, cwd: str, *, new: bool) -> None:
        """Store where the session lives now (a new one stored and claimed in one step).

        Raises:
            NotOwner: The write was fenced out or the store is down (nothing is kept).
        """
        record = StoredSession(endpoint=self.key, session_id=session_id, cwd=cwd, extra={"home": endpoint.url})
        try:
            if new:
                started = time.monotonic()
                lease = await self._call(self.store.save_owned, record, self.owner, duration=self.lease)
                self.held[session_id] = _Held(lease.fence, started + self.lease)
            else:
                fence = self._holds(session_id)
                if fence is None:
                    raise NotOwner(f"the lease of session {session_id} ran out")
                await self._call(self.store.save, record, fence=fence)
        except SessionStoreFenced as exc:
            self._lost(session_id, f"taken over: {exc}")
            raise NotOwner(str(exc)) from exc
        except SessionStoreError as exc:
            raise NotOwner(f"the session store is unavailable: {exc}") from exc
        self.homes[session_id] = endpoint

    async def forget(self, session_id: str) -> None:
        fence = self._holds(session_id)
        self.homes.pop(session_id, None)
        self.held.pop(session_id, None)
        if fence is None:
            return
        with contextlib.suppress(SessionStoreError):  # fenced out: the new owner decides
            await self._call(self.store.delete, self.key, session_id, fence=fence)

    def use(self, session_id: str) -> None:
        self.users[session_id] = self.users.get(session_id, 0) + 1

    async def unuse(self, session_ids: Sequence[str]) -> None:
        idle = []
        for session_id in session_ids:
            self.users[session_id] = self.users.get(session_id, 1) - 1
            if self.users[session_id] <= 0:
                del self.users[session_id]
                if self.held.pop(session_id, None) is not None:
                    idle.append(session_id)
        if idle:  # nobody here uses them: another replica may take them at once
            try:
                await self._call(self.store.release, self.key, self.owner, idle)
            except SessionStoreError as exc:
                logger.info("could not release %d sessions (they expire instead): %s", len(idle), exc)

    def _lost(self, session_id: str, why: str) -> None:
        if self.held.pop(session_id, None) is not None:
            logger.warning("session %s is no longer ours (%s)", session_id, why)
        self.homes.pop(session_id, None)
        self.on_lost(session_id)

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            if not self.held:
                continue
            started = time.monotonic()
            try:
                leases = await self._call(self.store.renew, self.key, self.owner, duration=self.lease)
            except SessionStoreError as exc:  # keep acting until the leases we had run out
                logger.warning("could not renew %d leases: %s", len(self.held), exc)
                continue
            kept = {lease.session_id: lease for lease in leases}
            for session_id in list(self.held):
                lease = kept.get(session_id)
                if lease is None or lease.fence != self.held[session_id].fence:
                    self._lost(session_id, "another replica took it over")
                else:
                    self.held[session_id].until = started + self.lease
