"""Transports: one seam (:mod:`acp_client.transports.base`), four implementations.

The public names of the transport layer, importable from here: the seam (:class:`Transport`,
:class:`Connector`, :class:`TransportInfo`), the configuration values connectors take
(:class:`Limits`, :class:`TlsConfig`, :class:`CookieStore`), and the connectors. Modules whose
name starts with ``_`` are private: import from here or from the public modules
(:mod:`.base`, :mod:`.http`, :mod:`.websocket`, :mod:`.stdio`, :mod:`.memory`).
"""

from ._cookies import CookieStore
from ._security import TlsConfig
from .base import Connector, Limits, Transport, TransportInfo
from .http import HttpConnector
from .stdio import DEFAULT_INHERITED_ENV, StdioConnector
from .websocket import WebSocketConnector

__all__ = [
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
