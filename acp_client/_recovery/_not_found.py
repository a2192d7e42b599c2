"""The one table of the ways agents say "I do not know this session". Pure.

ACP's code is -32002 (resource not found, ``data.sessionId``), but agents in the wild spell it in
several ways (docs/agents-conformance.md). Recovery treats any of them like -32002
(the next step is a new session), and a session method answered with one of them after a recovery
sends the session through recovery again, as unknown: it never stays stuck on an id the agent lost.

Each row names where it was seen; ``tests/test_not_found.py`` has a test per row.
"""

from __future__ import annotations

import re
from typing import Any, Final

import attrs

from ..exceptions import RpcError


@attrs.frozen
class Spelling:
    """One way of saying "session not found", and where it was seen (``seen_in``).

    Each condition given must hold (``None``: any): the error ``code``; ``names_session``, its
    ``data`` names the session (without it, an -32602 could be any bad parameter); ``message`` and
    ``details`` (``data.details``, or ``data`` when it is a string, where agents put the reason
    under a generic message), regular expressions searched case-insensitively. The generic messages
    (``^invalid params$``, ``^internal error$``) only count with ``names_session`` or ``details``: a
    specific message ("session not attached to this connection") is another error.
    """

    seen_in: str
    code: int | None = None
    names_session: bool = False
    message: str | None = None
    details: str | None = None

    def matches(self, error: RpcError, session_id: str | None) -> bool:
        if self.code is not None and error.code != self.code:
            return False
        if self.names_session and not _names(error.data, session_id):
            return False
        if self.details is not None and not _search(self.details, _details(error)):
            return False
        return self.message is None or _search(self.message, error.message)


#: Every spelling, in the order they are tried (docs/agents-conformance.md has the wire excerpts).
SPELLINGS: Final[tuple[Spelling, ...]] = (
    Spelling(
        "the ACP schema; deepagents-acp 0.0.13 and fast-agent 0.10.48 on session/load (-32002, data.uri)",
        code=-32002,
    ),
    Spelling(
        "pi-acp 0.0.34 on session/load and session/prompt (-32602 'Invalid params', data the string "
        "'Unknown sessionId: <id>')",
        code=-32602,
        message=r"^invalid params$",
        details=r"^\s*unknown sessionid\b",
    ),
    Spelling(
        "pydantic-acp 1.10.0 on session/prompt and session/resume (-32602 'Invalid params', data.sessionId)",
        code=-32602,
        names_session=True,
        message=r"^invalid params$",
    ),
    Spelling(
        "deepagents-acp 0.0.13 on session/prompt (-32603 'Internal error', the id in data.details)",
        code=-32603,
        names_session=True,
        message=r"^internal error$",
    ),
    Spelling(
        "Zed's claude-agent-acp 0.23.1 on session/prompt and session/set_mode, claude-code-acp 0.16.2 on "
        "session/load and session/prompt (-32603 'Internal error', data.details 'Session not found', no id)",
        code=-32603,
        message=r"^internal error$",
        details=r"^\s*session not found\W*$",
    ),
    Spelling(
        "agentao 0.5.17 on session/load (-32600 \"Session '<id>' not found\"); fast-agent 0.10.48's message",
        message=r"\bsession\b[^.]{0,120}\bnot found\b",
    ),
    Spelling(
        "agentao 0.5.17 on session/load before any save (-32600 'No sessions directory found')",
        message=r"\bno sessions directory found\b",
    ),
    Spelling("agentao 0.5.17 on session/prompt (-32600 'unknown sessionId: <id>')", message=r"\bunknown session"),
    Spelling(
        "the field report of issue 17 (agent not recorded): 'Invalid session identifier'",
        message=r"\binvalid session identifier\b",
    ),
)


def _search(pattern: str, text: object) -> bool:
    return isinstance(text, str) and re.search(pattern, text, re.IGNORECASE) is not None


def _details(error: RpcError) -> object:
    """Where an agent puts the reason under a generic message: ``data.details``, or a string ``data``."""
    if isinstance(error.data, str):
        return error.data
    return error.data.get("details") if isinstance(error.data, dict) else None


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(error: BaseException, limit: int = 80) -> str:
    """An error as a note quotes it: the code and message the agent sent, shortened, with the details
    when the agent put the reason there (``-32603 'Internal error' (details: 'Session not found')``);
    any other error as its text."""
    if not isinstance(error, RpcError):
        return _shorten(str(error), limit)
    text = f"{error.code} {_shorten(str(error.message or ''), limit)!r}"
    details = _details(error)
    if isinstance(details, str) and details:
        text += f" (details: {_shorten(details, limit)!r})"
    return text


def _names(data: Any, session_id: str | None) -> bool:
    """Whether ``data`` names the session: a value equal to its id, or a string holding the id as
    a whole word (deepagents-acp quotes it inside ``data.details``)."""
    if not session_id:
        return False
    whole = re.compile(rf"(?<![\w-]){re.escape(session_id)}(?![\w-])")
    values = data.values() if isinstance(data, dict) else (data,)
    return any(value == session_id or (isinstance(value, str) and whole.search(value)) for value in values)


def says_session_not_found(error: BaseException, session_id: str | None) -> Spelling | None:
    """The row of :data:`SPELLINGS` that ``error`` matches for ``session_id``, or ``None``."""
    if not isinstance(error, RpcError):
        return None
    return next((spelling for spelling in SPELLINGS if spelling.matches(error, session_id)), None)


#: How a refusal says the session is only busy for now ("the session is closing; retry after close
#: completes": Qwen Code's daemon 0.24.4 while it closes a session whose WebSocket dropped).
_RETRY_LATER: Final = re.compile(r"\bretry (?:after|later|again)\b", re.IGNORECASE)


def says_retry_later(error: RpcError) -> bool:
    """Whether ``error`` says to try the same request again in a moment (the session is being closed
    or torn down and will be there to load then), rather than that the session is gone."""
    return any(isinstance(text, str) and _RETRY_LATER.search(text) for text in (error.message, _details(error)))
