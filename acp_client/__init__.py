"""acp_client: a typed asyncio client for the Agent Client Protocol (ACP) that keeps sessions
alive through network drops and agent restarts.

Start with :class:`AcpClient` (configured with the values in :mod:`acp_client.config`); wire
types live in :mod:`acp_client.types`, the clock seam in :mod:`acp_client.clock`, the test kit in
:mod:`acp_client.testing`, and the thread-safe facade for editor hosts in :mod:`acp_client.sync`.
"""

import importlib
import logging
from typing import TYPE_CHECKING, Any, Final

from ._codec import session_from_json, session_to_json
from ._version import __version__
from .client import SUPPORTED_PROTOCOL_VERSIONS, AcpClient, SessionHandle
from .clock import Clock, SystemClock
from .config import USE_CLIENT_DEFAULT, Callbacks, QueueOptions, Timeouts, UseClientDefault
from .display import printable
from .exceptions import (
    AcpError,
    AgentExited,
    AuthenticationFailed,
    AuthRequired,
    BatchNotSupported,
    CapabilityNotSupported,
    ClientClosed,
    ClientSuspended,
    ConfigurationError,
    ConnectError,
    ConnectionLost,
    ConnectTimeout,
    HttpStatusError,
    IncompatibleProtocolVersion,
    InternalError,
    InvalidMessage,
    InvalidParams,
    InvalidRequest,
    LoopThreadError,
    MalformedFrame,
    MessageTooLarge,
    MethodNotFound,
    MissingHeader,
    NotAcceptable,
    ParseError,
    ProtocolError,
    QueueFull,
    RecoveryFailed,
    RequestCancelled,
    RequestTimeout,
    RpcError,
    ServiceUnavailable,
    SessionNotFound,
    SessionNotTracked,
    SessionStoreBusy,
    SessionStoreCorrupt,
    SessionStoreDriverMissing,
    SessionStoreError,
    SessionStoreFenced,
    SessionStoreForeign,
    SessionStoreReadOnly,
    SessionStoreTooNew,
    SessionStoreUnavailable,
    TlsVerificationError,
    TransportClosed,
    TransportError,
    TurnInProgress,
    UnexpectedResponse,
    UnknownConnection,
    UnknownSession,
    UnsafeRedirect,
    UnsupportedMediaType,
    UnsupportedProtocolVersion,
)
from .group import EndpointGroup
from .handlers import ClientHandlers, FileSystemPolicy, TerminalHandler
from .retry import RetryPolicy
from .state import (
    ConnectionState,
    Continuity,
    OwnershipLost,
    Probe,
    PromptResult,
    RecoveryContext,
    RecoveryOutcome,
    RecoveryPath,
    SessionPage,
    State,
    StreamResumed,
    TurnInterrupted,
    UpdateEvent,
)
from .store import SessionStore, StoredSession, endpoint_key
from .telemetry import Telemetry
from .transcript import (
    ReplayReport,
    SegmentStart,
    ToolCallView,
    Transcript,
    TranscriptMessage,
    TranscriptSegment,
    TurnStatus,
)
from .transports import Connector, CookieStore, Limits, TlsConfig, Transport, TransportInfo
from .transports.endpoint import connector_for
from .types import Session

# A library's logger: records go wherever the app sends them, and nowhere (not to Python's
# last-resort stderr handler) when it configures no logging. What the app must see reaches it
# through callbacks and exceptions; the log is for those who ask for it.
logging.getLogger("acp_client").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from .store import PostgresSessionStore, SqliteSessionStore
    from .transports.http import HttpConnector
    from .transports.stdio import DEFAULT_INHERITED_ENV, StdioConnector
    from .transports.websocket import WebSocketConnector

# The connectors are imported on first use, by the transports package (httpx and websockets cost more
# to import than the rest of the package together; an app needs at most the ones it connects with).
# The stores load sqlite3 (psycopg) on first use too.
_LAZY: Final = {
    "DEFAULT_INHERITED_ENV": ".transports",
    "HttpConnector": ".transports",
    "StdioConnector": ".transports",
    "WebSocketConnector": ".transports",
    "SqliteSessionStore": ".store",
    "PostgresSessionStore": ".store",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DEFAULT_INHERITED_ENV",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "USE_CLIENT_DEFAULT",
    "AcpClient",
    "AcpError",
    "AgentExited",
    "AuthRequired",
    "AuthenticationFailed",
    "BatchNotSupported",
    "Callbacks",
    "CapabilityNotSupported",
    "ClientClosed",
    "ClientHandlers",
    "ClientSuspended",
    "Clock",
    "ConfigurationError",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionLost",
    "ConnectionState",
    "Connector",
    "Continuity",
    "CookieStore",
    "EndpointGroup",
    "FileSystemPolicy",
    "HttpConnector",
    "HttpStatusError",
    "IncompatibleProtocolVersion",
    "InternalError",
    "InvalidMessage",
    "InvalidParams",
    "InvalidRequest",
    "Limits",
    "LoopThreadError",
    "MalformedFrame",
    "MessageTooLarge",
    "MethodNotFound",
    "MissingHeader",
    "NotAcceptable",
    "OwnershipLost",
    "ParseError",
    "PostgresSessionStore",
    "Probe",
    "PromptResult",
    "ProtocolError",
    "QueueFull",
    "QueueOptions",
    "RecoveryContext",
    "RecoveryFailed",
    "RecoveryOutcome",
    "RecoveryPath",
    "ReplayReport",
    "RequestCancelled",
    "RequestTimeout",
    "RetryPolicy",
    "RpcError",
    "SegmentStart",
    "ServiceUnavailable",
    "Session",
    "SessionHandle",
    "SessionNotFound",
    "SessionNotTracked",
    "SessionPage",
    "SessionStore",
    "SessionStoreBusy",
    "SessionStoreCorrupt",
    "SessionStoreDriverMissing",
    "SessionStoreError",
    "SessionStoreFenced",
    "SessionStoreForeign",
    "SessionStoreReadOnly",
    "SessionStoreTooNew",
    "SessionStoreUnavailable",
    "SqliteSessionStore",
    "State",
    "StdioConnector",
    "StoredSession",
    "StreamResumed",
    "SystemClock",
    "Telemetry",
    "TerminalHandler",
    "Timeouts",
    "TlsConfig",
    "TlsVerificationError",
    "ToolCallView",
    "Transcript",
    "TranscriptMessage",
    "TranscriptSegment",
    "Transport",
    "TransportClosed",
    "TransportError",
    "TransportInfo",
    "TurnInProgress",
    "TurnInterrupted",
    "TurnStatus",
    "UnexpectedResponse",
    "UnknownConnection",
    "UnknownSession",
    "UnsafeRedirect",
    "UnsupportedMediaType",
    "UnsupportedProtocolVersion",
    "UpdateEvent",
    "UseClientDefault",
    "WebSocketConnector",
    "__version__",
    "connector_for",
    "endpoint_key",
    "printable",
    "session_from_json",
    "session_to_json",
]
