"""One link of a pool: an instance, its supervisor (none until first needed), its last state; and
where each session lives (its :class:`Placement`, kept in the session's :func:`placed` slot)."""

from __future__ import annotations

import asyncio

import attrs

from .._link._authority import Authority
from .._link._supervisor import Supervisor
from .._util._slots import Slot
from ..clock import TimerHandle
from ..location import Endpoint
from ..state import ConnectionState, State
from ..transports.base import Connector


class Link:
    """One instance: its endpoint, its supervisor (none until first needed), its last state."""

    def __init__(self, endpoint: Endpoint, connector: Connector) -> None:
        self.endpoint = endpoint
        self.connector = connector
        #: The endpoint a probe or a one-off close connects with: this link's connector (the
        #: client's headers, TLS, cookies and transport options), equal to ``endpoint``.
        self.probe_endpoint = (
            endpoint if endpoint.connector is not None else attrs.evolve(endpoint, connector=connector)
        )
        self.supervisor: Supervisor | None = None
        self.state = ConnectionState(State.CONNECTING)
        self.starting: asyncio.Future[None] | None = None
        self.failover_timer: TimerHandle | None = None
        #: When the armed failover fires (on the client's clock).
        self.failover_due: float | None = None
        #: Failovers that found no instance to take this link's sessions, since it was last
        #: connected: the attempt number of the client's ``suspended`` state while they wait.
        self.failed_moves = 0
        #: What this instance may speak for (its refusals are counted there): set with the supervisor.
        self.authority: Authority | None = None

    @property
    def connected(self) -> bool:
        sup = self.supervisor
        return sup is not None and self.state.state is State.CONNECTED and sup.connection is not None

    @property
    def usable(self) -> bool:
        """Has a supervisor that may still connect (not failed or closed)."""
        return self.supervisor is not None and not self.state.is_terminal


@attrs.define(eq=False)
class Placement:
    """Where a session lives in the pool."""

    #: The link it lives on (``None``: not known yet, e.g. restored from a store).
    home: Link | None = None
    #: It is being moved to another link: its calls wait.
    moving: bool = False
    #: Links it moved off while they were unreachable: they may still hold it in memory, and it
    #: is closed there before it is attached again (docs/many-instances.md).
    left_behind: set[Link] = attrs.Factory(set)
    #: Held while the session moves, and while a sweep closes one of its copies.
    guard: asyncio.Lock = attrs.Factory(asyncio.Lock)
    #: The link it is being attached to (a move, or the app's load / resume before it settles):
    #: what that instance sends about it is admitted, as its home's is.
    attaching: Link | None = None


#: A session's placement (see :class:`~acp_client._util._slots.Slot`).
placed: Slot[Placement] = Slot(Placement)
