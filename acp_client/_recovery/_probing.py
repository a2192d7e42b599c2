"""Asking one instance about sessions: ``session/status`` (or ``session/close`` for a copy left
behind), over its live link or a link of its own, within one bound.

A link of its own is opened by the caller's ``opener`` (:func:`acp_client._link._opening.open_link`)
and closed whatever happens. One instance's failure is an answer (``unreachable``), never an
error. :func:`fan_out` asks every instance at once: one connect and ``initialize`` per instance.

Each instance's work runs in a task of its own, awaited only until the timeout: an instance that
does not let go when cancelled (a flood to drain, a close handshake that never completes) cannot
hold the answer past it, and a slow close (in the background) never turns an answer into a timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

import attrs

from .._codec import from_wire, to_wire
from .._rpc._connection import Connection
from .._util._logging import get_logger
from ..clock import Clock, move_on_after, move_on_at
from ..exceptions import AcpError, CapabilityNotSupported, RequestTimeout, SessionNotFound
from ..location import Endpoint, InstanceAnswer, Location
from ..state import Probe
from ..transports.base import Connector
from ..types import (
    CloseSessionRequest,
    Implementation,
    InitializeResponse,
    SessionStatusRequest,
    SessionStatusResponse,
)
from ._not_found import says_session_not_found

logger = get_logger("acp_client.locate")

_T = TypeVar("_T")

#: Opens and initializes a link to an instance (the client's way: :func:`acp_client._link._opening.open_link`).
Opener: TypeAlias = Callable[[Connector], Awaitable[tuple[Connection, InitializeResponse]]]

#: An instance's live, initialized link (a client's own): asked directly, no connect.
Live: TypeAlias = tuple[Connection, InitializeResponse]


@attrs.frozen
class Settings:
    """One round of asking: ``timeout`` for each instance's whole exchange (connect included) from
    ``start`` on ``clock``; an instance in ``live`` is asked over that link, others over one ``opener`` opens."""

    session_ids: tuple[str, ...]
    timeout: float | None
    opener: Opener
    clock: Clock
    start: float
    live: Mapping[Endpoint, Live] = attrs.field(factory=dict)


#: One instance's answers, one per session id (in the order of ``Settings.session_ids``).
Answers: TypeAlias = tuple[InstanceAnswer, ...]


@attrs.define(eq=False)
class _Link:
    conn: Connection | None = None  # a link of its own to one instance, closed whatever happens


async def _open(endpoint: Endpoint, settings: Settings, link: _Link) -> Live:
    """The instance's live connection, or a fresh one (kept in ``link``), initialized."""
    live = settings.live.get(endpoint)
    if live is None:
        assert endpoint.connector is not None, "the caller gives every endpoint its connector"
        live = await settings.opener(endpoint.connector)
        link.conn = live[0]
    return live


async def _statuses(endpoint: Endpoint, settings: Settings, link: _Link) -> Answers:
    """``session/status`` for every session on one instance, concurrently over one link (no timeout of its own)."""
    clock = settings.clock
    agent: Implementation | None = None

    def answer(probe: Probe, **fields: Any) -> InstanceAnswer:
        elapsed = clock.monotonic() - settings.start
        return InstanceAnswer(endpoint, probe, agent=agent, elapsed=elapsed, **fields)

    async def status(conn: Connection, session_id: str, version: int) -> InstanceAnswer:
        request = to_wire(SessionStatusRequest(session_id=session_id), protocol_version=version)
        try:
            result = await conn.request("session/status", request, timeout=None)
        except AcpError as exc:
            if isinstance(exc, SessionNotFound) or says_session_not_found(exc, session_id):
                return answer(Probe.UNKNOWN)
            logger.debug("locate: %s gave no usable answer for %s: %s", endpoint, session_id, exc)
            return answer(Probe.UNREACHABLE, error=exc)
        try:
            decoded = from_wire(SessionStatusResponse, result, protocol_version=version)
        except AcpError as exc:
            return answer(Probe.UNREACHABLE, error=exc)
        return answer(decoded.status, raw_status=decoded.raw_status, state=decoded.state)

    ids = settings.session_ids
    try:
        conn, init = await _open(endpoint, settings, link)
        agent, version = init.agent_info, init.protocol_version
        if not init.agent_capabilities.supports("session/status"):
            path = init.agent_capabilities.capability_path("session/status", version)
            error = CapabilityNotSupported("session/status", path)
            return tuple(answer(Probe.UNREACHABLE, error=error) for _ in ids)
    except AcpError as exc:
        logger.debug("locate: %s gave no usable answer: %s", endpoint, exc)
        return tuple(answer(Probe.UNREACHABLE, error=exc) for _ in ids)
    if len(ids) == 1:  # the common case (one session located): no task of its own
        return (await status(conn, ids[0], version),)
    return tuple(await asyncio.gather(*(status(conn, sid, version) for sid in ids)))


