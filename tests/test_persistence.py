"""``AcpClient(session_store=...)``: the bookkeeping in the store and the recovery of stored
sessions on ``connect()``, over memory transports on a fake clock.

Each test plays two "processes" in one: a first client writes the store and closes, a second
client with the same store and the same agent recovers what it finds there.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from acp_client import AcpClient, ConfigurationError, RecoveryPath, SessionStoreError, State
from acp_client.state import Probe
from acp_client.store import SessionStoreUnavailable, SqliteSessionStore, StoredSession, endpoint_key
from acp_client.testing import ReferenceAgent, inside

from ._harness import HarnessConnector
from ._support import eventually
from ._world import KEY, OutageStore, Side, World


async def test_sessions_are_saved_as_created_and_used(world: World) -> None:
    ids = await world.first_run(2)
    stored = world.stored()
    assert set(stored) == set(ids)
    assert stored[ids[0]].cwd == "/work/p0" and stored[ids[0]].status is Probe.ACTIVE
    # Most recently prompted first; each turn left its transcript tail.
    assert [record.session_id for record in world.store.load(KEY)] == [ids[1], ids[0]]
    stored = tuple(
        {k: v for k, v in entry.items() if k != "messageId"} for entry in world.store.load_transcript(KEY, ids[0])
    )
    assert stored == (
        {"format": 2, "dropped": 0},
        {"segment": ids[0], "began": "created", "lost": False},
        {"role": "user", "text": "hello 0", "status": "complete"},
        {"role": "agent", "text": "echo: hello 0"},
    )


async def test_stored_sessions_are_recovered_before_connected(world: World) -> None:
    ids = await world.first_run(2)
    before = world.stored()
    side = world.side()
    await side.client.connect()

    # The stored sessions were tracked again and recovered on the first connection.
    assert [state.state for state in side.states] == [State.CONNECTING, State.RECOVERING, State.CONNECTED]
    assert sorted(outcome.previous_session_id for outcome in side.outcomes) == sorted(ids)
    assert {outcome.path for outcome in side.outcomes} == {RecoveryPath.RESUME}
    assert {outcome.probe for outcome in side.outcomes} == {Probe.ACTIVE}
    assert side.client.recovery_outcomes == side.outcomes
    methods = side.connector.sent_methods()
    assert methods[0] == "initialize"
    assert sorted(methods[1:]) == ["session/resume"] * 2 + ["session/status"] * 2
    assert sorted(handle.session_id for handle in side.client.sessions) == sorted(ids)
    # Listed most recently used first; nothing was re-created or re-dated by the restore.
    assert [record.session_id for record in side.client.stored_sessions()] == [ids[1], ids[0]]
    await side.flush()
    after = world.stored()
    for session_id in ids:
        assert after[session_id].created_at == before[session_id].created_at
        assert after[session_id].last_used_at == before[session_id].last_used_at
        assert after[session_id].raw_status == "active"
    # The restored session works.
    handle = side.client.session(ids[0])
    assert (await handle.prompt("again")).stop_reason == "end_turn"
    await side.flush()
    assert world.store.load(KEY)[0].session_id == ids[0]


async def test_restart_replays_and_eviction_renames(world: World) -> None:
    kept, lost = await world.first_run(2)
    world.agent.lose_memory()
    world.agent.evict(lost)
    side = world.side()
    await side.client.connect()

    by_previous = {outcome.previous_session_id: outcome for outcome in side.outcomes}
    assert by_previous[kept].path is RecoveryPath.REPLAY and by_previous[kept].probe is Probe.INACTIVE
    assert by_previous[lost].path is RecoveryPath.NEW_SESSION and by_previous[lost].probe is Probe.UNKNOWN
    new_id = by_previous[lost].session_id
    assert new_id is not None and new_id != lost
    assert side.client.session(kept).transcript.text() == "user: hello 0\nagent: echo: hello 0"
    await side.flush()
    stored = world.stored()
    assert set(stored) == {kept, new_id}
    assert stored[new_id].previous_session_ids == (lost,)
    assert stored[new_id].cwd == "/work/p1"
    # A third process finds the renamed session under its new id, and resumes both.
    await side.close()
    third = world.side()
    await third.client.connect()
    assert {o.previous_session_id: o.path for o in third.outcomes} == {
        kept: RecoveryPath.RESUME,
        new_id: RecoveryPath.RESUME,
    }


async def test_close_forget_and_abandon_delete(world: World) -> None:
    ids = await world.first_run(3)
    side = world.side(callbacks={"decide_recovery": lambda c: RecoveryPath.ABANDON if c.session_id == ids[2] else None})
    await side.client.connect()
    await side.client.close_session(ids[0])
    side.client.forget_session(ids[1])
    await side.flush()
    assert world.stored() == {}
    assert side.client.stored_sessions() == []


async def test_mode_and_config_are_kept(world: World) -> None:
    side = world.side()

    def accept_set_mode(message: Any) -> Any:  # the reference agent has no modes: say yes
        if isinstance(message, dict) and message.get("error", {}).get("code") == -32601:
            return {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        return message

    side.connector.rewrite = accept_set_mode
    await side.client.connect()
    handle = await side.client.new_session("/work/modes")
    await handle.set_mode("architect")
    # What set_config_option() does once the agent said yes (the setter itself lands separately).
    engine = inside(side.client).engine
    tracked = engine.table.require(handle.session_id)
    engine.emit(lambda o: o.config_changed(tracked, "effort", "high"))
    await side.close()
    record = world.stored()[handle.session_id]
    assert record.mode_id == "architect" and record.config_options == {"effort": "high"}

    second = world.side()
    await second.client.connect()
    await second.flush()
    record = world.stored()[handle.session_id]
    assert record.mode_id == "architect" and record.config_options == {"effort": "high"}


async def test_a_drop_during_the_first_recovery_hands_over_to_the_reconnect_loop(world: World) -> None:
    ids = await world.first_run(1)
    side = world.side()
    dropped: list[bool] = []

    def drop_on_resume(message: Any) -> None:
        if isinstance(message, dict) and message.get("method") == "session/resume" and not dropped:
            dropped.append(True)
            side.connector.drop()

    side.connector.on_send = drop_on_resume
    await side.client.connect()
    assert side.client.state.state is not State.CONNECTED  # connect() handed over to the outage loop
    await eventually(lambda: side.client.state.state is State.CONNECTED, 60, clock=world.clock)
    kinds = [state.state for state in side.states]
    assert kinds[:3] == [State.CONNECTING, State.RECOVERING, State.RECONNECTING]
    assert kinds[-2:] == [State.RECOVERING, State.CONNECTED]
    assert [outcome.path for outcome in side.outcomes] == [RecoveryPath.RESUME]
    assert side.outcomes[0].previous_session_id == ids[0]


async def test_an_unreadable_store_fails_connect(world: World) -> None:
    class Unreadable:
        def load(self, endpoint: str) -> list[StoredSession]:
            raise SessionStoreError("cannot read", path="/nowhere")

        def get(self, endpoint: str, session_id: str) -> None: ...
        def save(self, session: StoredSession) -> None: ...
        def delete(self, endpoint: str, session_id: str) -> bool: ...  # type: ignore[empty-body]
        def rename(self, *args: Any, **kwargs: Any) -> None: ...
        def touch(self, *args: Any, **kwargs: Any) -> bool: ...  # type: ignore[empty-body]
        def save_transcript(self, *args: Any) -> bool: ...  # type: ignore[empty-body]
        def load_transcript(self, *args: Any) -> tuple[dict[str, Any], ...]: ...  # type: ignore[empty-body]

    side = Side(world.agent, world.clock, Unreadable())
    world.sides.append(side)
    with pytest.raises(SessionStoreError, match="cannot read"):
        await side.client.connect()
    assert side.client.state.state is State.FAILED
    assert side.connector.connects == 0  # nothing was sent


def test_store_key_defaults_and_requirements(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "s.db") as store:
        client = AcpClient("wss://user:pw@agent.example:443/acp?token=1", session_store=store)
        assert client.session_store_key == endpoint_key("wss://agent.example/acp") == "wss://agent.example/acp"
        assert AcpClient("ws://h/acp", session_store=store, session_store_key="mine").session_store_key == "mine"
        plain = AcpClient("ws://h/acp")
        assert plain.session_store_key is None and plain.stored_sessions() == []
        agent = ReferenceAgent()
        with pytest.raises(ConfigurationError, match="session_store_key is required"):
            AcpClient(HarnessConnector(agent), session_store=store)
        with pytest.raises(ConfigurationError, match="session_store"):
            AcpClient("ws://h/acp", session_store="sessions.db")  # type: ignore[arg-type]


async def test_a_turn_ending_after_aclose_raises_no_store_error(world: World) -> None:
    side = world.side()
    await side.client.connect()
    handle = await side.client.new_session("/work/slow")
    turn = asyncio.ensure_future(handle.prompt("/slow"))  # streams until cancelled
    await world.clock.settle()
    await side.client.aclose()  # the store bridge closes while the turn is still unwinding
    with pytest.raises(Exception) as caught:
        await turn
    assert not isinstance(caught.value, SessionStoreError), repr(caught.value)


async def test_writes_after_the_bridge_closed_are_skipped_quietly(world: World) -> None:
    from acp_client._engine._persistence import Persistence
    from acp_client._sessions._table import SessionTable
    from acp_client.store._bridge import StoreBridge
    from acp_client.types import Session

    bridge = StoreBridge(world.store, KEY)
    table = SessionTable()
    persistence = Persistence(bridge, table, version=lambda: 1, keep_transcripts=True)
    tracked = table.track(Session(session_id="s1", cwd="/w"), cwd="/w")
    persistence.tracked(tracked)
    await bridge.aclose()
    persistence.touched(tracked)  # nothing raises: the client is closed, there is nothing to write to
    persistence.turn_ended(tracked)
    persistence.changed(tracked, mode_id="m")
    persistence.forgotten(tracked)
    assert [record.session_id for record in world.store.load(KEY)] == ["s1"]


async def test_a_failed_background_write_is_told_to_the_app_and_the_session_goes_on(
    world: World, tmp_path: Path
) -> None:
    store = OutageStore(tmp_path / "outage.db")
    errors: list[SessionStoreError] = []
    side = Side(world.agent, world.clock, store, callbacks={"on_store_error": errors.append})
    await side.client.connect()
    handle = await side.client.new_session("/work/outage")
    await side.flush()
    assert errors == []

    store.down = True
    assert (await handle.prompt("while the database is down")).stop_reason == "end_turn"
    await side.flush()
    assert errors and all(isinstance(error, SessionStoreUnavailable) for error in errors)
    assert "went away" in str(errors[0])
    # Nothing of that turn reached the store; the session and its conversation go on in memory.
    assert "while the database is down" not in str(store.load_transcript(KEY, handle.session_id))
    assert "while the database is down" in handle.transcript.text()

    # Back up: the next turn's write carries the whole conversation, the missed turn included.
    store.down = False
    told = len(errors)
    await handle.prompt("after it came back")
    await side.flush()
    assert len(errors) == told
    stored = str(store.load_transcript(KEY, handle.session_id))
    assert "while the database is down" in stored and "after it came back" in stored
    await side.close()
    store.close()


# -- durable before acknowledged ---------------------------------------------------------------------


class GatedStore(SqliteSessionStore):
    """An SQLite store whose conversation writes wait for ``gate`` (a slow disk or database)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered, self.gate = threading.Event(), threading.Event()
        self.gate.set()

    def save_turn(self, endpoint: str, session_id: str, entries: Any, **options: Any) -> bool:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return super().save_turn(endpoint, session_id, entries, **options)


