"""A pooled client records each session's home with it in the store, and a restore starts there.

Each record carries the name of the instance its session lives on (``StoredSession.home``, in the
record's ``extra``), written with the session and again when it moves. The next process asks that
instance alone about that session; the other instances hear of an id only when its home does not
have it active. A liar that answers ``active`` for every id (the reference agent's
``status-always-active`` fault) therefore never wins a session it does not host, and cannot speak
for one. Three reference agents over memory connectors, a fake clock, a real SQLite file (and one
PostgreSQL database).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

from acp_client import AcpClient, ClientHandlers, RecoveryPath
from acp_client.handlers import FileSystemPolicy
from acp_client.location import Endpoint
from acp_client.pool import Pool
from acp_client.store import HOME_KEY, SessionStore, SqliteSessionStore, StoredSession
from acp_client.testing import inside
from tests._farm import Farm, Recorder
from tests._harness import FAST_RETRY
from tests._support import eventually
from tests.peers.postgres import Database

KEY = "pool:homes"


@pytest.fixture
def store(tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
    with SqliteSessionStore(tmp_path / "sessions.db") as opened:
        yield opened  # type: ignore[misc]


def client(
    farm: Farm, recorder: Recorder, store: SessionStore, endpoints: Iterable[Endpoint] | None = None, **options: Any
) -> AcpClient:
    return AcpClient(
        Pool(list(endpoints or farm.endpoints), failover_delay=5.0),
        retry=FAST_RETRY,
        clock=farm.clock,
        callbacks=recorder.callbacks(),
        session_store=store,
        session_store_key=KEY,
        **options,
    )


async def flush(pooled: AcpClient) -> None:
    persistence = inside(pooled).engine.persistence
    assert persistence is not None
    await persistence.bridge.flush()


async def first_process(farm: Farm, store: SessionStore, count: int = 3) -> list[str]:
    """``count`` sessions placed round robin (on a, b, c), a turn each; the process ends."""
    async with client(farm, Recorder(), store) as first:
        handles = [await first.new_session("/tmp") for _ in range(count)]
        for handle in handles:
            await farm.clock.run(handle.prompt("hello"))
        await flush(first)
        return [h.session_id for h in handles]


def homes(store: SessionStore) -> dict[str, str | None]:
    return {record.session_id: record.home for record in store.load(KEY)}


def asked(farm: Farm) -> dict[str, set[str]]:
    """Which ids each instance was asked ``session/status`` about."""
    return {
        name: {m["params"]["sessionId"] for m in connector.sent if m["method"] == "session/status"}
        for name, connector in farm.connectors.items()
    }


def closes(farm: Farm) -> list[tuple[str, str]]:
    return [
        (name, m["params"]["sessionId"])
        for name, connector in farm.connectors.items()
        for m in connector.sent
        if m["method"] == "session/close"
    ]


def forget_what_was_sent(farm: Farm) -> None:
    for connector in farm.connectors.values():
        connector.sent.clear()


async def test_each_record_carries_its_home_and_a_restore_asks_only_the_home(
    farm: Farm, store: SqliteSessionStore
) -> None:
    on_a, on_b, on_c = await first_process(farm, store)
    assert homes(store) == {on_a: "a", on_b: "b", on_c: "c"}
    forget_what_was_sent(farm)
    recorder = Recorder()
    async with client(farm, recorder, store):
        outcomes = {o.previous_session_id: (o.path, o.endpoint) for o in recorder.outcomes}
        assert outcomes == {s: (RecoveryPath.RESUME, n) for s, n in ((on_a, "a"), (on_b, "b"), (on_c, "c"))}
        assert asked(farm) == {"a": {on_a}, "b": {on_b}, "c": {on_c}}  # no instance heard of another's id
        assert closes(farm) == []


async def test_the_others_are_asked_only_about_the_id_its_home_does_not_have(
    farm: Farm, store: SqliteSessionStore
) -> None:
    on_a, on_b, on_c = await first_process(farm, store)
    farm.agents["b"].lose_memory()  # b lost its memory, kept its store: inactive there
    forget_what_was_sent(farm)
    recorder = Recorder()
    async with client(farm, recorder, store):
        by_old = {o.previous_session_id: o for o in recorder.outcomes}
        assert (by_old[on_b].path, by_old[on_b].endpoint) == (RecoveryPath.REPLAY, "b")  # its home, among inactive
        assert asked(farm) == {"a": {on_a, on_b}, "b": {on_b}, "c": {on_c, on_b}}
        assert farm.violations == []


async def test_a_liar_claiming_every_id_active_never_wins_a_restored_session(
    farm: Farm, store: SqliteSessionStore
) -> None:
    on_a, on_b, on_c = await first_process(farm, store)
    farm.agents["a"].faults = frozenset({"status-always-active"})  # the first instance lies
    forget_what_was_sent(farm)
    recorder = Recorder()
    async with client(farm, recorder, store) as second:
        by_old = {o.previous_session_id: o for o in recorder.outcomes}
        for session_id, name in ((on_a, "a"), (on_b, "b"), (on_c, "c")):
            assert (by_old[session_id].path, by_old[session_id].endpoint) == (RecoveryPath.RESUME, name)
            assert second.session(session_id).endpoint == name
        assert closes(farm) == []
        assert asked(farm)["a"] == {on_a}  # the liar never heard of the others
        assert farm.agents["b"].sessions[on_b].in_memory and farm.agents["c"].sessions[on_c].in_memory
        assert (await farm.clock.run(second.session(on_b).prompt("again"))).stop_reason == "end_turn"
        await flush(second)
    assert homes(store) == {on_a: "a", on_b: "b", on_c: "c"}


async def test_while_the_recorded_home_is_down_a_liars_claim_waits_for_it(
    farm: Farm, store: SqliteSessionStore
) -> None:
    _, on_b, _ = await first_process(farm, store)
    farm.agents["a"].faults = frozenset({"status-always-active"})
    farm.connectors["b"].refuse()  # the home is down when the next process starts
    forget_what_was_sent(farm)
    recorder = Recorder()
    async with client(farm, recorder, store) as second:
        assert second.session(on_b).endpoint is None  # not resumed on the liar meanwhile
        farm.connectors["b"].accept()
        await eventually(lambda: second.session(on_b).endpoint == "b", 120.0, clock=farm.clock)
        outcome = next(o for o in recorder.outcomes if o.previous_session_id == on_b)
        assert (outcome.path, outcome.endpoint) == (RecoveryPath.RESUME, "b")
        assert on_b not in asked(farm)["a"]  # the liar never heard of it: the session waited for its home
        attached = [m for m in farm.connectors["a"].sent if m["method"] in ("session/load", "session/resume")]
        assert all(m["params"]["sessionId"] != on_b for m in attached)
        assert closes(farm) == []


async def test_a_member_that_is_not_the_recorded_home_cannot_speak_for_a_restored_session(
    farm: Farm, store: SqliteSessionStore, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the other session's secret", encoding="utf-8")
    on_a, on_b, _ = await first_process(farm, store)
    farm.agents["a"].faults = frozenset({"status-always-active"})
    permissions: list[Any] = []

    def permission(request: Any) -> Any:
        permissions.append(request)
        return None

    handlers = ClientHandlers(permission=permission, file_system=FileSystemPolicy(read=True))
    async with client(farm, Recorder(), store, handlers=handlers) as second:
        victim, liar = second.session(on_b), second.session(on_a)
        await farm.clock.run(liar.prompt(f"/as {on_b} {secret}"))
        reply = liar.transcript.messages[-1].text
        assert "session/request_permission: refused -32002" in reply, reply
        assert "fs/read_text_file: refused -32002" in reply, reply
        assert permissions == [] and "injected" not in victim.transcript.text()
        links = inside(second).links.links  # type: ignore[attr-defined]
        assert links[0].authority is not None and links[0].authority.refused == 3


async def test_a_restored_session_is_admitted_from_its_recorded_home_only_before_it_is_placed(
    farm: Farm, store: SqliteSessionStore
) -> None:
    _, on_b, _ = await first_process(farm, store)
    farm.connectors["b"].refuse()  # b's session waits for b: not placed yet
    async with client(farm, Recorder(), store) as second:
        assert second.session(on_b).endpoint is None
        links = inside(second).links  # type: ignore[attr-defined]
        admits = {link.endpoint.name: links._admits(link)(on_b) for link in links.links}
        assert admits == {"a": False, "b": True, "c": False}
        farm.connectors["b"].accept()
        await eventually(lambda: second.session(on_b).endpoint == "b", 120.0, clock=farm.clock)


async def test_a_move_is_recorded_and_the_next_restore_starts_at_the_new_home(
    farm: Farm, store: SqliteSessionStore
) -> None:
    async with client(farm, Recorder(), store) as first:
        handle = await first.new_session("/tmp")
        await farm.clock.run(handle.prompt("hello"))
        await flush(first)
        assert homes(store) == {handle.session_id: "a"}
        farm.share(handle.session_id, "b", "c")  # the others can load it from shared storage
        farm.connectors["a"].refuse()
        farm.connectors["a"].drop()
        await eventually(lambda: handle.endpoint not in (None, "a"), 120.0, clock=farm.clock)
        moved_to = handle.endpoint
        await flush(first)
        assert homes(store) == {handle.session_id: moved_to}
    farm.connectors["a"].accept()
    forget_what_was_sent(farm)
    recorder = Recorder()
    async with client(farm, recorder, store) as second:
        assert second.session(handle.session_id).endpoint == moved_to
        assert {name for name, ids in asked(farm).items() if handle.session_id in ids} <= {moved_to, "a"}
        assert asked(farm)[moved_to] == {handle.session_id}
        await farm.clock.advance(30.0)  # the copy left behind on a is closed once a answers
        assert not (farm.agents["a"].sessions.get(handle.session_id) or _Gone()).in_memory
        assert farm.violations == []


class _Gone:
    in_memory = False


async def test_the_home_is_the_instance_name_never_a_url_with_its_secrets(
    farm: Farm, store: SqliteSessionStore
) -> None:
    endpoints = [
        Endpoint(f"ws://user:hunter2@{name}.example/acp?token=s3cret", connector=farm.connectors[name])
        for name in ("a", "b", "c")
    ]
    async with client(farm, Recorder(), store, endpoints) as pooled:
        handle = await pooled.new_session("/tmp")
        await flush(pooled)
    [record] = store.load(KEY)
    assert record.home == handle.endpoint == endpoints[0].name
    assert "hunter2" not in str(record.extra) and "s3cret" not in str(record.extra)


def test_the_record_keeps_the_apps_own_extra_beside_the_home() -> None:
    record = StoredSession("pool:x", "s1", "/tmp", extra={"mine": 1, HOME_KEY: 7})
    assert record.home is None  # not a name: not a home
    homed = record.with_placement("b", ["c", "a", "c"])
    assert homed.extra == {"mine": 1, HOME_KEY: "b", "acp_client.left_behind": ["a", "c"]}
    assert (homed.home, homed.left_behind) == ("b", ("a", "c"))
    assert homed.with_placement("b", ["a", "c"]) is homed
    assert homed.with_placement("c").extra == {"mine": 1, HOME_KEY: "c"}


async def test_with_postgresql_a_restore_asks_only_the_home(farm: Farm, postgres_database: Database) -> None:
    from acp_client.store import PostgresSessionStore

    with PostgresSessionStore(postgres_database.dsn) as pg:
        on_a, on_b, on_c = await first_process(farm, pg)
        assert homes(pg) == {on_a: "a", on_b: "b", on_c: "c"}
        farm.agents["a"].faults = frozenset({"status-always-active"})
        forget_what_was_sent(farm)
        recorder = Recorder()
        async with client(farm, recorder, pg):
            assert {o.previous_session_id: o.endpoint for o in recorder.outcomes} == {on_a: "a", on_b: "b", on_c: "c"}
            assert asked(farm) == {"a": {on_a}, "b": {on_b}, "c": {on_c}}
            assert closes(farm) == []
