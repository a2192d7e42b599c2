"""One client's telemetry: its tracer, the shared instruments, and one observer per link."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import metrics, trace

from .._rpc._observe import LinkObserver
from .._util._logging import get_logger
from .._util._version import __version__
from ..state import RecoveryOutcome
from ..telemetry import Telemetry
from . import _names as n
from ._links import LinkTelemetry, record_outcomes
from ._metrics import UpdateSource, instruments_for

logger = get_logger("acp_client.telemetry")


class ClientTelemetry:
    """Built by the engine when telemetry is on: ``clock`` (the client's ``monotonic``) times the
    metrics, ``version`` is the negotiated ACP version, ``queued`` how many requests wait now."""

    def __init__(
        self, option: Telemetry, *, clock: Callable[[], float], version: Callable[[], int], queued: Callable[[], int]
    ) -> None:
        # The module-level lookup follows a global provider the app installs later.
        tracers = trace if option.tracer_provider is None else option.tracer_provider
        self.tracer = tracers.get_tracer(n.SCOPE, __version__)
        meters = option.meter_provider if option.meter_provider is not None else metrics.get_meter_provider()
        self.instruments = instruments_for(meters)  # type: ignore[arg-type]
        self.source = UpdateSource(queued)
        self.update_counts = self.source.update_counts
        self.instruments.add(self.source)
        self._clock = clock
        self._version = version

    def link(self) -> LinkTelemetry:
        """The observer of one more link."""
        return LinkTelemetry(tracer=self.tracer, instruments=self.instruments, version=self._version, clock=self._clock)

    def recovered(self, outcomes: list[RecoveryOutcome]) -> None:
        """Outcomes reported outside a link's recovery round (a failover between instances): spans of their own."""
        record_outcomes(self.tracer, self.instruments, outcomes, None)

    def turn_interrupted(self, session_id: str, link: LinkObserver | None) -> None:
        """A drop cut a prompt off: counted, and an event of the link's outage (the single link's)."""
        try:
            self.instruments.interrupted.add(1)
        except Exception:
            logger.debug("telemetry: could not count an interrupted prompt", exc_info=True)
        if link is not None:
            link.interrupted(session_id)

    def close(self) -> None:
        self.instruments.retire(self.source)
