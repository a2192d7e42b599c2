"""StoreBridge: the client's async, ordered, never-on-the-loop view of a store."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import attrs
import pytest

from acp_client import SessionStoreError
from acp_client.store import SessionStoreBusy, SqliteSessionStore, StoredSession
from acp_client.store._bridge import StoreBridge

EP = "ws://agent.example/acp"


class RecordingStore(SqliteSessionStore):
    """Records the thread of every call; can be told to fail writes."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.threads: set[int] = set()
        self.fail_writes = False

    def save(self, session: StoredSession) -> None:
        self.threads.add(threading.get_ident())
        if self.fail_writes:
            raise SessionStoreBusy("locked", path=self.path)
        super().save(session)

    def load(self, endpoint: str) -> list[StoredSession]:
        self.threads.add(threading.get_ident())
        return super().load(endpoint)


@pytest.fixture
def store(tmp_path: Path) -> RecordingStore:
    return RecordingStore(tmp_path / "s.db")


async def test_calls_run_off_the_loop_in_issue_order(store: RecordingStore) -> None:
    bridge = StoreBridge(store, EP)
    base = StoredSession(endpoint=EP, session_id="s", cwd="/")
    for index in range(50):  # fire and forget: the last one issued must win
        bridge.save(attrs.evolve(base, title=f"v{index}"))
    renamed = await bridge.rename("s", "t")
    assert renamed is not None and renamed.title == "v49"
    assert await bridge.touch("t")
    assert await bridge.save_transcript("t", [{"role": "user", "text": "hi"}])
    assert await bridge.run(store.load_transcript, EP, "t") == ({"role": "user", "text": "hi"},)
    assert not await bridge.touch("s")
    loaded = await bridge.load()
    assert [(item.session_id, item.title) for item in loaded] == [("t", "v49")]
    assert threading.get_ident() not in store.threads and len(store.threads) == 1
    assert await bridge.delete("t")
    await bridge.aclose()
    assert store.load(EP) == []
    store.close()


async def test_a_failing_write_is_reported_not_raised(store: RecordingStore) -> None:
    errors: list[SessionStoreError] = []
    bridge = StoreBridge(store, EP)
    bridge.on_error = errors.append
    store.fail_writes = True
    assert await bridge.save(StoredSession(endpoint=EP, session_id="s", cwd="/")) is None
    assert len(errors) == 1 and isinstance(errors[0], SessionStoreBusy)
    store.fail_writes = False
    await bridge.save(StoredSession(endpoint=EP, session_id="s", cwd="/"))
    assert [item.session_id for item in await bridge.load()] == ["s"]
    await bridge.aclose()
    store.close()


async def test_load_raises_the_store_error(store: RecordingStore) -> None:
    bridge = StoreBridge(store, EP)
    store.close()
    with pytest.raises(SessionStoreError, match="closed"):
        await bridge.load()
    await bridge.aclose()


async def test_a_write_survives_the_cancellation_of_its_caller(store: RecordingStore) -> None:
    bridge = StoreBridge(store, EP)

    async def caller() -> None:
        await bridge.save(StoredSession(endpoint=EP, session_id="kept", cwd="/"))

    task = asyncio.create_task(caller())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await bridge.aclose()  # flushes
    assert [item.session_id for item in store.load(EP)] == ["kept"]
    store.close()


async def test_a_record_of_another_endpoint_is_a_bug(store: RecordingStore) -> None:
    bridge = StoreBridge(store, EP)
    with pytest.raises(ValueError, match="saved through"):
        bridge.save(StoredSession(endpoint="ws://other/", session_id="s", cwd="/"))
    await bridge.aclose()
    with pytest.raises(SessionStoreError, match="closed"):
        bridge.touch("s")
    store.close()


def test_the_end_of_a_turn_falls_back_to_touch_and_save_transcript_on_a_store_without_save_turn(
    tmp_path: Path,
) -> None:
    from datetime import datetime, timezone

    from acp_client.store._bridge import write_turn

    class Older:  # a store of the app's own, written before save_turn existed
        def __init__(self) -> None:
            self.inner = SqliteSessionStore(tmp_path / "older.db")
            self.calls: list[str] = []

        def touch(self, *args: object, **kwargs: object) -> bool:
            self.calls.append("touch")
            return self.inner.touch(*args, **kwargs)  # type: ignore[arg-type]

        def save_transcript(self, *args: object, **kwargs: object) -> bool:
            self.calls.append("save_transcript")
            return self.inner.save_transcript(*args, **kwargs)  # type: ignore[arg-type]

    older = Older()
    older.inner.save(StoredSession(endpoint=EP, session_id="s1", cwd="/"))
    when = datetime(2026, 5, 6, tzinfo=timezone.utc)
    assert write_turn(older, EP, "s1", [{"role": "user", "text": "hi"}], when=when)
    assert older.calls == ["touch", "save_transcript"]
    assert older.inner.get(EP, "s1").last_used_at == when  # type: ignore[union-attr]
    assert older.inner.load_transcript(EP, "s1") == ({"role": "user", "text": "hi"},)
    assert not write_turn(older, EP, "missing", [], when=when)
    older.inner.close()
