"""``connector_for`` and the client constructors refuse every malformed endpoint with one
``ConfigurationError`` line (never a bare ``ValueError`` from the URL parser), and accept the
well-formed ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from acp_client import AcpClient, ConfigurationError, RetryPolicy, Timeouts
from acp_client.pool import Pool
from acp_client.sync import SyncAcpClient
from acp_client.transports.endpoint import connector_for

#: (endpoint, a piece of the message that says what is wrong)
BAD_ENDPOINTS = [
    ("ws://127.0.0.1:99999/acp", "the port 99999 is out of range (1-65535)"),
    ("ws://127.0.0.1:65536/acp", "the port 65536 is out of range"),
    ("http://127.0.0.1:0/acp", "the port 0 is out of range"),
    ("ws://127.0.0.1:abc/acp", "the port 'abc' is not a number"),
    ("http://127.0.0.1:-1/acp", "the port '-1' is not a number"),
    ("ws://127.0.0.1:80:90/acp", "the port '80:90' is not a number"),
    ("ws://127.0.0.1:/acp", "nothing after the ':'"),
    ("ws://h:\uff11\uff12/acp", "is not a number"),  # full-width digits
    ("ws://[::1:8000/acp", "an IPv6 address goes in brackets"),
    ("ws://::1]:8000/acp", "an IPv6 address goes in brackets"),
    ("http://[::1]]:8000/acp", "an IPv6 address goes in brackets"),
    ("ws://[[::1]:8000/acp", "an IPv6 address goes in brackets"),
    ("ws://[zz]:8000/acp", "'zz' is not an IPv6 address"),
    ("ws://[::1]x/acp", "after an IPv6 address's ']'"),
    ("ws:///acp", "URL has no host"),
    ("http://:8000/acp", "URL has no host"),
    ("ws://user:secret@:8000/acp", "URL has no host"),
    ("ws://exa mple:8000/acp", "spaces or control characters"),
    ("http://host:8000/acp\n", "spaces or control characters"),
    ("ws://host\x1b[2J:8000/acp", "spaces or control characters"),
    ("ftp://host/acp", "unsupported endpoint 'ftp'"),
    ("wss:/host/acp", "malformed wss URL: did you mean 'wss://host/acp'"),
    ("ws//host:8000/acp", "malformed ws URL"),
    ("127.0.0.1:8000", "has no scheme: did you mean 'ws://127.0.0.1:8000/acp'"),
    ("", "unsupported endpoint ''"),
    ("stdio:", "stdio: endpoint needs a command"),
    ("stdio:agent 'unclosed", "cannot split the stdio: command"),
]

GOOD_ENDPOINTS = [
    "ws://127.0.0.1:8000/acp",
    "wss://agent.example:65535/acp",
    "http://[::1]:8000/acp",
    "ws://[::1]/acp",
    "https://agent.example/acp?x=1",
    "stdio:python -m agent",
]


@pytest.mark.parametrize(("endpoint", "says"), BAD_ENDPOINTS)
@pytest.mark.parametrize("entry", ["connector_for", "AcpClient", "SyncAcpClient", "Pool"])
def test_a_malformed_endpoint_is_one_configuration_error_line(entry: str, endpoint: str, says: str) -> None:
    build: Callable[[], Any] = {
        "connector_for": lambda: connector_for(endpoint),
        "AcpClient": lambda: AcpClient(endpoint),
        "SyncAcpClient": lambda: SyncAcpClient(endpoint),
        "Pool": lambda: AcpClient(Pool([endpoint, "ws://127.0.0.1:8000/acp"])),
    }[entry]
    with pytest.raises(ConfigurationError) as caught:
        client = build()
        if isinstance(client, SyncAcpClient):
            client.close()
    message = str(caught.value)
    assert says in message, message
    assert "\n" not in message and "\x1b" not in message
    assert "secret" not in message


def test_the_url_checks_name_the_problem_without_credentials_or_query() -> None:
    with pytest.raises(ConfigurationError) as caught:
        AcpClient("ws://alice:hunter2@127.0.0.1:99999/acp?token=abc")
    assert str(caught.value) == "malformed URL 'ws://127.0.0.1:99999/acp': the port 99999 is out of range (1-65535)"


@pytest.mark.parametrize("endpoint", GOOD_ENDPOINTS)
def test_well_formed_endpoints_are_accepted(endpoint: str) -> None:
    assert connector_for(endpoint) is not None


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: RetryPolicy(max_elapsed=-1), "RetryPolicy.max_elapsed must be a finite number"),
        (lambda: RetryPolicy(initial_delay=float("nan")), "RetryPolicy.initial_delay"),
        (lambda: Timeouts(request=-1), "Timeouts.request"),
        (lambda: AcpClient("ws://h:8000/acp", protocol_version=7), "protocol_version must be one of"),
        (lambda: AcpClient(42), "endpoint must be str"),  # type: ignore[arg-type]
        (lambda: AcpClient("ws://h:8000/acp", retry=5), "retry must be RetryPolicy"),  # type: ignore[arg-type]
    ],
)
def test_bad_option_values_are_configuration_errors(make: Callable[[], Any], says: str) -> None:
    with pytest.raises(ConfigurationError, match=None) as caught:
        make()
    assert says in str(caught.value) and "\n" not in str(caught.value)
