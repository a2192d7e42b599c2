"""``SyncAcpClient`` with a shared session store: the ownership callbacks (``decide_adoption``,
``on_ownership_lost``) and ``on_store_error`` run on the callback executor and post their events,
like every other callback of the facade."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from acp_client import Callbacks, SessionOwnershipLost, SessionStoreError
from acp_client.store import SessionStoreUnavailable, SqliteSessionStore, StoredSession
from acp_client.sync import EventKind, OwnershipLostEvent, StoreErrorEvent, SyncAcpClient, SyncEvent
from acp_client.testing import ReferenceAgent
from tests._harness import HarnessConnector
from tests._world import OutageStore
from tests.sync._support import DEADLINE, next_event

KEY = "memory://shared"


def _client(agent: ReferenceAgent, store: SqliteSessionStore, owner: str, **kwargs: Any) -> SyncAcpClient:
    return SyncAcpClient(
        HarnessConnector(agent),
        session_store=store,
        session_store_key=KEY,
        owner=owner,
        retry=None,
        default_timeout=DEADLINE,
        **kwargs,
    )


def test_decide_adoption_is_asked_on_the_callback_executor(tmp_path: Path) -> None:
    agent = ReferenceAgent()
    with SqliteSessionStore(tmp_path / "sessions.db") as store:
        with _client(agent, store, "a") as first:
            session_id = first.new_session("/work").session_id
        # A clean close released the lease: the session is adoptable, and the app decides.
        asked: list[tuple[str, str]] = []

        def refuse(record: StoredSession) -> bool:
            asked.append((record.session_id, threading.current_thread().name))
            return False

        with _client(agent, store, "b", callbacks=Callbacks(decide_adoption=refuse)) as second:
            assert second.owned_sessions() == [] and second.sessions == []
            assert [record.session_id for record in second.adoptable_sessions()] == [session_id]
        assert [sid for sid, _ in asked] == [session_id]
        assert asked[0][1].startswith("acp-callbacks")  # the executor, not the loop thread

        with _client(agent, store, "c", callbacks=Callbacks(decide_adoption=lambda record: True)) as third:
            assert third.owned_sessions() == [session_id]
            assert [handle.session_id for handle in third.sessions] == [session_id]


def test_ownership_lost_reaches_the_callback_and_the_event_queue(tmp_path: Path) -> None:
    agent = ReferenceAgent()
    events: queue.Queue[SyncEvent] = queue.Queue()
    lost: list[Any] = []
    with SqliteSessionStore(tmp_path / "sessions.db") as store:
        callbacks = Callbacks(on_ownership_lost=lost.append)
        with _client(agent, store, "a", callbacks=callbacks, event_queue=events) as client:
            session = client.new_session("/work")
            # Another replica takes the session over (as after a lease that lapsed).
            store.release(KEY, "a")
            assert [lease.owner for lease in store.claim(KEY, [session.session_id], "x", duration=60)] == ["x"]
            with pytest.raises(SessionOwnershipLost):  # its touch is refused: lost, the turn never ends
                session.prompt("hello")
            event = next_event(events, EventKind.OWNERSHIP_LOST)
            assert isinstance(event, OwnershipLostEvent)
            assert (event.payload.session_id, event.payload.owner) == (session.session_id, "a")
            assert client.sessions == []
        assert [record.session_id for record in lost] == [session.session_id]


def test_a_failed_store_write_reaches_the_callback_and_the_event_queue(tmp_path: Path) -> None:
    agent = ReferenceAgent()
    events: queue.Queue[SyncEvent] = queue.Queue()
    errors: list[tuple[SessionStoreError, str]] = []

    def on_store_error(error: SessionStoreError) -> None:
        errors.append((error, threading.current_thread().name))

    with OutageStore(tmp_path / "sessions.db") as store:
        callbacks = Callbacks(on_store_error=on_store_error)
        with _client(agent, store, "a", callbacks=callbacks, event_queue=events) as client:
            session = client.new_session("/work")
            store.down = True
            assert session.prompt("hello").stop_reason == "end_turn"
            event = next_event(events, EventKind.STORE_ERROR)
            assert isinstance(event, StoreErrorEvent)
            assert isinstance(event.payload, SessionStoreUnavailable)
            assert [handle.session_id for handle in client.sessions] == [session.session_id]  # still tracked
    assert errors and errors[0][1].startswith("acp-callbacks")
