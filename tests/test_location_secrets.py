"""Pool members' URLs carry no secret out: user-info and secret-looking query values are redacted
wherever an endpoint is shown — handles, outcomes and their notes, reprs, log records (the
``acp_client.locate`` DEBUG log included), span attributes, exceptions."""

from __future__ import annotations

import logging

import pytest

from acp_client import AcpClient, Callbacks, RecoveryOutcome
from acp_client.location import Endpoint
from acp_client.pool import Pool, locate
from acp_client.transports._security import redact_url
from tests._farm import NAMES, Farm
from tests._harness import FAST_RETRY
from tests._support import eventually
from tests.telemetry._otel import Otel

SECRETS = ("hunter2", "s3cr3t", "sig-value")


def _url(name: str) -> str:
    return f"ws://alice:hunter2@{name}.example:8000/acp?token=s3cr3t&agent={name}&X-Amz-Signature=sig-value"


def test_redact_url() -> None:
    assert redact_url(_url("a")) == "ws://***@a.example:8000/acp?token=***&agent=a&X-Amz-Signature=***"
    assert redact_url("https://h/acp?api_key=1&password=2&access_token=3&page=4") == (
        "https://h/acp?api_key=***&password=***&access_token=***&page=4"
    )
    assert redact_url("https://h/acp") == "https://h/acp"
    assert redact_url("stdio:agent --flag") == "stdio:agent --flag"


def test_an_endpoint_shows_its_url_redacted() -> None:
    endpoint = Endpoint(_url("a"))
    assert endpoint.name == redact_url(_url("a")) and str(endpoint) == endpoint.name
    assert not any(secret in repr(endpoint) for secret in SECRETS)
    assert endpoint.url == _url("a")  # what it connects with is kept


async def test_a_pool_shows_no_secret_of_its_members_urls(farm: Farm, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="acp_client")
    otel = Otel()
    outcomes: list[RecoveryOutcome] = []
    record = outcomes.append
    endpoints = [Endpoint(_url(n), connector=farm.connectors[n]) for n in NAMES]
    pool = Pool(endpoints, failover_delay=5.0)
    callbacks = Callbacks(on_resume=record, on_replay=record, on_new_session=record, on_recovery_failed=record)
    client = AcpClient(pool, retry=FAST_RETRY, clock=farm.clock, callbacks=callbacks, telemetry=otel.telemetry)
    shown: list[str] = []
    try:
        async with client:
            handle = await client.new_session("/tmp")
            await farm.clock.run(handle.prompt("hello"))
            shown.append(str(handle.endpoint))
            location = await farm.clock.run(client.locate(handle.session_id))
            shown.append(repr(location))
            # The home goes away for good: the session moves (an outcome with a note naming both).
            farm.connectors["a"].refuse()
            farm.connectors["a"].drop()
            await eventually(lambda: outcomes, clock=farm.clock)
            shown.append(str(handle.endpoint))
        located = await farm.clock.run(locate(handle.session_id, endpoints, clock=farm.clock))
        shown.append(repr(located))
    finally:
        otel.shutdown()
    for outcome in outcomes:
        shown += [repr(outcome), str(outcome.endpoint), *outcome.notes]
    assert any("moved from" in note for outcome in outcomes for note in outcome.notes)
    shown += [r.getMessage() for r in caplog.records]
    assert any(r.name == "acp_client.locate" for r in caplog.records)
    for span in otel.spans():
        shown += [f"{key}={value}" for key, value in (span.attributes or {}).items()]
    assert any("acp.recovery.endpoint" in line for line in shown)
    leaked = [line for line in shown if any(secret in line for secret in SECRETS)]
    assert leaked == []
    assert str(outcomes[-1].endpoint).startswith("ws://***@")
