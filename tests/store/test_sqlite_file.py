"""The SQLite store's file is its owner's only: a symbolic link at the store path is refused (a
dangling one would create the conversations where it points), a new file is ``0600``, and an
empty file turned into a store is made ``0600`` first, with its ``-wal`` / ``-shm``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from acp_client import SessionStoreError
from acp_client.store import SqliteSessionStore, StoredSession


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_dangling_symlink_at_the_store_path_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "planted.db"
    target.parent.mkdir()
    link = tmp_path / "sessions.db"
    link.symlink_to(target)
    with pytest.raises(SessionStoreError, match="symbolic link") as raised:
        SqliteSessionStore(link)
    assert raised.value.path == str(link)
    assert not target.exists()


def test_a_symlink_to_an_empty_file_is_refused_unless_allowed_then_made_private(tmp_path: Path) -> None:
    target = tmp_path / "empty.db"
    target.touch()
    target.chmod(0o644)
    for suffix in ("-wal", "-shm"):
        side = Path(f"{target}{suffix}")
        side.touch()
        side.chmod(0o644)
    link = tmp_path / "sessions.db"
    link.symlink_to(target)
    with pytest.raises(SessionStoreError, match="symbolic link"):
        SqliteSessionStore(link)
    assert _mode(target) == 0o644 and target.stat().st_size == 0  # left untouched
    with SqliteSessionStore(link, allow_symlink=True) as store:
        store.save(StoredSession(endpoint="ws://h/acp", session_id="s1", cwd="/tmp"))
    assert target.stat().st_size > 0
    assert _mode(target) == 0o600
    for suffix in ("-wal", "-shm"):
        side = Path(f"{target}{suffix}")
        assert not side.exists() or _mode(side) == 0o600, oct(_mode(side))


def test_an_empty_file_turned_into_a_store_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    path.touch()
    path.chmod(0o644)
    with SqliteSessionStore(path) as store:
        store.save(StoredSession(endpoint="ws://h/acp", session_id="s1", cwd="/tmp"))
        for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            assert not candidate.exists() or _mode(candidate) == 0o600, (candidate, oct(_mode(candidate)))


def test_a_new_store_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "sessions.db"
        with SqliteSessionStore(path) as store:
            store.save(StoredSession(endpoint="ws://h/acp", session_id="s1", cwd="/tmp"))
            assert _mode(path) == 0o600
    finally:
        os.umask(old)


def test_an_existing_store_keeps_the_mode_its_owner_chose(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SqliteSessionStore(path) as store:
        store.save(StoredSession(endpoint="ws://h/acp", session_id="s1", cwd="/tmp"))
    path.chmod(0o640)
    with SqliteSessionStore(path) as store:
        assert store.load("ws://h/acp")[0].session_id == "s1"
    assert _mode(path) == 0o640
