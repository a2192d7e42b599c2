"""The thread-safe synchronous facade for editor hosts: :class:`SyncAcpClient`.

Editor hosts (Vim, Sublime Text, a Qt or Tk app...) run Python on a thread of their own and cannot
hand it to asyncio. :class:`SyncAcpClient` runs an :class:`~acp_client.AcpClient` on an event loop
in a daemon thread it owns, and gives the host blocking methods with timeouts, callable from any
thread::

    from acp_client.sync import PermissionEvent, SessionUpdateEvent, SyncAcpClient

    events = queue.Queue()
    with SyncAcpClient("ws://127.0.0.1:8000/acp", event_queue=events) as client:
        session = client.new_session(cwd="/home/me/project")
        turn = session.prompt_async("Summarize the README")
        while not turn.done():                     # the editor's own main loop
            for event in drain(events):            # events.get_nowait() until queue.Empty
                if isinstance(event, SessionUpdateEvent):
                    render(event.payload)          # an UpdateEvent
                elif isinstance(event, PermissionEvent):
                    event.payload.allow()          # or .reject() / .select(id) / .cancel()
            editor.process_ui_events(10)           # poll every few ms
        print(turn.result().stop_reason)

**Threads.** :meth:`~SyncAcpClient.connect` (or ``with``) starts the loop thread
(``acp-client-loop``); :meth:`~SyncAcpClient.close` closes the client, stops the loop and joins the
thread. Both are idempotent and safe from any thread. A blocking method called *from the loop thread
itself* (a coroutine given to :meth:`~SyncAcpClient.submit`, an ``async`` handler) would deadlock,
so it raises :class:`LoopThreadError`.

**Timeouts.** Every blocking method takes ``timeout`` (seconds; omitted: ``default_timeout``, by
default ``None``: no limit of the facade's own, the async client's timeouts still apply, so sync and
async agree; :meth:`~SyncAcpClient.prompt` has no default limit). On expiry the call raises
:class:`~acp_client.exceptions.RequestTimeout` and the coroutine behind it is cancelled (a request
gets a ``$/cancel_request``; a prompt a ``session/cancel``). Other exceptions propagate unchanged;
after :meth:`~SyncAcpClient.close`, calls raise :class:`~acp_client.exceptions.ClientClosed`.
:meth:`~SyncAcpClient.prompt_async` and :meth:`~SyncAcpClient.submit` return a
:class:`concurrent.futures.Future` instead of blocking.

**Callbacks never run on the loop thread.** The ``callbacks`` (the same
:class:`~acp_client.config.Callbacks` value as :class:`~acp_client.AcpClient` takes) are submitted
to ``callback_executor`` (default: a private single-thread executor, ``acp-callbacks-*``, so they
run one at a time in order). With an ``event_queue``, every event is also put on it as a
:class:`SyncEvent`, for an editor that polls:

======================================  ===================================================
event class (``event.kind``)            ``event.payload``
======================================  ===================================================
:class:`StateEvent` (``STATE``)         :class:`~acp_client.state.ConnectionState` (``on_state_change``)
:class:`SessionUpdateEvent` (``UPDATE``)  :class:`~acp_client.state.UpdateEvent` (``on_update``)
:class:`ResumeEvent` (``RESUME``)       :class:`~acp_client.state.RecoveryOutcome` (``on_resume``)
:class:`ReplayEvent` (``REPLAY``)       :class:`~acp_client.state.RecoveryOutcome` (``on_replay``)
:class:`NewSessionEvent`                :class:`~acp_client.state.RecoveryOutcome` (``on_new_session``)
:class:`RecoveryFailedEvent`            :class:`~acp_client.state.RecoveryOutcome` (``on_recovery_failed``)
:class:`TurnInterruptedEvent`           :class:`~acp_client.state.TurnInterrupted` (``on_turn_interrupted``)
:class:`StreamResumedEvent`             :class:`~acp_client.state.StreamResumed` (``on_stream_resumed``)
:class:`PermissionEvent`                :class:`PermissionRequest`: answer it from any thread
:class:`ProtocolErrorEvent`             :class:`~acp_client.exceptions.AcpError` (``on_protocol_error``)
:class:`NotificationEvent`              ``(method, params)`` of another notification (``on_notification``)
:class:`OwnershipLostEvent`            :class:`~acp_client.state.OwnershipLost` (``on_ownership_lost``)
:class:`StoreErrorEvent`                :class:`~acp_client.exceptions.SessionStoreError` (``on_store_error``)
======================================  ===================================================

:data:`SyncEvent` is the union of these classes, so ``match event: case StateEvent(payload=state):``
or ``isinstance(event, SessionUpdateEvent)`` is checked by a type checker (``event.payload`` has the
type of its class). ``event.kind`` (an :class:`EventKind`) names the kind too.

Use an unbounded queue: an event that does not fit is dropped and logged as an error.

**Questions from the agent.** Callbacks whose answer the client waits for run on the executor too,
and the loop task waiting for them (not the loop) gives up after ``answer_timeout`` seconds:

* ``handlers=ClientHandlers(permission=fn)`` with a plain function: ``fn(request)`` returns the
  outcome; no answer in time means ``cancelled``. Without a permission handler but with an
  ``event_queue``, each request is a ``PERMISSION`` event whose :class:`PermissionRequest` the host
  answers from its own thread (no answer in time: ``cancelled``). With neither: ``cancelled`` at once.
* a plain-function ``handlers.elicitation``: its answer, or ``cancel`` after the timeout.
* ``decide_recovery``: its path, or the proposed path after the timeout.
* ``refresh_credentials``: waited for up to the timeout.
* ``decide_adoption``: ``True`` adopts the session; no answer in time leaves it (another client may
  adopt it).

Coroutine handlers (``async def``, and the terminal and extension handlers) run on the loop thread,
as with :class:`~acp_client.AcpClient`; they must not block or call this facade's blocking methods.
Do not block inside a callback either: with the default executor, the next callbacks (and answers)
wait for it. A host blocked in :meth:`~SyncAcpClient.prompt` cannot poll its queue, so answer
permissions from a callback or use :meth:`~SyncAcpClient.prompt_async`.

:class:`EventLoopThread` is the loop-in-a-thread underneath, usable on its own to run other asyncio
code (a :class:`~acp_client.testing.ReferenceServer`, say) from synchronous code.
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
