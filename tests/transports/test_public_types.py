"""The transport layer's public names: importable from ``acp_client.transports``, pinned."""

from __future__ import annotations

import acp_client
import acp_client.transports as transports


def test_transport_config_types_are_public() -> None:
    assert transports.__all__ == [
        "DEFAULT_INHERITED_ENV",
        "Connector",
        "CookieStore",
        "HttpConnector",
        "Limits",
        "StdioConnector",
        "TlsConfig",
        "Transport",
        "TransportInfo",
        "WebSocketConnector",
    ]
    for name in transports.__all__:
        value = getattr(transports, name)
        # The same objects as the top-level re-exports, never a second copy.
        assert getattr(acp_client, name) is value
        module = getattr(value, "__module__", "acp_client.transports")
        assert module.startswith("acp_client.transports")
