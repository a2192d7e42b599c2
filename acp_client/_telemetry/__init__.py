"""OpenTelemetry instrumentation (the ``otel`` extra), behind the hooks of :mod:`acp_client._rpc._observe`.

Nothing here is imported until a client is built, and OpenTelemetry only when telemetry is enabled
and ``opentelemetry-api`` is installed: :func:`instrumentation` answers ``None`` otherwise, and the
core then runs as without this package (one ``is None`` check per hook point).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .._util._logging import get_logger
from ..telemetry import Telemetry

if TYPE_CHECKING:
    from ._client import ClientTelemetry

__all__ = ["instrumentation"]

logger = get_logger("acp_client.telemetry")


def instrumentation(
    option: Telemetry | None, *, clock: Callable[[], float], version: Callable[[], int], queued: Callable[[], int]
) -> ClientTelemetry | None:
    """The client's telemetry, or ``None`` when it is disabled or the ``otel`` extra is missing."""
    option = option if option is not None else Telemetry()
    if not option.enabled:
        return None
    try:
        from ._client import ClientTelemetry
    except ImportError:  # opentelemetry-api is not installed: no telemetry
        return None
    try:
        return ClientTelemetry(option, clock=clock, version=version, queued=queued)
    except Exception:  # a provider that fails must not stop the client
        logger.warning("telemetry disabled: the tracer or meter provider failed", exc_info=True)
        return None
