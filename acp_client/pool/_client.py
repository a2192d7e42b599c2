"""How an :class:`~acp_client.AcpClient` given several endpoints plugs the pool in: the links
factory the client hands its engine (:data:`acp_client._links.LinksFactory`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._links import LinkKit, Links, LinksFactory
from ..location import Endpoint
from ..transports.base import Connector
from ._links import PoolLinks
from ._placement import PlacementFunction, placement_policy

__all__ = ["pool_links"]


def pool_links(
    endpoints: Sequence[str | Connector | Endpoint],
    *,
    placement: object,
    failover_delay: float,
    connector: Callable[[str], Connector],
) -> tuple[LinksFactory, Connector]:
    """The links factory for several instances, and the first instance's connector.

    ``connector`` builds the connector for a URL (the client's headers, TLS, cookies, options).

    Raises:
        ConfigurationError: A bad endpoint list, duplicate names, or an unknown placement.
    """
    checked = Endpoint.many(endpoints)
    connectors = tuple(e.connector if e.connector is not None else connector(e.url) for e in checked)
    policy: PlacementFunction = placement_policy(placement)  # type: ignore[arg-type]

    def build(kit: LinkKit) -> Links:
        return PoolLinks(kit, checked, connectors, placement=policy, failover_delay=float(failover_delay))

    return build, connectors[0]
