"""The thread-safe synchronous facade for editor hosts: :class:`SyncAcpClient`.

Editor hosts (Vim, Sublime Text, a Qt or Tk app...) run Python on a thread of their own and cannot
hand it to asyncio. :class:`SyncAcpClient` runs an :class:`~acp_client.AcpClient` on an event loop
in a daemon thread it owns, and gives the host blocking methods with timeouts, callable from any
thread::

    from acp_client.sync import EventKind, SyncAcpClient

    events = queue.Queue()
    with SyncAcpClient("ws://127.0.0.1:8000/acp", event_queue=events) as client:
        session = client.new_session(cwd="/home/me/project")
        turn = client.prompt_async(session.session_id, "Summarize the README")
        while not turn.done():                     # the editor's own main loop
            for event in drain(events):            # events.get_nowait() until queue.Empty
                if event.kind is EventKind.UPDATE:
                    render(event.payload)          # an UpdateEvent
                elif event.kind is EventKind.PERMISSION:
                    event.payload.allow()          # or .reject() / .select(id) / .cancel()
            editor.process_ui_events(10)           # poll every few ms
        print(turn.result().stop_reason)

**Threads.** :meth:`~SyncAcpClient.connect` (or ``with``) starts the loop thread
(``acp-client-loop``); :meth:`~SyncAcpClient.close` (or leaving the ``with`` block) closes the
client, stops the loop and joins the thread. Both are idempotent and safe from any thread. Calling a
blocking method *from the loop thread itself* (from a coroutine given to
:meth:`~SyncAcpClient.submit`, or from an ``async`` handler) would deadlock, so it raises
:class:`LoopThreadError` instead.

**Timeouts.** Every blocking method takes ``timeout`` (seconds; omitted: the client's
``default_timeout``; ``None``: wait as long as it takes). When it expires the call raises
:class:`~acp_client.exceptions.RequestTimeout` and the coroutine behind it is cancelled (a pending
request gets a ``$/cancel_request``; a timed-out :meth:`~SyncAcpClient.prompt` also sends
``session/cancel`` so the agent ends the turn). Any other exception from the client propagates
unchanged (``SessionNotFound``, ``ConnectionLost``, ``CapabilityNotSupported``...). After
:meth:`~SyncAcpClient.close`, calls raise :class:`~acp_client.exceptions.ClientClosed`.
:meth:`~SyncAcpClient.prompt_async` and :meth:`~SyncAcpClient.submit` return a
:class:`concurrent.futures.Future` instead of blocking.

**Callbacks never run on the loop thread.** The ``on_*`` callbacks (same meaning as on
:class:`~acp_client.AcpClient`) are submitted to ``callback_executor`` (default: a private
single-thread executor, ``acp-callbacks-*``, so they run one at a time in order). With an
``event_queue``, every event is also put on it as a :class:`SyncEvent`, for an editor that polls:

=====================  =================================================================
``SyncEvent.kind``     ``SyncEvent.payload``
=====================  =================================================================
``STATE``              :class:`~acp_client.state.ConnectionState` (``on_state_change``)
``UPDATE``             :class:`~acp_client.client.UpdateEvent` (``on_update``)
``RESUME``             :class:`~acp_client.state.RecoveryOutcome` (``on_resume``)
``REPLAY``             :class:`~acp_client.state.RecoveryOutcome` (``on_replay``)
``NEW_SESSION``        :class:`~acp_client.state.RecoveryOutcome` (``on_new_session``)
``RECOVERY_FAILED``    :class:`~acp_client.state.RecoveryOutcome` (``on_recovery_failed``)
``TURN_INTERRUPTED``   :class:`~acp_client.state.TurnInterrupted` (``on_turn_interrupted``)
``PERMISSION``         :class:`PermissionRequest`: answer it from any thread
``PROTOCOL_ERROR``     :class:`~acp_client.exceptions.AcpError` (``on_protocol_error``)
``NOTIFICATION``       ``(method, params)`` of another notification (``on_notification``)
=====================  =================================================================

Use an unbounded queue: an event that does not fit is dropped and logged as an error.

**Questions from the agent.** Callbacks whose answer the client waits for run on the executor too,
and the loop task waiting for them (not the loop) gives up after ``answer_timeout`` seconds:

* ``handlers=ClientHandlers(permission=fn)`` with a plain function: ``fn(request)`` returns the
  outcome; no answer in time means ``cancelled``. Without a permission handler but with an
  ``event_queue``, each request is posted as a ``PERMISSION`` event whose :class:`PermissionRequest`
  the host answers (:meth:`~PermissionRequest.allow`, :meth:`~PermissionRequest.reject`,
  :meth:`~PermissionRequest.select`, :meth:`~PermissionRequest.cancel`) from its own thread; no
  answer in time means ``cancelled`` too. With neither, the answer is ``cancelled`` at once.
* a plain-function ``handlers.elicitation``: its answer, or ``cancel`` after the timeout.
* ``decide_recovery``: its path, or the proposed path after the timeout.
* ``refresh_credentials``: waited for up to the timeout.

Coroutine handlers (``async def``, and the terminal and extension handlers) run on the loop thread,
as with :class:`~acp_client.AcpClient`; they must not block or call this facade's blocking methods.
Do not block inside a callback either: with the default executor, the next callbacks (and answers)
wait for it. A host blocked in :meth:`~SyncAcpClient.prompt` cannot poll its queue, so answer
permissions from a callback or use :meth:`~SyncAcpClient.prompt_async`.

:class:`EventLoopThread` is the loop-in-a-thread underneath, usable on its own to run other asyncio
code (a :class:`~acp_client.testing.ReferenceServer`, say) from synchronous code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import enum
import inspect
import logging
import queue
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import attrs

from ._connection import DEFAULT_TIMEOUT, _Default
from .client import AcpClient, PromptResult, SessionHandle, SessionPage, UpdateEvent
from .exceptions import AcpError, ClientClosed, ConfigurationError, LoopThreadError, RequestTimeout
from .handlers import ClientHandlers
from .state import ConnectionState, RecoveryContext, RecoveryOutcome, State, TurnInterrupted
from .transcript import Transcript
from .transports.base import Connector
from .types import (
    CancelledPermissionOutcome,
    ContentBlock,
    CreateElicitationRequest,
    CreateElicitationResponse,
    McpServer,
    PermissionOption,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
    Session,
)

__all__ = [
    "EventKind",
    "EventLoopThread",
    "LoopThreadError",
    "PermissionRequest",
    "SyncAcpClient",
    "SyncEvent",
    "SyncSessionHandle",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

PermissionOutcome = SelectedPermissionOutcome | CancelledPermissionOutcome
Timeout = float | None | _Default

#: How much longer than its timeout a blocking call waits for the loop to report the expiry
#: itself, before giving up on a loop that does not answer at all.
_GRACE = 5.0
#: How long a timed-out prompt waits for its ``session/cancel`` to be sent.
_CANCEL_SEND_TIMEOUT = 1.0
#: How long :meth:`EventLoopThread.stop` waits for the thread to end.
_JOIN_TIMEOUT = 10.0


# -- the loop in a thread -----------------------------------------------------------------------------


async def _bounded(
    awaitable: Awaitable[T],
    timeout: float | None,
    method: str,
    on_timeout: Callable[[], Awaitable[Any]] | None = None,
) -> T:
    """Await ``awaitable``; after ``timeout`` seconds cancel it and raise ``RequestTimeout``."""
    if timeout is None:
        return await awaitable
    task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
        if task.cancelled():
            if on_timeout is not None:
                await on_timeout()
            raise RequestTimeout(method, timeout)
    return task.result()


def _close_awaitable(awaitable: Awaitable[Any]) -> None:
    if inspect.iscoroutine(awaitable):
        awaitable.close()


class EventLoopThread:
    """An asyncio event loop running in a daemon thread of its own.

    ::

        with EventLoopThread(name="agent") as loop:
            server = loop.run(start_server(), timeout=10)
            future = loop.submit(server.serve_forever())     # a concurrent.futures.Future

    Args:
        name: The thread's name.
    """

    def __init__(self, *, name: str = "acp-client-loop") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._stopped = False
        self._outstanding: set[concurrent.futures.Future[Any]] = set()

    def __repr__(self) -> str:
        return f"<EventLoopThread {self.name} running={self.running}>"

    def __enter__(self) -> EventLoopThread:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def thread(self) -> threading.Thread | None:
        """The loop's thread (``None`` before :meth:`start`)."""
        return self._thread

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop (``None`` before :meth:`start`). Touch it only from its own thread or
        through ``call_soon_threadsafe``."""
        return self._loop

    @property
    def running(self) -> bool:
        """Whether the loop is running and accepts work."""
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._stopped

    def in_loop_thread(self) -> bool:
        """Whether the caller runs on the loop's thread."""
        thread = self._thread
        return thread is not None and threading.get_ident() == thread.ident

    def start(self) -> None:
        """Start the thread and its loop (idempotent).

        Raises:
            ClientClosed: The loop was stopped already (a stopped loop does not restart).
        """
        with self._lock:
            if self._stopped:
                raise ClientClosed(f"the event loop thread {self.name!r} was stopped")
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
                self._thread.start()
        self._ready.wait()  # a caller racing the first one waits for the loop too

    def stop(self, *, join_timeout: float | None = _JOIN_TIMEOUT) -> None:
        """Cancel every task still on the loop, stop it, and join the thread (idempotent).

        Futures returned by :meth:`submit` that are still pending end cancelled; blocking
        :meth:`run` calls raise :class:`~acp_client.exceptions.ClientClosed`.

        Raises:
            LoopThreadError: Called from the loop thread (it cannot join itself).
        """
        if self.in_loop_thread():
            raise LoopThreadError("EventLoopThread.stop() was called from its own loop thread")
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is None:
            return
        self._ready.wait()  # a start() in progress: its loop exists once ready (else it would never stop)
        loop = self._loop
        assert loop is not None
        with contextlib.suppress(RuntimeError):  # already closed
            loop.call_soon_threadsafe(loop.stop)
        thread.join(join_timeout)
        if thread.is_alive():
            logger.warning("event loop thread %r did not end within %ss", self.name, join_timeout)
        with self._lock:
            outstanding = list(self._outstanding)
        for future in outstanding:
            future.cancel()

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            try:
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            except Exception:
                logger.exception("event loop thread %r did not shut down cleanly", self.name)
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def submit(
        self, awaitable: Awaitable[T], *, timeout: float | None = None, method: str = "call"
    ) -> concurrent.futures.Future[T]:
        """Schedule ``awaitable`` on the loop from any thread (the loop thread included).

        Args:
            awaitable: A coroutine (or other awaitable) to run on the loop.
            timeout: Cancel it after this many seconds; the future then fails with
                :class:`~acp_client.exceptions.RequestTimeout` (``None``: no limit).
            method: The name a timeout reports.

        Returns:
            A :class:`concurrent.futures.Future`; cancelling it cancels the work on the loop.

        Raises:
            ClientClosed: The loop is not running.
        """
        loop = self._loop
        if loop is None or not self.running:
            _close_awaitable(awaitable)
            raise ClientClosed(f"the event loop thread {self.name!r} is not running")
        wrapper = _bounded(awaitable, timeout, method)
        try:
            future = asyncio.run_coroutine_threadsafe(wrapper, loop)
        except RuntimeError as exc:  # closed between the check and the call
            wrapper.close()
            _close_awaitable(awaitable)
            raise ClientClosed(f"the event loop thread {self.name!r} is not running") from exc
        with self._lock:
            self._outstanding.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._outstanding.discard(future)

    def run(self, awaitable: Awaitable[T], *, timeout: float | None = None, method: str = "call") -> T:
        """Run ``awaitable`` on the loop and block until it ends.

        Args:
            awaitable: A coroutine (or other awaitable).
            timeout: Seconds to wait (``None``: as long as it takes).
            method: The name a timeout reports.

        Returns:
            What the awaitable returned.

        Raises:
            RequestTimeout: It did not end within ``timeout`` (it was cancelled).
            LoopThreadError: Called from the loop thread itself.
            ClientClosed: The loop is not running, or was stopped meanwhile.
            Exception: Whatever the awaitable raised, unchanged.
        """
        if self.in_loop_thread():
            _close_awaitable(awaitable)
            raise LoopThreadError(
                f"{method}: a blocking call was made on the event loop thread {self.name!r}; "
                "it would deadlock (await the async API there instead)"
            )
        future = self.submit(awaitable, timeout=timeout, method=method)
        return self.wait(future, timeout=timeout, method=method)

    def wait(self, future: concurrent.futures.Future[T], *, timeout: float | None = None, method: str = "call") -> T:
        """Block until a future from :meth:`submit` ends (``timeout``: as given to :meth:`submit`;
        the wait allows the loop a few seconds more to report the expiry itself).

        Raises:
            RequestTimeout: Still not done after that (the future is cancelled).
            LoopThreadError: Called from the loop thread itself.
            ClientClosed: The loop was stopped before the work ended.
        """
        if self.in_loop_thread() and not future.done():
            raise LoopThreadError(f"{method}: waiting on the event loop thread {self.name!r} would deadlock")
        limit = None if timeout is None else timeout + _GRACE
        try:
            done, _ = concurrent.futures.wait([future], timeout=limit)
        except BaseException:  # KeyboardInterrupt in the host: do not leave the work running
            future.cancel()
            raise
        if not done:
            future.cancel()
            raise RequestTimeout(method, timeout or 0.0)
        if future.cancelled():
            raise ClientClosed(f"{method}: cancelled (the client was closed, or the future was cancelled)")
        return future.result()