@pytest.mark.parametrize("version", [1, 2])
async def test_prompt_returns_only_once_its_turn_is_written(world: World, tmp_path: Path, version: int) -> None:
    store = GatedStore(tmp_path / "gated.db")
    side = Side(world.agent, world.clock, store, protocol_version=version)
    await side.client.connect()
    handle = await side.client.new_session("/work/durable")
    store.gate.clear()
    turn = asyncio.ensure_future(handle.prompt("keep me"))
    await eventually(store.entered.is_set, what="the turn's write started on the store thread")
    await world.clock.settle()
    assert not turn.done()  # the agent ended the turn (v2: idle), but it is not written yet
    assert "keep me" not in str(store.load_transcript(KEY, handle.session_id))
    store.gate.set()
    result = await turn
    assert result.stop_reason == "end_turn" and result.stored is True
    assert "keep me" in str(store.load_transcript(KEY, handle.session_id))  # already there when it returned
    await side.close()
    store.close()


async def test_a_turn_the_store_could_not_write_is_marked_and_written_with_the_next_success(
    world: World, tmp_path: Path
) -> None:
    store = OutageStore(tmp_path / "outage.db")
    errors: list[SessionStoreError] = []
    side = Side(world.agent, world.clock, store, callbacks={"on_store_error": errors.append})
    await side.client.connect()
    handle = await side.client.new_session("/work/outage")
    assert (await handle.prompt("stored")).stored is True
    store.down = True
    result = await handle.prompt("while the database is down")
    assert result.stop_reason == "end_turn" and result.stored is False  # returned, marked not yet stored
    assert errors and isinstance(errors[-1], SessionStoreUnavailable)  # told before the return
    assert "while the database is down" not in str(store.load_transcript(KEY, handle.session_id))
    store.down = False
    persistence = inside(side.client).engine.persistence
    assert persistence is not None and handle.session_id in persistence.unstored
    await persistence.bridge.run(store.count)  # the store's next success, whatever it was
    await side.flush()
    assert "while the database is down" in str(store.load_transcript(KEY, handle.session_id))
    assert handle.session_id not in persistence.unstored
    await side.close()
    store.close()
