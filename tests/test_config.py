"""Configuration as values: every option is checked when the client is built, and a bad one
raises ConfigurationError naming it (before: some were accepted and failed at the first drop)."""

from __future__ import annotations

import math
import queue
from typing import Any

import attrs
import pytest

from acp_client import AcpClient, Callbacks, ConfigurationError, QueueOptions, RetryPolicy, Timeouts
from acp_client.sync import SyncAcpClient
from acp_client.testing import MemoryConnector, ReferenceAgent

URL = "ws://127.0.0.1:9/acp"  # never connected to


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"retry": {"max_delay": 5}}, "retry"),
        ({"retry": 5}, "retry"),
        ({"callbacks": {"on_resume": print}}, "callbacks"),
        ({"timeouts": 60}, "timeouts"),
        ({"queue": True}, "queue"),
        ({"protocol_version": "1"}, "protocol_version"),
        ({"protocol_version": 3}, "protocol_version"),
        ({"recovery_concurrency": 0}, "recovery_concurrency"),
        ({"recovery_concurrency": 2.5}, "recovery_concurrency"),
        ({"handlers": object()}, "handlers"),
        ({"client_info": "me"}, "client_info"),
        ({"headers": [("a", "b")]}, "headers"),
        ({"secret_headers": "x-api-key"}, "secret_headers"),
        ({"tls": True}, "tls"),
        ({"cookies": {}}, "cookies"),
        ({"limits": 1024}, "limits"),
        ({"transport_options": ["http2"]}, "transport_options"),
        ({"clock": object()}, "clock"),
        ({"rng": 42}, "rng"),
        ({"keep_transcripts": "yes"}, "keep_transcripts"),
    ],
)
def test_a_bad_client_option_fails_at_construction_naming_it(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        AcpClient(URL, **options)


def test_a_bad_endpoint_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="endpoint"):
        AcpClient(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [field.name for field in attrs.fields(Callbacks)])
def test_every_callback_must_be_callable(name: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        Callbacks(**{name: "x"})
    Callbacks(**{name: print})
    Callbacks(**{name: None})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("request", -1),
        ("request", 0),
        ("request", math.nan),
        ("request", math.inf),
        ("request", "60"),
        ("request", True),
        ("connect", None),
        ("connect", -0.5),
        ("probe", math.nan),
    ],
)
def test_timeouts_are_finite_positive_seconds(field: str, value: Any) -> None:
    with pytest.raises(ConfigurationError, match=f"Timeouts.{field}"):
        Timeouts(**{field: value})


def test_valid_timeouts_and_none_for_no_request_limit() -> None:
    assert Timeouts(request=None, connect=1, probe=0.5).request is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("enabled", 1), ("max_size", 0), ("max_size", 2.0), ("max_size", True), ("max_age", -1), ("max_age", math.inf)],
)
def test_queue_options_are_checked(field: str, value: Any) -> None:
    with pytest.raises(ConfigurationError, match=f"QueueOptions.{field}"):
        QueueOptions(**{field: value})


def test_values_are_frozen_and_shared() -> None:
    callbacks = Callbacks(on_update=print)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        callbacks.on_update = None  # type: ignore[misc]
    client = AcpClient(MemoryConnector(ReferenceAgent()), callbacks=callbacks, timeouts=Timeouts(request=5))
    assert client.callbacks is callbacks and client.timeouts.request == 5


def test_the_sync_facade_checks_its_own_options_and_shares_callbacks() -> None:
    with pytest.raises(ConfigurationError, match="answer_timeout"):
        SyncAcpClient(URL, answer_timeout=-1)
    with pytest.raises(ConfigurationError, match="callbacks"):
        SyncAcpClient(URL, callbacks={"on_update": print})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="event_queue"):
        SyncAcpClient(URL, event_queue=[])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="retry"):
        SyncAcpClient(URL, retry=5)
    client = SyncAcpClient(URL, callbacks=Callbacks(on_update=print), event_queue=queue.Queue())
    assert client.client.callbacks.on_update is not None  # relayed to the host's executor


def test_the_default_retry_policy_is_a_policy() -> None:
    AcpClient(URL, retry=RetryPolicy())
    AcpClient(URL, retry=None)
