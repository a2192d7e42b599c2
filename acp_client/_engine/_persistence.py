"""The client's bookkeeping in a session store: what is saved, renamed and deleted, and when.

:class:`Persistence` sits between the session table and a :class:`~acp_client.store.StoreBridge`
(the store's worker thread). It derives every write from the :class:`StoredSession` last written
for the session (``Tracked.stored``), so what the app set and the timestamps survive each save:

=====================================  ===============================================================================
event                                  store call
=====================================  ===============================================================================
``connect()``                          ``load`` and each session's ``load_transcript`` (raises: a store or a stored
                                       conversation the client cannot read fails ``connect()``, and nothing is
                                       written); the sessions are tracked again, their conversations shown at once,
                                       *without* a save
``new_session`` / ``fork`` / ``load``  ``save`` (a new record, status ``active``); with a shared store the call
/ ``resume_session``                   returns once it is written
recovery outcome: new session          ``rename`` (one atomic step), then ``save``, and ``save_transcript`` (the lost
                                       segment kept)
recovery outcome: resume / replay      ``save`` when the status changed
a session moved to another instance    ``save`` with its new home (``StoredSession.home``, in ``extra``)
recovery abandoned,                    ``delete``
``close_session``, ``forget_session``
``set_mode`` / ``set_model`` /         ``save`` with the new value
``set_config_option``
a prompt                               ``touch`` (``last_used_at``) without transcripts kept; with them, the turn's
                                       end writes it
the end of a turn                      one job: ``save`` when the agent changed the title, ``save_turn``
                                       (``last_used_at`` and the whole conversation, every segment, in one step; the
                                       store bounds it) with transcripts kept; the turn's result reaches the app only
                                       once it ran (``durable``); a store error marks the session not yet stored,
                                       written again with the store's next success
=====================================  ===============================================================================

Writes never raise into the client's flow (the bridge logs a store error and carries on).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

import attrs

from .._link._events import SessionEvents
from .._sessions._conversation import from_entries, to_entries
from .._sessions._table import SessionTable, Tracked
from .._util._logging import get_logger
from ..exceptions import InvalidMessage, SessionStoreError
from ..state import Probe, RecoveryOutcome, RecoveryPath
from ..store._bridge import StoreBridge
from ..store.base import StoredSession
from ..transcript import Transcript

logger = get_logger("acp_client.store")


class Leases(Protocol):
    """A shared store's ownership (:class:`~acp_client._engine._ownership.Ownership`)."""

    async def candidates(self) -> list[StoredSession]: ...

    async def take(self, records: Sequence[StoredSession]) -> list[str]: ...

    async def aclose(self) -> None: ...


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Persistence(SessionEvents):
    """Keeps one endpoint's records in a store in step with the session table (``version``: the
    negotiated one, the wire form MCP servers are stored in)."""

    def __init__(
        self, bridge: StoreBridge, table: SessionTable, *, version: Callable[[], int], keep_transcripts: bool
    ) -> None:
        self.bridge = bridge
        #: Set by :meth:`Ownership.bind` when the store is shared.
        self.ownership: Leases | None = None
        self._table = table
        self._version = version
        self._keep_transcripts = keep_transcripts
        #: The first save of each session the app just opened, while it is queued (a shared store).
        self._opening: dict[str, asyncio.Future[Any]] = {}
        #: The write of each session's last ended turn (what ``prompt()`` waits for).
        self._turn_writes: dict[str, asyncio.Future[bool | None]] = {}
        #: Sessions whose last turn a store error left unwritten: written with the next success.
        self.unstored: set[str] = set()
        #: Where a session is (:meth:`Links.placement_of <acp_client._link._links.Links.placement_of>`,
        #: set by the engine): recorded with it, and again when it moves.
        self.placement_of: Callable[[Tracked], tuple[str | None, tuple[str, ...]]] = lambda tracked: (None, ())
        bridge.on_success = self._store_is_back

    def records(self) -> list[StoredSession]:
        """Every record this client keeps, most recently used first."""
        kept = [tracked.stored for tracked in self._table if tracked.stored is not None]
        return sorted(kept, key=lambda record: record.last_used_at, reverse=True)

    async def restore(self) -> int:
        """Track again every session stored for the endpoint, with its conversation (nothing is written);
        how many. Raises ``SessionStoreError`` (``SessionStoreCorrupt``, ``SessionStoreTooNew``)."""
        if self.ownership is None:
            stored = await self.bridge.load()
            self._track(stored, await self._conversations(stored))
            return len(stored)
        # A shared store: the owner's sessions and the ones it adopts, read (and their
        # conversations decoded) before the one write, the claim; then the ones claimed tracked.
        stored = await self.ownership.candidates()
        conversations = await self._conversations(stored)
        held = set(await self.ownership.take(stored))
        kept = [record for record in stored if record.session_id in held]
        self._track(kept, conversations)
        return len(kept)

    async def aclose(self) -> None:
        if self.ownership is not None:
            await self.ownership.aclose()
        await self.bridge.aclose()

    async def track_stored(self, stored: Sequence[StoredSession]) -> list[Tracked]:
        """Track ``stored`` (most recently used first) with their conversations (one whose MCP
        servers cannot be decoded is left out, logged); raises as :meth:`restore`."""
        return self._track(stored, await self._conversations(stored))

    async def _conversations(self, stored: Sequence[StoredSession]) -> dict[str, Transcript]:
        """The stored conversations of ``stored``, decoded (reads only; raises as :meth:`restore`)."""
        if not self._keep_transcripts or not stored:
            return {}
        path = str(getattr(self.bridge.store, "path", "") or self.bridge.endpoint)

        def decode(entries: Sequence[Mapping[str, Any]], session_id: str) -> Transcript:
            return from_entries(entries, session_id, path=path)

        return await self.bridge.load_each([record.session_id for record in stored], decode)

    def _track(self, stored: Sequence[StoredSession], conversations: Mapping[str, Transcript]) -> list[Tracked]:
        restored: list[Tracked] = []
        for record in reversed(stored):  # oldest first: the table then lists the most recent last
            try:
                servers = record.decoded_mcp_servers()
            except InvalidMessage as exc:
                logger.warning("stored session %s: undecodable MCP servers (%s), not restored", record.session_id, exc)
                continue
            tracked = self._table.track(
                record.to_session(),
                cwd=record.cwd,
                mcp_servers=servers,
                additional_directories=record.additional_directories,
            )
            tracked.stored = record
            transcript = conversations.get(record.session_id)
            if transcript is not None:
                tracked.transcript = transcript
            # What the app had set comes back too, so a replay or new session restores it.
            tracked.settings.mode_id = record.mode_id
            tracked.settings.model_id = record.model_id
            tracked.settings.config.update({key: (value, None) for key, value in record.config_options.items()})
            restored.append(tracked)
        restored.reverse()
        return restored

    def _homed(self, tracked: Tracked, record: StoredSession) -> StoredSession:
        """``record`` with where ``tracked`` lives now (an unknown home keeps the one recorded)."""
        home, left_behind = self.placement_of(tracked)
        return record if home is None else record.with_placement(home, left_behind)

    def _save(self, tracked: Tracked, record: StoredSession) -> asyncio.Future[Any] | None:
        tracked.stored = record
        return self._queue(self.bridge.save, record)

    def _queue(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future[Any] | None:
        """Queue one write (its future); ``None`` once the client is closed."""
        try:
            future: asyncio.Future[Any] = write(*args, **kwargs)
        except SessionStoreError as exc:
            logger.debug("session store write skipped: %s", exc)
            return None
        return future

    def tracked(self, tracked: Tracked) -> None:
        now = _now()
        known = tracked.stored
        if known is not None and known.session_id == tracked.session_id:
            record = attrs.evolve(known, status=Probe.ACTIVE, updated_at=now, last_used_at=now)
        else:
            record = StoredSession.from_mcp_servers(
                self.bridge.endpoint,
                tracked.session_id,
                tracked.cwd,
                tracked.mcp_servers,
                protocol_version=self._version(),
                additional_directories=tracked.additional_directories,
                title=tracked.record.title,
                status=Probe.ACTIVE,
                created_at=now,
            )
        saved = self._save(tracked, self._homed(tracked, record))
        if saved is not None and self.ownership is not None:
            self._opening[tracked.session_id] = saved

    async def stored(self, tracked: Tracked) -> None:
        """With a shared store: wait until the record :meth:`tracked` queued is written, so that another
        client can adopt a session the app holds a handle on should this process die (never raises)."""
        saved = self._opening.pop(tracked.session_id, None)  # the engine asks right after "tracked"
        if saved is not None:
            await asyncio.shield(saved)

    def forgotten(self, tracked: Tracked) -> None:
        record, tracked.stored = tracked.stored, None
        if record is not None:
            self._queue(self.bridge.delete, record.session_id)

    def changed(self, tracked: Tracked, **fields: Any) -> None:
        record = tracked.stored
        if record is not None:
            self._save(tracked, attrs.evolve(record, updated_at=_now(), **fields))

    def config_changed(self, tracked: Tracked, option_id: str, value: Any) -> None:
        record = tracked.stored
        if record is not None:
            options = {**record.config_options, option_id: value}
            self._save(tracked, attrs.evolve(record, config_options=options, updated_at=_now()))

    def touched(self, tracked: Tracked) -> None:
        record = tracked.stored
        if record is not None:
            now = _now()
            tracked.stored = attrs.evolve(record, last_used_at=now)
            if not self._keep_transcripts:
                self._queue(self.bridge.touch, record.session_id, when=now)

    def turn_ended(self, tracked: Tracked) -> None:
        record = tracked.stored
        if record is None or record.session_id != tracked.session_id:
            return
        title = tracked.record.title
        changed = None
        if title is not None and title != record.title:
            changed = attrs.evolve(record, title=title, updated_at=_now())
            tracked.stored = changed
        entries = to_entries(tracked.transcript) if self._keep_transcripts else None
        if changed is None and entries is None:
            return
        write = self._turn_write(tracked.session_id, changed, entries, record.last_used_at)
        if write is not None:
            self._turn_writes[tracked.session_id] = write

    def _turn_write(
        self,
        session_id: str,
        record: StoredSession | None,
        entries: Sequence[Mapping[str, Any]] | None,
        when: datetime,
    ) -> asyncio.Future[bool | None] | None:
        """Queue a turn's write; a store error marks the session not yet stored."""
        write: asyncio.Future[bool | None] | None = self._queue(
            self.bridge.save_turn, session_id, record, entries, when
        )
        if write is None:
            return None

        def written(future: asyncio.Future[bool | None]) -> None:
            if future.cancelled() or future.exception() is not None or future.result() is None:
                self.unstored.add(session_id)
            else:
                self.unstored.discard(session_id)

        write.add_done_callback(written)
        return write

    async def durable(self, tracked: Tracked) -> bool | None:
        """Wait for the write of ``tracked``'s last ended turn: ``True`` once written, ``False`` when not
        (the store failed, or no longer holds the session), ``None`` when there was nothing to write."""
        write = self._turn_writes.pop(tracked.session_id, None)
        if write is None:
            return None
        try:
            return await asyncio.shield(write) is True
        except SessionStoreError:
            return False

    def _store_is_back(self) -> None:
        """A store call went through: write again the conversations a store error left out."""
        if not self.unstored:
            return
        waiting, self.unstored = self.unstored, set()
        for session_id in waiting:
            tracked = self._table.get(session_id)
            record = tracked.stored if tracked is not None else None
            if tracked is None or record is None or record.session_id != session_id:
                continue
            logger.info("session store: writing the conversation of %s, which a store error left out", session_id)
            entries = to_entries(tracked.transcript) if self._keep_transcripts else None
            if self._turn_write(session_id, record, entries, record.last_used_at) is None:
                self.unstored.add(session_id)

    def recovered(self, outcomes: list[RecoveryOutcome]) -> None:
        """A session re-created under a new id is renamed (whether or not its outcome was
        reported), an abandoned one deleted, and a recovered one saved when its status changed."""
        by_id = {outcome.session_id: outcome for outcome in outcomes if outcome.session_id is not None}
        for tracked in list(self._table):
            record = tracked.stored
            if record is None:
                continue
            if tracked.abandoned:
                self.forgotten(tracked)
                continue
            now = _now()
            if tracked.session_id != record.session_id:
                self._queue(self.bridge.rename, record.session_id, tracked.session_id)
                previous = (*record.previous_session_ids, record.session_id)
                renamed = attrs.evolve(
                    record,
                    session_id=tracked.session_id,
                    previous_session_ids=previous,
                    title=tracked.record.title,
                    status=Probe.ACTIVE,
                    raw_status=None,
                    updated_at=now,
                )
                self._save(tracked, self._homed(tracked, renamed))
                if self._keep_transcripts:  # every segment, the one the agent lost too
                    self._queue(self.bridge.save_transcript, tracked.session_id, to_entries(tracked.transcript))
                continue
            outcome = by_id.get(tracked.session_id)
            updated = self._homed(tracked, record)  # it may have moved to another instance
            if outcome is not None and outcome.path is not RecoveryPath.ABANDON:
                raw = outcome.raw_status if outcome.probe is Probe.ACTIVE else None
                if record.status is not Probe.ACTIVE or record.raw_status != raw:
                    updated = attrs.evolve(updated, status=Probe.ACTIVE, raw_status=raw)
            if updated is not record:
                self._save(tracked, attrs.evolve(updated, updated_at=now))
