"""Several instances of one agent: endpoints, placement, and finding a session (docs/many-instances.md).

The routing primitive is :func:`locate`: it asks every instance ``session/status`` for one session,
concurrently, each under its own timeout, and returns every instance's answer — ``active``,
``inactive``, ``unknown`` (-32002) or ``unreachable`` (one vocabulary:
:class:`~acp_client.state.Probe`). :meth:`Location.route` then applies the decision table of
:mod:`acp_client._recovery._decisions`:

* ``active`` somewhere → **resume** there (the home instance first);
* else ``inactive`` somewhere → **replay** on exactly one instance: the home instance if it is
  back, else the first that answered ``inactive``;
* else ``unknown`` on every reachable instance → a **new session**, placed by a policy;
* nothing reachable → **unavailable** (try again later).

A :class:`Route` names one instance (never a replay while some instance has the session active),
so a session is never loaded or resumed on two.

A new session goes where a placement policy says (:class:`RoundRobin` by default,
:class:`FewestSessions`, or any function ``policy(candidates, sessions) -> Endpoint``)::

    location = await locate("sess_1", ["ws://agent-1:8000/acp", "ws://agent-2:8000/acp"], timeout=2.0)
    route = location.route(home=None)         # Route(kind=resume|replay|new_session|unavailable, endpoint=...)

``AcpClient(Pool([url, url, ...]))`` gets its links from this package, on top of its one-link core
(one link per instance, failover, placement); a client of one URL or connector never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._link._opening import opener
from .._recovery import _probing
from .._rpc._handshake import SUPPORTED_PROTOCOL_VERSIONS
from .._util._checks import check_seconds
from .._util._version import __version__
from ..clock import Clock, SystemClock
from ..exceptions import ConfigurationError
from ..group import EndpointGroup, LinksPlan
from ..location import Endpoint, InstanceAnswer, Location, Route, RouteKind
from ..state import Probe
from ..transports.base import Connector, Transport
from ..types import ClientCapabilities, Implementation
from ._client import Pool
from ._placement import FewestSessions, PlacementFunction, RoundRobin, placement_policy

__all__ = [
    "Endpoint",
    "EndpointGroup",
    "FewestSessions",
    "InstanceAnswer",
    "LinksPlan",
    "Location",
    "PlacementFunction",
    "Pool",
    "Probe",
    "RoundRobin",
    "Route",
    "RouteKind",
    "locate",
    "locate_many",
    "placement_policy",
]

_PROBE_CLIENT_INFO = Implementation(name="acp-reconnect-locate", version=__version__, title="acp_client.pool")


async def locate(
    session_id: str,
    endpoints: Sequence[str | Connector | Endpoint],
    *,
    timeout: float | None = 5.0,
    protocol_version: int = 1,
    client_info: Implementation | None = None,
    connect_options: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
) -> Location:
    """Ask every instance ``session/status`` for ``session_id``, concurrently.

    Each instance gets a fresh link: connect, ``initialize``, ``session/status``, close. Nothing
    else is sent (``session/status`` has no side effects), so locating a session never loads it.

    Args:
        session_id: The session to find.
        endpoints: The instances (URLs, connectors or :class:`Endpoint` values).
        timeout: Seconds each instance gets for the whole exchange; past it the instance is
            ``unreachable`` (its ``error`` a :class:`~acp_client.exceptions.RequestTimeout`).
            ``None``: no limit.
        protocol_version: The ACP version proposed in ``initialize``.
        client_info: The identity sent in ``initialize``.
        connect_options: Keyword arguments for :func:`~acp_client.transports.connector_for` when an
            endpoint is a URL (``headers``, ``tls``, ``cookies``, ``limits``, ``http2``...).
        clock: Measures the timeouts (a :class:`~acp_client.testing.FakeClock` in tests).

    Returns:
        Every instance's answer, in the order of ``endpoints``. An instance that cannot be
        reached, refuses, times out or does not offer ``session/status`` is ``unreachable``;
        this function does not raise for one instance's failure.

    Raises:
        ConfigurationError: No endpoints, two endpoints with one name, a non-positive
            ``timeout``, or an unsupported ``protocol_version``.
    """
    located = await locate_many(
        [session_id],
        endpoints,
        timeout=timeout,
        protocol_version=protocol_version,
        client_info=client_info,
        connect_options=connect_options,
        clock=clock,
    )
    return located[session_id]


async def locate_many(
    session_ids: Sequence[str],
    endpoints: Sequence[str | Connector | Endpoint],
    *,
    timeout: float | None = 5.0,
    protocol_version: int = 1,
    client_info: Implementation | None = None,
    connect_options: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
) -> dict[str, Location]:
    """:func:`locate` for several sessions at once: one link per instance, which asks
    ``session/status`` for every session (concurrently), so finding ten sessions costs one
    connect and one ``initialize`` per instance, not ten. Same options as :func:`locate`.

    Returns:
        One :class:`Location` per distinct session id, in the order given (empty for no ids:
        nothing is connected).

    Raises:
        ConfigurationError: As :func:`locate`.
    """
    targets = Endpoint.many(endpoints)
    check_seconds("timeout", timeout, optional=True)
    if protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise ConfigurationError(f"protocol_version must be one of {SUPPORTED_PROTOCOL_VERSIONS}")
    clock = clock if clock is not None else SystemClock()
    options = dict(connect_options or {})
    open_one = opener(
        proposed=lambda: protocol_version,
        client_info=client_info or _PROBE_CLIENT_INFO,
        capabilities=ClientCapabilities(),
        clock=clock,
        timeout=None,  # each instance's whole exchange is bounded by ``timeout``
    )
    with_connectors = [attrs.evolve(e, connector=_connector(e, options)) for e in targets]
    return await _probing.fan_out(session_ids, with_connectors, timeout=timeout, opener=open_one, clock=clock, live={})


@attrs.frozen
class _Unusable:
    """The connector of an endpoint whose URL cannot be used: that instance answers
    ``unreachable`` with the reason, as an instance that cannot be reached does."""

    target: str
    error: ConfigurationError

    async def connect(self) -> Transport:
        raise self.error


def _connector(endpoint: Endpoint, options: Mapping[str, Any]) -> Connector:
    try:
        return endpoint.open(**options)
    except ConfigurationError as exc:
        return _Unusable(endpoint.name, exc)