#: The links still closing after their answer (or its deadline): kept until closed.
_closing: set[asyncio.Future[None]] = set()
#: How long a link closing in the background may take (on the caller's clock).
CLOSE_LIMIT = 10.0


def _close_in_background(task: asyncio.Future[Any], link: _Link, clock: Clock) -> asyncio.Future[None]:
    async def close() -> None:
        await asyncio.wait([task])  # the work ends first (it was answered, or cancelled)
        with move_on_after(clock, CLOSE_LIMIT):
            if link.conn is not None:
                await link.conn.aclose()

    closing = asyncio.ensure_future(close())
    _closing.add(closing)
    closing.add_done_callback(_closing.discard)
    return closing


async def _in_time(settings: Settings, work: Callable[[_Link], Awaitable[_T]], late: Callable[[], _T]) -> _T:
    """``work`` on a link of its own within ``settings.timeout``; ``late()`` past it, at once. The
    link is closed within what is left of the timeout, and past it in the background."""
    clock, link = settings.clock, _Link()
    deadline = None if settings.timeout is None else clock.monotonic() + settings.timeout
    task = asyncio.ensure_future(work(link))
    answered: list[_T] = []
    try:
        with move_on_at(clock, deadline):
            answered.append(await asyncio.shield(task))
    finally:
        if not task.done():
            task.cancel()
        closing = _close_in_background(task, link, clock)
    if answered:
        with move_on_at(clock, deadline):
            await asyncio.shield(closing)
    return answered[0] if answered else late()


async def ask(endpoint: Endpoint, settings: Settings) -> Answers:
    """One instance's answers for ``settings.session_ids`` within ``settings.timeout``; an
    instance that cannot answer in time is ``unreachable`` (its ``error`` a ``RequestTimeout``)."""

    def late() -> Answers:
        elapsed = settings.clock.monotonic() - settings.start
        error = RequestTimeout("locate (connect, initialize, session/status)", settings.timeout or 0.0)
        return tuple(
            InstanceAnswer(endpoint, Probe.UNREACHABLE, elapsed=elapsed, error=error) for _ in settings.session_ids
        )

    return await _in_time(settings, lambda link: _statuses(endpoint, settings, link), late)


async def close_copy(endpoint: Endpoint, session_id: str, settings: Settings) -> bool:
    """``session/close`` for one session on one instance, within ``settings.timeout``: ``True`` when
    the instance no longer has it in memory (closed, or unknown); ``False`` without ``session/close``.
    Never raises for the instance's failure."""

    async def close(link: _Link) -> bool:
        try:
            conn, init = await _open(endpoint, settings, link)
            if not init.agent_capabilities.supports("session/close"):
                return False
            request = to_wire(CloseSessionRequest(session_id=session_id), protocol_version=init.protocol_version)
            await conn.request("session/close", request, timeout=None)
        except AcpError as exc:
            if isinstance(exc, SessionNotFound) or says_session_not_found(exc, session_id):
                return True
            logger.info("could not close %s on %s: %s", session_id, endpoint, exc)
            return False
        return True

    return await _in_time(settings, close, lambda: False)


def settings(
    session_ids: Sequence[str], *, timeout: float | None, opener: Opener, clock: Clock, live: Mapping[Endpoint, Live]
) -> Settings:
    """A round of asking that starts now."""
    return Settings(tuple(session_ids), timeout, opener, clock, clock.monotonic(), dict(live))


async def fan_out(
    session_ids: Sequence[str],
    endpoints: Sequence[Endpoint],
    *,
    timeout: float | None,
    opener: Opener,
    clock: Clock,
    live: Mapping[Endpoint, Live],
) -> dict[str, Location]:
    """Every endpoint asked at once: one :class:`~acp_client.location.Location` per distinct session id, in order."""
    ids = tuple(dict.fromkeys(session_ids))
    if not ids:
        return {}
    asking = settings(ids, timeout=timeout, opener=opener, clock=clock, live=live)
    results = await asyncio.gather(*(ask(e, asking) for e in endpoints), return_exceptions=True)
    per_instance: list[Answers] = []
    for result in results:
        if isinstance(result, BaseException):  # not one instance's failure: a bug or a cancellation
            raise result
        per_instance.append(result)
    elapsed = clock.monotonic() - asking.start
    located = {
        sid: Location(sid, tuple(answers[index] for answers in per_instance), elapsed) for index, sid in enumerate(ids)
    }
    for location in located.values() if logger.isEnabledFor(logging.DEBUG) else ():
        logger.debug(
            "located %s in %.3fs: %s",
            location.session_id,
            location.elapsed,
            ", ".join(f"{answer.endpoint}={answer.probe.value}" for answer in location.answers),
        )
    return located
