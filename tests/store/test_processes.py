"""Stores shared by real processes: no lost writes (SQLite and PostgreSQL); SQLite's held lock is
waited for."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acp_client.store import SCHEMA_VERSION, SessionStoreBusy, SqliteSessionStore, StoredSession
from tests._support import eventually_blocking

from ._worker import EP, EP2, expected_ids, open_store

ROOT = Path(__file__).resolve().parents[2]
COUNT = 120


def spawn(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store._worker", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 60.0) -> None:
    def ready() -> bool:
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"worker exited early ({process.returncode}): {err}")
        return path.exists()

    eventually_blocking(ready, timeout, what=f"the worker to create {path.name}")


def finish(process: subprocess.Popen[str]) -> None:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, f"worker failed: {out}\n{err}"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_writing_at_once_lose_nothing(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    path = str(tmp_path / "shared.db") if kind == "sqlite" else request.getfixturevalue("postgres_database").dsn
    seed = open_store(path)
    seed.save(StoredSession(endpoint=EP, session_id="shared", cwd="/shared"))
    workers = {name: spawn("write", path, name, str(COUNT), str(tmp_path / f"{name}.ready")) for name in "ab"}
    for name, process in workers.items():
        wait_for(tmp_path / f"{name}.ready", process)
    for process in workers.values():  # both start writing at the same moment
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in workers.values():
        finish(process)

    first = {item.session_id: item for item in seed.load(EP)}
    second = {item.session_id for item in seed.load(EP2)}
    expected_first = {"shared"}
    expected_second: set[str] = set()
    for name in "ab":
        one, two = expected_ids(name, COUNT)
        expected_first |= one
        expected_second |= two
    assert set(first) == expected_first
    assert second == expected_second
    for session_id, item in first.items():
        if session_id == "shared":
            continue
        writer, index = item.extra["writer"], item.extra["i"]
        assert item.config_options == {"i": index}
        assert seed.load_transcript(EP, session_id) == ({"role": "agent", "text": f"{writer} {index}"},)
        if session_id.endswith("-renamed"):
            assert item.previous_session_ids == (f"{writer}-{index}",)
    assert first["shared"].last_used_at > first["shared"].created_at  # touched by both
    seed.close()  # type: ignore[attr-defined]
    if kind == "sqlite":
        raw = sqlite3.connect(path)
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        raw.close()


def test_a_writer_waits_for_another_processes_lock(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    store = SqliteSessionStore(path, busy_timeout=30.0)
    ready = tmp_path / "held.ready"
    holder = spawn("hold", str(path), "1.0", str(ready))
    wait_for(ready, holder)
    started = time.monotonic()
    store.save(StoredSession(endpoint=EP, session_id="mine", cwd="/mine"))  # waits for the commit
    waited = time.monotonic() - started
    finish(holder)
    assert waited > 0.3
    assert {item.session_id for item in store.load(EP)} == {"held", "mine"}
    store.close()


def test_a_lock_held_past_the_busy_timeout_is_a_typed_error_and_harms_nothing(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    store = SqliteSessionStore(path, busy_timeout=0.1)
    store.save(StoredSession(endpoint=EP, session_id="before", cwd="/"))
    ready = tmp_path / "held.ready"
    holder = spawn("hold", str(path), "1.5", str(ready))
    wait_for(ready, holder)
    with pytest.raises(SessionStoreBusy, match="locked by another writer"):
        store.save(StoredSession(endpoint=EP, session_id="mine", cwd="/mine"))
    assert [item.session_id for item in store.load(EP)] == ["before"]  # WAL: reads go on meanwhile
    finish(holder)
    store.save(StoredSession(endpoint=EP, session_id="mine", cwd="/mine"))  # usable again
    assert {item.session_id for item in store.load(EP)} == {"before", "held", "mine"}
    store.close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    raw.close()


def test_two_processes_creating_the_same_new_store_at_once(tmp_path: Path) -> None:
    path = tmp_path / "new" / "fresh.db"
    path.parent.mkdir()  # the store creates its file, not missing directories
    go = tmp_path / "go"
    workers = {name: spawn("write", str(path), name, "5", str(tmp_path / f"{name}.ready"), str(go)) for name in "xy"}
    go.touch()
    for process in workers.values():
        finish(process)
    with SqliteSessionStore(path) as store:
        assert store.count(EP) == 10
        assert store.schema_version == SCHEMA_VERSION
