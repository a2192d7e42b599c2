"""The engine's links: the one seam between the one-link core and what carries its calls.

The engine asks :class:`Links` to start, close and fail, where a call goes and where a session is
found; where sessions live, the links learn from the engine's events. A client of one endpoint has
:class:`SingleLink`; one given an :class:`~acp_client.group.EndpointGroup` gets its links from the
group's plan, built from one :class:`LinkKit`. Nothing here knows what a group does with several
links, so the common case pays nothing for the special one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from .._recovery import _probing
from .._recovery._probing import Opener
from .._recovery._recoverer import Recoverer
from .._rpc._connection import Connection
from .._sessions._table import SessionTable, Tracked
from ..clock import Clock
from ..config import QueueOptions, Timeouts
from ..location import Endpoint, Location
from ..state import ConnectionState, RecoveryOutcome
from ..transports.base import Connector
from ..types import InitializeResponse
from ._client_state import StateMachine
from ._events import SessionEvents
from ._queue import Ticket
from ._supervisor import Supervisor


class SupervisorFactory(Protocol):
    """Makes one link's supervisor (the engine's options, the link's callbacks)."""

    def __call__(
        self,
        connector: Connector,
        *,
        recover: Callable[[Connection, Any], Any],
        on_drop: Callable[[Any], None],
        on_state: Callable[[ConnectionState], None],
        on_fail: Callable[[BaseException], None],
    ) -> Supervisor: ...


@attrs.frozen
class LinkKit:
    """What links are built from: the engine's parts (``state``: the client's one publisher;
    ``crashed`` fails every link and the client; ``recovered`` is the engine's "recovered" event;
    ``opener`` opens a short link, a locate's or a copy's close, the client's way)."""

    table: SessionTable
    recoverer: Recoverer
    clock: Clock
    version: Callable[[], int]
    timeouts: Timeouts
    queue: QueueOptions
    concurrency: int
    supervisor: SupervisorFactory
    state: StateMachine
    subscribe: Callable[[SessionEvents], None]
    crashed: Callable[[BaseException], None]
    recovered: Callable[[list[RecoveryOutcome], bool], None]
    opener: Opener

    async def recover_round(
        self, supervisor: Supervisor, conn: Connection, init: InitializeResponse, **options: Any
    ) -> list[RecoveryOutcome]:
        """One link's recovery round (:meth:`Recoverer.recover` with ``options``) inside its
        telemetry episode, then the "recovered" event. A round a drop cut off reports nothing (the
        next round reports its finished outcomes)."""
        observer = supervisor.observer
        reported: list[RecoveryOutcome] = []
        try:
            with observer.recovering() if observer is not None else contextlib.nullcontext():
                reported = await self.recoverer.recover(conn, init, **options)
                if observer is not None:
                    observer.recovered(reported)
        finally:
            self.recovered(reported, observer is not None)
        return reported


class Links(Protocol):
    """What the engine asks of its links (where a session lives, they learn from its events)."""

    @property
    def primary(self) -> Supervisor:
        """Where calls that concern no session go."""

    @property
    def queued(self) -> int:
        """Calls waiting for a link (during an outage)."""

    def supervisors(self) -> list[Supervisor]:
        """Every link started so far."""

    async def start(self, *, restored: bool) -> None:
        """Connect; ``restored``: sessions came from a store, recover them before connected."""

    def fail(self, error: BaseException) -> None:
        """Fail the client for good (a condition found outside the links)."""

    async def aclose(self) -> None: ...

    async def link_for(self, tracked: Tracked | None, method: str, ticket: Ticket | None = None) -> Supervisor:
        """Where a call goes: a session's where it lives (or, for its load / resume, where it is
        found); a ``session/new`` where a new session is placed; any other to :attr:`primary`.
        ``ticket``: the call's place in the outage queues."""

    def endpoint_of(self, tracked: Tracked) -> str | None:
        """The name of the instance ``tracked`` lives on (``None`` for a single endpoint)."""

    def placement_of(self, tracked: Tracked) -> tuple[str | None, tuple[str, ...]]:
        """The instance ``tracked`` lives on (``None``: a single endpoint, or not placed yet) and
        those that may still hold a copy of it, as a session store records them."""

    async def locate(self, session_id: str, timeout: float | None) -> Location:
        """Every instance's ``session/status`` answer for one session."""


#: Builds the links of a client from the engine's parts.
LinksFactory = Callable[[LinkKit], Links]


class SingleLink:
    """The links of a single-endpoint client: one supervisor, one connector."""

    def __init__(self, kit: LinkKit, connector: Connector) -> None:
        self._kit = kit
        self._endpoint = Endpoint(connector.target, connector=connector)
        table = kit.table
        self.supervisor = kit.supervisor(
            connector, recover=self._recover, on_drop=table.dropped, on_state=kit.state.set, on_fail=table.closed
        )

    async def _recover(self, conn: Connection, init: InitializeResponse) -> None:
        await self._kit.recover_round(self.supervisor, conn, init)

    @property
    def primary(self) -> Supervisor:
        return self.supervisor

    @property
    def queued(self) -> int:
        return self.supervisor.queued

    def supervisors(self) -> list[Supervisor]:
        return [self.supervisor]

    async def start(self, *, restored: bool) -> None:
        await self.supervisor.start(recover=restored)

    def fail(self, error: BaseException) -> None:
        self.supervisor.fail(error)

    async def aclose(self) -> None:
        await self.supervisor.aclose()

    async def link_for(self, tracked: Tracked | None, method: str, ticket: Ticket | None = None) -> Supervisor:
        return self.supervisor

    def endpoint_of(self, tracked: Tracked) -> str | None:
        return None

    def placement_of(self, tracked: Tracked) -> tuple[str | None, tuple[str, ...]]:
        return None, ()

    async def locate(self, session_id: str, timeout: float | None) -> Location:
        """The one instance's answer, over the live link if connected (else a link of its own)."""
        kit, live = self._kit, self.supervisor.live()
        asked = {self._endpoint: live} if live is not None else {}
        located = await _probing.fan_out(
            [session_id], [self._endpoint], timeout=timeout, opener=kit.opener, clock=kit.clock, live=asked
        )
        return located[session_id]
