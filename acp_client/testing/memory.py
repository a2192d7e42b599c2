"""Connect an :class:`~acp_client.AcpClient` to an in-process agent over memory transports.

With a :class:`~acp_client.testing.FakeClock` this runs whole outages — drops, refused
reconnects, agent restarts — deterministically and in milliseconds::

    clock = FakeClock()
    agent = ReferenceAgent(clock=clock)
    connector = MemoryConnector(agent)
    async with AcpClient(connector, clock=clock) as client:
        session = await client.new_session("/tmp")
        connector.refuse(3)              # the next three connects fail
        connector.drop()                 # cut every live link
        await clock.run(client.session_status(session.session_id))
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ..exceptions import ConnectError
from ..transports.base import Transport
from ..transports.memory import MemoryTransport, memory_pair

__all__ = ["MemoryConnector", "ServesTransports"]

logger = logging.getLogger(__name__)


class ServesTransports(Protocol):
    """An agent that can serve one client link (the reference agent does)."""

    async def serve(self, transport: Transport) -> None: ...


class MemoryConnector:
    """A :class:`~acp_client.transports.base.Connector` to an in-process agent, with fault controls.

    Args:
        agent: The agent to serve each new link (e.g. a
            :class:`~acp_client.testing.ReferenceAgent`).
        name: A label for logs.
    """

    def __init__(self, agent: ServesTransports, *, name: str = "reference-agent") -> None:
        self.agent = agent
        self._name = name
        self._links: list[tuple[MemoryTransport, MemoryTransport]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._refuse_count = 0
        self._refusing = False
        #: How many links were opened so far.
        self.connects = 0
        #: How many connects were refused so far.
        self.refused = 0

    @property
    def target(self) -> str:
        return f"memory://{self._name}"

    @property
    def refusing(self) -> bool:
        """Whether the next connect will be refused (see :meth:`refuse`)."""
        return self._refusing or self._refuse_count > 0

    @property
    def live_links(self) -> int:
        """How many links are open now."""
        return sum(1 for client, _ in self._links if not client.closed)

    async def connect(self) -> Transport:
        """Open a link served by the agent.

        Raises:
            ConnectError: The connector is refusing (see :meth:`refuse`).
        """
        if self._refusing or self._refuse_count > 0:
            self._refuse_count = max(0, self._refuse_count - 1)
            self.refused += 1
            raise ConnectError(f"{self.target}: connection refused (simulated)")
        client, agent = memory_pair(f"{self._name}-client", self._name)
        self._links = [link for link in self._links if not link[0].closed]
        self._links.append((client, agent))
        self.connects += 1
        task = asyncio.ensure_future(self.agent.serve(agent))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return client

    def drop(self, reason: str = "connection dropped (simulated)") -> int:
        """Cut every live link, as a network failure would; returns how many were cut."""
        live = [agent for client, agent in self._links if not client.closed]
        for agent in live:
            agent.close(reason)
        self._links = []
        return len(live)

    def refuse(self, count: int | None = None) -> None:
        """Refuse the next ``count`` connects, or every connect until :meth:`accept` (``None``)."""
        if count is None:
            self._refusing = True
        else:
            self._refuse_count = count

    def accept(self) -> None:
        """Stop refusing connects."""
        self._refusing = False
        self._refuse_count = 0

    async def aclose(self) -> None:
        """Cut every link and wait for the agent's serving tasks to end."""
        self.drop("connector closed")
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
