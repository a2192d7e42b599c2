"""OpenTelemetry traces and metrics, as an option value (see ``docs/telemetry.md``).

Install the ``otel`` extra (``pip install -e '.[otel]'`` in a checkout, or just ``opentelemetry-api``) and
the client traces every request, every agent request its handlers answer and every recovery, and
counts reconnects, recoveries and updates — on the global tracer and meter providers, so an app
that configures the OpenTelemetry SDK sees them and one that does not pays next to nothing::

    client = AcpClient(url, telemetry=Telemetry(tracer_provider=provider, meter_provider=meters))
    client = AcpClient(url, telemetry=Telemetry(enabled=False))   # none at all

Without the extra nothing is imported and nothing changes. The providers are typed loosely here
(anything with ``get_tracer`` / ``get_meter``): no OpenTelemetry type is part of this API.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import attrs

from ._util._checks import check_instance
from .exceptions import ConfigurationError

__all__ = ["MeterProviderLike", "Telemetry", "TracerProviderLike"]


@runtime_checkable
class TracerProviderLike(Protocol):
    """What the client needs of an OpenTelemetry ``TracerProvider``."""

    def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> Any: ...


@runtime_checkable
class MeterProviderLike(Protocol):
    """What the client needs of an OpenTelemetry ``MeterProvider``."""

    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> Any: ...


def _provider(kind: type) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and not isinstance(value, kind):
            method = "get_tracer" if kind is TracerProviderLike else "get_meter"
            raise ConfigurationError(
                f"Telemetry.{attribute.name} must have a {method}() method (an OpenTelemetry provider) or be None, "
                f"not {type(value).__name__}"
            )

    return check


def _flag(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_instance(f"Telemetry.{attribute.name}", value, bool)


@attrs.frozen(kw_only=True)
class Telemetry:
    """Where the client's spans and metrics go.

    Attributes:
        tracer_provider: An OpenTelemetry ``TracerProvider`` (default: the global one, looked up
            at each span, so one the app installs later is used).
        meter_provider: An OpenTelemetry ``MeterProvider`` (default: the global one).
        enabled: ``False`` turns instrumentation off for this client (no span, no metric, no
            ``_meta`` added to requests).

    Raises:
        ConfigurationError: A provider without ``get_tracer`` / ``get_meter``, or ``enabled``
            not a bool.
    """

    tracer_provider: TracerProviderLike | None = attrs.field(default=None, validator=_provider(TracerProviderLike))
    meter_provider: MeterProviderLike | None = attrs.field(default=None, validator=_provider(MeterProviderLike))
    enabled: bool = attrs.field(default=True, validator=_flag)
