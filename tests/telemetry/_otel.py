"""The OpenTelemetry SDK wired to in-memory exporters, and readers of what they hold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acp_client import Telemetry

__all__ = ["Otel"]


class Otel:
    """A tracer and a meter provider exporting to memory, and the :class:`Telemetry` using them."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.telemetry = Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        return [span for span in spans if name is None or span.name == name]

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Each metric's points: ``(attributes, value)``; a histogram's value is its count."""
        found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points = found.setdefault(metric.name, [])
                    for point in metric.data.data_points:
                        value = point.count if hasattr(point, "bucket_counts") else point.value
                        points.append((dict(point.attributes or {}), value))
        return found

    def units(self) -> dict[str, str]:
        data = self.reader.get_metrics_data()
        return {
            metric.name: metric.unit or ""
            for resource in (data.resource_metrics if data is not None else ())
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }


def total(points: Sequence[tuple[dict[str, Any], Any]], **attributes: Any) -> Any:
    """The sum of the points whose attributes include ``attributes``."""
    return sum(value for point, value in points if all(point.get(k) == v for k, v in attributes.items()))
