"""Several instances of one agent: endpoints, placement, and finding a session (DESIGN.md §5).

The routing primitive is :func:`locate`: it asks every instance ``session/status`` for one session,
concurrently, each under its own timeout, and returns every instance's answer — ``active``,
``inactive``, ``unknown`` (-32002) or ``unreachable`` (one vocabulary:
:class:`~acp_client.state.Probe`). :meth:`Location.route` then applies the decision table of
:mod:`acp_client._recovery`:

* ``active`` somewhere → **resume** there (the home instance first);
* else ``inactive`` somewhere → **replay** on exactly one instance: the home instance if it is
  back, else the first that answered ``inactive``;
* else ``unknown`` on every reachable instance → a **new session**, placed by a policy;
* nothing reachable → **unavailable** (try again later).

A session is never sent to two instances for ``session/load`` / ``session/resume``: a
:class:`Route` names one instance, and it is never a replay while some instance reports the
session active.

:class:`EndpointPool` keeps the endpoints, the placement policy (:class:`RoundRobin` by default,
:class:`FewestSessions`, or any function) and each session's home instance::

    pool = EndpointPool(["ws://agent-1:8000/acp", "ws://agent-2:8000/acp"])
    home = pool.place()                       # where a new session goes
    pool.bind("sess_1", home)
    ...
    location = await pool.locate("sess_1", timeout=2.0)
    route = pool.route(location)              # Route(kind=resume|replay|new_session|unavailable, endpoint=...)

A client given several endpoints (``AcpClient([url, url, ...])``) plugs this package in on top of
its one-link core: one link per instance, failover and placement (:mod:`acp_client.pool._links`,
:mod:`acp_client.pool._failover`). A single-endpoint client never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from .._checks import check_seconds
from .._handshake import SUPPORTED_PROTOCOL_VERSIONS
from .._opening import opener
from .._version import __version__
from ..clock import Clock, SystemClock
from ..exceptions import ConfigurationError
from ..location import Endpoint, InstanceAnswer, Location, Route, RouteKind
from ..state import Probe
from ..transports.base import Connector, Transport
from ..types import ClientCapabilities, Implementation
from ._locate import fan_out
from ._placement import FewestSessions, PlacementFunction, RoundRobin, placement_policy

__all__ = [
    "Endpoint",
    "EndpointPool",
    "FewestSessions",
    "InstanceAnswer",
    "Location",
    "PlacementFunction",
    "Probe",
    "RoundRobin",
    "Route",
    "RouteKind",
    "locate",
    "locate_many",
    "placement_policy",
]

_PROBE_CLIENT_INFO = Implementation(name="acp-reconnect-locate", version=__version__, title="acp_client.pool")


# -- finding a session -----------------------------------------------------------------------------


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
        connect_options: Keyword arguments for :func:`~acp_client.connector_for` when an
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
    return await fan_out(session_ids, with_connectors, timeout=timeout, opener=open_one, clock=clock, live={})


class _Unusable:
    """The connector of an endpoint whose URL cannot be used: that instance answers
    ``unreachable`` with the reason, as an instance that cannot be reached does."""

    def __init__(self, target: str, error: ConfigurationError) -> None:
        self._target, self._error = target, error

    @property
    def target(self) -> str:
        return self._target

    async def connect(self) -> Transport:
        raise self._error


def _connector(endpoint: Endpoint, options: Mapping[str, Any]) -> Connector:
    try:
        return endpoint.open(**options)
    except ConfigurationError as exc:
        return _Unusable(endpoint.url, exc)


# -- the pool ---------------------------------------------------------------------------------------


class EndpointPool:
    """Instances of one agent, a placement policy, and each session's home instance.

    No I/O except :meth:`locate`; the caller runs the calls a :class:`Route` names and then
    records the result with :meth:`bind` (or :meth:`rename` for a new session that replaced an
    old one).

    Args:
        endpoints: The instances (URLs, connectors or :class:`Endpoint` values), in preference
            order.
        placement: ``"round_robin"`` (default), ``"fewest_sessions"``, or a
            :data:`PlacementFunction`.

    Raises:
        ConfigurationError: No endpoints, two endpoints with one name, or an unknown policy.
    """

    def __init__(
        self,
        endpoints: Sequence[str | Connector | Endpoint],
        *,
        placement: Literal["round_robin", "fewest_sessions"] | PlacementFunction = "round_robin",
    ) -> None:
        self._endpoints = Endpoint.many(endpoints)
        self._placement = placement_policy(placement)
        self._homes: dict[str, Endpoint] = {}

    def __repr__(self) -> str:
        names = ", ".join(endpoint.name for endpoint in self._endpoints)
        return f"EndpointPool([{names}], placement={self._placement!r}, sessions={len(self._homes)})"

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """The instances, in the order given."""
        return self._endpoints

    def endpoint(self, name: str | Endpoint) -> Endpoint:
        """The pool's endpoint for a name, URL or endpoint.

        Raises:
            KeyError: Not one of the pool's instances.
        """
        for endpoint in self._endpoints:
            if name in (endpoint, endpoint.name, endpoint.url):
                return endpoint
        raise KeyError(str(name))

    # -- homes --------------------------------------------------------------------------------------

    def home(self, session_id: str) -> Endpoint | None:
        """The instance ``session_id`` lives on, if the pool knows it."""
        return self._homes.get(session_id)

    def bind(self, session_id: str, endpoint: str | Endpoint) -> Endpoint:
        """Record that ``session_id`` now lives on ``endpoint``; returns the pool's endpoint.

        Raises:
            KeyError: ``endpoint`` is not one of the pool's instances.
        """
        chosen = self.endpoint(endpoint)
        self._homes[session_id] = chosen
        return chosen

    def rename(self, old_session_id: str, new_session_id: str, endpoint: str | Endpoint) -> Endpoint:
        """A new session replaced ``old_session_id``: forget the old, bind the new one.

        Raises:
            KeyError: ``endpoint`` is not one of the pool's instances.
        """
        chosen = self.endpoint(endpoint)
        self._homes.pop(old_session_id, None)
        self._homes[new_session_id] = chosen
        return chosen

    def forget(self, session_id: str) -> None:
        """Stop tracking ``session_id`` (closed or abandoned)."""
        self._homes.pop(session_id, None)

    def session_counts(self) -> dict[Endpoint, int]:
        """How many tracked sessions live on each instance (every instance listed)."""
        counts = dict.fromkeys(self._endpoints, 0)
        for endpoint in self._homes.values():
            counts[endpoint] += 1
        return counts

    # -- decisions ----------------------------------------------------------------------------------

    def place(self, candidates: Sequence[str | Endpoint] | None = None) -> Endpoint:
        """Where a new session goes, by the placement policy.

        Args:
            candidates: The instances to choose from (default: all of them; pass the reachable
                ones after a fan-out).

        Raises:
            ConfigurationError: No candidates, or the policy returned an endpoint that is not
                one of them.
            KeyError: A candidate is not one of the pool's instances.
        """
        chosen_from = tuple(self.endpoint(c) for c in candidates) if candidates is not None else self._endpoints
        if not chosen_from:
            raise ConfigurationError("no candidate instance to place a new session on")
        chosen = self._placement(chosen_from, self.session_counts())
        if chosen not in chosen_from:
            raise ConfigurationError(f"the placement policy chose {chosen!r}, which is not a candidate")
        return chosen

    async def locate(self, session_id: str, **options: Any) -> Location:
        """:func:`locate` over the pool's instances (same keyword options)."""
        return await locate(session_id, self._endpoints, **options)

    async def locate_many(self, session_ids: Sequence[str], **options: Any) -> dict[str, Location]:
        """:func:`locate_many` over the pool's instances (same keyword options)."""
        return await locate_many(session_ids, self._endpoints, **options)

    def route(self, location: Location) -> Route[Endpoint]:
        """The fan-out decision for ``location``'s session, its home taken from the pool; a new
        session is placed by the policy among the reachable instances."""
        home = self._homes.get(location.session_id)
        decided = location.route(home if home is not None and home in self._endpoints else None)
        if decided.kind is RouteKind.NEW_SESSION:
            return attrs.evolve(decided, endpoint=self.place(decided.candidates))
        return decided
