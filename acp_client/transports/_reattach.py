"""Reattaching one broken Streamable HTTP stream to its connection, where it broke.

:class:`Cursor` holds what reopens a stream on the same ``Acp-Connection-Id``: its last event id
(sent as ``Last-Event-ID``) and the **resumption headers** the server sent with it (an epoch naming
the numbering). A stream without event ids cannot be resumed: its break is a drop. The link
(:meth:`._link.HttpTransport._reattach_stream`) reopens a stream from its cursor, trying again
until a deadline, and treats the break as a drop when it gives up.

A server that cannot resume says so with a **resync signal**: an SSE event of type ``resync`` (the
reference agent), a notification with ``"kind": "state_resync_required"`` (Qwen Code's daemon), or
a resumption header whose value changed across the reopening.
"""

from __future__ import annotations

from typing import Any, Final

from .._codec._jsonrpc import Message
from ._wire import HeaderView

#: Headers a server sends with a stream that the client echoes back when it reopens that stream.
_RESUMPTION_HEADERS: Final = ("Acp-Stream-Epoch", "X-Qwen-Event-Epoch")
#: The SSE event type of the reference agent's resync signal.
RESYNC_EVENT: Final = "resync"
#: The marker of Qwen Code's resync notification (looked for in the raw data before decoding).
RESYNC_MARKER: Final = b"state_resync_required"
#: Pauses before reopening a stream (the n-th quick attempt in a row); a ``Retry-After`` is taken
#: as said, up to :data:`MAX_RETRY_DELAY`.
_DELAYS: Final = (0.05, 0.25, 1.0)
MAX_RETRY_DELAY: Final = 5.0


def retry_delay(attempt: int) -> float:
    """The pause before the ``attempt``-th (from 1) quick reopening in a row."""
    return _DELAYS[min(attempt, len(_DELAYS)) - 1]


class Cursor:
    """Where one stream stands: its last event id and the resumption headers it came with."""

    __slots__ = ("headers", "last_event_id")

    def __init__(self) -> None:
        #: The last ``id:`` the stream carried (``""``: none, the stream cannot be resumed).
        self.last_event_id = ""
        #: The resumption headers of the last opening, as the server sent them.
        self.headers: dict[str, str] = {}

    @property
    def resumable(self) -> bool:
        """Whether the stream carried an event id that can travel back in a header."""
        return _header_safe(self.last_event_id)

    def request_headers(self) -> list[tuple[str, str]]:
        """The headers of a request that reopens the stream from here."""
        if not self.resumable:
            return []
        return [("Last-Event-ID", self.last_event_id), *self.headers.items()]

    def take(self, headers: HeaderView) -> str | None:
        """Keep the resumption headers of an opening; returns what changed (an epoch change), if any."""
        changed: str | None = None
        for name in _RESUMPTION_HEADERS:
            value = headers.get(name)
            if not isinstance(value, str) or not _header_safe(value):
                continue
            before = self.headers.get(name)
            if before is not None and before != value:
                changed = f"{name} changed from {before!r} to {value!r}"
            self.headers[name] = value
        return changed


def _header_safe(value: str) -> bool:
    """Non-empty printable ASCII: what may go back to the server in a header."""
    return bool(value) and value.isascii() and value.isprintable()


def is_resync_message(message: Message) -> bool:
    """Whether a notification is a server's "cannot resume, load the session again" signal."""
    if type(message) is not dict:
        return False
    params: Any = message.get("params")
    return type(params) is dict and params.get("kind") == "state_resync_required"
