"""The transport layer's public names: importable from ``acp_client.transports``, pinned."""

from __future__ import annotations

import pytest

import acp_client
import acp_client.transports as transports
from acp_client import ConfigurationError
from acp_client.transports import Limits


def test_transport_config_types_are_public() -> None:
    assert transports.__all__ == [
        "DEFAULT_INHERITED_ENV",
        "AgentExited",
        "AuthenticationFailed",
        "BatchNotSupported",
        "ConnectTimeout",
        "Connector",
        "CookieStore",
        "HttpConnector",
        "HttpStatusError",
        "Limits",
        "MessageTooLarge",
        "MissingHeader",
        "NotAcceptable",
        "ServiceUnavailable",
        "StdioConnector",
        "TlsConfig",
        "TlsVerificationError",
        "Transport",
        "TransportClosed",
        "TransportInfo",
        "UnknownConnection",
        "UnknownSession",
        "UnsafeRedirect",
        "UnsupportedMediaType",
        "WebSocketConnector",
        "connector_for",
    ]
    for name in transports.__all__:
        value = getattr(transports, name)
        if isinstance(value, type) and issubclass(value, acp_client.AcpError):
            # The transport errors: defined in the one tree, their public home is here.
            assert value.__module__ == "acp_client.exceptions" and issubclass(value, acp_client.TransportError)
            continue
        module = getattr(value, "__module__", "acp_client.transports")
        assert module.startswith("acp_client.transports")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_message_bytes": 0},
        {"max_sse_line_bytes": -1},
        {"max_http_body_bytes": 1.5},
        {"max_message_bytes": True},
        {"max_stderr_bytes": "64k"},
    ],
)
def test_limits_refuse_caps_that_cannot_work_at_construction(kwargs: dict[str, object]) -> None:
    name = next(iter(kwargs))
    with pytest.raises(ConfigurationError, match=rf"Limits\.{name} must be a whole number of bytes"):
        Limits(**kwargs)  # type: ignore[arg-type]


def test_limits_keep_sensible_caps() -> None:
    assert Limits(max_message_bytes=1, max_stderr_bytes=0).max_stderr_bytes == 0
