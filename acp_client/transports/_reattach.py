"""Reattaching one broken Streamable HTTP stream to its connection (see :mod:`._resume`).

:func:`reattach` reopens the stream on the same ``Acp-Connection-Id`` from its cursor, trying again
after network failures and ``503``\\s until a deadline; it says why when it gives up, and the
transport then treats the break as a drop. It never closes the link itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

import attrs

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
from ._resume import Cursor
from ._wire import Reply
from .base import StreamResumed

__all__ = ["MAX_RETRY_DELAY", "GaveUp", "reattach", "retry_delay"]

logger = get_logger("acp_client.transports.http")

#: Pauses before reopening a stream (the n-th quick attempt in a row); a ``Retry-After`` is taken
#: as said, up to :data:`MAX_RETRY_DELAY`.
_DELAYS: Final = (0.05, 0.25, 1.0)
MAX_RETRY_DELAY: Final = 5.0


def retry_delay(attempt: int) -> float:
    """The pause before the ``attempt``-th (from 1) quick reopening in a row."""
    return _DELAYS[min(attempt, len(_DELAYS)) - 1]


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
        except (UnknownSession, AuthenticationFailed) as exc:
            # 404 / 403 for the session (or credentials refused): nothing to reattach to here.
            return GaveUp(f"the {what} could not be reattached: {exc}")
        except ServiceUnavailable as exc:
            delay = exc.retry_after
        except (NotAcceptable, UnsafeRedirect, ProtocolError, MessageTooLarge) as exc:
            return GaveUp(f"the {what} could not be reattached: {exc}")
        except AcpError as exc:
            logger.debug("reattaching the %s failed: %s", what, exc)
        else:
            changed = cursor.take(response.headers)
            if changed is not None:
                await exchange.close_sse(response)
                return GaveUp(f"the {what} cannot be resumed: {changed}; messages may be missing")
            return response, StreamResumed(session_id, cursor.last_event_id, exchange.connection_id, reason)
        failures += 1
        if delay is None:
            delay = retry_delay(failures)
        await asyncio.sleep(min(delay, MAX_RETRY_DELAY, max(0.0, deadline - loop.time())))
    return None
