"""Endpoint groups: several instances of one agent that a client uses as one endpoint.

Given a group, :class:`~acp_client.AcpClient` asks it once for a :class:`LinksPlan` and talks to
its links through the same seam as to its own single link (:mod:`acp_client._link._links`): the
group brings the links (placement, failover), the client keeps everything else. A client of one
endpoint never imports the code for several. The library's group: ``docs/many-instances.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import attrs

from ._link._links import LinksFactory
from .location import Endpoint
from .transports.base import Connector

__all__ = ["EndpointGroup", "LinksPlan"]


@attrs.frozen
class LinksPlan:
    """How a client facing an :class:`EndpointGroup` gets its links.

    Attributes:
        build: Makes the links from the engine's parts (called once, by the client's engine).
        first: The first instance's connector (``AcpClient.connector``).
        store_key: The key the client files its sessions under in a session store, if the group
            can name one (``None``: ``session_store_key`` is required).
        endpoints: The instances (``AcpClient.endpoints``).
    """

    build: LinksFactory
    first: Connector
    store_key: str | None
    endpoints: tuple[Endpoint, ...] = ()


@runtime_checkable
class EndpointGroup(Protocol):
    """Several instances of one agent used as one endpoint (see the module docstring)."""

    def links_plan(self, connector: Callable[[str], Connector]) -> LinksPlan:
        """The plan for a client whose connectors for URLs ``connector`` builds (with the
        client's headers, TLS, cookies and transport options).

        Raises:
            ConfigurationError: The group cannot be used by this client.
        """
