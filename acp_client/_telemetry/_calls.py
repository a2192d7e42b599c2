"""Spans for calls: a CLIENT span per request the client sends (with the trace context carried to
the agent in ``params._meta``), a SERVER span per agent→client request the app's handlers answer
(continuing the agent's trace when its ``_meta`` carries one). Every OpenTelemetry call is guarded:
a broken provider, processor or exporter is logged at DEBUG and never reaches the request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    INVALID_SPAN,
    INVALID_SPAN_CONTEXT,
    ProxyTracer,
    ProxyTracerProvider,
    Span,
    SpanKind,
    Status,
    StatusCode,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .._codec._jsonrpc import RequestId
from .._rpc._observe import Send
from .._util._checks import DEFAULT_PORTS
from .._util._logging import get_logger
from ..exceptions import ConnectionLost, RequestTimeout, RpcError
from ..transports.base import Transport, TransportInfo
from . import _names as n

logger = get_logger("acp_client.telemetry")

#: ``traceparent`` / ``tracestate``, the W3C names the ACP meta-propagation RFD reserves in ``_meta``.
PROPAGATOR = TraceContextTextMapPropagator()


def server_attributes(info: TransportInfo) -> dict[str, Any]:
    """``server.address`` / ``server.port`` of a network link (none for stdio or memory)."""
    if info.kind not in ("websocket", "http"):
        return {}
    try:
        parts = urlsplit(info.target)
        host, port = parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return {}
    return {key: value for key, value in ((n.SERVER_ADDRESS, host), (n.SERVER_PORT, port)) if value}


def error_type(exc: BaseException) -> str:
    """``error.type``: the JSON-RPC error code of an error answer, else the exception's type."""
    if isinstance(exc, RpcError):
        return str(exc.code)
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


_OUTCOMES: Final = (
    (RpcError, "error"),
    (RequestTimeout, "timeout"),
    (ConnectionLost, "connection_lost"),
    (asyncio.CancelledError, "cancelled"),
)


def outcome_of(exc: BaseException | None) -> str:
    """The value of ``acp.request.outcome``."""
    if exc is None:
        return "ok"
    return next((outcome for kind, outcome in _OUTCOMES if isinstance(exc, kind)), "error")


def record_failure(span: Span, exc: BaseException) -> None:
    """What a failed call tells its span (a cancelled one is not an error)."""
    span.set_attribute(n.REQUEST_OUTCOME, outcome_of(exc))
    if isinstance(exc, asyncio.CancelledError):
        return
    span.set_attribute(n.ERROR_TYPE, error_type(exc))
    if isinstance(exc, RpcError):
        span.set_attribute(n.RPC_RESPONSE_STATUS_CODE, str(exc.code))
        span.set_status(Status(StatusCode.ERROR, exc.message))
        return
    if isinstance(exc, ConnectionLost):
        span.set_attribute(n.MAY_HAVE_EXECUTED, exc.may_have_executed)
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc)))


def with_trace_context(params: Any, span: Span) -> Any:
    """``params`` with the span's ``traceparent`` (and ``tracestate``) in ``_meta``, merged under
    any ``_meta`` the app set (its keys win); the app's objects are never modified. Params that
    are not an object, and a span without a valid context (no SDK), are left as they are."""
    if not isinstance(params, dict) or span.get_span_context() == INVALID_SPAN_CONTEXT:
        return params  # no SDK: nothing to carry (what the propagator would decide, at a fraction of its cost)
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span, Context()))
    if not carrier:
        return params
    meta = params.get("_meta")
    if meta is None:
        return {**params, "_meta": carrier}
    if not isinstance(meta, dict):  # not ours to fix: sent as the app wrote it
        return params
    return {**params, "_meta": {**carrier, **meta}}


