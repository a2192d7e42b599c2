"""More of :class:`~acp_client.sync.SyncAcpClient`: what the agent said, the calls that mirror the
rest of :class:`~acp_client.AcpClient` (fork, the session setters, every listed session, the
session store, the instances and ``locate``, raw requests), and state changes as a blocking
iterator. A base class of ``SyncAcpClient``, kept apart so each file stays one concern."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._options import next_cursor
from ..client import AcpClient
from ..config import USE_CLIENT_DEFAULT, UseClientDefault
from ..exceptions import RequestTimeout
from ..location import Endpoint, Location
from ..state import ConnectionState, RecoveryOutcome
from ..store import StoredSession
from ..transports.base import TransportInfo
from ..types import AgentCapabilities, Implementation, InitializeResponse, McpServer, Session, SessionConfigOption
from ._session import SyncSessionHandle

__all__ = ["ClientExtras"]

T = TypeVar("T")

Timeout = float | None | UseClientDefault


class ClientExtras:
    """The part of :class:`~acp_client.sync.SyncAcpClient` beyond sessions and turns."""

    _client: AcpClient

    if TYPE_CHECKING:  # defined by SyncAcpClient; declared here for the type checker only

        def _run(self, method: str, awaitable: Awaitable[T], timeout: Timeout, *, bounded: bool = False) -> T: ...

        def _check_thread(self, method: str) -> None: ...

        def _timeout(self, timeout: Timeout) -> float | None: ...

        def submit(self, coro: Awaitable[T], *, timeout: float | None = None) -> concurrent.futures.Future[T]: ...

    @property
    def initialize_result(self) -> InitializeResponse:
        """What the agent answered to ``initialize`` (any thread; see :attr:`AcpClient.initialize_result`).

        Raises:
            ClientClosed: Not connected yet.
        """
        return self._client.initialize_result

    @property
    def agent_info(self) -> Implementation | None:
        """The agent's name and version, as it sent them in ``initialize`` (any thread)."""
        return self._client.agent_info

    @property
    def agent_capabilities(self) -> AgentCapabilities:
        """The agent's capabilities, normalized across protocol versions (any thread)."""
        return self._client.agent_capabilities

    @property
    def transport_info(self) -> TransportInfo | None:
        """The live link's :class:`~acp_client.transports.TransportInfo` (``pid`` of a stdio agent)."""
        return self._client.transport_info

    @property
    def recovery_outcomes(self) -> list[RecoveryOutcome]:
        """The recovery outcomes so far, oldest first."""
        return self._client.recovery_outcomes

    def fork_session(
        self,
        session_id: str,
        cwd: str | Path,
        *,
        mcp_servers: Sequence[McpServer] = (),
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SyncSessionHandle:
        """``session/fork`` (see :meth:`AcpClient.fork_session`)."""
        coro = self._client.fork_session(session_id, cwd, mcp_servers=mcp_servers)
        owner: Any = self  # a SyncAcpClient
        return SyncSessionHandle(owner, self._run("session/fork", coro, timeout))

    def forget_session(self, session_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Stop tracking a session; nothing is sent (see :meth:`AcpClient.forget_session`)."""
        self._run("forget_session", self._forget(session_id), timeout)

    async def _forget(self, session_id: str) -> None:
        self._client.forget_session(session_id)

    def set_mode(self, session_id: str, mode_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/set_mode`` (see :meth:`AcpClient.set_mode`)."""
        self._run("session/set_mode", self._client.set_mode(session_id, mode_id), timeout)

    def set_model(self, session_id: str, model_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/set_model`` (see :meth:`AcpClient.set_model`)."""
        self._run("session/set_model", self._client.set_model(session_id, model_id), timeout)

    def set_config_option(
        self,
        session_id: str,
        config_id: str,
        value: Any,
        *,
        type: str | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> tuple[SessionConfigOption, ...]:
        """``session/set_config_option``; every option with its new value (see
        :meth:`AcpClient.set_config_option`)."""
        coro = self._client.set_config_option(session_id, config_id, value, type=type)
        return self._run("session/set_config_option", coro, timeout)

    def iter_sessions(
        self, *, cwd: str | Path | None = None, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> Iterator[Session]:
        """Every session ``session/list`` reports, following cursors, one page per blocking call
        (``timeout`` applies to each; see :meth:`AcpClient.iter_sessions`)."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = self._run("session/list", self._client.list_sessions(cwd=cwd, cursor=cursor), timeout)
            yield from page.sessions
            if (cursor := next_cursor(page, seen)) is None:
                return

    @property
    def sessions(self) -> list[SyncSessionHandle]:
        """Handles on every session the client tracks (read on the loop thread)."""
        owner: Any = self  # a SyncAcpClient
        handles = self._run("sessions", self._read(lambda: self._client.sessions), USE_CLIENT_DEFAULT)
        return [SyncSessionHandle(owner, handle) for handle in handles]

    @property
    def session_store_key(self) -> str | None:
        """The key this client files its sessions under in its ``session_store`` (any thread)."""
        return self._client.session_store_key

    def stored_sessions(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> list[StoredSession]:
        """This client's records in its store, most recently used first (read on the loop thread;
        no I/O)."""
        return self._run("stored_sessions", self._read(self._client.stored_sessions), timeout)

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """The instances of an endpoint group, in the order given (empty for one endpoint)."""
        return self._client.endpoints

    def locate(
        self, session_id: str, *, probe_timeout: Timeout = USE_CLIENT_DEFAULT, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> Location:
        """Every instance's ``session/status`` answer for ``session_id`` (see
        :meth:`AcpClient.locate`; ``probe_timeout`` is its per-instance ``timeout``)."""
        return self._run("locate", self._client.locate(session_id, timeout=probe_timeout), timeout)

    @staticmethod
    async def _read(read: Callable[[], T]) -> T:
        return read()

    def request(self, method: str, params: Any = None, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Any:
        """Send any request (e.g. an ``_``-prefixed extension) and return its raw result; the
        client's request timeout applies as well (see :meth:`AcpClient.request`)."""
        return self._run(method, self._client.request(method, params), timeout)

    def notify(self, method: str, params: Any = None, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Send any notification (see :meth:`AcpClient.notify`)."""
        self._run(method, self._client.notify(method, params), timeout)

    def state_changes(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Iterator[ConnectionState]:
        """Iterate over the state changes from now on, blocking for each; ends after ``closed``
        or ``failed`` (like :meth:`AcpClient.state_changes`). Stop early with ``break``.

        Raises:
            RequestTimeout: No change within ``timeout`` seconds of the previous one.
            LoopThreadError: Called from the loop thread.
        """
        self._check_thread("state_changes")
        states: queue.Queue[ConnectionState] = queue.Queue()
        started = threading.Event()
        pump = self.submit(self._pump_states(states, started))
        started.wait()
        limit = self._timeout(timeout)
        try:
            while True:
                try:
                    state = states.get(timeout=limit)
                except queue.Empty:
                    raise RequestTimeout("state_changes", limit or 0.0) from None
                yield state
                if state.is_terminal:
                    return
        finally:
            pump.cancel()

    async def _pump_states(self, states: queue.Queue[ConnectionState], started: threading.Event) -> None:
        changes = self._client.state_changes()
        started.set()  # registered from here on (the generator's first step runs below, at once)
        async for state in changes:
            states.put(state)
