"""The bridge from the loop thread to the host: callbacks run on the host's executor, events go
on its queue, and the agent's questions wait (on the loop, never blocking it) for the host."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from .._util._logging import get_logger
from ..clock import Clock, SystemClock, move_on_after
from ..config import Callbacks
from ..handlers import ClientHandlers
from ..types import (
    CancelledPermissionOutcome,
    CreateElicitationRequest,
    CreateElicitationResponse,
    PermissionOutcome,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
)
from ._events import EVENT_CLASSES, EventKind, PermissionEvent, PermissionRequest, SyncEvent

logger = get_logger("acp_client.sync")

T = TypeVar("T")

#: Which event each callback also posts on the host's queue: ``on_<kind>`` (the state's is
#: ``on_state_change``); a permission request is a question, not a callback.
_EVENTS = {
    "on_state_change" if kind is EventKind.STATE else f"on_{kind.value}": kind
    for kind in EventKind
    if kind is not EventKind.PERMISSION
}


def _log_callback_failure(future: concurrent.futures.Future[Any]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        logger.error("app callback raised", exc_info=error)


class HostBridge:
    """Runs the host's callbacks on its executor (``None``: a private single-thread one made by
    :meth:`start`) and posts events on its queue; a question waits ``answer_timeout`` on ``clock``."""

    def __init__(
        self,
        callbacks: Callbacks,
        *,
        executor: concurrent.futures.Executor | None,
        event_queue: queue.Queue[SyncEvent] | None,
        answer_timeout: float | None,
        clock: Clock | None = None,
    ) -> None:
        self.callbacks = callbacks
        self.clock = clock or SystemClock()
        self.own_executor = executor is None
        self.executor = executor
        self.queue = event_queue
        self.answer_timeout = answer_timeout
        self.dropped_events = 0
        # Marks the threads callbacks ran on (a thread-local, not a set of idents: the OS gives an
        # ended thread's ident to the next thread it starts).
        self._callback_thread = threading.local()
        self._permission_fn: Callable[[RequestPermissionRequest], Any] | None = None
        self._elicitation_fn: Callable[[CreateElicitationRequest], Any] | None = None

    def start(self) -> None:
        if self.own_executor:
            self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="acp-callbacks")

    def shutdown(self) -> None:
        executor = self.executor
        if self.own_executor and executor is not None:
            # A callback may be the one closing us: it cannot wait for its own thread.
            executor.shutdown(wait=not self.on_callback_thread())

    def on_callback_thread(self) -> bool:
        """Whether the caller's thread runs the host's callbacks (one of them may be calling)."""
        return bool(getattr(self._callback_thread, "marked", False))

    def loop_callbacks(self) -> Callbacks:
        """The callbacks for the :class:`~acp_client.AcpClient` on the loop: each relays to the
        host (executor and queue); questions wait for its answer."""
        relays: dict[str, Any] = {name: self._relay(name, kind) for name, kind in _EVENTS.items()}
        for name in ("decide_recovery", "refresh_credentials", "decide_adoption"):
            question = getattr(self.callbacks, name)
            if question is not None:  # no answer in time: ``None`` (the proposed path; not adopted)
                relays[name] = functools.partial(self._ask_host, name, question, None)
        return Callbacks(**relays)

    def loop_handlers(self, handlers: ClientHandlers) -> ClientHandlers:
        """Plain-function permission / elicitation handlers run on the executor instead."""
        permission = handlers.permission
        if permission is None or not inspect.iscoroutinefunction(permission):
            self._permission_fn = permission
            handlers = attrs.evolve(handlers, permission=self._ask_permission)
        elicitation = handlers.elicitation
        if elicitation is not None and not inspect.iscoroutinefunction(elicitation):
            self._elicitation_fn = elicitation
            handlers = attrs.evolve(handlers, elicitation=self._ask_elicitation)
        return handlers

    def _to_host(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any] | None:
        executor = self.executor
        if executor is None:
            return None
        try:
            return executor.submit(self._in_host, fn, *args)
        except RuntimeError as exc:  # the host's executor is shut down
            logger.error("callback %r not delivered: %s", fn, exc)
            return None

    def _in_host(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._callback_thread.marked = True
        return fn(*args)

    def post(self, event: SyncEvent) -> bool:
        if self.queue is None:
            return False
        try:
            self.queue.put_nowait(event)
        except queue.Full:
            self.dropped_events += 1
            logger.error("event queue is full: %s event dropped (use an unbounded queue)", event.kind.value)
            return False
        return True

    def _relay(self, name: str, kind: EventKind) -> Callable[..., None]:
        callback: Callable[..., Any] | None = getattr(self.callbacks, name)
        event_class: Callable[[Any], SyncEvent] = EVENT_CLASSES[kind]

        def relay(*args: Any) -> None:
            if callback is not None:
                future = self._to_host(callback, *args)
                if future is not None:
                    future.add_done_callback(_log_callback_failure)
            if self.queue is not None:
                self.post(event_class(args[0] if len(args) == 1 else args))

        return relay

    async def _ask_host(self, what: str, fn: Callable[..., Any], default: T, *args: Any) -> Any:
        """Run ``fn(*args)`` on the executor and wait for its result (``default`` on timeout or
        failure). Only this loop task waits; the loop keeps running."""
        future = self._to_host(fn, *args)
        if future is None:
            return default
        waiter = asyncio.wrap_future(future)
        with move_on_after(self.clock, self.answer_timeout):
            try:
                return await waiter
            except Exception as exc:
                logger.error("%s raised: using the default", what, exc_info=exc)
                return default
        logger.warning("%s did not answer within %ss: using the default", what, self.answer_timeout)
        return default

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
        if not self.post(PermissionEvent(PermissionRequest(request, answer))):
            return cancelled
        waiter = asyncio.wrap_future(answer)
        try:
            with move_on_after(self.clock, self.answer_timeout):
                await asyncio.wait({waiter})
        finally:
            waiter.cancel()  # withdraws the request: later answers are refused
            answer.cancel()
        # Read ``answer`` itself: the host may have answered (and been told so) after the wait
        # ended but before the withdrawal, without the waiter having seen it yet.
        if answer.cancelled():
            logger.info("permission request not answered within %ss: cancelled", self.answer_timeout)
            return cancelled
        return answer.result()
