"""Fixtures of the telemetry tests: the SDK with in-memory exporters, the reference server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.telemetry._otel import Otel


@pytest.fixture
def otel() -> Iterator[Otel]:
    found = Otel()
    yield found
    found.shutdown()
