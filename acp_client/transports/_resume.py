"""Where a Streamable HTTP stream stands, so a broken one can be reattached where it broke. Pure.

A server that numbers its SSE events (``id:`` lines) and keeps a dropped connection's streams for a
while lets a client reopen a stream on the same ``Acp-Connection-Id`` with ``Last-Event-ID`` and
get exactly what it missed. :class:`Cursor` is what the client needs for that: the last event id
the stream carried, and the **resumption headers** the server sent with the stream (an epoch that
names the numbering), which go back on the reopening request. A stream that carried no event id
has no cursor: reopening it could skip messages without anyone noticing, so the transport treats
its break as a drop instead (see :mod:`acp_client.transports.http`).

A server that cannot resume (it evicted the events after the cursor, or its numbering changed)
says so with a **resync signal**; the client then knows messages are missing. Recognized:

* an SSE event of type ``resync`` (the reference agent's; its data is a JSON object with a
  ``reason``);
* a notification whose params say ``"kind": "state_resync_required"`` (Qwen Code's daemon);
* a resumption header whose value changed across the reopening (an epoch change).
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from .._jsonrpc import Message

__all__ = ["LAST_EVENT_ID", "RESUMPTION_HEADERS", "RESYNC_EVENT", "RESYNC_MARKER", "Cursor", "is_resync_message"]

LAST_EVENT_ID: Final = "Last-Event-ID"
#: Headers a server sends with a stream that the client echoes back when it reopens that stream.
RESUMPTION_HEADERS: Final = ("Acp-Stream-Epoch", "X-Qwen-Event-Epoch")
#: The SSE event type of the reference agent's resync signal.
RESYNC_EVENT: Final = "resync"
#: The marker of Qwen Code's resync notification (looked for in the raw data before decoding).
RESYNC_MARKER: Final = b"state_resync_required"


class _Headers(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...


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
        return [(LAST_EVENT_ID, self.last_event_id), *self.headers.items()]

    def take(self, headers: _Headers) -> str | None:
        """Keep the resumption headers of an opening; returns what changed (an epoch change), if any.

        Args:
            headers: The answer's headers (case-insensitive ``get``).
        """
        changed: str | None = None
        for name in RESUMPTION_HEADERS:
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
