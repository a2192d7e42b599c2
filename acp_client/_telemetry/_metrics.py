"""The client's metrics: one set of instruments per meter provider, shared by every client using it.

The two observed values cost nothing on the hot path: queued requests are read at each collection,
and updates are counted per variant class in a plain dict. A closed client's counts are kept, so
the cumulative update counter never goes back.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from .._util._logging import get_logger
from .._util._version import __version__
from ..types import UnknownSessionUpdate
from . import _names as n

logger = get_logger("acp_client.telemetry")

#: Reported for update kinds this SDK does not know (an agent could send unbounded many).
_OTHER = "_OTHER"


def _kind(variant: type) -> str:
    if issubclass(variant, UnknownSessionUpdate):
        return _OTHER
    kind = getattr(variant, "kind", None)
    return kind if isinstance(kind, str) else _OTHER


class UpdateSource:
    """What one client reports to the observed instruments."""

    def __init__(self, queued: Callable[[], int]) -> None:
        #: Updates received, per variant class (the engine adds to it).
        self.update_counts: dict[type, int] = {}
        self.queued = queued


class Instruments:
    """The instruments of one meter provider."""

    def __init__(self, provider: MeterProvider) -> None:
        meter = provider.get_meter(n.SCOPE, __version__)
        self.reconnect_attempts = meter.create_counter(
            n.METRIC_RECONNECT_ATTEMPTS, unit="{attempt}", description="Reconnect attempts, by cause"
        )
        self.recoveries = meter.create_counter(
            n.METRIC_RECOVERIES, unit="{recovery}", description="Sessions recovered, by path and continuity"
        )
        self.recovery_duration = meter.create_histogram(
            n.METRIC_RECOVERY_DURATION, unit="s", description="How long the recovery of one session took, by path"
        )
        self.disconnected = meter.create_histogram(
            n.METRIC_DISCONNECTED, unit="s", description="From a drop until the link was connected again"
        )
        self.interrupted = meter.create_counter(
            n.METRIC_INTERRUPTED, unit="{prompt}", description="Prompt turns a drop cut off (they may have executed)"
        )
        self.request_duration = meter.create_histogram(
            n.METRIC_REQUEST_DURATION, unit="s", description="Requests the client sent, by method and outcome"
        )
        self._lock = threading.Lock()
        self._sources: weakref.WeakSet[UpdateSource] = weakref.WeakSet()
        self._retired: dict[type, int] = {}
        meter.create_observable_up_down_counter(
            n.METRIC_QUEUED,
            callbacks=[self._observe_queued],
            unit="{request}",
            description="Requests waiting for the connection during an outage",
        )
        meter.create_observable_counter(
            n.METRIC_UPDATES,
            callbacks=[self._observe_updates],
            unit="{update}",
            description="session/update notifications received, by kind",
        )

    def add(self, source: UpdateSource) -> None:
        with self._lock:
            self._sources.add(source)

    def retire(self, source: UpdateSource) -> None:
        """A client closed: keep its counts, stop asking it."""
        with self._lock:
            if source not in self._sources:
                return
            self._sources.discard(source)
            for variant, count in source.update_counts.copy().items():
                self._retired[variant] = self._retired.get(variant, 0) + count

    def _observe_queued(self, options: CallbackOptions) -> Iterable[Observation]:
        total = 0
        with self._lock:
            sources = list(self._sources)
        for source in sources:
            try:
                total += source.queued()
            except Exception:
                logger.debug("telemetry: could not read a queue length", exc_info=True)
        return [Observation(total)]

    def _observe_updates(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals: dict[str, int] = {}
            counted = [self._retired.copy(), *(source.update_counts.copy() for source in self._sources)]
        for counts in counted:
            for variant, count in counts.items():
                kind = _kind(variant)
                totals[kind] = totals.get(kind, 0) + count
        return [Observation(count, {n.UPDATE_KIND: kind}) for kind, count in sorted(totals.items())]


_LOCK = threading.Lock()
_BY_PROVIDER: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()
_UNWEAKABLE: dict[int, tuple[Any, Instruments]] = {}


def instruments_for(provider: MeterProvider) -> Instruments:
    """The instruments of ``provider``, made on first use (two clients never register one instrument twice)."""
    with _LOCK:
        try:
            found = _BY_PROVIDER.get(provider)
        except TypeError:  # a provider that cannot be weakly referenced: kept for good
            held = _UNWEAKABLE.get(id(provider))
            if held is None:
                held = _UNWEAKABLE[id(provider)] = (provider, Instruments(provider))
            return held[1]
        if found is None:
            found = _BY_PROVIDER[provider] = Instruments(provider)
        return found