# -- events ------------------------------------------------------------------------------------------------


class EventKind(str, enum.Enum):
    """What a :class:`SyncEvent` reports (see the table in :mod:`acp_client.sync`)."""

    STATE = "state"
    UPDATE = "update"
    RESUME = "resume"
    REPLAY = "replay"
    NEW_SESSION = "new_session"
    RECOVERY_FAILED = "recovery_failed"
    TURN_INTERRUPTED = "turn_interrupted"
    PERMISSION = "permission"
    PROTOCOL_ERROR = "protocol_error"
    NOTIFICATION = "notification"


@attrs.frozen
class SyncEvent:
    """One event put on the host's ``event_queue``.

    Attributes:
        kind: What happened.
        payload: The record the matching callback would get (see :mod:`acp_client.sync`).
    """

    kind: EventKind
    payload: Any


def _first_option(options: Iterable[PermissionOption], prefix: str) -> PermissionOption | None:
    for option in options:
        if option.kind.startswith(prefix):
            return option
    return None


@attrs.frozen(eq=False)
class PermissionRequest:
    """A ``session/request_permission`` waiting for the host's answer (a ``PERMISSION`` event).

    Answer it once, from any thread. Each answering method returns ``True`` when its answer was
    taken, ``False`` when the request was already answered, timed out (then it was answered
    ``cancelled``), or withdrawn (the turn was cancelled, the client closed).

    Attributes:
        request: The agent's request.
    """

    request: RequestPermissionRequest
    _answer: concurrent.futures.Future[PermissionOutcome] = attrs.field(repr=False)

    @property
    def session_id(self) -> str:
        return self.request.session_id

    @property
    def options(self) -> tuple[PermissionOption, ...]:
        """The choices offered."""
        return self.request.options

    @property
    def title(self) -> str | None:
        """What is asked: the v2 ``title``, or the v1 tool call's title."""
        if self.request.title is not None:
            return self.request.title
        tool_call = self.request.tool_call
        return tool_call.title if tool_call is not None else None

    @property
    def pending(self) -> bool:
        """Whether an answer is still awaited."""
        return not self._answer.done()

    @property
    def outcome(self) -> PermissionOutcome | None:
        """The answer given by the host, once given (``None`` while pending or when withdrawn)."""
        if self._answer.done() and not self._answer.cancelled():
            return self._answer.result()
        return None

    def select(self, option_id: str) -> bool:
        """Answer with the option ``option_id``.

        Raises:
            ConfigurationError: ``option_id`` is not one of :attr:`options`.
        """
        if all(option.option_id != option_id for option in self.options):
            offered = ", ".join(option.option_id for option in self.options)
            raise ConfigurationError(f"{option_id!r} is not an offered option (offered: {offered})")
        return self._settle(SelectedPermissionOutcome(option_id=option_id))

    def allow(self) -> bool:
        """Answer with the first ``allow_*`` option (``cancelled`` when none is offered)."""
        option = _first_option(self.options, "allow")
        return self._settle(
            SelectedPermissionOutcome(option_id=option.option_id) if option else CancelledPermissionOutcome()
        )

    def reject(self) -> bool:
        """Answer with the first ``reject_*`` option (``cancelled`` when none is offered)."""
        option = _first_option(self.options, "reject")
        return self._settle(
            SelectedPermissionOutcome(option_id=option.option_id) if option else CancelledPermissionOutcome()
        )

    def cancel(self) -> bool:
        """Answer ``cancelled``."""
        return self._settle(CancelledPermissionOutcome())

    def _settle(self, outcome: PermissionOutcome) -> bool:
        try:
            self._answer.set_result(outcome)
        except concurrent.futures.InvalidStateError:
            return False
        return True


