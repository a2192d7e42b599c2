"""``SqliteSessionStore`` refuses at open what cannot work later (issue 20): a store this process
cannot write (the file, or the directory SQLite keeps its ``-wal``/``-shm`` files in), and a
path in a directory that does not exist — each a typed error naming the path, nothing created."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_client import SessionStoreError
from acp_client.store import SessionStoreReadOnly, SqliteSessionStore, StoredSession


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make ``path`` read-only for this process: its write bits go, and where that is not enough
    (root ignores them) it is made immutable (``chattr +i``, which binds root too)."""
    mode = path.stat().st_mode
    path.chmod(mode & ~0o222)
    immutable = False
    try:
        if os.access(path, os.W_OK):
            assert shutil.which("chattr"), "running as root needs chattr (e2fsprogs) to make a file read-only"
            subprocess.run(["chattr", "+i", str(path)], check=True)
            immutable = True
        assert not os.access(path, os.W_OK)
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(mode)


def _stored(tmp_path: Path) -> Path:
    path = tmp_path / "sessions.db"
    with SqliteSessionStore(path) as store:
        store.save(StoredSession(endpoint="ws://agent/acp", session_id="s1", cwd="/work"))
    return path


def test_a_read_only_store_file_is_refused_at_open(tmp_path: Path) -> None:
    path = _stored(tmp_path)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with read_only(path), pytest.raises(SessionStoreReadOnly, match=rf"session store {path} is read-only") as info:
        SqliteSessionStore(path)
    assert info.value.path == str(path)
    with SqliteSessionStore(path) as store:  # writable again: nothing was lost
        assert [record.session_id for record in store.load("ws://agent/acp")] == ["s1"]


def test_a_store_in_a_read_only_directory_is_refused_at_open(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    path = _stored(folder)
    with read_only(folder), pytest.raises(SessionStoreReadOnly, match=rf"its directory {folder} is not writable"):
        SqliteSessionStore(path)
    with read_only(folder), pytest.raises(SessionStoreReadOnly) as info:
        SqliteSessionStore(folder / "new.db")
    assert info.value.path == str(folder)


def test_a_missing_directory_is_refused_not_created(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "deeper" / "sessions.db"
    with pytest.raises(SessionStoreError, match=r"the directory .*no-such-dir/deeper does not exist") as info:
        SqliteSessionStore(path)
    assert info.value.path == str(path)
    assert not (tmp_path / "no-such-dir").exists()
