"""A look inside a client, for tests: its links, its session table, its engine.

Tests that must see what the public API does not show (the reason a client failed, the live
connection of its one link, a session's replay flags) look through :func:`inside` instead of
reaching for private attributes, so the client's layout can change without breaking them::

    from acp_client.testing import inside

    assert isinstance(inside(client).supervisor.failure, IncompatibleProtocolVersion)

To test what a bug inside the client does (nothing may hang), :meth:`Inside.crash` makes one of
its links die of an error of the test's choosing.

Nothing here is a stable API for applications.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .._engine._engine import Engine
    from .._engine._persistence import Persistence
    from .._link._links import Links
    from .._link._supervisor import Supervisor
    from .._sessions._table import SessionTable
    from ..client import AcpClient

__all__ = ["Inside", "inside"]


@attrs.frozen
class Inside:
    """The parts of one client (see :func:`inside`)."""

    engine: Engine

    @property
    def links(self) -> Links:
        """The client's links (one supervisor, or an endpoint group's)."""
        return self.engine.links

    @property
    def supervisor(self) -> Supervisor:
        """The supervisor of the link for calls that concern no session (a single endpoint's
        only one)."""
        return self.engine.links.primary

    @property
    def table(self) -> SessionTable:
        """The session table."""
        return self.engine.table

    @property
    def persistence(self) -> Persistence | None:
        """The session store's bookkeeping, when a store is set."""
        return self.engine.persistence

    def crash(self, error: BaseException, *, recovering: bool = False, link: Supervisor | None = None) -> None:
        """Make a link of the client die of ``error``, as a bug in the client would, to test
        that nothing hangs: the turns and requests on that link fail with ``error`` as their
        cause and the client fails.

        Args:
            error: What the link's task dies of.
            recovering: Crash the link's next recovery round instead (the reconnect task dies
                of it), rather than one of its tasks now.
            link: Which link (one of ``inside(client).links.supervisors()``); by default the one
                for calls that concern no session.
        """
        (link if link is not None else self.supervisor).crash(error, recovering=recovering)


def inside(client: AcpClient | Any) -> Inside:
    """The parts of ``client`` (an :class:`~acp_client.AcpClient`)."""
    return Inside(client._engine)
