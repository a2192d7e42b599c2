"""acp_client: a typed asyncio client for the Agent Client Protocol (ACP) that keeps sessions
alive through network drops and agent restarts.

Start with :class:`AcpClient` and its :class:`ClientOptions`. Here are the names an app holds: the
client, its configuration, what it reports and the errors it catches. The rest lives with its
subject: :mod:`acp_client.transports` (connectors, network settings, transport errors),
:mod:`acp_client.store` (session stores), :mod:`acp_client.exceptions` (the whole error tree),
:mod:`acp_client.types` (wire types), :mod:`acp_client.sync` (the thread-safe facade for editor
hosts), :mod:`acp_client.testing` (the test kit); several instances: ``docs/many-instances.md``.
"""

import logging

from ._util._version import __version__
from .client import AcpClient, SessionHandle
from .config import Callbacks, ClientOptions, QueueOptions, Timeouts
from .display import printable
from .exceptions import (
    AcpError,
    AuthRequired,
    CapabilityNotSupported,
    ClientClosed,
    ClientSuspended,
    ConfigurationError,
    ConnectError,
    ConnectionLost,
    ProtocolError,
    QueueFull,
    RecoveryFailed,
    RequestTimeout,
    RpcError,
    SessionNotFound,
    SessionNotTracked,
    SessionOwnershipLost,
    SessionStoreError,
    TransportError,
    TurnInProgress,
)
from .handlers import ClientHandlers
from .retry import RetryPolicy
from .state import (
    ConnectionState,
    OwnershipLost,
    PromptResult,
    RecoveryContext,
    RecoveryOutcome,
    RecoveryPath,
    State,
    StreamResumed,
    TurnInterrupted,
    UpdateEvent,
)
from .telemetry import Telemetry
from .transcript import Transcript, TranscriptMessage, TurnStatus
from .transports import TlsConfig

# A library's logger: records go wherever the app sends them, and nowhere (not to Python's
# last-resort stderr handler) when it configures no logging. What the app must see reaches it
# through callbacks and exceptions; the log is for those who ask for it.
logging.getLogger("acp_client").addHandler(logging.NullHandler())

__all__ = [
    "AcpClient",
    "AcpError",
    "AuthRequired",
    "Callbacks",
    "CapabilityNotSupported",
    "ClientClosed",
    "ClientHandlers",
    "ClientOptions",
    "ClientSuspended",
    "ConfigurationError",
    "ConnectError",
    "ConnectionLost",
    "ConnectionState",
    "OwnershipLost",
    "PromptResult",
    "ProtocolError",
    "QueueFull",
    "QueueOptions",
    "RecoveryContext",
    "RecoveryFailed",
    "RecoveryOutcome",
    "RecoveryPath",
    "RequestTimeout",
    "RetryPolicy",
    "RpcError",
    "SessionHandle",
    "SessionNotFound",
    "SessionNotTracked",
    "SessionOwnershipLost",
    "SessionStoreError",
    "State",
    "StreamResumed",
    "Telemetry",
    "Timeouts",
    "TlsConfig",
    "Transcript",
    "TranscriptMessage",
    "TransportError",
    "TurnInProgress",
    "TurnInterrupted",
    "TurnStatus",
    "UpdateEvent",
    "__version__",
    "printable",
]
