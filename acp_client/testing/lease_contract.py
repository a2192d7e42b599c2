"""The ownership contract of a :class:`~acp_client.store.SharedSessionStore`, as a pytest suite a
store author subclasses (needs ``pytest``): leases, fencing tokens, fenced writes, concurrent claims.

Subclass :class:`SharedSessionStoreContract` and give it a ``backend`` fixture: an object with an
``open()`` method that opens a new store object on one fresh location per test (each call a new
object, as another process would open it) and a ``close()``::

    class TestMyStoreLeases(SharedSessionStoreContract):
        @pytest.fixture
        def backend(self, tmp_path):
            backend = MyBackend(tmp_path)
            yield backend
            backend.close()

Every lease call is given ``now=`` explicitly, so the suite never waits for a lease to expire and
runs the same against a store whose clock is a database server's.

This module imports pytest; ``acp_client.testing`` does not import it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import pytest

from ..exceptions import ConfigurationError, SessionStoreFenced
from ..store._bridge import write_turn
from ..store.base import Fence, Lease, SharedSessionStore
from .store_contract import EP, T0, record

__all__ = ["LeaseBackend", "SharedSessionStoreContract"]

OTHER = "stdio:agent --other"
LEASE = 30.0


def at(seconds: float) -> datetime:
    """``seconds`` after :data:`T0`."""
    return T0 + timedelta(seconds=seconds)


class LeaseBackend(Protocol):
    """What the suite needs of a store's location."""

    def open(self) -> Any:
        """A new store object on the test's location (a :class:`SharedSessionStore`)."""

    def close(self) -> None:
        """Remove the location (after the test)."""


def _ids(leases: Sequence[Lease]) -> list[str]:
    return sorted(lease.session_id for lease in leases)


