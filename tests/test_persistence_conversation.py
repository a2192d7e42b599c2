"""The conversation outlives the process (issue 17 item 1): a session restored from the store shows
its conversation at once, whatever path recovery takes, and new turns are appended to it. A stored
conversation that is damaged or newer is refused with a typed error naming the file, never
rewritten."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from acp_client import RecoveryPath
from acp_client.state import Continuity
from acp_client.store import SessionStoreCorrupt, SessionStoreTooNew, SqliteSessionStore
from acp_client.store import _schema as schema
from acp_client.store import sqlite as sqlite_module
from acp_client.transcript import SegmentStart, TurnStatus

from ._world import KEY, World

TWO_TURNS = "user: turn one\nagent: echo: turn one\nuser: turn two\nagent: echo: turn two"


async def two_turns(world: World) -> str:
    side = world.side()
    await side.client.connect()
    handle = await side.client.new_session("/work")
    await handle.prompt("turn one")
    await handle.prompt("turn two")
    await side.close()
    return handle.session_id


async def test_an_editor_restart_keeps_the_conversation_and_appends_to_it(world: World) -> None:
    """The editor restarts, the agent keeps running: the session comes back by resume with its
    conversation, and the next turn is appended (it used to replace the stored one)."""
    sid = await two_turns(world)
    side = world.side()
    await side.client.connect()
    assert [outcome.path for outcome in side.outcomes] == [RecoveryPath.RESUME]
    handle = side.client.session(sid)
    assert handle.transcript.text() == TWO_TURNS  # at once, before any new turn
    await handle.prompt("turn three")
    assert handle.transcript.text() == TWO_TURNS + "\nuser: turn three\nagent: echo: turn three"
    await side.flush()
    stored = [entry.get("text") for entry in world.store.load_transcript(KEY, sid) if "role" in entry]
    assert stored == ["turn one", "echo: turn one", "turn two", "echo: turn two", "turn three", "echo: turn three"]


async def test_after_an_agent_restart_the_replay_is_reconciled_with_the_stored_conversation(world: World) -> None:
    sid = await two_turns(world)
    world.agent.lose_memory()  # the agent lost its memory: the session comes back by replay
    side = world.side()
    await side.client.connect()
    (outcome,) = side.outcomes
    assert outcome.path is RecoveryPath.REPLAY and outcome.continuity is Continuity.KEPT
    handle = side.client.session(sid)
    assert handle.transcript.text() == TWO_TURNS  # no duplicate, nothing fused
    assert [m.status for m in handle.transcript.messages if m.role == "user"] == [TurnStatus.COMPLETE] * 2


async def test_agent_inserted_messages_are_stored_restored_and_never_turns(world: World) -> None:
    """Text an agent put among its replayed prompts (``"inserted": true`` in the stored form) comes
    back marked, is not a turn, survives the next save and the next replay; entries without the key
    (older stores) are ordinary messages."""
    sid = await two_turns(world)
    entries = list(world.store.load_transcript(KEY, sid))
    marker = {"role": "user", "text": "[Request interrupted by user]", "inserted": True}
    entries.insert(next(i for i, e in enumerate(entries) if e.get("text") == "turn two"), marker)
    assert world.store.save_transcript(KEY, sid, entries)
    world.agent.lose_memory()  # the session comes back by replay, reconciled with the stored one
    side = world.side()
    await side.client.connect()
    handle = side.client.session(sid)
    assert handle.transcript.text() == TWO_TURNS.replace(
        "\nuser: turn two", "\nuser [inserted]: [Request interrupted by user]\nuser: turn two"
    )
    assert handle.transcript.turns == 2 and side.outcomes[0].continuity
    await handle.prompt("turn three")
    await side.flush()
    stored = world.store.load_transcript(KEY, sid)
    assert [e.get("inserted", False) for e in stored if "role" in e] == [False, False, True, *[False] * 4]


async def test_a_session_the_agent_lost_keeps_its_stored_conversation_as_earlier_history(world: World) -> None:
    sid = await two_turns(world)
    world.agent.evict(sid)
    side = world.side()
    await side.client.connect()
    (outcome,) = side.outcomes
    assert outcome.path is RecoveryPath.NEW_SESSION and outcome.lost_turns == 2
    handle = side.client.session(sid)
    lost, current = handle.transcript.segments
    assert (lost.session_id, lost.lost, lost.turns) == (sid, True, 2)
    assert (current.session_id, current.began) == (handle.session_id, SegmentStart.NEW_AFTER_LOSS)
    await handle.prompt("after")
    await side.close()
    # A third process still has both segments.
    third = world.side()
    await third.client.connect()
    restored = third.client.session(handle.session_id).transcript
    assert [(s.session_id, s.lost, len(s.messages)) for s in restored.segments] == [
        (sid, True, 4),
        (handle.session_id, False, 2),
    ]


async def test_the_store_bound_drops_the_oldest_messages_and_says_so(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.store.close()
    world.store = SqliteSessionStore(tmp_path / "small.db", max_transcript_bytes=400)
    try:
        side = world.side()
        await side.client.connect()
        handle = await side.client.new_session("/work")
        for index in range(10):
            await handle.prompt(f"prompt number {index}")
        await side.close()
        stored = world.store.load_transcript(KEY, handle.session_id)
        assert len(json.dumps(stored, separators=(",", ":"))) <= 500
        assert stored[0]["dropped"] > 0
        restored = world.side()
        await restored.client.connect()
        transcript = restored.client.session(handle.session_id).transcript
        assert transcript.dropped == stored[0]["dropped"]
        assert transcript.messages[-1].text == "echo: prompt number 9"
        assert transcript.dropped + len(transcript.messages) == 20
    finally:
        for side in world.sides:
            await side.close()
        world.store.close()


async def test_an_oversized_message_is_cut_with_a_marker_not_the_whole_conversation_dropped(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.store.close()
    world.store = SqliteSessionStore(tmp_path / "small.db", max_transcript_bytes=1000)
    try:
        side = world.side()
        await side.client.connect()
        handle = await side.client.new_session("/work")
        await handle.prompt("hello")
        await handle.prompt("tell me " + "x" * 5000)  # echoed: two messages each five times the bound
        await side.close()
        stored = world.store.load_transcript(KEY, handle.session_id)
        assert len(json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode()) <= 1000
        restored = world.side()
        await restored.client.connect()
        messages = restored.client.session(handle.session_id).transcript.messages
        prompt, answer = messages[-2], messages[-1]
        assert (prompt.role, answer.role) == ("user", "agent")
        assert " bytes dropped … " in prompt.text and prompt.text.endswith("xxx")
        assert " bytes dropped … " in answer.text and answer.text.endswith("xxx")
    finally:
        for side in world.sides:
            await side.close()
        world.store.close()


def _contents(path: Path) -> list[tuple[object, ...]]:
    raw = sqlite3.connect(path)
    try:
        return [*raw.execute("SELECT * FROM sessions"), *raw.execute("SELECT * FROM transcripts")]
    finally:
        raw.close()


def _damage(path: Path, tail: str) -> list[tuple[object, ...]]:
    raw = sqlite3.connect(path)
    raw.execute("UPDATE transcripts SET tail = ?", (tail,))
    raw.commit()
    raw.close()
    return _contents(path)


@pytest.mark.parametrize(
    ("tail", "error", "words"),
    [
        ('[{"format": 2, "dropped": 0}, {"role": "user", "te', SessionStoreCorrupt, "damaged"),  # truncated
        ('{"not": "a list"}', SessionStoreCorrupt, "damaged"),
        ('[{"format": 2, "dropped": 0}, {"role": "robot", "text": "x"}]', SessionStoreCorrupt, "damaged"),
        ('[{"format": 9, "dropped": 0}]', SessionStoreTooNew, "format 9"),
    ],
)
async def test_a_bad_stored_conversation_is_refused_naming_the_file_and_left_as_it_is(
    world: World, tail: str, error: type[Exception], words: str
) -> None:
    await two_turns(world)
    path = Path(world.store.path)
    world.store.close()
    before = _damage(path, tail)
    world.store = SqliteSessionStore(path)
    side = world.side()
    with pytest.raises(error, match=words) as caught:
        await side.client.connect()
    assert str(path) in str(caught.value)
    await side.close()
    world.store.close()
    assert _contents(path) == before  # nothing rewritten
    world.store = SqliteSessionStore(path)


async def test_a_store_of_the_previous_schema_is_migrated_and_its_tail_shown(world: World, tmp_path: Path) -> None:
    """A file written by schema version 1 (a list of ``{"role", "text"}``) opens as a conversation."""
    sid = await two_turns(world)
    world.store.close()
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    schema._create_v1(raw)
    new = sqlite3.connect(tmp_path / "sessions.db")
    for row in new.execute(f"SELECT {', '.join(schema.RECORD_COLUMNS)} FROM sessions"):  # a version-1 row
        raw.execute(f"INSERT INTO sessions VALUES ({', '.join('?' for _ in row)})", row)
    new.close()
    old_tail = [{"role": "user", "text": "turn one"}, {"role": "agent", "text": "echo: turn one"}]
    raw.execute("INSERT INTO transcripts VALUES (?, ?, ?)", (KEY, sid, json.dumps(old_tail)))
    raw.execute(f"PRAGMA application_id = {sqlite_module.APPLICATION_ID}")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    world.store = SqliteSessionStore(path)
    assert world.store.schema_version == sqlite_module.SCHEMA_VERSION == 3
    assert world.store.load_transcript(KEY, sid)[:2] == (
        {"format": 2, "dropped": 0},
        {"segment": sid, "began": "created", "lost": False},
    )
    side = world.side()
    await side.client.connect()
    assert side.client.session(sid).transcript.text() == "user: turn one\nagent: echo: turn one"
