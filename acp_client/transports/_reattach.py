"""Reattaching one broken Streamable HTTP stream to its connection, where it broke.

:class:`Cursor` holds what reopens a stream on the same ``Acp-Connection-Id``: its last event id
(sent as ``Last-Event-ID``) and the **resumption headers** the server sent with it (an epoch naming
the numbering). A stream without event ids cannot be resumed: its break is a drop.
:func:`reattach` reopens the stream from its cursor, trying again after network failures and
``503``\\s until a deadline; it says why when it gives up (the transport then treats the break as a
drop), and never closes the link itself.

A server that cannot resume says so with a **resync signal**: an SSE event of type ``resync`` (the
reference agent), a notification with ``"kind": "state_resync_required"`` (Qwen Code's daemon), or
a resumption header whose value changed across the reopening.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

import attrs

from .._codec._jsonrpc import Message
from .._util._logging import get_logger
from ..exceptions import (
    AcpError,
    AuthenticationFailed,
    MessageTooLarge,
    NotAcceptable,
    ProtocolError,
    ServiceUnavailable,
    UnknownConnection,
    UnknownSession,
    UnsafeRedirect,
)
from ._exchange import HttpExchange
from ._wire import HeaderView, Reply
from .base import StreamResumed

__all__ = [
    "MAX_RETRY_DELAY",
    "RESYNC_EVENT",
    "RESYNC_MARKER",
    "Cursor",
    "GaveUp",
    "is_resync_message",
    "reattach",
    "retry_delay",
]

logger = get_logger("acp_client.transports.http")

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


@attrs.frozen
class GaveUp:
    """The stream cannot be reattached: why (``forgotten``: the server no longer knows the connection)."""

    reason: str
    forgotten: bool = False


async def reattach(
    exchange: HttpExchange,
    session_id: str | None,
    cursor: Cursor,
    *,
    reason: str,
    timeout: float,
    target: str,
    closed: Callable[[], bool],
) -> tuple[Reply, StreamResumed] | GaveUp | None:
    """Reopen a broken stream from ``cursor`` within ``timeout`` seconds.

    Returns:
        The reopened stream and the event to report once it shows it is not a resync;
        :class:`GaveUp` when the server refused, could not be reached in time or changed its
        numbering; ``None`` when the link closed meanwhile.
    """
    what = "connection stream" if session_id is None else f"stream of session {session_id}"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    logger.info(
        "%s of connection %s at %s broke (%s); reattaching from event %s",
        what,
        exchange.connection_id,
        target,
        reason,
        cursor.last_event_id,
    )
    failures = 0
    while not closed():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return GaveUp(f"the {what} could not be reattached within {timeout:g}s ({reason})")
        delay: float | None = None
        try:
            response = await asyncio.wait_for(exchange.open_sse(session_id, cursor.request_headers()), remaining)
        except asyncio.TimeoutError:
            continue
        except UnknownConnection as exc:
            return GaveUp(f"the {what} could not be reattached: {exc}", forgotten=True)
        except (
            UnknownSession,
            AuthenticationFailed,
            NotAcceptable,
            UnsafeRedirect,
            ProtocolError,
            MessageTooLarge,
        ) as exc:
            # 404 / 403 for the session, credentials refused, or an answer no retry changes.
            return GaveUp(f"the {what} could not be reattached: {exc}")
        except ServiceUnavailable as exc:
            delay = exc.retry_after
        except AcpError as exc:
            logger.debug("reattaching the %s failed: %s", what, exc)
        else:
            changed = cursor.take(response.headers)
            if changed is not None:
                await exchange.close_sse(response)
                return GaveUp(f"the {what} cannot be resumed: {changed}; messages may be missing")
            return response, StreamResumed(session_id, cursor.last_event_id, exchange.connection_id, reason)
        failures += 1
        await asyncio.sleep(
            min(retry_delay(failures) if delay is None else delay, MAX_RETRY_DELAY, max(0.0, deadline - loop.time()))
        )
    return None
