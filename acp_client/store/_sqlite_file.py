"""The SQLite store's file, before SQLite opens it: what it may be, and who may read it.

A session store holds the user's conversations and the MCP servers' credentials, so its file is readable by its owner
only:

* a path that is a symbolic link is refused (unless the app allows it): a link planted where the store will be —
  dangling or not — would put the conversations wherever it points, with whatever mode that file has;
* a missing file is created with mode ``0600`` (and SQLite gives its ``-wal`` and ``-shm`` files the mode of the
  database file);
* an empty file the store is about to initialize, and any ``-wal`` / ``-shm`` already next to it, get mode ``0600``
  first (refused when that cannot be done);
* an existing store keeps its mode (the app may have chosen to share it);
* a file that is not an SQLite database, or that this process cannot write, is refused untouched.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

from ..exceptions import SessionStoreCorrupt, SessionStoreError, SessionStoreReadOnly

_SQLITE_HEADER: Final = b"SQLite format 3\x00"
#: The files SQLite keeps next to a database in WAL mode.
SIDE_FILES: Final = ("-wal", "-shm")
_OWNER_ONLY: Final = 0o600


def prepare(text: str, *, create: bool, allow_symlink: bool) -> None:
    """Check (and create, or make private) the store file at ``text`` (see the module docstring): raises
    ``SessionStoreCorrupt`` for a file that is not an SQLite database, ``SessionStoreReadOnly`` for one this process
    cannot write, ``SessionStoreError`` for anything else refused."""
    path = Path(text)
    try:
        if path.is_symlink() and not allow_symlink:
            raise SessionStoreError(
                f"session store {text} is a symbolic link (refused: pass allow_symlink=True to use it)", path=text
            )
        if path.exists():
            if not path.is_file():
                raise SessionStoreError(f"session store {text} is not a regular file", path=text)
            with path.open("rb") as handle:
                head = handle.read(len(_SQLITE_HEADER))
            if head and head != _SQLITE_HEADER:
                raise SessionStoreCorrupt(f"session store {text} is not an SQLite database (left untouched)", path=text)
            _check_writable(path, text)
            if not head:  # empty: it becomes a store now, readable by its owner only
                _make_private(path, text)
            return
        if not create:
            raise SessionStoreError(f"session store {text} does not exist", path=text)
        directory = path.parent
        if not directory.is_dir():
            # Not created for the app: a mistyped directory would silently start an empty store.
            raise SessionStoreError(
                f"cannot create session store {text}: the directory {directory} does not exist (create it first)",
                path=text,
            )
        _check_writable(path, text)
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
        with contextlib.suppress(FileExistsError):  # another process created it meanwhile
            os.close(os.open(path, flags, _OWNER_ONLY))
    except OSError as exc:
        raise SessionStoreError(f"cannot open session store {text}: {exc}", path=text) from exc


def _make_private(path: Path, text: str) -> None:
    for target in (path, *(Path(f"{path}{suffix}") for suffix in SIDE_FILES)):
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            try:
                target.chmod(_OWNER_ONLY)
            except OSError as exc:
                raise SessionStoreError(
                    f"session store {text}: cannot make {target} private (mode {mode:o}): {exc}", path=text
                ) from exc


def _check_writable(path: Path, text: str) -> None:
    """Refuse a store this process cannot write now, rather than failing every save later."""
    if path.exists() and not os.access(path, os.W_OK):
        raise SessionStoreReadOnly(f"session store {text} is read-only (it must be writable)", path=text)
    directory = path.parent
    if not os.access(directory, os.W_OK | os.X_OK):
        raise SessionStoreReadOnly(
            f"session store {text}: its directory {directory} is not writable "
            "(SQLite keeps the store's -wal and -shm files next to it)",
            path=str(directory),
        )
