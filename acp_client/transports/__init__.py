"""Transports: one seam (:mod:`acp_client.transports.base`), four implementations.

The public names of the transport layer, importable from here: the seam (:class:`Transport`,
:class:`Connector`, :class:`TransportInfo`), the configuration values connectors take
(:class:`Limits`, :class:`TlsConfig`, :class:`CookieStore`), and the connectors. Modules whose
name starts with ``_`` are private: import from here or from the public modules
(:mod:`.base`, :mod:`.http`, :mod:`.websocket`, :mod:`.stdio`, :mod:`.memory`).
"""

import importlib
from typing import TYPE_CHECKING, Any, Final

from ..exceptions import (
    AgentExited,
    AuthenticationFailed,
    BatchNotSupported,
    ConnectTimeout,
    HttpStatusError,
    MessageTooLarge,
    MissingHeader,
    NotAcceptable,
    ServiceUnavailable,
    TlsVerificationError,
    TransportClosed,
    UnknownConnection,
    UnknownSession,
    UnsafeRedirect,
    UnsupportedMediaType,
)
from ._cookies import CookieStore
from ._security import TlsConfig
from .base import Connector, Limits, Transport, TransportInfo
from .endpoint import connector_for

if TYPE_CHECKING:
    from .http import HttpConnector
    from .stdio import DEFAULT_INHERITED_ENV, StdioConnector
    from .websocket import WebSocketConnector

# The connectors load on first use: httpx and websockets cost more to import than the rest of the
# package together, and an app needs at most the ones it connects with.
_LAZY: Final = {
    "DEFAULT_INHERITED_ENV": ".stdio",
    "HttpConnector": ".http",
    "StdioConnector": ".stdio",
    "WebSocketConnector": ".websocket",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
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
