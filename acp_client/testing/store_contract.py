"""The session store contract, as a pytest suite a store author subclasses (needs ``pytest``).

Every :class:`~acp_client.store.SessionStore` must pass it: the built-in SQLite and PostgreSQL
stores run it in acp_client's own tests (``tests/store/test_contract.py``). To check a store of
your own, subclass :class:`SessionStoreContract` in a test module and give it a ``backend``
fixture: an object of the :class:`StoreBackend` shape, which opens your store on a fresh location
(a file, a database, a schema) for each test and can write raw data there the way only your store's
own format knows (an older schema version, a damaged record, another application's tables)::

    import pytest
    from acp_client.testing.store_contract import SessionStoreContract

    class TestMyStore(SessionStoreContract):
        @pytest.fixture
        def backend(self, tmp_path):
            backend = MyBackend(tmp_path)  # implements StoreBackend
            yield backend
            backend.close()

What it checks: every field round-trips through a new store object; the conversation is kept
apart from the record and bounded (what is dropped is counted in its header); rename, delete and
touch; values that are not JSON are refused before writing; a damaged record or conversation is a
typed error and one bad record does not hide the others; older schemas are migrated, a newer
incompatible one, another application's data and a damaged store are refused and never
rewritten; threads and two store objects writing one location at once lose nothing.

This module imports pytest; ``acp_client.testing`` does not import it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

import attrs
import pytest

from ..exceptions import (
    AcpError,
    ConfigurationError,
    SessionStoreCorrupt,
    SessionStoreError,
    SessionStoreForeign,
    SessionStoreTooNew,
)
from ..store.base import SessionStore, StoredSession
from ..types import Probe

__all__ = ["EP", "T0", "SessionStoreContract", "StoreBackend", "full_record", "record"]

T0 = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=timezone.utc)
EP = "ws://agent.example/acp"


def record(session_id: str = "s1", *, endpoint: str = EP, used: int = 0, **fields: Any) -> StoredSession:
    """A small record at fixed times (``used`` seconds after :data:`T0` it was last used)."""
    return StoredSession(
        endpoint=endpoint,
        session_id=session_id,
        cwd="/work",
        created_at=T0,
        updated_at=T0,
        last_used_at=T0 + timedelta(seconds=used),
        **fields,
    )


def full_record() -> StoredSession:
    """A record with every field set to something other than its default (non-ASCII included)."""
    return StoredSession(
        endpoint="stdio:python -m agent",
        session_id="sess-ü-1",
        cwd="/home/ünï/project",
        mcp_servers=({"name": "fs", "command": "/bin/fs", "args": ["-x"], "env": [{"name": "K", "value": "v"}]},),
        additional_directories=("/extra/one", "/extra/two"),
        protocol_version=2,
        mode_id="architect",
        model_id="model-7",
        config_options={"reasoning": "high", "tools": True, "n": 3},
        title="Fix the flaky test ✓",
        status=Probe.INACTIVE,
        raw_status="saved",
        created_at=T0,
        updated_at=T0 + timedelta(minutes=5),
        last_used_at=datetime(2026, 3, 4, 8, 0, 0, 1, tzinfo=timezone(timedelta(hours=-3))),
        previous_session_ids=("old-1", "old-2"),
        extra={"label": "main", "nested": {"a": [1, 2, None]}},
    )


def conversation(session_id: str, count: int, *, size: int = 200) -> list[dict[str, Any]]:
    """A stored conversation (format 2): a header, one segment, ``count`` messages of ``size`` chars."""
    entries: list[dict[str, Any]] = [
        {"format": 2, "dropped": 0},
        {"segment": session_id, "began": "created", "lost": False},
    ]
    for index in range(count):
        role = "user" if index % 2 == 0 else "agent"
        entries.append({"role": role, "text": f"{index:05d} " + "y" * size, "messageId": f"m{index}"})
    return entries


def _compact_size(entries: Sequence[Mapping[str, Any]]) -> int:
    return len(json.dumps(list(entries), ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


class StoreBackend(Protocol):
    """What the contract needs from the store under test, on one fresh location per test.

    Attributes:
        schema_version: The newest schema version the store's code writes.
        older_versions: The older schema versions :meth:`seed_version` can write (each is
            migrated by the contract's test); empty for a store that never had another.
    """

    schema_version: int
    older_versions: Sequence[int]

    def open(self, *, max_transcript_bytes: int | None = None, migration: str | None = None) -> SessionStore:
        """A new store object on the location (each call its own object, its own connections).

        ``migration``: ``None`` for the store as shipped; ``"additive"`` for its code plus one
        more schema migration that older code may still read and write; ``"breaking"`` for one
        that raises the compatible version past the shipped code. The backend closes every store
        it opened in :meth:`close`.
        """

    def version_of(self, store: SessionStore) -> int:
        """The schema version ``store`` found (or made) at the location."""

    def seed_version(self, version: int, session: StoredSession, messages: Sequence[Mapping[str, Any]]) -> None:
        """Write, without the store, what the store's code of schema ``version`` would have written
        for ``session`` and its conversation (``messages``: plain ``role``/``text`` entries, in the
        conversation form that version kept)."""

    def stamp_version(self, version: int, *, compatible: int) -> None:
        """Make the existing store claim schema ``version``, readable by code of ``compatible`` and later."""

    def make_foreign(self) -> None:
        """Put another application's data where the store would be (its own tables, rows)."""

    def make_corrupt(self) -> None:
        """Put the store's identity there without its tables."""

    def damage_record(self, endpoint: str, session_id: str) -> None:
        """Damage one stored record so it cannot be decoded."""

    def damage_transcript(self, endpoint: str, session_id: str) -> None:
        """Damage one stored conversation so it is not a list of JSON objects."""

    def snapshot(self) -> object:
        """An image of everything at the location, comparable with ``==`` (to see nothing was written)."""

    def close(self) -> None:
        """Close every store :meth:`open` made."""


class SessionStoreContract:
    """The contract's tests; subclass it with a ``backend`` fixture (see the module docstring)."""

    @pytest.fixture
    def store(self, backend: StoreBackend) -> SessionStore:
        return backend.open()

    def test_every_field_round_trips_through_a_new_store_object(self, backend: StoreBackend) -> None:
        stored = full_record()
        fields = attrs.asdict(stored, recurse=False)
        assert fields.pop("lease") is None  # a shared store's bookkeeping, filled in on reads (not a record field)
        assert all(value not in (None, (), {}) for value in fields.values())
        backend.open().save(stored)
        later = backend.open()  # another object (another process would see the same)
        (loaded,) = later.load(stored.endpoint)
        assert loaded == stored
        assert later.get(stored.endpoint, stored.session_id) == stored
        assert loaded.last_used_at.tzinfo is timezone.utc

    def test_defaults_round_trip(self, store: SessionStore) -> None:
        stored = StoredSession(endpoint=EP, session_id="s", cwd="/")
        store.save(stored)
        assert store.get(EP, "s") == stored
        assert store.get(EP, "missing") is None

    def test_save_replaces_the_whole_record(self, store: SessionStore) -> None:
        store.save(record(title="first", mode_id="a", extra={"x": 1}))
        store.save(record(title="second"))
        assert store.load(EP) == [record(title="second")]

    def test_load_is_most_recently_used_first_and_touch_reorders(self, store: SessionStore) -> None:
        for index, name in enumerate(["a", "b", "c"]):
            store.save(record(name, used=index))
        assert [item.session_id for item in store.load(EP)] == ["c", "b", "a"]
        assert store.touch(EP, "a", when=T0 + timedelta(hours=1))
        assert [item.session_id for item in store.load(EP)] == ["a", "c", "b"]
        touched = store.get(EP, "a")
        assert touched is not None and touched.last_used_at == T0 + timedelta(hours=1)
        assert touched.updated_at == T0  # touch sets last_used_at only
        assert not store.touch(EP, "missing")
        assert store.get(EP, "missing") is None  # touch creates nothing
        store.touch(EP, "b")
        assert store.load(EP)[0].session_id == "b"  # now

    def test_sessions_are_scoped_by_endpoint(self, store: SessionStore) -> None:
        other = "stdio:agent --serve"
        store.save(record("shared", title="on ws", used=1))
        store.save(record("shared", endpoint=other, title="on stdio", used=2))
        store.save(record("only-ws"))
        assert {item.session_id for item in store.load(EP)} == {"shared", "only-ws"}
        assert [item.title for item in store.load(other)] == ["on stdio"]
        assert store.load("http://elsewhere/") == []
        assert store.delete(other, "shared")
        assert not store.delete(other, "shared")
        kept = store.get(EP, "shared")
        assert kept is not None and kept.title == "on ws"
        assert store.load(other) == []

    def test_rename_is_one_step_and_remembers_the_old_id(self, store: SessionStore) -> None:
        store.save(record("old", mode_id="m", previous_session_ids=("older",)))
        store.save(record("new", title="stale record under the new id"))
        renamed = store.rename(EP, "old", "new", when=T0 + timedelta(minutes=1))
        assert renamed is not None
        assert renamed.session_id == "new" and renamed.mode_id == "m"
        assert renamed.previous_session_ids == ("older", "old")
        assert renamed.updated_at == T0 + timedelta(minutes=1)
        assert store.load(EP) == [renamed]
        assert store.rename(EP, "old", "other") is None  # nothing stored under it: nothing written
        assert store.get(EP, "other") is None
        assert store.rename(EP, "new", "new") == renamed
        with pytest.raises(ConfigurationError):
            store.rename(EP, "new", "")

    def test_a_value_that_is_not_json_is_refused_before_writing(self, store: SessionStore) -> None:
        with pytest.raises(ConfigurationError):
            store.save(record(extra={"when": datetime.now()}))
        with pytest.raises(ConfigurationError):
            store.save(record(config_options={"x": float("nan")}))
        assert store.load(EP) == []
        store.save(record())
        with pytest.raises(ConfigurationError):
            store.save_transcript(EP, "s1", [{"when": datetime.now()}])
        assert store.load_transcript(EP, "s1") == ()

    def test_the_conversation_lives_beside_the_record(self, backend: StoreBackend, store: SessionStore) -> None:
        tail = (
            {"format": 2, "dropped": 0},
            {"segment": "s1", "began": "created", "lost": False},
            {"role": "user", "text": "hi"},
            {"role": "agent", "text": "hello ✓", "messageId": "m1"},
        )
        assert not store.save_transcript(EP, "s1", tail)  # no record: nothing written
        assert store.load_transcript(EP, "s1") == ()
        store.save(record())
        assert store.save_transcript(EP, "s1", tail)
        store = backend.open()
        assert store.load_transcript(EP, "s1") == tail
        store.save(record(title="saving the record keeps the conversation"))
        assert store.load_transcript(EP, "s1") == tail
        assert store.load_transcript("ws://other/", "s1") == ()  # scoped by endpoint
        store.rename(EP, "s1", "s2")  # moves with the record
        assert store.load_transcript(EP, "s1") == ()
        assert store.load_transcript(EP, "s2") == tail
        store.save(record("s3"))
        store.save_transcript(EP, "s3", tail[:1])
        store.rename(EP, "s2", "s3")  # replaces the stale record under the new id, and its conversation
        assert store.load_transcript(EP, "s3") == tail
        assert store.delete(EP, "s3")  # goes with the record
        assert store.load_transcript(EP, "s3") == ()
        store.save(record("s3"))  # a new record under that id starts with no conversation
        assert store.load_transcript(EP, "s3") == ()

    def test_the_conversation_is_replaced_whole(self, store: SessionStore) -> None:
        store.save(record())
        assert store.save_transcript(EP, "s1", conversation("s1", 10))
        assert store.save_transcript(EP, "s1", conversation("s1", 3))
        assert store.load_transcript(EP, "s1") == tuple(conversation("s1", 3))
        assert store.save_transcript(EP, "s1", [])
        assert store.load_transcript(EP, "s1") == ()

    def test_a_conversation_past_the_bound_drops_its_oldest_messages_and_counts_them(
        self, backend: StoreBackend
    ) -> None:
        bound = 8 * 1024
        store = backend.open(max_transcript_bytes=bound)
        store.save(record())
        entries = conversation("s1", 200)
        assert store.save_transcript(EP, "s1", entries)
        stored = store.load_transcript(EP, "s1")
        assert _compact_size(stored) <= bound
        header, marker, *messages = stored
        assert 0 < len(messages) < 200
        assert messages == entries[-len(messages) :]  # the newest, whole and in order
        assert header == {"format": 2, "dropped": 200 - len(messages)}  # what was dropped is said
        assert marker == entries[1]  # the kept messages stay in their segment
        # Appending a turn to the bounded conversation adds to the count, never resets it.
        grown = [*stored, {"role": "user", "text": "next " + "z" * 200}, {"role": "agent", "text": "ok " + "z" * 200}]
        assert store.save_transcript(EP, "s1", grown)
        header, _, *again = store.load_transcript(EP, "s1")
        assert again[-2:] == grown[-2:]
        assert header["dropped"] == 200 + 2 - len(again)

    def test_a_conversation_within_the_bound_is_kept_as_given(self, backend: StoreBackend) -> None:
        store = backend.open(max_transcript_bytes=64 * 1024)
        store.save(record())
        entries = conversation("s1", 20)
        store.save_transcript(EP, "s1", entries)
        assert store.load_transcript(EP, "s1") == tuple(entries)

    def test_a_bound_of_zero_keeps_no_message_and_counts_them_all(self, backend: StoreBackend) -> None:
        store = backend.open(max_transcript_bytes=0)
        store.save(record())
        store.save_transcript(EP, "s1", conversation("s1", 5))
        header, *rest = store.load_transcript(EP, "s1")
        assert header == {"format": 2, "dropped": 5}
        assert not [entry for entry in rest if "role" in entry]

    def test_a_list_without_a_header_is_bounded_from_its_oldest_end(self, backend: StoreBackend) -> None:
        entries = tuple({"role": "agent", "text": f"{i}: " + "y" * 200} for i in range(1000))
        store = backend.open(max_transcript_bytes=8 * 1024)
        store.save(record())
        assert store.save_transcript(EP, "s1", entries)
        tail = store.load_transcript(EP, "s1")
        assert 0 < len(tail) < 1000 and list(tail) == list(entries[-len(tail) :])
        assert _compact_size(tail) <= 8 * 1024

    def test_a_negative_bound_is_refused(self, backend: StoreBackend) -> None:
        with pytest.raises(ConfigurationError):
            backend.open(max_transcript_bytes=-1)

    def test_a_damaged_record_is_skipped_by_load_and_named_by_get(
        self, backend: StoreBackend, store: SessionStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        store.save(record("good", used=1))
        store.save(record("bad"))
        backend.damage_record(EP, "bad")
        with caplog.at_level("WARNING", logger="acp_client.store"):
            assert [item.session_id for item in store.load(EP)] == ["good"]
        assert "'bad'" in caplog.text
        with pytest.raises(SessionStoreCorrupt, match="bad"):
            store.get(EP, "bad")

    def test_a_damaged_conversation_is_a_typed_error(self, backend: StoreBackend, store: SessionStore) -> None:
        store.save(record("good"))
        store.save_transcript(EP, "good", conversation("good", 2))
        backend.damage_transcript(EP, "good")
        with pytest.raises(SessionStoreCorrupt, match="transcript of session 'good'"):
            store.load_transcript(EP, "good")
        assert store.load(EP) == [record("good")]  # the record itself still loads

    def test_a_new_store_has_the_current_schema_version(self, backend: StoreBackend) -> None:
        assert backend.version_of(backend.open()) == backend.schema_version >= 1

    def test_every_older_schema_version_is_migrated_keeping_its_sessions(self, backend: StoreBackend) -> None:
        messages = [{"role": "user", "text": "hi ✓"}, {"role": "agent", "text": "hello", "messageId": "m1"}]
        stored = full_record()
        for version in backend.older_versions:
            assert 1 <= version < backend.schema_version
            backend.seed_version(version, stored, messages)
            store = backend.open()
            assert backend.version_of(store) == backend.schema_version, version
            assert store.load(stored.endpoint) == [stored], version
            kept = store.load_transcript(stored.endpoint, stored.session_id)
            assert [entry for entry in kept if "role" in entry] == messages, version
            assert kept[0].get("format") == 2, version  # the conversation in today's form
            store.save(attrs.evolve(stored, title="written after the migration"))
            again = backend.open()
            assert backend.version_of(again) == backend.schema_version
            assert again.load_transcript(stored.endpoint, stored.session_id) == kept  # migrated once

    def test_a_store_is_migrated_by_newer_code_and_older_code_still_uses_an_additive_change(
        self, backend: StoreBackend
    ) -> None:
        backend.open().save(full_record())
        newer = backend.open(migration="additive")
        assert backend.version_of(newer) == backend.schema_version + 1
        assert newer.load(full_record().endpoint) == [full_record()]
        older = backend.open()  # this code, on the newer (additive) schema: used as it is
        assert backend.version_of(older) == backend.schema_version + 1  # never downgraded
        older.save(record())
        assert older.load(EP) == [record()]

    def test_a_migration_that_breaks_older_readers_locks_them_out_without_a_write(self, backend: StoreBackend) -> None:
        backend.open().save(record())
        backend.open(migration="breaking")
        backend.close()
        self._refused(backend, SessionStoreTooNew, f"schema version {backend.schema_version + 1}")

    def test_a_newer_incompatible_schema_is_refused_and_left_untouched(self, backend: StoreBackend) -> None:
        backend.open().save(record())
        backend.close()
        current = backend.schema_version
        backend.stamp_version(current + 3, compatible=current + 1)
        error = self._refused(backend, SessionStoreTooNew, f"schema version {current + 3}.*upgrade acp_client")
        assert isinstance(error, SessionStoreTooNew)
        assert (error.version, error.supported) == (current + 3, current)

    def test_a_newer_compatible_schema_is_used_as_it_is(self, backend: StoreBackend) -> None:
        backend.open().save(record())
        backend.close()
        current = backend.schema_version
        backend.stamp_version(current + 1, compatible=current)
        store = backend.open()
        assert backend.version_of(store) == current + 1
        assert store.load(EP) == [record()]
        store.save(record("s2"))
        assert backend.version_of(backend.open()) == current + 1  # never downgraded

    def test_another_applications_data_is_refused_and_left_untouched(self, backend: StoreBackend) -> None:
        backend.make_foreign()
        self._refused(backend, SessionStoreForeign, "another application")

    def test_our_identity_without_our_tables_is_corrupt_and_left_untouched(self, backend: StoreBackend) -> None:
        backend.make_corrupt()
        self._refused(backend, SessionStoreCorrupt, "missing|damaged")

    @staticmethod
    def _refused(backend: StoreBackend, error: type[SessionStoreError], match: str) -> SessionStoreError:
        before = backend.snapshot()
        with pytest.raises(error, match=match) as info:
            backend.open()
        assert isinstance(info.value, AcpError)
        assert info.value.path  # says where
        assert backend.snapshot() == before  # not a byte written
        return info.value

    def test_many_threads_share_one_store_object(self, store: SessionStore) -> None:
        self._write_at_once([store] * 4)

    def test_two_store_objects_writing_one_location_at_once_lose_nothing(self, backend: StoreBackend) -> None:
        first, second = backend.open(), backend.open()
        first.save(record("shared"))
        self._write_at_once([first, second, first, second], shared="shared")
        third = backend.open()
        shared = third.get(EP, "shared")
        assert shared is not None and shared.last_used_at > T0  # touched by all

    @staticmethod
    def _write_at_once(stores: Sequence[SessionStore], *, shared: str | None = None, count: int = 25) -> None:
        """Each store in its own thread, all started at once: saves, conversations, renames,
        deletes and reads interleaved; then every write is checked to be there."""
        errors: list[BaseException] = []
        start = threading.Barrier(len(stores))

        def work(worker: int, store: SessionStore) -> None:
            try:
                start.wait()
                for index in range(count):
                    session_id = f"t{worker}-{index}"
                    store.save(record(session_id, used=index, config_options={"i": index}))
                    assert store.save_transcript(EP, session_id, conversation(session_id, 1, size=10))
                    if shared is not None:
                        store.touch(EP, shared)
                    final = session_id
                    if index % 5 == 0:
                        final = session_id + "-renamed"
                        assert store.rename(EP, session_id, final) is not None
                    if index % 7 == 3:
                        assert store.delete(EP, final)
                    store.load(EP)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n, store)) for n, store in enumerate(stores)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        found = {item.session_id: item for item in stores[0].load(EP)}
        for worker in range(len(stores)):
            for index in range(count):
                session_id = f"t{worker}-{index}"
                final = session_id + "-renamed" if index % 5 == 0 else session_id
                if index % 7 == 3:
                    assert final not in found, final
                    continue
                assert found[final].config_options == {"i": index}
                kept = stores[0].load_transcript(EP, final)
                assert kept == tuple(conversation(session_id, 1, size=10)), final