class SharedSessionStoreContract:
    """The tests every :class:`~acp_client.store.SharedSessionStore` passes (see the module
    docstring)."""

    @pytest.fixture
    def store(self, backend: LeaseBackend) -> Any:
        store: Any = backend.open()
        shared: object = store
        assert isinstance(shared, SharedSessionStore), "the store does not implement SharedSessionStore"
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def other(self, backend: LeaseBackend) -> Any:
        """A second store object on the same location (another process's)."""
        store = backend.open()
        try:
            yield store
        finally:
            store.close()

    def test_a_new_session_is_stored_owned_and_never_unowned(self, store: Any) -> None:
        lease = store.save_owned(record("s1"), "a", duration=LEASE, now=T0)
        assert (lease.session_id, lease.owner, lease.token) == ("s1", "a", 1)
        assert lease.expires_at == at(LEASE)
        assert store.adoptable(EP, now=T0) == []
        (loaded,) = store.load(EP)
        assert loaded.lease == lease
        assert store.get(EP, "s1").lease == lease
        assert loaded == record("s1")  # the lease is not part of the record's equality

    def test_claiming_a_free_session_takes_it_and_bumps_its_token(self, store: Any) -> None:
        store.save(record("s1"))
        assert store.get(EP, "s1").lease is None or store.get(EP, "s1").lease.owner is None
        (lease,) = store.claim(EP, ["s1"], "a", duration=LEASE, now=T0)
        assert (lease.owner, lease.token, lease.expires_at) == ("a", 1, at(LEASE))

    def test_the_owner_claiming_again_extends_its_lease_and_keeps_its_token(self, store: Any) -> None:
        store.save_owned(record("s1"), "a", duration=LEASE, now=T0)
        (lease,) = store.claim(EP, ["s1"], "a", duration=LEASE, now=at(10))
        assert (lease.owner, lease.token, lease.expires_at) == ("a", 1, at(10 + LEASE))

    def test_a_session_held_by_a_live_owner_cannot_be_claimed(self, store: Any, other: Any) -> None:
        store.save_owned(record("s1"), "a", duration=LEASE, now=T0)
        assert other.claim(EP, ["s1"], "b", duration=LEASE, now=at(LEASE - 1)) == []
        assert store.get(EP, "s1").lease.owner == "a"
        with pytest.raises(SessionStoreFenced) as info:
            other.save_owned(record("s1", title="b's"), "b", duration=LEASE, now=at(1))
        assert (info.value.holder, info.value.holder_token, info.value.owner) == ("a", 1, "b")
        assert store.get(EP, "s1").title is None  # nothing written

    def test_an_expired_lease_is_taken_over_with_a_higher_token(self, store: Any, other: Any) -> None:
        store.save_owned(record("s1"), "a", duration=LEASE, now=T0)
        (taken,) = other.claim(EP, ["s1"], "b", duration=LEASE, now=at(LEASE))  # expiry is exclusive
        assert (taken.owner, taken.token) == ("b", 2)
        assert store.claim(EP, ["s1"], "a", duration=LEASE, now=at(LEASE + 1)) == []
        (back,) = store.claim(EP, ["s1"], "a", duration=LEASE, now=at(3 * LEASE))
        assert (back.owner, back.token) == ("a", 3)  # every change of hands grows the token

    def test_claim_takes_what_it_can_of_many_in_one_step(self, store: Any, other: Any) -> None:
        for name in ("free", "mine", "theirs", "expired"):
            store.save(record(name))
        store.claim(EP, ["mine"], "a", duration=LEASE, now=T0)
        other.claim(EP, ["theirs"], "b", duration=LEASE, now=T0)
        other.claim(EP, ["expired"], "b", duration=1, now=T0)
        leases = store.claim(EP, ["free", "mine", "theirs", "expired", "missing"], "a", duration=LEASE, now=at(5))
        assert _ids(leases) == ["expired", "free", "mine"]
        assert {lease.session_id: lease.token for lease in leases} == {"expired": 2, "free": 1, "mine": 1}
        assert store.claim(EP, [], "a", duration=LEASE, now=T0) == []

    def test_claims_are_scoped_by_endpoint(self, store: Any) -> None:
        store.save(record("s1", endpoint=OTHER))
        assert store.claim(EP, ["s1"], "a", duration=LEASE, now=T0) == []
        assert _ids(store.claim(OTHER, ["s1"], "a", duration=LEASE, now=T0)) == ["s1"]

    def test_renew_extends_every_lease_of_the_owner_at_once(self, store: Any, other: Any) -> None:
        for name in ("s1", "s2", "s3"):
            store.save_owned(record(name), "a", duration=LEASE, now=T0)
        store.save_owned(record("b1"), "b", duration=LEASE, now=T0)
        store.save_owned(record("x", endpoint=OTHER), "a", duration=LEASE, now=T0)
        other.claim(EP, ["s3"], "b", duration=LEASE, now=at(LEASE + 1))  # s3 expired and was taken
        renewed = store.renew(EP, "a", duration=LEASE, now=at(LEASE + 2))  # s1, s2 expired, not taken
        assert _ids(renewed) == ["s1", "s2"]
        assert {lease.expires_at for lease in renewed} == {at(2 * LEASE + 2)}
        assert {lease.token for lease in renewed} == {1}
        assert store.get(EP, "b1").lease.expires_at == at(LEASE)  # another owner's: untouched
        assert store.get(OTHER, "x").lease.expires_at == at(LEASE)  # another endpoint's: untouched
        assert store.renew(EP, "nobody", duration=LEASE, now=T0) == []

    def test_release_makes_sessions_adoptable_at_once_and_keeps_the_token(self, store: Any, other: Any) -> None:
        for name in ("s1", "s2", "s3"):
            store.save_owned(record(name), "a", duration=LEASE, now=T0)
        assert store.release(EP, "a", ["s1"]) == 1
        assert [item.session_id for item in other.adoptable(EP, now=at(1))] == ["s1"]
        assert store.release(EP, "a") == 2
        assert store.release(EP, "a") == 0
        assert sorted(item.session_id for item in other.adoptable(EP, now=at(1))) == ["s1", "s2", "s3"]
        lease = store.get(EP, "s2").lease
        assert (lease.owner, lease.token) == (None, 1)
        (again,) = other.claim(EP, ["s2"], "b", duration=LEASE, now=at(2))
        assert again.token == 2
        assert store.release(EP, "a", ["s2"]) == 0  # not a's any more

    def test_adoptable_lists_unowned_and_expired_sessions_most_recently_used_first(self, store: Any) -> None:
        store.save(record("never", used=1))
        store.save_owned(record("live", used=5), "a", duration=LEASE, now=T0)
        store.save_owned(record("short", used=3), "b", duration=5, now=T0)
        store.save(record("elsewhere", endpoint=OTHER))
        assert [item.session_id for item in store.adoptable(EP, now=at(1))] == ["never"]
        found = store.adoptable(EP, now=at(5))
        assert [item.session_id for item in found] == ["short", "never"]
        assert (found[0].lease.owner, found[0].lease.token) == ("b", 1)  # who held it, for the app

    def test_the_owners_fenced_writes_apply(self, store: Any) -> None:
        fence = store.save_owned(record("s1"), "a", duration=LEASE, now=T0).fence
        assert fence == Fence("a", 1)
        store.save(record("s1", title="t"), fence=fence)
        assert store.touch(EP, "s1", when=at(9), fence=fence)
        assert store.save_transcript(EP, "s1", [{"role": "user", "text": "hi"}], fence=fence)
        renamed = store.rename(EP, "s1", "s2", fence=fence)
        assert renamed is not None and renamed.lease is not None and renamed.lease.fence == fence
        moved = store.get(EP, "s2")
        assert (moved.title, moved.last_used_at, moved.lease.owner, moved.lease.token) == ("t", at(9), "a", 1)
        assert store.load_transcript(EP, "s2") == ({"role": "user", "text": "hi"},)
        assert store.delete(EP, "s2", fence=fence)
        assert store.load(EP) == []

    def test_an_expired_lease_nobody_took_still_writes(self, store: Any) -> None:
        fence = store.save_owned(record("s1"), "a", duration=1, now=T0).fence
        store.save(record("s1", title="late"), fence=fence)
        assert store.get(EP, "s1").title == "late"

    def test_a_stale_owner_is_refused_every_write_and_overwrites_nothing(self, store: Any, other: Any) -> None:
        stale = store.save_owned(record("s1", title="a's"), "a", duration=LEASE, now=T0).fence
        store.save_transcript(EP, "s1", [{"role": "user", "text": "a"}], fence=stale)
        fresh = other.claim(EP, ["s1"], "b", duration=LEASE, now=at(LEASE + 1))[0].fence
        other.save(record("s1", title="b's"), fence=fresh)
        other.save_transcript(EP, "s1", [{"role": "user", "text": "b"}], fence=fresh)
        writes: list[Callable[[], object]] = [
            lambda: store.save(record("s1", title="stale"), fence=stale),
            lambda: store.touch(EP, "s1", when=at(99), fence=stale),
            lambda: store.save_transcript(EP, "s1", [{"role": "user", "text": "stale"}], fence=stale),
            lambda: store.rename(EP, "s1", "s9", fence=stale),
            lambda: store.delete(EP, "s1", fence=stale),
        ]
        for write in writes:
            with pytest.raises(SessionStoreFenced) as info:
                write()
            error = info.value
            assert (error.session_id, error.owner, error.token) == ("s1", "a", 1)
            assert (error.holder, error.holder_token) == ("b", 2)
        (kept,) = store.load(EP)
        assert (kept.session_id, kept.title, kept.last_used_at) == ("s1", "b's", T0)
        assert store.load_transcript(EP, "s1") == ({"role": "user", "text": "b"},)
        assert kept.lease.fence == fresh

    def test_a_fenced_save_never_brings_back_a_session_the_new_owner_deleted(self, store: Any, other: Any) -> None:
        stale = store.save_owned(record("s1"), "a", duration=LEASE, now=T0).fence
        fresh = other.claim(EP, ["s1"], "b", duration=LEASE, now=at(LEASE + 1))[0].fence
        assert other.delete(EP, "s1", fence=fresh)
        with pytest.raises(SessionStoreFenced) as info:
            store.save(record("s1", title="ghost"), fence=stale)
        assert info.value.holder is None
        assert not store.touch(EP, "s1", fence=stale)
        assert not store.save_transcript(EP, "s1", [], fence=stale)
        assert store.rename(EP, "s1", "s2", fence=stale) is None
        assert not store.delete(EP, "s1", fence=stale)
        assert store.load(EP) == []

    def test_the_end_of_a_turn_is_one_fenced_write(self, store: Any, other: Any) -> None:
        # The client writes a turn's end with ``write_turn``: the store's ``save_turn`` when it has
        # one (the last use and the conversation in one step), else ``touch`` and ``save_transcript``.
        fence = store.save_owned(record("s1"), "a", duration=LEASE, now=T0).fence
        turn = [{"role": "user", "text": "hi"}, {"role": "agent", "text": "hello"}]
        assert write_turn(store, EP, "s1", turn, when=at(5), fence=fence)
        assert store.get(EP, "s1").last_used_at == at(5)
        assert store.load_transcript(EP, "s1") == tuple(turn)
        assert not write_turn(store, EP, "missing", turn, when=at(6), fence=fence)
        fresh = other.claim(EP, ["s1"], "b", duration=LEASE, now=at(LEASE + 1))[0].fence
        with pytest.raises(SessionStoreFenced):
            write_turn(store, EP, "s1", [{"role": "user", "text": "stale"}], when=at(LEASE + 2), fence=fence)
        assert store.get(EP, "s1").last_used_at == at(5)  # nothing of the stale owner's turn written
        assert store.load_transcript(EP, "s1") == tuple(turn)
        assert write_turn(other, EP, "s1", [{"role": "user", "text": "b"}], when=at(LEASE + 3), fence=fresh)
        assert store.load_transcript(EP, "s1") == ({"role": "user", "text": "b"},)

    def test_unfenced_writes_keep_the_lease(self, store: Any) -> None:
        lease = store.save_owned(record("s1"), "a", duration=LEASE, now=T0)
        store.save(record("s1", title="app's"))
        store.touch(EP, "s1", when=at(3))
        store.save_transcript(EP, "s1", [{"role": "user", "text": "x"}])
        assert store.get(EP, "s1").lease == lease
        renamed = store.rename(EP, "s1", "s2")
        assert renamed is not None
        assert store.get(EP, "s2").lease == Lease("s2", "a", 1, at(LEASE))

    @pytest.mark.parametrize("owner", ["", None, 7, "a\nb", "x" * 201])
    def test_a_bad_owner_is_refused(self, store: Any, owner: Any) -> None:
        store.save(record("s1"))
        with pytest.raises(ConfigurationError, match="owner"):
            store.claim(EP, ["s1"], owner, duration=LEASE, now=T0)
        with pytest.raises(ConfigurationError, match="owner"):
            store.renew(EP, owner, duration=LEASE, now=T0)
        with pytest.raises(ConfigurationError, match="owner"):
            store.save_owned(record("s2"), owner, duration=LEASE, now=T0)
        assert store.get(EP, "s2") is None

    @pytest.mark.parametrize("duration", [0, -1, float("nan"), float("inf"), True, "30"])
    def test_a_bad_duration_is_refused(self, store: Any, duration: Any) -> None:
        store.save(record("s1"))
        with pytest.raises(ConfigurationError, match="duration"):
            store.claim(EP, ["s1"], "a", duration=duration, now=T0)
        with pytest.raises(ConfigurationError, match="duration"):
            store.renew(EP, "a", duration=duration, now=T0)
        assert store.get(EP, "s1").lease is None or store.get(EP, "s1").lease.owner is None

    def test_owners_claiming_the_same_sessions_at_once_each_get_a_session_exactly_once(
        self, backend: LeaseBackend
    ) -> None:
        names = [f"s{index}" for index in range(40)]
        seed = backend.open()
        for name in names:
            seed.save(record(name))
        stores = [backend.open() for _ in range(4)]
        got: dict[str, list[str]] = {}
        start = threading.Barrier(len(stores))

        def run(index: int, store: Any) -> None:
            owner = f"owner-{index}"
            start.wait()
            taken: list[str] = []
            for name in names[index::2] + names[::3]:  # overlapping picks, in different orders
                taken += [lease.session_id for lease in store.claim(EP, [name], owner, duration=LEASE, now=T0)]
            taken += _ids(store.claim(EP, names, owner, duration=LEASE, now=T0))
            got[owner] = taken

        threads = [threading.Thread(target=run, args=(index, store)) for index, store in enumerate(stores)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        owners = {name: [owner for owner, taken in got.items() if name in taken] for name in names}
        assert all(len(held) == 1 for held in owners.values()), owners
        for item in seed.load(EP):
            assert item.lease is not None and [item.lease.owner] == owners[item.session_id]
            assert item.lease.token == 1
        for store in (seed, *stores):
            store.close()
