"""One link's recovery episodes: a span ``acp.recovery`` from the drop until the link is connected
again (or the client fails or closes), with an event per reconnect attempt, and one child span per
session recovered, made from the outcome the recoverer reports. The episode is observed through the
link's state changes, the supervisor's reconnect hook and each round's outcomes; a recovery round
runs with the episode as the current span, so the requests it sends are its children.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .._util._logging import get_logger
from ..state import ConnectionState, RecoveryOutcome, RecoveryPath, State
from ..transports.base import Transport
from . import _names as n
from ._calls import Calls, error_type, server_attributes
from ._metrics import Instruments

logger = get_logger("acp_client.telemetry")

_DOWN = frozenset({State.RECONNECTING, State.SUSPENDED})


def _outcome_attributes(outcome: RecoveryOutcome) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        n.RECOVERY_PATH: outcome.path.value,
        n.RECOVERY_PLANNED_PATH: outcome.planned.value,
        n.RECOVERY_PROBE: outcome.probe.value,
        n.RECOVERY_CONTINUITY: outcome.continuity.value,
        n.RECOVERY_REPLAYED: outcome.replayed_updates,
        n.PREVIOUS_SESSION_ID: outcome.previous_session_id,
    }
    optional = {
        n.SESSION_ID: outcome.session_id,
        n.RECOVERY_RAW_STATUS: outcome.raw_status,
        n.RECOVERY_ENDPOINT: outcome.endpoint,
    }
    attributes.update({key: value for key, value in optional.items() if value is not None})
    if outcome.steps:
        attributes[n.RECOVERY_STEPS] = [f"{method}: {result}" for method, result in outcome.steps]
    if outcome.notes:
        attributes[n.RECOVERY_NOTES] = list(outcome.notes)
    return attributes


def record_outcomes(
    tracer: trace.Tracer, instruments: Instruments, outcomes: list[RecoveryOutcome], parent: Span | None
) -> None:
    """A child span of ``parent`` (or a span of its own) and the metrics for each outcome."""
    now = time.time_ns()
    floor = getattr(parent, "start_time", None) if parent is not None else None
    context = trace.set_span_in_context(parent, Context()) if parent is not None else Context()
    for outcome in outcomes:
        try:
            start = now - int(outcome.duration * 1e9)
            if isinstance(floor, int):  # a fake clock's durations may be longer than the episode
                start = max(start, floor)
            span = tracer.start_span(
                n.RECOVERY_SESSION_SPAN, context=context, attributes=_outcome_attributes(outcome), start_time=start
            )
            if outcome.path is RecoveryPath.ABANDON:
                if outcome.error is not None:
                    span.set_attribute(n.ERROR_TYPE, error_type(outcome.error))
                    span.record_exception(outcome.error)
                span.set_status(Status(StatusCode.ERROR, "the session was abandoned"))
            span.end(end_time=now)
            path = {n.RECOVERY_PATH: outcome.path.value}
            instruments.recoveries.add(1, {**path, n.RECOVERY_CONTINUITY: outcome.continuity.value})
            instruments.recovery_duration.record(outcome.duration, path)
        except Exception:
            logger.debug("telemetry: could not record a recovery outcome", exc_info=True)


class LinkTelemetry:
    """The :class:`~acp_client._rpc._observe.LinkObserver` of one link, and its recovery episodes."""

    def __init__(
        self, *, tracer: trace.Tracer, instruments: Instruments, version: Callable[[], int], clock: Callable[[], float]
    ) -> None:
        self._tracer = tracer
        self._instruments = instruments
        self._version = version
        self._clock = clock
        self._attributes: dict[str, Any] = {}
        self._episode: Span | None = None
        self._since = 0.0
        self._dropped = False
        self._attempts = 0
        self._sessions = 0

    def calls(self, transport: Transport) -> Calls:
        try:
            self._attributes = {n.TRANSPORT: transport.info.kind, **server_attributes(transport.info)}
        except Exception:
            logger.debug("telemetry: could not read the transport", exc_info=True)
        return Calls(
            transport, tracer=self._tracer, version=self._version, on_request_done=self._request_done, clock=self._clock
        )

    def reconnecting(self, attempt: int, delay: float, cause: BaseException | None) -> None:
        try:
            text = str(cause) if cause is not None else ""
            kind = type(cause).__name__ if cause is not None else "unknown"
            episode = self._begin(cause=text, dropped=True)
            self._attempts += 1
            episode.add_event(
                n.RECONNECT_EVENT,
                {n.RECONNECT_ATTEMPT: attempt, n.RECONNECT_DELAY: delay, n.RECONNECT_CAUSE: text, n.ERROR_TYPE: kind},
            )
            self._instruments.reconnect_attempts.add(1, {n.RECONNECT_CAUSE: kind})
        except Exception:
            logger.debug("telemetry: could not record a reconnect attempt", exc_info=True)

    def watch(self, on_state: Callable[[ConnectionState], None]) -> Callable[[ConnectionState], None]:
        """``on_state``, with the link's episodes observed first."""

        def observed(state: ConnectionState) -> None:
            try:
                self._state(state)
            except Exception:
                logger.debug("telemetry: could not follow a state change", exc_info=True)
            on_state(state)

        return observed

    @contextlib.contextmanager
    def recovering(self) -> Iterator[None]:
        """Run one recovery round with the episode as the current span."""
        try:
            episode = self._begin(cause=None, dropped=False)
        except Exception:
            logger.debug("telemetry: could not start a recovery span", exc_info=True)
            yield
            return
        with trace.use_span(episode, record_exception=False, set_status_on_exception=False):
            yield

    def interrupted(self, session_id: str) -> None:
        """A drop of this link cut a prompt of ``session_id`` off (the outage has begun, or begins now)."""
        try:
            self._begin(cause=None, dropped=True).add_event(n.PROMPT_INTERRUPTED_EVENT, {n.SESSION_ID: session_id})
        except Exception:
            logger.debug("telemetry: could not record an interrupted prompt", exc_info=True)

    def recovered(self, outcomes: list[RecoveryOutcome]) -> None:
        """The outcomes of one recovery round (children of the episode)."""
        self._sessions += len(outcomes)
        record_outcomes(self._tracer, self._instruments, outcomes, self._episode)

    def _request_done(self, method: str, outcome: str, seconds: float) -> None:
        self._instruments.request_duration.record(seconds, {n.RPC_METHOD: method, n.REQUEST_OUTCOME: outcome})

    def _begin(self, *, cause: str | None, dropped: bool) -> Span:
        if self._episode is None:
            attributes: dict[str, Any] = dict(self._attributes)
            if cause:
                attributes[n.DISCONNECT_CAUSE] = cause
            # A root of its own: the task that runs the reconnects inherited whatever span was
            # current when the app connected, which has nothing to do with this outage.
            self._episode = self._tracer.start_span(
                n.RECOVERY_SPAN, context=Context(), kind=SpanKind.INTERNAL, attributes=attributes
            )
            self._since, self._dropped, self._attempts, self._sessions = self._clock(), dropped, 0, 0
        self._dropped = self._dropped or dropped
        return self._episode

    def _state(self, state: ConnectionState) -> None:
        kind = state.state
        if kind in _DOWN:
            down = self._begin(cause=state.cause, dropped=True)
            if kind is State.SUSPENDED:
                down.add_event("acp.suspended", {n.RECONNECT_ATTEMPT: state.attempt or 0})
            return
        episode = self._episode
        if kind is State.RECOVERING:
            self._begin(cause=None, dropped=False).add_event("acp.recovering")
            return
        if episode is None or kind is State.CONNECTING:
            return
        self._episode = None
        result = {State.CONNECTED: "connected", State.FAILED: "failed"}.get(kind, "closed")
        episode.set_attributes(
            {n.RECOVERY_RESULT: result, n.RECONNECT_ATTEMPTS: self._attempts, n.RECOVERY_SESSIONS: self._sessions}
        )
        if kind is State.FAILED:
            episode.set_status(Status(StatusCode.ERROR, state.cause or "the client failed"))
        episode.end()
        if kind is State.CONNECTED and self._dropped:
            self._instruments.disconnected.record(self._clock() - self._since)
