"""Where the reference agent keeps its sessions when they are not in memory.

A :class:`SessionStore` holds one :class:`StoredSession` per session id: its working directory,
MCP servers and full message history. In memory by default; with ``directory=`` each session is a
JSON file, so a respawned stdio agent process finds its earlier sessions (and reports them as
``inactive`` / ``saved`` until they are loaded again).

Sharing: several agents may use one store (the same object, or the same directory from several
processes). Every lookup reads the directory and every save replaces one file atomically, so a
session saved by one instance is ``inactive`` on the others and loads there with its history.
Nothing arbitrates between instances: loading one session on two of them at once is the mistake
the client's routing avoids (the last save wins).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import attrs

logger = logging.getLogger(__name__)

#: Session ids the store accepts: they become file names, so no separators and no leading dot.
_SAFE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def is_safe_session_id(session_id: object) -> bool:
    """Whether ``session_id`` is a string the store can use as a file name."""
    return isinstance(session_id, str) and _SAFE_ID.fullmatch(session_id) is not None


#: The last timestamp handed out (one element, mutated in place).
_last_time = [datetime.min.replace(tzinfo=timezone.utc)]


def utc_now() -> str:
    """The current time as an RFC 3339 UTC timestamp (microseconds), strictly increasing within
    this process so creation times order sessions without ties."""
    now = datetime.now(timezone.utc)
    if now <= _last_time[0]:
        now = _last_time[0] + timedelta(microseconds=1)
    _last_time[0] = now
    return now.isoformat(timespec="microseconds").replace("+00:00", "Z")


@attrs.frozen
class HistoryEntry:
    """One message of a session's history.

    Attributes:
        role: ``"user"`` or ``"agent"``.
        message_id: The message's id (the v2 ``messageId``; v1 replays ignore it).
        content: The message's content blocks (ACP ``ContentBlock`` objects as JSON dicts).
    """

    role: Literal["user", "agent"]
    message_id: str
    content: tuple[dict[str, Any], ...]

    @property
    def text(self) -> str:
        """The concatenated text of the message's text blocks."""
        return "".join(str(block.get("text", "")) for block in self.content if block.get("type") == "text")

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "messageId": self.message_id, "content": list(self.content)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HistoryEntry:
        role = data["role"]
        if role not in ("user", "agent"):
            raise ValueError(f"unknown role {role!r}")
        content = data.get("content") or []
        if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
            raise ValueError("content must be a list of objects")
        return cls(role=role, message_id=str(data["messageId"]), content=tuple(content))


@attrs.frozen
class StoredSession:
    """Everything the agent needs to bring a session back into memory.

    Attributes:
        cwd: The working directory given to ``session/new``.
        mcp_servers: The MCP servers given to ``session/new`` (as sent).
        created_at: RFC 3339 creation time.
        updated_at: RFC 3339 time of the last change.
        title: A short title (the start of the first prompt), or ``None``.
        history: The messages, oldest first.
    """

    session_id: str
    cwd: str
    mcp_servers: tuple[dict[str, Any], ...] = ()
    created_at: str = attrs.field(factory=utc_now)
    updated_at: str = attrs.field(factory=utc_now)
    title: str | None = None
    history: tuple[HistoryEntry, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "sessionId": self.session_id,
            "cwd": self.cwd,
            "mcpServers": list(self.mcp_servers),
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "history": [entry.to_json() for entry in self.history],
        }
        if self.title is not None:
            data["title"] = self.title
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredSession:
        mcp_servers = data.get("mcpServers") or []
        history = data.get("history") or []
        if not isinstance(mcp_servers, list) or not isinstance(history, list):
            raise ValueError("mcpServers and history must be lists")
        title = data.get("title")
        return cls(
            session_id=str(data["sessionId"]),
            cwd=str(data["cwd"]),
            mcp_servers=tuple(server for server in mcp_servers if isinstance(server, dict)),
            created_at=str(data.get("createdAt") or utc_now()),
            updated_at=str(data.get("updatedAt") or utc_now()),
            title=title if isinstance(title, str) else None,
            history=tuple(HistoryEntry.from_json(entry) for entry in history),
        )


class SessionStore:
    """Persistent session records for a :class:`ReferenceAgent`.

    Args:
        directory: Keep one JSON file per session in this directory (created if missing).
            ``None`` (the default) keeps the records in memory only.

    Raises:
        OSError: ``directory`` cannot be created.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._memory: dict[str, StoredSession] = {}
        self.directory = Path(directory) if directory is not None else None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        where = str(self.directory) if self.directory is not None else "memory"
        return f"SessionStore({where})"

    def save(self, record: StoredSession) -> None:
        """Write ``record``, replacing any earlier version (atomically on disk).

        Raises:
            ValueError: The session id cannot be a file name (see :func:`is_safe_session_id`; in
                memory, any id is kept).
            OSError: The file could not be written.
        """
        if self.directory is None:
            self._memory[record.session_id] = record
            return
        if not is_safe_session_id(record.session_id):
            raise ValueError(f"session id {record.session_id!r} cannot be stored")
        fd, temp_name = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record.to_json(), handle, ensure_ascii=False)
            os.replace(temp_name, self._path(record.session_id))
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise

    def load(self, session_id: str) -> StoredSession | None:
        """The stored record for ``session_id``, or ``None`` (unknown, unsafe id, or unreadable)."""
        if self.directory is None:
            return self._memory.get(session_id)
        if not is_safe_session_id(session_id):
            return None
        path = self._path(session_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return StoredSession.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring unreadable session file %s: %s", path, exc)
            return None

    def delete(self, session_id: str) -> bool:
        """Forget ``session_id``; ``True`` when a record was removed."""
        if self.directory is None:
            return self._memory.pop(session_id, None) is not None
        if not is_safe_session_id(session_id):
            return False
        try:
            self._path(session_id).unlink()
        except FileNotFoundError:
            return False
        return True

    def __contains__(self, session_id: object) -> bool:
        return isinstance(session_id, str) and self.load(session_id) is not None

    def list(self) -> list[StoredSession]:
        """Every stored session, oldest first (by creation time, then id)."""
        return sorted(self._iter_records(), key=lambda record: (record.created_at, record.session_id))

    def clear(self) -> None:
        """Forget every stored session."""
        for record in list(self._iter_records()):
            self.delete(record.session_id)

    def _iter_records(self) -> Iterator[StoredSession]:
        if self.directory is None:
            yield from self._memory.values()
            return
        for path in sorted(self.directory.glob("*.json")):
            if path.name.startswith("."):
                continue
            record = self.load(path.stem)
            if record is not None:
                yield record

    def _path(self, session_id: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{session_id}.json"
