"""The one table of the ways agents say "I do not know this session". Pure.

ACP's code is -32002 (resource not found, ``data.sessionId``), but agents in the wild spell it in
several ways (DESIGN.md §7; docs/agents-conformance.md). Recovery treats any of them like -32002
(the next step is a new session), and a session method answered with one of them after a recovery
sends the session through recovery again, as unknown: it never stays stuck on an id the agent lost.

Each row names where it was seen; ``tests/test_not_found.py`` has a test per row.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from .exceptions import RpcError

__all__ = ["SPELLINGS", "Spelling", "says_session_not_found"]


@attrs.frozen
class Spelling:
    """One way of saying "session not found".

    Attributes:
        seen_in: Where it was seen (an agent and its version, or the schema).
        code: The JSON-RPC error code it comes with (``None``: any code).
        names_session: The error's ``data`` must name the session (``data.sessionId``, or a string
            ``data`` that holds the id); without it, an -32602 could be any bad parameter.
        words: Words the message must contain (compared case-insensitively; ``None``: any message).
    """

    seen_in: str
    code: int | None = None
    names_session: bool = False
    words: str | None = None

    def matches(self, error: RpcError, session_id: str | None) -> bool:
        if self.code is not None and error.code != self.code:
            return False
        if self.names_session and not _names(error.data, session_id):
            return False
        return self.words is None or self.words in str(error.message or "").lower()


#: Every spelling, in the order they are tried.
SPELLINGS: Final[tuple[Spelling, ...]] = (
    Spelling("the ACP schema (-32002 resource not found); the reference agent", code=-32002),
    Spelling("pydantic-acp 1.10.0 (-32602, data.sessionId)", code=-32602, names_session=True),
    Spelling(
        "agents on the official Python SDK that raise internally (-32603, data names the session)",
        code=-32603,
        names_session=True,
    ),
    Spelling("message 'Session not found' (deepagents-acp, agents on the official SDKs)", words="session not found"),
    Spelling("message 'Unknown session' (isaac-acp)", words="unknown session"),
    Spelling("message 'Invalid session identifier' (agentao)", words="invalid session identifier"),
)


def _names(data: Any, session_id: str | None) -> bool:
    if session_id is None:
        return False
    if isinstance(data, str):
        return session_id in data
    if isinstance(data, dict):
        return any(value == session_id or (isinstance(value, str) and session_id in value) for value in data.values())
    return False


def says_session_not_found(error: BaseException, session_id: str | None) -> Spelling | None:
    """The row of :data:`SPELLINGS` that ``error`` matches for ``session_id``, or ``None``."""
    if not isinstance(error, RpcError):
        return None
    for spelling in SPELLINGS:
        if spelling.matches(error, session_id):
            return spelling
    return None
