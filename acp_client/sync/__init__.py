"""The thread-safe synchronous facade for editor hosts: :class:`SyncAcpClient`.

Editor hosts (Vim, Sublime Text, a Qt or Tk app...) run Python on a thread of their own and cannot
hand it to asyncio. :class:`SyncAcpClient` runs an :class:`~acp_client.AcpClient` on an event loop
in a daemon thread it owns (:class:`EventLoopThread`, usable on its own), and gives the host
blocking methods with timeouts, callable from any thread but the loop thread (there they raise
:class:`LoopThreadError`). Callbacks run on ``callback_executor``, never on the loop thread; with an
``event_queue`` every event is also put on it as a :class:`SyncEvent` (one class per kind, each
with a typed ``payload``); questions from the agent wait at most ``answer_timeout`` for the host.
The guide, with the event table, the timeouts and the rules that keep a host responsive:
``docs/editor-plugin.md``.
"""

from ..exceptions import LoopThreadError
from ._client import SyncAcpClient, SyncClientOptions, SyncSessionHandle
from ._events import (
    EventKind,
    NewSessionEvent,
    NotificationEvent,
    OwnershipLostEvent,
    PermissionEvent,
    PermissionRequest,
    ProtocolErrorEvent,
    RecoveryFailedEvent,
    ReplayEvent,
    ResumeEvent,
    SessionUpdateEvent,
    StateEvent,
    StoreErrorEvent,
    StreamResumedEvent,
    SyncEvent,
    TurnInterruptedEvent,
)
from ._loop import EventLoopThread

__all__ = [
    "EventKind",
    "EventLoopThread",
    "LoopThreadError",
    "NewSessionEvent",
    "NotificationEvent",
    "OwnershipLostEvent",
    "PermissionEvent",
    "PermissionRequest",
    "ProtocolErrorEvent",
    "RecoveryFailedEvent",
    "ReplayEvent",
    "ResumeEvent",
    "SessionUpdateEvent",
    "StateEvent",
    "StoreErrorEvent",
    "StreamResumedEvent",
    "SyncAcpClient",
    "SyncClientOptions",
    "SyncEvent",
    "SyncSessionHandle",
    "TurnInterruptedEvent",
]