def trace_context_of(params: Any) -> Context | None:
    """The agent's trace context from ``params._meta`` (``None``: it sent none we can read)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("traceparent"), str):
        return None
    carrier = {key: meta[key] for key in ("traceparent", "tracestate") if isinstance(meta.get(key), str)}
    found = PROPAGATOR.extract(carrier, context=Context())
    return found if trace.get_current_span(found).get_span_context().is_valid else None


class Calls:
    """The :class:`~acp_client._rpc._observe.CallObserver` of one connection."""

    def __init__(
        self,
        transport: Transport,
        *,
        tracer: trace.Tracer,
        version: Callable[[], int],
        on_request_done: Callable[[str, str, float], None],
        clock: Callable[[], float],
    ) -> None:
        info = transport.info
        self._tracer = tracer
        #: The tracer follows the global provider (the app passed none of its own).
        self._proxied = isinstance(tracer, ProxyTracer)
        self._version = version
        self._on_done = on_request_done
        self._clock = clock
        self._base: dict[str, Any] = {
            n.RPC_SYSTEM_NAME: "jsonrpc",
            n.RPC_SYSTEM: "jsonrpc",
            n.JSONRPC_PROTOCOL_VERSION: "2.0",
            n.TRANSPORT: info.kind,
            **server_attributes(info),
        }

    def _start(self, method: str, params: Any, kind: SpanKind, parent: Context | None) -> Span:
        attributes = {**self._base, n.RPC_METHOD: method, n.PROTOCOL_VERSION: self._version()}
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(session_id, str):
            attributes[n.SESSION_ID] = session_id
        return self._tracer.start_span(method, context=parent, kind=kind, attributes=attributes)

    def _idle(self) -> bool:
        """No SDK behind the tracer and no span to continue: a span would be the invalid one, so
        none is made (the metrics still are)."""
        return (
            self._proxied
            and isinstance(trace.get_tracer_provider(), ProxyTracerProvider)
            and trace.get_current_span() is INVALID_SPAN
        )

    async def outgoing(self, method: str, params: Any, send: Send) -> Any:
        span: Span | None = None
        if not self._idle():
            try:
                span = self._start(method, params, SpanKind.CLIENT, None)
                sent = with_trace_context(params, span)
            except Exception:
                logger.debug("telemetry: could not start the span of %s", method, exc_info=True)
                return await send(params, _ignore)
        started = self._clock()
        failure: BaseException | None = None
        try:
            if span is None:
                return await send(params, _ignore)

            def on_id(request_id: RequestId) -> None:
                try:
                    span.set_attribute(n.JSONRPC_REQUEST_ID, str(request_id))
                except Exception:
                    logger.debug("telemetry: could not set the request id", exc_info=True)

            return await self._within(span, send(sent, on_id))
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self._done(method, failure, started)

    def _done(self, method: str, failure: BaseException | None, started: float) -> None:
        try:
            self._on_done(method, outcome_of(failure), self._clock() - started)
        except Exception:
            logger.debug("telemetry: could not record the duration of %s", method, exc_info=True)

    async def incoming(
        self, request_id: RequestId, method: str, params: Any, handle: Callable[[str, Any], Awaitable[Any]]
    ) -> Any:
        try:
            span = self._start(method, params, SpanKind.SERVER, trace_context_of(params))
            span.set_attribute(n.JSONRPC_REQUEST_ID, str(request_id))
        except Exception:
            logger.debug("telemetry: could not start the span of %s", method, exc_info=True)
            return await handle(method, params)
        return await self._within(span, handle(method, params))

    @staticmethod
    async def _within(span: Span, call: Awaitable[Any]) -> Any:
        """Await ``call`` with ``span`` current, then end the span with the call's outcome."""
        failure: BaseException | None = None
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                return await call
        except BaseException as exc:
            failure = exc
            raise
        finally:
            try:
                if failure is None:
                    span.set_attribute(n.REQUEST_OUTCOME, "ok")
                else:
                    record_failure(span, failure)
                span.end()
            except Exception:
                logger.debug("telemetry: could not end a span", exc_info=True)


def _ignore(request_id: RequestId) -> None:
    pass
