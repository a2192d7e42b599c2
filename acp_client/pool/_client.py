"""What a client is given to use several instances of one agent: :class:`Pool`, an
:class:`~acp_client.group.EndpointGroup` whose plan is the pool's links (:mod:`._links`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from .._link._links import LinkKit, Links
from .._util._checks import check_seconds, field_check
from ..exceptions import ConfigurationError
from ..group import LinksPlan
from ..location import Endpoint
from ..store import pool_key
from ..transports.base import Connector
from ._links import PoolLinks
from ._placement import PlacementFunction, placement_policy


def _endpoints(value: Sequence[str | Connector | Endpoint]) -> tuple[Endpoint, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigurationError("Pool() takes a list of URLs, connectors or Endpoint values")
    return Endpoint.many(value)


@attrs.frozen
class Pool:
    """Several instances of one agent, used by one client (``docs/many-instances.md``)::

        async with AcpClient(Pool(["ws://agent-1:8000/acp", "ws://agent-2:8000/acp"])) as client:
            ...

    The client keeps one link per instance (opened when first needed), places each new session on
    one instance, recovers a session on its home instance after a drop, and moves it to another
    instance when its home does not have it or stays unreachable past ``failover_delay``.

    Args:
        endpoints: The instances, in preference order: URLs, connectors or :class:`Endpoint`
            values (names must differ).
        placement: Where new sessions go: ``"round_robin"`` (default), ``"fewest_sessions"``,
            or a :data:`PlacementFunction`.
        failover_delay: Seconds a session's home instance may stay unreachable before the
            session moves to another instance.

    Raises:
        ConfigurationError: No endpoints, two with one name, an unknown placement, or a
            ``failover_delay`` that is not a positive number of seconds.
    """

    endpoints: tuple[Endpoint, ...] = attrs.field(converter=_endpoints)
    placement: PlacementFunction = attrs.field(
        default="round_robin",
        converter=placement_policy,  # type: ignore[assignment]  # a name becomes its policy
    )
    failover_delay: float = attrs.field(default=10.0, validator=field_check(check_seconds))

    def links_plan(self, connector: Callable[[str], Connector]) -> LinksPlan:
        """The pool's links for a client (see :class:`~acp_client.group.EndpointGroup`)."""
        connectors = tuple(e.connector if e.connector is not None else connector(e.url) for e in self.endpoints)
        endpoints, placement, delay = self.endpoints, self.placement, float(self.failover_delay)

        def build(kit: LinkKit) -> Links:
            return PoolLinks(kit, endpoints, connectors, placement=placement, failover_delay=delay)

        keyed = all(e.connector is None for e in endpoints)
        return LinksPlan(build, connectors[0], pool_key(e.url for e in endpoints) if keyed else None, endpoints)