# -- the facade ----------------------------------------------------------------------------------------------


class _Phase(enum.Enum):
    NEW = "new"
    CONNECTING = "connecting"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"


def _log_callback_failure(future: concurrent.futures.Future[Any]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        logger.error("app callback raised", exc_info=error)


class SyncAcpClient:
    """A blocking, thread-safe :class:`~acp_client.AcpClient` for hosts that own their thread.

    See :mod:`acp_client.sync` for the threading, timeout and callback rules.

    Args:
        endpoint: As for :class:`~acp_client.AcpClient` (a URL, ``stdio:...``, or a connector).
        callback_executor: Where callbacks run (``submit`` is called from the loop thread).
            Default: a private single-thread executor, shut down by :meth:`close`.
        event_queue: Also put every event on this queue as a :class:`SyncEvent`; permission
            requests go there when there is no permission handler.
        default_timeout: Seconds a blocking call waits when it is given no ``timeout``
            (``None``: no limit).
        answer_timeout: Seconds the client waits for the host to answer a permission request,
            an elicitation, ``decide_recovery`` or ``refresh_credentials`` (``None``: no limit).
        handlers: As for :class:`~acp_client.AcpClient`; plain-function ``permission`` and
            ``elicitation`` handlers run on the callback executor.
        on_update, on_state_change, on_resume, on_replay, on_new_session, on_recovery_failed,
        on_turn_interrupted, on_protocol_error, on_notification, decide_recovery,
        refresh_credentials: As for :class:`~acp_client.AcpClient`, but called on the callback
            executor (plain functions; a returned awaitable is not awaited).
        client_kwargs: Everything else :class:`~acp_client.AcpClient` takes (``retry``,
            ``protocol_version``, ``headers``, ``tls``, ``request_timeout``...).

    Raises:
        ConfigurationError: An invalid setting (from :class:`~acp_client.AcpClient`).
    """

    def __init__(
        self,
        endpoint: str | Connector,
        *,
        callback_executor: concurrent.futures.Executor | None = None,
        event_queue: queue.Queue[SyncEvent] | None = None,
        default_timeout: float | None = 30.0,
        answer_timeout: float | None = 60.0,
        handlers: ClientHandlers | None = None,
        on_update: Callable[[UpdateEvent], Any] | None = None,
        on_state_change: Callable[[ConnectionState], Any] | None = None,
        on_resume: Callable[[RecoveryOutcome], Any] | None = None,
        on_replay: Callable[[RecoveryOutcome], Any] | None = None,
        on_new_session: Callable[[RecoveryOutcome], Any] | None = None,
        on_recovery_failed: Callable[[RecoveryOutcome], Any] | None = None,
        on_turn_interrupted: Callable[[TurnInterrupted], Any] | None = None,
        on_protocol_error: Callable[[AcpError], Any] | None = None,
        on_notification: Callable[[str, Any], Any] | None = None,
        decide_recovery: Callable[[RecoveryContext], Any] | None = None,
        refresh_credentials: Callable[[], Any] | None = None,
        **client_kwargs: Any,
    ) -> None:
        for name, value in (("default_timeout", default_timeout), ("answer_timeout", answer_timeout)):
            if value is not None and value <= 0:
                raise ConfigurationError(f"{name} must be positive (or None)")
        self.default_timeout = default_timeout
        self.answer_timeout = answer_timeout
        self._own_executor = callback_executor is None
        self._executor: concurrent.futures.Executor | None = callback_executor
        self._callback_threads: set[int] = set()
        self._queue = event_queue
        #: Events that did not fit in ``event_queue`` (each was logged).
        self.dropped_events = 0
        self._loop_thread = EventLoopThread(name="acp-client-loop")
        self._lock = threading.Lock()
        self._phase = _Phase.NEW
        self._connected = threading.Event()
        self._closed = threading.Event()
        self._background: set[asyncio.Task[Any]] = set()

        handlers = handlers or ClientHandlers()
        permission = handlers.permission
        self._permission_fn: Callable[[RequestPermissionRequest], Any] | None = None
        if permission is None or not inspect.iscoroutinefunction(permission):
            self._permission_fn = permission
            handlers = attrs.evolve(handlers, permission=self._ask_permission)
        elicitation = handlers.elicitation
        self._elicitation_fn: Callable[[CreateElicitationRequest], Any] | None = None
        if elicitation is not None and not inspect.iscoroutinefunction(elicitation):
            self._elicitation_fn = elicitation
            handlers = attrs.evolve(handlers, elicitation=self._ask_elicitation)

        self._decide_fn = decide_recovery
        self._refresh_fn = refresh_credentials
        self._client = AcpClient(
            endpoint,
            handlers=handlers,
            on_update=self._relay(EventKind.UPDATE, on_update),
            on_state_change=self._relay(EventKind.STATE, on_state_change),
            on_resume=self._relay(EventKind.RESUME, on_resume),
            on_replay=self._relay(EventKind.REPLAY, on_replay),
            on_new_session=self._relay(EventKind.NEW_SESSION, on_new_session),
            on_recovery_failed=self._relay(EventKind.RECOVERY_FAILED, on_recovery_failed),
            on_turn_interrupted=self._relay(EventKind.TURN_INTERRUPTED, on_turn_interrupted),
            on_protocol_error=self._relay(EventKind.PROTOCOL_ERROR, on_protocol_error),
            on_notification=self._relay_notification(on_notification),
            decide_recovery=self._decide if decide_recovery is not None else None,
            refresh_credentials=self._refresh if refresh_credentials is not None else None,
            **client_kwargs,
        )

    def __repr__(self) -> str:
        return f"<SyncAcpClient {self._phase.value} {self.state}>"

    # -- lifecycle ----------------------------------------------------------------------------------------

    def __enter__(self) -> SyncAcpClient:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def connect(self, *, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
        """Start the loop thread, connect and initialize. A second call waits for the first.

        Raises:
            ClientClosed: The client was closed.
            RequestTimeout: Not connected within ``timeout`` (the client is then closed).
            LoopThreadError: Called from the loop thread.
            AcpError: What :meth:`AcpClient.connect` raised (the client is then closed).
        """
        self._check_thread("connect")
        with self._lock:
            phase = self._phase
            if phase is _Phase.NEW:
                self._phase = _Phase.CONNECTING
        if phase in (_Phase.CLOSING, _Phase.CLOSED):
            raise ClientClosed("the client is closed")
        if phase is not _Phase.NEW:
            self._connected.wait()
            if self._phase is not _Phase.RUNNING:
                raise ClientClosed("the client is closed (connecting failed)")
            return
        try:
            if self._own_executor:
                self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="acp-callbacks")
            self._loop_thread.start()
            self._loop_thread.run(self._client.connect(), timeout=self._timeout(timeout), method="connect")
        except BaseException:
            self._connected.set()
            self.close()
            raise
        with self._lock:
            if self._phase is _Phase.CONNECTING:
                self._phase = _Phase.RUNNING
        self._connected.set()

    def close(self, *, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
        """Close the client, stop the loop and join its thread (idempotent, any thread but the
        loop's). Pending calls fail (``ConnectionLost`` / ``ClientClosed``); pending permission
        requests are withdrawn. Callbacks already submitted to the default executor run first.

        Raises:
            LoopThreadError: Called from the loop thread.
        """
        self._check_thread("close")
        with self._lock:
            phase = self._phase
            if phase in (_Phase.CLOSING, _Phase.CLOSED):
                first = False
            else:
                first = True
                self._phase = _Phase.CLOSING
        if not first:
            self._closed.wait()
            return
        try:
            if self._loop_thread.running:
                try:
                    self._loop_thread.run(self._client.aclose(), timeout=self._timeout(timeout), method="close")
                except AcpError as exc:
                    logger.warning("closing the client did not finish cleanly: %s", exc)
            self._loop_thread.stop()
            executor = self._executor
            if self._own_executor and executor is not None:
                # A callback may be the one closing us: it cannot wait for its own thread.
                executor.shutdown(wait=threading.get_ident() not in self._callback_threads)
        finally:
            with self._lock:
                self._phase = _Phase.CLOSED
            self._connected.set()
            self._closed.set()

    # -- properties -------------------------------------------------------------------------------------------

    @property
    def client(self) -> AcpClient:
        """The :class:`~acp_client.AcpClient` underneath: use it only on the loop thread (in a
        coroutine given to :meth:`submit`)."""
        return self._client

    @property
    def thread(self) -> threading.Thread | None:
        """The loop thread (``None`` before :meth:`connect`)."""
        return self._loop_thread.thread

    @property
    def state(self) -> ConnectionState:
        """The current connection state (readable from any thread, without blocking)."""
        return self._client.state

    @property
    def protocol_version(self) -> int:
        """The negotiated ACP version (the proposed one before connecting)."""
        return self._client.protocol_version

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has finished."""
        return self._closed.is_set()

    def notify_network_available(self) -> None:
        """Skip the current reconnect backoff (never blocks; callable from any thread)."""
        loop = self._loop_thread.loop
        if loop is None or not self._loop_thread.running:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._client.notify_network_available)

    # -- running work ----------------------------------------------------------------------------------------

    def submit(self, coro: Awaitable[T], *, timeout: float | None = None) -> concurrent.futures.Future[T]:
        """Run any coroutine on the client's loop (e.g. ``client.submit(client.client.set_mode(...))``).

        Returns:
            A future; cancelling it cancels the coroutine.

        Raises:
            ClientClosed: The client is not connected, or is closed.
        """
        self._require_running(coro)
        return self._loop_thread.submit(coro, timeout=timeout, method="submit")

    def run(self, coro: Awaitable[T], *, timeout: Timeout = DEFAULT_TIMEOUT) -> T:
        """Run any coroutine on the client's loop and block until it ends.

        Raises:
            RequestTimeout: It did not end within ``timeout`` (it was cancelled).
            LoopThreadError: Called from the loop thread.
            ClientClosed: The client is not connected, or is closed.
        """
        return self._run("run", coro, timeout)

    def _timeout(self, timeout: Timeout) -> float | None:
        return self.default_timeout if isinstance(timeout, _Default) else timeout

    def _check_thread(self, method: str) -> None:
        if self._loop_thread.in_loop_thread():
            raise LoopThreadError(
                f"SyncAcpClient.{method}() was called on the client's own event loop thread; it would "
                "deadlock (await SyncAcpClient.client there instead)"
            )

    def _require_running(self, awaitable: Awaitable[Any] | None = None) -> None:
        if self._phase is not _Phase.RUNNING:
            if awaitable is not None:
                _close_awaitable(awaitable)
            detail = "call connect() first" if self._phase in (_Phase.NEW, _Phase.CONNECTING) else "it was closed"
            raise ClientClosed(f"the client is not connected: {detail}")

    def _run(self, method: str, awaitable: Awaitable[T], timeout: Timeout, *, bounded: bool = False) -> T:
        """Run on the loop and wait. ``bounded``: the awaitable enforces ``timeout`` itself (the
        wait here is only the safety net)."""
        try:
            self._check_thread(method)
            self._require_running()
        except BaseException:
            _close_awaitable(awaitable)
            raise
        limit = self._timeout(timeout)
        if bounded:
            future = self._loop_thread.submit(awaitable, method=method)
            return self._loop_thread.wait(future, timeout=limit, method=method)
        return self._loop_thread.run(awaitable, timeout=limit, method=method)

    # -- sessions ---------------------------------------------------------------------------------------------

    def new_session(
        self,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        additional_directories: Sequence[str | Path] = (),
        timeout: Timeout = DEFAULT_TIMEOUT,
    ) -> Session:
        """``session/new`` (see :meth:`AcpClient.new_session`)."""
        coro = self._client.new_session(cwd, mcp_servers=mcp_servers, additional_directories=additional_directories)
        return self._run("session/new", coro, timeout)

    def load_session(
        self,
        session_id: str,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        timeout: Timeout = DEFAULT_TIMEOUT,
    ) -> Session:
        """``session/load`` (v1; see :meth:`AcpClient.load_session`)."""
        return self._run("session/load", self._client.load_session(session_id, cwd, mcp_servers=mcp_servers), timeout)

    def resume_session(
        self,
        session_id: str,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        replay: bool = False,
        timeout: Timeout = DEFAULT_TIMEOUT,
    ) -> Session:
        """``session/resume`` (see :meth:`AcpClient.resume_session`)."""
        coro = self._client.resume_session(session_id, cwd, mcp_servers=mcp_servers, replay=replay)
        return self._run("session/resume", coro, timeout)

    def list_sessions(
        self, *, cwd: str | Path | None = None, cursor: str | None = None, timeout: Timeout = DEFAULT_TIMEOUT
    ) -> SessionPage:
        """``session/list``: one page (see :meth:`AcpClient.list_sessions`)."""
        return self._run("session/list", self._client.list_sessions(cwd=cwd, cursor=cursor), timeout)

    def session_status(self, session_id: str, *, timeout: Timeout = DEFAULT_TIMEOUT) -> Session:
        """``session/status`` (see :meth:`AcpClient.session_status`)."""
        return self._run("session/status", self._client.session_status(session_id), timeout)

    def close_session(self, session_id: str, *, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
        """``session/close`` (see :meth:`AcpClient.close_session`)."""
        self._run("session/close", self._client.close_session(session_id), timeout)

    def session(self, session_id: str) -> SyncSessionHandle:
        """A blocking handle on a session this client opened (by its current or an earlier id).

        Raises:
            SessionNotFound: The client does not track this session.
        """
        handle = self._run("session", self._get_handle(session_id), DEFAULT_TIMEOUT)
        return SyncSessionHandle(self, handle)

    async def _get_handle(self, session_id: str) -> SessionHandle:
        return self._client.session(session_id)

    # -- turns ------------------------------------------------------------------------------------------------

    def prompt(
        self,
        session_id: str,
        prompt: str | ContentBlock | Iterable[ContentBlock],
        *,
        timeout: Timeout = DEFAULT_TIMEOUT,
    ) -> PromptResult:
        """``session/prompt``: run one turn and block until it ends.

        Raises:
            RequestTimeout: The turn did not end within ``timeout``; the wait was cancelled and
                ``session/cancel`` sent.
            TurnInProgress / ConnectionLost / RpcError: See :meth:`AcpClient.prompt`.
        """
        limit = self._timeout(timeout)
        return self._run("session/prompt", self._prompt(session_id, prompt, limit), limit, bounded=True)

    def prompt_async(
        self,
        session_id: str,
        prompt: str | ContentBlock | Iterable[ContentBlock],
        *,
        timeout: Timeout = None,
    ) -> concurrent.futures.Future[PromptResult]:
        """Start a turn without blocking; the future ends with the :class:`PromptResult` or
        the error :meth:`prompt` would raise. ``timeout`` defaults to none here.

        Raises:
            ClientClosed: The client is not connected, or is closed.
        """
        coro = self._prompt(session_id, prompt, self._timeout(timeout))
        self._require_running(coro)
        return self._loop_thread.submit(coro, method="session/prompt")

    async def _prompt(
        self, session_id: str, prompt: str | ContentBlock | Iterable[ContentBlock], timeout: float | None
    ) -> PromptResult:
        async def cancel_turn() -> None:
            send = asyncio.ensure_future(self._client.cancel(session_id))
            self._background.add(send)
            send.add_done_callback(self._background_done)
            await asyncio.wait({send}, timeout=_CANCEL_SEND_TIMEOUT)

        return await _bounded(self._client.prompt(session_id, prompt), timeout, "session/prompt", cancel_turn)

    def _background_done(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.info("session/cancel after a prompt timeout failed: %s", task.exception())

    def cancel(self, session_id: str, *, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
        """``session/cancel``: ask the agent to end the running turn (see :meth:`AcpClient.cancel`)."""
        self._run("session/cancel", self._client.cancel(session_id), timeout)

    def wait_for_state(self, *states: State, timeout: Timeout = DEFAULT_TIMEOUT) -> ConnectionState:
        """Block until the connection state is one of ``states`` (returns it at once if it is).

        Raises:
            RequestTimeout: Not reached within ``timeout``.
            ClientClosed: The client closed or failed first (unless that was asked for).
        """
        wanted = frozenset(states)
        if not wanted:
            raise ConfigurationError("wait_for_state needs at least one state")
        if self.state.state in wanted:
            return self.state
        return self._run("wait_for_state", self._wait_state(wanted), timeout)

    async def _wait_state(self, wanted: frozenset[State]) -> ConnectionState:
        current = self._client.state
        if current.state in wanted:
            return current
        async for state in self._client.state_changes():
            if state.state in wanted:
                return state
            if state.is_terminal:
                break
        raise ClientClosed(f"the client is {self._client.state} (waited for {', '.join(s.value for s in wanted)})")

    # -- callbacks: loop thread → host --------------------------------------------------------------------

    def _to_host(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any] | None:
        executor = self._executor
        if executor is None:
            return None
        try:
            return executor.submit(self._in_host, fn, *args)
        except RuntimeError as exc:  # the host's executor is shut down
            logger.error("callback %r not delivered: %s", fn, exc)
            return None

    def _in_host(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._callback_threads.add(threading.get_ident())
        return fn(*args)

    def _post(self, event: SyncEvent) -> bool:
        if self._queue is None:
            return False
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped_events += 1
            logger.error("event queue is full: %s event dropped (use an unbounded queue)", event.kind.value)
            return False
        return True

    def _deliver(self, kind: EventKind, callback: Callable[..., Any] | None, *args: Any) -> None:
        if callback is not None:
            future = self._to_host(callback, *args)
            if future is not None:
                future.add_done_callback(_log_callback_failure)
        if self._queue is not None:
            self._post(SyncEvent(kind, args[0] if len(args) == 1 else args))

    def _relay(self, kind: EventKind, callback: Callable[[Any], Any] | None) -> Callable[[Any], None]:
        def relay(value: Any) -> None:
            self._deliver(kind, callback, value)

        return relay

    def _relay_notification(self, callback: Callable[[str, Any], Any] | None) -> Callable[[str, Any], None]:
        def relay(method: str, params: Any) -> None:
            self._deliver(EventKind.NOTIFICATION, callback, method, params)

        return relay

    async def _ask_host(self, what: str, fn: Callable[..., Any], default: T, *args: Any) -> Any:
        """Run ``fn(*args)`` on the executor and wait for its result (``default`` on timeout or
        failure). Only this loop task waits; the loop keeps running."""
        future = self._to_host(fn, *args)
        if future is None:
            return default
        waiter = asyncio.wrap_future(future)
        try:
            done, _ = await asyncio.wait({waiter}, timeout=self.answer_timeout)
        except asyncio.CancelledError:
            waiter.cancel()
            raise
        if not done:
            waiter.cancel()
            logger.warning("%s did not answer within %ss: using the default", what, self.answer_timeout)
            return default
        if waiter.exception() is not None:
            logger.error("%s raised: using the default", what, exc_info=waiter.exception())
            return default
        return waiter.result()

    async def _decide(self, context: RecoveryContext) -> Any:
        assert self._decide_fn is not None
        return await self._ask_host("decide_recovery", self._decide_fn, None, context)

    async def _refresh(self) -> None:
        assert self._refresh_fn is not None
        await self._ask_host("refresh_credentials", self._refresh_fn, None)

    async def _ask_elicitation(self, request: CreateElicitationRequest) -> CreateElicitationResponse:
        cancel = CreateElicitationResponse(action="cancel")
        assert self._elicitation_fn is not None
        answer = await self._ask_host("the elicitation handler", self._elicitation_fn, cancel, request)
        if not isinstance(answer, CreateElicitationResponse):
            logger.error("the elicitation handler returned %r, not a CreateElicitationResponse", answer)
            return cancel
        return answer

    async def _ask_permission(self, request: RequestPermissionRequest) -> PermissionOutcome:
        cancelled = CancelledPermissionOutcome()
        fn = self._permission_fn
        if fn is not None:
            chosen = await self._ask_host("the permission handler", fn, cancelled, request)
            if not isinstance(chosen, SelectedPermissionOutcome | CancelledPermissionOutcome):
                logger.error("the permission handler returned %r, not a permission outcome", chosen)
                return cancelled
            return chosen
        answer: concurrent.futures.Future[PermissionOutcome] = concurrent.futures.Future()
        if not self._post(SyncEvent(EventKind.PERMISSION, PermissionRequest(request, answer))):
            return cancelled
        waiter = asyncio.wrap_future(answer)
        try:
            await asyncio.wait({waiter}, timeout=self.answer_timeout)
        finally:
            waiter.cancel()  # withdraws the request: later answers are refused
            answer.cancel()
        # Read ``answer`` itself: the host may have answered (and been told so) after the wait
        # ended but before the withdrawal, without the waiter having seen it yet.
        if answer.cancelled():
            logger.info("permission request not answered within %ss: cancelled", self.answer_timeout)
            return cancelled
        return answer.result()


class SyncSessionHandle:
    """A blocking handle on one session (see :class:`~acp_client.client.SessionHandle`). It follows
    the session across recoveries: after a new-session recovery :attr:`session_id` is the new id."""

    def __init__(self, owner: SyncAcpClient, handle: SessionHandle) -> None:
        self._owner = owner
        self._handle = handle

    def __repr__(self) -> str:
        return f"<SyncSessionHandle {self.session_id}>"

    @property
    def session_id(self) -> str:
        """The current session id."""
        return self._handle.session_id

    @property
    def record(self) -> Session:
        """The latest :class:`~acp_client.types.Session` record."""
        return self._handle.record

    @property
    def abandoned(self) -> bool:
        """Whether recovery gave up on this session."""
        return self._handle.abandoned

    @property
    def turn_running(self) -> bool:
        return self._handle.turn_running

    @property
    def transcript(self) -> Transcript:
        """A snapshot (a copy) of the conversation so far, taken on the loop thread.

        Raises:
            LoopThreadError: Read on the loop thread (use :attr:`SessionHandle.transcript` there).
            ClientClosed: The client is not connected, or is closed.
        """
        return self._owner._run("transcript", self._snapshot(), DEFAULT_TIMEOUT)

    async def _snapshot(self) -> Transcript:
        return copy.deepcopy(self._handle.transcript)

    def prompt(
        self, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: Timeout = DEFAULT_TIMEOUT
    ) -> PromptResult:
        """Run one turn and block until it ends (see :meth:`SyncAcpClient.prompt`)."""
        return self._owner.prompt(self.session_id, prompt, timeout=timeout)

    def prompt_async(
        self, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: Timeout = None
    ) -> concurrent.futures.Future[PromptResult]:
        """Start a turn without blocking (see :meth:`SyncAcpClient.prompt_async`)."""
        return self._owner.prompt_async(self.session_id, prompt, timeout=timeout)

    def cancel(self, *, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
        """Ask the agent to end the running turn."""
        self._owner._run("session/cancel", self._handle.cancel(), timeout)

    def status(self, *, timeout: Timeout = DEFAULT_TIMEOUT) -> Session:
        """Probe ``session/status``."""
        return self._owner._run("session/status", self._handle.status(), timeout)

    def close(self, *, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
        """Close the session on the agent and stop tracking it."""
        self._owner._run("session/close", self._handle.close(), timeout)
