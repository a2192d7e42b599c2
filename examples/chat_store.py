"""``--store PATH`` for ``examples/chat.py``: sessions that outlive the chat process.

With a store, the chat client keeps its sessions in an SQLite file
(:class:`~acp_client.store.SqliteSessionStore`). A later run with the same store and the same URL
recovers every stored session of that URL as ``connect()`` runs — a ``recovered`` event for each,
exactly as after a drop — and continues the most recently used one (announced by a ``session``
event with ``"restored": true``). Only when nothing was stored does it start a new session.

Commands (script and interactive modes):

* ``/sessions`` — the stored sessions of this URL, most recently used first (the current one
  marked); in ``--json`` mode one ``sessions`` event:
  ``{"sessions": [{"sessionId", "title", "cwd", "lastUsed", "current"}]}``.
* ``/switch ID`` — continue session ID (a unique prefix is enough; an id it had before a
  new-session recovery finds it too): a ``session`` event with ``"switched": true``, then its
  conversation is redrawn (in the terminal views).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from acp_client import AcpError, SessionHandle, SessionNotTracked
from acp_client.store import StoredSession


def restored_handle(chat: Any) -> SessionHandle | None:
    """The most recently used stored session that came back, if any."""
    live = {handle.session_id: handle for handle in chat.client.sessions}
    for record in chat.client.stored_sessions():
        handle = live.get(record.session_id)
        if handle is not None:
            return handle
    return None


def held_elsewhere(chat: Any) -> list[str]:
    """Why a run with a store starts a new session though the store holds this URL's sessions:
    another process holds them (a chat still running, or one that ended without closing, whose
    hold lasts until its lease expires). One line each; none when nothing is held elsewhere."""
    key = chat.client.session_store_key
    if chat.store is None or key is None:
        return []
    now = datetime.now(timezone.utc)
    lines = []
    for record in chat.store.load(key):
        lease = record.lease
        if lease is None or lease.owner is None or lease.owner == chat.client.owner or lease.expires_at <= now:
            continue
        until = lease.expires_at.astimezone().strftime("%H:%M:%S")
        lines.append(
            f"stored session {record.session_id} is held by another process ({lease.owner}) until {until}: "
            "this run starts a new session; run again after that time to continue the stored one"
        )
    return lines


def listing(chat: Any) -> list[dict[str, Any]]:
    """The stored sessions (or, without a store, the tracked ones) as JSON-ready rows."""
    current = chat.handle.session_id if chat.handle is not None else None
    records: list[StoredSession] = chat.client.stored_sessions()
    if not records and chat.store is None:
        return [
            {
                "sessionId": handle.session_id,
                "title": handle.record.title,
                "cwd": handle.cwd,
                "lastUsed": None,
                "current": handle.session_id == current,
            }
            for handle in chat.client.sessions
        ]
    return [
        {
            "sessionId": record.session_id,
            "title": record.title,
            "cwd": record.cwd,
            "lastUsed": record.last_used_at.isoformat(timespec="seconds"),
            "current": record.session_id == current,
        }
        for record in records
    ]


def find(chat: Any, wanted: str) -> SessionHandle:
    """The tracked session ``wanted`` names: its id, an earlier id, or a unique prefix.

    Raises:
        SessionNotTracked: No tracked session, or several, match.
    """
    wanted = wanted.strip()
    try:
        handle: SessionHandle = chat.client.session(wanted)
        return handle
    except SessionNotTracked:
        pass
    matches = [handle for handle in chat.client.sessions if handle.session_id.startswith(wanted)] if wanted else []
    if len(matches) != 1:
        detail = "several sessions match" if matches else "no such session"
        raise SessionNotTracked(wanted, f"{detail}: {wanted!r} (see /sessions)")
    return matches[0]


def switch(chat: Any, wanted: str) -> bool:
    """``/switch``: make ``wanted`` the current session; reports it (or the error)."""
    try:
        handle = find(chat, wanted)
    except AcpError as exc:
        chat.output.event("error", message=str(exc))
        return False
    chat.handle = handle
    chat.output.event("session", sessionId=handle.session_id, switched=True, **chat._where(handle.endpoint))
    chat.output.show_conversation(handle)  # its conversation, redrawn: the screen showed another one
    return True


def describe_listing(rows: list[dict[str, Any]]) -> list[str]:
    """The readable lines of ``/sessions``."""
    lines = []
    for row in rows:
        mark = "*" if row["current"] else " "
        when = f"  {row['lastUsed']}" if row["lastUsed"] else ""
        title = f"  {row['title']}" if row["title"] else ""
        lines.append(f" {mark} {row['sessionId']}{when}  {row['cwd']}{title}")
    return lines or ["  (none)"]
