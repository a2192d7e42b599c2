"""The supervisor: the only place that sleeps and reconnects.

It owns the current :class:`~acp_client._rpc._connection.Connection`, notices when it drops,
reconnects under the :class:`~acp_client.retry.RetryPolicy`, hands the new connection to the
client's recovery routine (it knows nothing of sessions), and only then releases the requests
queued during the outage. If one of its tasks dies of a bug, the client does not hang: the state
goes ``failed`` with that cause, queued requests fail with ``ClientClosed`` and pending ones with
``ConnectionLost`` whose ``cause`` is that error.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from .._rpc._connection import (
    DEFAULT_MAX_INCOMING_REQUESTS,
    Connection,
    NotificationHandler,
    ProtocolErrorHandler,
    RequestHandler,
)
from .._rpc._observe import LinkObserver
from .._util._logging import get_logger
from .._util._tasks import TaskSet
from ..clock import Clock, TimerHandle
from ..config import USE_CLIENT_DEFAULT, QueueOptions
from ..exceptions import (
    AcpError,
    AuthenticationFailed,
    ClientClosed,
    ClientSuspended,
    ConnectionLost,
    TransportClosed,
    TransportError,
)
from ..retry import Attempt, RetryPolicy, reconnect_attempts
from ..state import ConnectionState, State
from ..transports.base import Connector, StreamResumed, TransportInfo
from ._authority import Authority, Guarding
from ._client_state import StateMachine
from ._opening import open_link
from ._queue import OutageQueue, Ticket

logger = get_logger("acp_client.reconnect")

#: The supervisor and connection being recovered, inside the recovery routine and the app callbacks
#: it runs (see :meth:`Supervisor.recovering`).
_RECOVERING_ON: contextvars.ContextVar[tuple[Supervisor, Connection] | None] = contextvars.ContextVar(
    "acp_recovering_on", default=None
)

Initializer = Callable[[Connection, float | None], Awaitable[Any]]
Recoverer = Callable[[Connection, Any], Awaitable[None]]


def _failed(cause: BaseException | None) -> ClientClosed:
    """The error for work the failed client cannot do; ``__cause__`` is what failed it."""
    error = ClientClosed(f"the client failed: {cause}")
    error.__cause__ = cause
    return error


class Supervisor:
    """Keeps one live connection to the agent, reconnecting after drops."""

    def __init__(
        self,
        connector: Connector,
        *,
        initialize: Initializer,
        recover: Recoverer,
        policy: RetryPolicy | None,
        clock: Clock,
        queue: QueueOptions,
        on_state: Callable[[ConnectionState], None],
        on_drop: Callable[[TransportError], None],
        on_fail: Callable[[BaseException], None],
        on_request: RequestHandler,
        on_notification: NotificationHandler,
        on_protocol_error: ProtocolErrorHandler | None = None,
        refresh_credentials: Callable[[], Any] | None = None,
        request_timeout: float | None = None,
        connect_timeout: float | None = None,
        rng: random.Random | None = None,
        max_incoming_requests: int = DEFAULT_MAX_INCOMING_REQUESTS,
        observer: LinkObserver | None = None,
        on_stream_resumed: Callable[[StreamResumed], None] | None = None,
    ) -> None:
        self._connector = connector
        self._on_stream_resumed = on_stream_resumed
        #: The link's telemetry, if any.
        self.observer = observer
        self._drop_error: BaseException | None = None
        self._max_incoming_requests = max_incoming_requests
        self._initialize = initialize
        self._recover = recover
        self._policy = policy
        self._clock = clock
        self._on_drop = on_drop
        self._on_fail = on_fail
        self._on_request = on_request
        self._on_notification = on_notification
        self._on_protocol_error = on_protocol_error
        self._refresh_credentials = refresh_credentials
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._rng = rng
        self._machine = StateMachine(on_state)
        #: The live connection (``None`` while down), and the agent's answer to ``initialize`` on it.
        self.connection: Connection | None = None
        self.init_result: Any = None
        self._connected_at = 0.0
        self._carried_attempts = 0
        self._attempts_this_outage = 0
        self._suspended = False
        self._suspend_due = False
        self._suspend_timer: TimerHandle | None = None
        self._queue: OutageQueue[Connection] = OutageQueue(queue, clock)
        self._wake = asyncio.Event()
        self._closing = False
        self._tasks = TaskSet(f"the link to {connector.target}", self.crashed)
        #: The fatal error that failed the client, if it failed.
        self.failure: BaseException | None = None
        self._crash: BaseException | None = None
        self._drop_cause: str = ""
        self._refreshed = False
        self._started = False

    @property
    def state(self) -> ConnectionState:
        return self._machine.state

    def live(self) -> tuple[Connection, Any] | None:
        """The connection and what the agent answered to ``initialize`` on it, while connected."""
        conn, init = self.connection, self.init_result
        return (conn, init) if conn is not None and init is not None and self.state.state is State.CONNECTED else None

    @property
    def queued(self) -> int:
        """Requests waiting for the connection (during an outage)."""
        return len(self._queue)

    def _set_state(
        self, state: State, *, attempt: int | None = None, retry_in: float | None = None, cause: str | None = None
    ) -> None:
        self._machine.set(ConnectionState(state, attempt, retry_in, cause))

    async def start(self, *, recover: bool = False) -> None:
        """Connect and initialize once; with ``recover`` (sessions restored from a store), recover
        on that link before it counts as connected (a drop then hands over to the reconnect loop).
        Raises what failed the first connection (then ``failed``), or ``ClientClosed``."""
        self._started = True
        try:
            conn, init = await self._open_with_refresh()
            dropped = await self._recover_link(conn, init) if recover and not self._closing else None
        except asyncio.CancelledError:
            self._set_state(State.CLOSED, cause="cancelled while connecting")
            raise
        except BaseException as exc:
            self.fail(exc)
            raise
        if self._closing:  # aclose() ran while connecting: it could not see this link
            await conn.aclose()
            raise ClientClosed("the client was closed while connecting")
        self._refreshed = False
        if dropped is not None:
            reason = TransportClosed(dropped)
            self._on_drop(reason)
            self._tasks.spawn(self._outage(reason))
            return
        self._install(conn, init)

    async def aclose(self) -> None:
        """Close for good: stop reconnecting, close the link, fail queued requests."""
        if self._closing:
            return
        self._closing = True
        self._cancel_suspend_timer()
        self._queue.fail(lambda method: ClientClosed("the client was closed"))
        self._set_state(State.CLOSED, cause="closed by the app")
        await self._tasks.aclose()
        conn, self.connection = self.connection, None
        if conn is not None:
            await conn.aclose()

    def notify_network_available(self) -> None:
        """Skip the current backoff wait and try to reconnect right away."""
        self._wake.set()

    def crash(self, error: BaseException, *, recovering: bool = False) -> None:
        """Make this link die of ``error`` as a bug in it would (the test kit's seam,
        :meth:`acp_client.testing.Inside.crash`): one of its tasks raises it now, or, with
        ``recovering``, its next recovery round does."""
        recover = self._recover

        async def die(*_: Any) -> None:
            self._recover = recover
            raise error

        if recovering:
            self._recover = die
        else:
            self._tasks.spawn(die())

    async def call(
        self,
        method: str,
        params: Any,
        *,
        idempotent: bool = False,
        timeout: Any = USE_CLIENT_DEFAULT,
        on_answer: Callable[[], None] | None = None,
        answered_over: Callable[[TransportInfo], None] | None = None,
    ) -> Any:
        """Send a request on the live connection, waiting out an outage if configured to (params
        that depend on what a recovery settles are built after :meth:`ready`). ``answered_over``
        is told which link answered (a session attached by the request is held by its agent).

        Raises:
            ConnectionLost: The connection dropped with the request pending (``idempotent`` ones
                are retried after recovery instead), or queuing is off.
            ClientSuspended / ClientClosed / QueueFull: The link is down too long, closed, or full.
            RpcError / RequestTimeout / TransportError: From the request itself.
        """
        while True:
            conn = await self.ready(method)
            try:
                result = await conn.request(method, params, timeout=timeout, on_answer=on_answer)
                if answered_over is not None:
                    answered_over(conn.transport.info)
                return result
            except ConnectionLost as exc:
                if self._crash is not None:  # an internal task died: say so, not "connection lost"
                    raise ConnectionLost(method, may_have_executed=exc.may_have_executed, cause=self._crash) from exc
                if idempotent and self.retries():
                    logger.debug("retrying %s after the connection dropped", method)
                    continue
                raise

    def retries(self) -> bool:
        """Whether a request the drop cut off may go again after the next recovery: not from
        inside a recovery (it would wait for itself), nor when there will be none."""
        here = _RECOVERING_ON.get() is not None
        return not here and self._policy is not None and not self.state.is_terminal and not self._closing

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification on the live connection (queued like requests during an outage)."""
        conn = await self.ready(method)
        await conn.notify(method, params)

    async def ready(self, method: str, ticket: Ticket | None = None) -> Connection:
        """The live connection, waited for in the outage queue (``ticket``: its place); raises as :meth:`call`."""
        conn = self.connection
        if conn is not None and not conn.is_closed and self.state.state is State.CONNECTED:
            return conn
        recovering = self._recovering_here()
        if recovering is not None and not recovering.is_closed and not self._closing:
            return recovering  # a recovery callback's own request: waiting would deadlock
        if self.state.state is State.CLOSED or self._closing:
            raise ClientClosed("the client is closed")
        if self.state.state is State.FAILED:
            raise _failed(self.failure)
        if not self._started:  # never connected: nothing will ever release the queue
            raise ClientClosed("not connected: call connect() first")
        if self._suspended:
            raise ClientSuspended(f"{method}: the agent has been unreachable for too long")
        return await self._queue.wait(method, ticket=ticket)

    def _recovering_here(self) -> Connection | None:
        here = _RECOVERING_ON.get()
        return here[1] if here is not None and here[0] is self else None

    def in_recovery(self) -> bool:
        """Whether the caller runs inside a recovery on this link (or an app callback it runs)."""
        return self._recovering_here() is not None

    @contextlib.contextmanager
    def recovering(self, conn: Connection) -> Iterator[None]:
        """Inside this block, requests through this supervisor go straight to ``conn`` (a
        recovery on it runs here: its callbacks' requests must not wait for it)."""
        token = _RECOVERING_ON.set((self, conn))
        try:
            yield
        finally:
            _RECOVERING_ON.reset(token)

    def guard(self, make: Guarding) -> Authority:
        """Put ``make``'s :class:`Authority` before the handlers of what this link's agent sends (before it starts)."""
        authority = make(self._on_request, self._on_notification)
        self._on_request, self._on_notification = authority.request, authority.notification
        return authority

    async def _open(self) -> tuple[Connection, Any]:
        connection = functools.partial(
            Connection, on_request=self._on_request, on_notification=self._on_notification, clock=self._clock,
            request_timeout=self._request_timeout, max_incoming_requests=self._max_incoming_requests,
            observer=self.observer.calls if self.observer is not None else None,
        )  # fmt: skip
        return await open_link(
            self._connector, connection=connection, on_protocol_error=self._on_protocol_error,
            initialize=self._initialize, timeout=self._connect_timeout, clock=self._clock,
            on_stream_resumed=self._on_stream_resumed,
        )  # fmt: skip

    async def _open_with_refresh(self) -> tuple[Connection, Any]:
        try:
            return await self._open()
        except AuthenticationFailed:
            if self._refresh_credentials is None or self._refreshed:
                raise
            self._refreshed = True
            logger.info("credentials refused by %s; refreshing them once", self._connector.target)
            refreshed = self._refresh_credentials()
            if inspect.isawaitable(refreshed):
                await refreshed
            return await self._open()

    def _install(self, conn: Connection, init: Any) -> None:
        """Connected on ``conn``: watch it, and release the queued requests onto it."""
        self.connection = conn
        self.init_result = init
        self._connected_at = self._clock.monotonic()
        self._tasks.spawn(self._watch(conn))
        self._set_state(State.CONNECTED)
        self._queue.release(conn)

    def crashed(self, error: BaseException) -> None:
        """An internal task died of an unexpected error (a bug): fail the client, never hang."""
        if self._closing or self.state.is_terminal:
            return
        self._crash = error
        self.fail(error)
        self._on_fail(_failed(error))
        conn, self.connection = self.connection, None
        if conn is not None:
            self._tasks.spawn(conn.aclose())

    async def _watch(self, conn: Connection) -> None:
        cause = await conn.wait_closed()
        if self._closing or conn is not self.connection:
            return
        self.connection = None
        # Release the dead link (a stdio agent that closed stdout but lives on, kept-alive HTTP sockets);
        # in the background, so a slow close never delays the reconnect.
        self._tasks.spawn(conn.aclose())
        reason = cause if cause is not None else TransportClosed("connection closed")
        try:
            self._on_drop(reason)
        except Exception:
            logger.exception("drop listener raised")
        if self._policy is None:
            self.failure = reason
            self._queue.fail(lambda method: ConnectionLost(method, may_have_executed=False, cause=reason))
            self._set_state(State.FAILED, cause=f"connection lost and reconnecting is off: {reason}")
            return
        self._tasks.spawn(self._outage(reason))

    async def _sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on the clock, or less if the app says the network is back."""
        if seconds <= 0:
            return
        if self._wake.is_set():
            self._wake.clear()
            return
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)
        if self._wake.is_set():
            self._wake.clear()
            logger.info("network reported available: reconnecting now")

    async def _on_wait(self, attempt: int, delay: float, error: BaseException | None) -> None:
        self._attempts_this_outage = attempt
        cause = str(error) if error is not None else self._drop_cause
        state = State.SUSPENDED if self._suspended else State.RECONNECTING
        self._set_state(state, attempt=attempt, retry_in=delay, cause=cause)
        logger.info("reconnecting to %s in %.2fs (attempt %d) after: %s", self._connector.target, delay, attempt, cause)
        if self.observer is not None:
            self.observer.reconnecting(attempt, delay, error if error is not None else self._drop_error)

    async def _attempt(self, attempt: Attempt) -> tuple[Connection, Any]:
        if self._closing:
            raise asyncio.CancelledError
        return await self._open_with_refresh()

    def _suspend(self) -> None:
        """The suspend timer: down too long."""
        if self.state.state is State.RECOVERING:
            # A live link is being recovered: suspend only if this recovery drops again
            # (suspended cannot lead to connected without another recovery).
            self._suspend_due = True
            return
        self._enter_suspension()

    def _enter_suspension(self) -> None:
        self._suspend_due = False
        if self.connection is not None or self._closing or self.state.is_terminal:
            return
        self._suspended = True
        logger.warning("%s unreachable for too long: suspending (queued requests failed)", self._connector.target)
        self._queue.fail(lambda method: ClientSuspended(f"{method}: the agent has been unreachable for too long"))
        self._set_state(
            State.SUSPENDED,
            attempt=self._attempts_this_outage or 1,
            retry_in=self.state.retry_in,
            cause="down too long",
        )

    def _cancel_suspend_timer(self) -> None:
        if self._suspend_timer is not None:
            self._suspend_timer.cancel()
            self._suspend_timer = None

    def fail(self, error: BaseException) -> None:
        """Fail the client for good with ``error``: queued requests fail, nothing reconnects."""
        self.failure = error
        self._cancel_suspend_timer()
        logger.error("giving up on %s: %s", self._connector.target, error)
        self._queue.fail(lambda method: _failed(error))
        self._set_state(State.FAILED, cause=str(error))

    async def _outage(self, cause: TransportError) -> None:
        assert self._policy is not None
        policy = self._policy
        started = self._clock.monotonic()
        uptime = started - self._connected_at
        # A connection that lived shorter than reset_after: this outage's backoff continues where
        # the last one ended (its attempts are still numbered from 1).
        carried = self._carried_attempts if uptime < policy.reset_after else 0
        self._drop_cause, self._drop_error = str(cause), cause
        self._refreshed = False
        self._suspended = self._suspend_due = False
        self._attempts_this_outage = 0
        if policy.suspend_after is not None:
            self._suspend_timer = self._clock.call_later(policy.suspend_after, self._suspend)
        logger.info("connection to %s lost: %s", self._connector.target, cause)
        while True:
            try:
                conn, init = await reconnect_attempts(
                    policy,
                    clock=self._clock,
                    sleep=self._sleep,
                    started_at=started,
                    attempts_before=self._attempts_this_outage,
                    backoff_from=carried,
                    rng=self._rng,
                    on_wait=self._on_wait,
                    attempt_fn=self._attempt,
                )
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                self.fail(exc)
                return
            dropped = await self._recover_link(conn, init)
            if self._closing:  # an app callback closed the client: aclose() could not see this link
                await conn.aclose()
                return
            if dropped is not None:
                self._drop_cause = dropped  # the same outage: its attempts go on counting
                if self._suspend_due:
                    self._enter_suspension()
                continue
            self._cancel_suspend_timer()
            self._carried_attempts = carried + self._attempts_this_outage
            self._suspended = self._suspend_due = False
            self._install(conn, init)
            return

    async def _recover_link(self, conn: Connection, init: Any) -> str | None:
        """Run the recovery routine on a fresh link; the drop cause when the link died meanwhile."""
        self._set_state(State.RECOVERING)
        with self.recovering(conn):
            try:
                await self._recover(conn, init)
            except (asyncio.CancelledError, ConnectionLost, TransportError) as exc:
                await conn.aclose()
                if isinstance(exc, asyncio.CancelledError):
                    raise
                logger.info("connection dropped again while recovering: %s", exc)
                return str(exc)
            except AcpError as exc:
                logger.error("recovery failed: %s", exc)
        return str(conn.close_cause) if conn.is_closed and not self._closing else None
