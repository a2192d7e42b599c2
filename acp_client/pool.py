"""Several instances of one agent: endpoints, placement, and finding a session (DESIGN.md §5).

The routing primitive is :func:`locate`: it asks every instance ``session/status`` for one session,
concurrently, each under its own timeout, and returns every instance's answer — ``active``,
``inactive``, ``unknown`` (-32002) or ``unreachable``. :meth:`Location.route` then applies the
fan-out decision (a pure function, :mod:`acp_client._routing`):

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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypeVar

import attrs

from . import _fanout
from ._checks import check_seconds
from ._codec import from_wire, to_wire
from ._connection import Connection
from ._fanout import Presence, RouteKind
from ._handshake import SUPPORTED_PROTOCOL_VERSIONS, initialize
from ._version import __version__
from .clock import Clock, SystemClock, move_on_after
from .exceptions import (
    AcpError,
    CapabilityNotSupported,
    ConfigurationError,
    RequestTimeout,
    SessionNotFound,
)
from .transports.base import Connector, Transport
from .transports.endpoint import connector_for
from .types import (
    ClientCapabilities,
    CloseSessionRequest,
    ForegroundState,
    Implementation,
    InitializeResponse,
    SessionStatus,
    SessionStatusRequest,
    SessionStatusResponse,
)

__all__ = [
    "Endpoint",
    "EndpointPool",
    "FewestSessions",
    "InstanceAnswer",
    "Location",
    "PlacementFunction",
    "Presence",
    "RoundRobin",
    "Route",
    "RouteKind",
    "locate",
    "locate_many",
    "placement_policy",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_PROBE_CLIENT_INFO = Implementation(name="acp-reconnect-locate", version=__version__, title="acp_client.pool")


@attrs.frozen
class Endpoint:
    """One instance of the agent.

    Attributes:
        url: ``ws://``, ``wss://``, ``http://``, ``https://`` (see
            :func:`~acp_client.connector_for`); with ``connector`` set, any label.
        name: A short name for logs and outcomes (default: ``url``).
        connector: Opens links to this instance instead of a connector built from ``url``
            (e.g. a :class:`~acp_client.testing.MemoryConnector`). Not part of equality.
    """

    url: str
    name: str = attrs.field()
    connector: Connector | None = attrs.field(default=None, eq=False, repr=False)

    @name.default
    def _name_default(self) -> str:
        return self.url

    @classmethod
    def of(cls, value: str | Connector | Endpoint) -> Endpoint:
        """An endpoint from a URL, a connector (named by its ``target``) or an endpoint."""
        if isinstance(value, Endpoint):
            return value
        if isinstance(value, str):
            return cls(value)
        return cls(value.target, connector=value)

    def open(self, **options: Any) -> Connector:
        """The connector for this instance: ``connector``, or one built from ``url`` with
        ``options`` (``headers``, ``tls``, ``cookies``, ``limits``, transport options).

        Raises:
            ConfigurationError: ``url`` has an unsupported scheme.
        """
        if self.connector is not None:
            return self.connector
        return connector_for(self.url, **options)

    def __str__(self) -> str:
        return self.name


def _endpoints(values: Iterable[str | Connector | Endpoint]) -> tuple[Endpoint, ...]:
    endpoints = tuple(Endpoint.of(value) for value in values)
    if not endpoints:
        raise ConfigurationError("at least one endpoint is needed")
    names = [endpoint.name for endpoint in endpoints]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigurationError(f"endpoint names must be distinct; repeated: {', '.join(duplicates)}")
    return endpoints


# -- placement ------------------------------------------------------------------------------------

#: ``policy(candidates, sessions) -> endpoint``: picks where a new session goes. ``candidates`` are
#: the reachable endpoints (never empty); ``sessions`` counts the sessions homed on each endpoint.
#: It must return one of ``candidates``.
PlacementFunction: TypeAlias = Callable[[Sequence[Endpoint], Mapping[Endpoint, int]], Endpoint]


class RoundRobin:
    """Each new session goes to the next candidate in turn (the default policy)."""

    def __init__(self) -> None:
        self._turn = 0

    def __repr__(self) -> str:
        return "RoundRobin()"

    def __call__(self, candidates: Sequence[Endpoint], sessions: Mapping[Endpoint, int]) -> Endpoint:
        chosen = candidates[self._turn % len(candidates)]
        self._turn += 1
        return chosen


class FewestSessions:
    """Each new session goes to the candidate with the fewest sessions (ties: the first)."""

    def __repr__(self) -> str:
        return "FewestSessions()"

    def __call__(self, candidates: Sequence[Endpoint], sessions: Mapping[Endpoint, int]) -> Endpoint:
        return min(candidates, key=lambda endpoint: sessions.get(endpoint, 0))


def placement_policy(policy: Literal["round_robin", "fewest_sessions"] | PlacementFunction) -> PlacementFunction:
    """The policy for a name (``"round_robin"``, ``"fewest_sessions"``) or a function, as is.

    Raises:
        ConfigurationError: An unknown name.
    """
    if callable(policy):
        return policy
    if policy == "round_robin":
        return RoundRobin()
    if policy == "fewest_sessions":
        return FewestSessions()
    raise ConfigurationError(f"placement must be 'round_robin', 'fewest_sessions' or a function, not {policy!r}")


# -- the fan-out probe -----------------------------------------------------------------------------


@attrs.frozen
class InstanceAnswer:
    """What one instance said about one session.

    Attributes:
        endpoint: The instance.
        presence: ``active``, ``inactive``, ``unknown`` (-32002) or ``unreachable``.
        raw_status: The status string on the wire, when the instance answered one.
        state: The v2 foreground state snapshot, when reported.
        agent: The identity the instance gave in ``initialize`` (``agentInfo`` / ``info``).
        elapsed: Seconds from the start of :func:`locate` to this answer.
        error: Why the instance is ``unreachable`` (a connect error, a timeout, the missing
            ``session/status`` capability, an error answer...), else ``None``.
    """

    endpoint: Endpoint
    presence: Presence
    raw_status: str | None = None
    state: ForegroundState | None = None
    agent: Implementation | None = None
    elapsed: float = 0.0
    error: BaseException | None = attrs.field(default=None, eq=False)


@attrs.frozen
class Route:
    """Where one session goes.

    Attributes:
        kind: ``resume``, ``replay``, ``new_session`` or ``unavailable``.
        endpoint: The one instance to send ``session/resume`` / ``session/load`` to (resume,
            replay), or where the new session is placed (new session, once placed by
            :meth:`EndpointPool.route`); ``None`` otherwise.
        candidates: For a new session: the reachable instances a policy may choose from.
        reason: The decision in words.
    """

    kind: RouteKind
    endpoint: Endpoint | None = None
    candidates: tuple[Endpoint, ...] = ()
    reason: str = ""


@attrs.frozen
class Location:
    """Every instance's answer about one session (from :func:`locate`).

    Attributes:
        session_id: The session asked about.
        answers: One answer per instance, in the order the endpoints were given.
        elapsed: Seconds the whole fan-out took.
    """

    session_id: str
    answers: tuple[InstanceAnswer, ...]
    elapsed: float = 0.0

    def _with(self, presence: Presence) -> tuple[Endpoint, ...]:
        return tuple(answer.endpoint for answer in self.answers if answer.presence is presence)

    @property
    def active(self) -> tuple[Endpoint, ...]:
        """The instances that have the session in memory."""
        return self._with(Presence.ACTIVE)

    @property
    def inactive(self) -> tuple[Endpoint, ...]:
        """The instances that know the session but do not have it in memory."""
        return self._with(Presence.INACTIVE)

    @property
    def unknown(self) -> tuple[Endpoint, ...]:
        """The instances that answered -32002."""
        return self._with(Presence.UNKNOWN)

    @property
    def unreachable(self) -> tuple[Endpoint, ...]:
        """The instances that gave no usable answer."""
        return self._with(Presence.UNREACHABLE)

    def answer(self, endpoint: str | Endpoint) -> InstanceAnswer:
        """The answer of one instance (by endpoint or name).

        Raises:
            KeyError: No such instance in this location.
        """
        for answer in self.answers:
            if endpoint in (answer.endpoint, answer.endpoint.name):
                return answer
        raise KeyError(str(endpoint))

    def route(self, home: str | Endpoint | None = None) -> Route:
        """The fan-out decision for this session (no placement: a new session's ``endpoint`` is
        ``None`` and ``candidates`` lists the reachable instances).

        "First" among several ``inactive`` (or ``active``) instances is the first to answer.

        Args:
            home: The instance the session lived on (endpoint or name), if known.

        Raises:
            KeyError: ``home`` is not one of the instances.
        """
        index = None
        if home is not None:
            index = next((i for i, a in enumerate(self.answers) if home in (a.endpoint, a.endpoint.name)), None)
            if index is None:
                raise KeyError(str(home))
        order = sorted(range(len(self.answers)), key=lambda i: self.answers[i].elapsed)
        decided = _fanout.route([answer.presence for answer in self.answers], index, order)
        endpoints = [answer.endpoint for answer in self.answers]
        return Route(
            kind=decided.kind,
            endpoint=endpoints[decided.instance] if decided.instance is not None else None,
            candidates=tuple(endpoints[i] for i in decided.candidates),
            reason=decided.reason,
        )


@attrs.frozen
class _Settings:
    session_ids: tuple[str, ...]
    timeout: float
    protocol_version: int
    client_info: Implementation
    connect_options: Mapping[str, Any]
    clock: Clock
    start: float
    #: Live, initialized links to some instances (a client's own): asked directly, no connect.
    live: Mapping[Endpoint, tuple[Connection, InitializeResponse]] = attrs.field(factory=dict)


#: One instance's answers, one per session id (in the order of ``_Settings.session_ids``).
_Answers: TypeAlias = tuple[InstanceAnswer, ...]


class _Link:
    """The probe's link to one instance, closed whatever happens."""

    def __init__(self) -> None:
        self.transport: Transport | None = None
        self.conn: Connection | None = None

    async def aclose(self) -> None:
        if self.conn is not None:
            await self.conn.aclose()
        elif self.transport is not None:
            with contextlib.suppress(AcpError):
                await self.transport.aclose()


async def _open(endpoint: Endpoint, settings: _Settings, link: _Link) -> tuple[Connection, InitializeResponse]:
    """The instance's live connection, or a fresh one (kept in ``link``), initialized."""
    live = settings.live.get(endpoint)
    if live is not None:
        return live
    link.transport = await endpoint.open(**settings.connect_options).connect()
    conn = link.conn = Connection(link.transport, clock=settings.clock)
    conn.start()
    init = await initialize(
        conn,
        proposed=settings.protocol_version,
        client_info=settings.client_info,
        capabilities=ClientCapabilities(),
        timeout=None,
    )
    return conn, init


async def _probe(endpoint: Endpoint, settings: _Settings, link: _Link) -> _Answers:
    """Connect, initialize and ask ``session/status`` for every session on one instance (the
    probes concurrently, over one link; no timeout of its own)."""
    clock = settings.clock
    agent: Implementation | None = None

    def answer(presence: Presence, **fields: Any) -> InstanceAnswer:
        elapsed = clock.monotonic() - settings.start
        return InstanceAnswer(endpoint, presence, agent=agent, elapsed=elapsed, **fields)

    async def status(conn: Connection, session_id: str, version: int) -> InstanceAnswer:
        request = to_wire(SessionStatusRequest(session_id=session_id), protocol_version=version)
        try:
            result = await conn.request("session/status", request, timeout=None)
        except SessionNotFound:
            return answer(Presence.UNKNOWN)
        except AcpError as exc:
            logger.debug("locate: %s gave no usable answer for %s: %s", endpoint, session_id, exc)
            return answer(Presence.UNREACHABLE, error=exc)
        try:
            decoded = from_wire(SessionStatusResponse, result, protocol_version=version)
        except AcpError as exc:
            return answer(Presence.UNREACHABLE, error=exc)
        presence = Presence.ACTIVE if decoded.status is SessionStatus.ACTIVE else Presence.INACTIVE
        return answer(presence, raw_status=decoded.raw_status, state=decoded.state)

    try:
        conn, init = await _open(endpoint, settings, link)
        agent = init.agent_info
        version = init.protocol_version
        if not init.agent_capabilities.supports("session/status"):
            path = init.agent_capabilities.capability_path("session/status", version)
            error = CapabilityNotSupported("session/status", path)
            return tuple(answer(Presence.UNREACHABLE, error=error) for _ in settings.session_ids)
    except AcpError as exc:
        logger.debug("locate: %s gave no usable answer: %s", endpoint, exc)
        return tuple(answer(Presence.UNREACHABLE, error=exc) for _ in settings.session_ids)
    return tuple(await asyncio.gather(*(status(conn, sid, version) for sid in settings.session_ids)))


async def _in_time(settings: _Settings, work: Callable[[_Link], Awaitable[_T]], late: Callable[[], _T]) -> _T:
    """``work`` on a link of its own within ``settings.timeout`` (measured on the injected clock);
    ``late()`` past it. The link is closed within what is left of the timeout (a slow close does
    not turn a result into a timeout)."""
    link = _Link()
    answered: list[_T] = []
    with move_on_after(settings.clock, settings.timeout):
        try:
            answered.append(await work(link))
        finally:
            await link.aclose()
    return answered[0] if answered else late()


async def _ask_in_time(endpoint: Endpoint, settings: _Settings) -> _Answers:
    """One instance's answers within the per-instance timeout."""

    def late() -> _Answers:
        elapsed = settings.clock.monotonic() - settings.start
        error = RequestTimeout("locate (connect, initialize, session/status)", settings.timeout)
        return tuple(
            InstanceAnswer(endpoint, Presence.UNREACHABLE, elapsed=elapsed, error=error) for _ in settings.session_ids
        )

    return await _in_time(settings, lambda link: _probe(endpoint, settings, link), late)


async def _close_copy(
    session_id: str,
    endpoint: Endpoint,
    *,
    timeout: float,
    protocol_version: int,
    clock: Clock,
    live: Mapping[Endpoint, tuple[Connection, InitializeResponse]],
) -> bool:
    """``session/close`` for one session on one instance, over its connection in ``live`` or a
    link of its own, within ``timeout``: ``True`` when the instance no longer has the session in
    memory (closed, or it did not know it). Never raises for the instance's failure; an instance
    without ``session/close`` keeps the session (``False``)."""
    settings = _Settings(
        session_ids=(session_id,),
        timeout=timeout,
        protocol_version=protocol_version,
        client_info=_PROBE_CLIENT_INFO,
        connect_options={},
        clock=clock,
        start=clock.monotonic(),
        live=live,
    )

    async def close(link: _Link) -> bool:
        try:
            conn, init = await _open(endpoint, settings, link)
            if not init.agent_capabilities.supports("session/close"):
                return False
            request = to_wire(CloseSessionRequest(session_id=session_id), protocol_version=init.protocol_version)
            await conn.request("session/close", request, timeout=None)
        except SessionNotFound:
            return True
        except AcpError as exc:
            logger.info("could not close %s on %s: %s", session_id, endpoint, exc)
            return False
        return True

    return await _in_time(settings, close, lambda: False)


async def locate(
    session_id: str,
    endpoints: Sequence[str | Connector | Endpoint],
    *,
    timeout: float = 5.0,
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
    timeout: float = 5.0,
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
    return await _locate_many(
        session_ids,
        endpoints,
        timeout=timeout,
        protocol_version=protocol_version,
        client_info=client_info,
        connect_options=connect_options,
        clock=clock,
    )


async def _locate_many(
    session_ids: Sequence[str],
    endpoints: Sequence[str | Connector | Endpoint],
    *,
    timeout: float = 5.0,
    protocol_version: int = 1,
    client_info: Implementation | None = None,
    connect_options: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
    live: Mapping[Endpoint, tuple[Connection, InitializeResponse]] | None = None,
) -> dict[str, Location]:
    """:func:`locate_many`; instances in ``live`` are asked over that connection (already
    initialized, left open) instead of a fresh link."""
    targets = _endpoints(endpoints)
    check_seconds("timeout", timeout)
    if protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise ConfigurationError(f"protocol_version must be one of {SUPPORTED_PROTOCOL_VERSIONS}")
    ids = tuple(dict.fromkeys(session_ids))
    if not ids:
        return {}
    clock = clock if clock is not None else SystemClock()
    settings = _Settings(
        session_ids=ids,
        timeout=timeout,
        protocol_version=protocol_version,
        client_info=client_info or _PROBE_CLIENT_INFO,
        connect_options=dict(connect_options or {}),
        clock=clock,
        start=clock.monotonic(),
        live=dict(live or {}),
    )
    results = await asyncio.gather(*(_ask_in_time(endpoint, settings) for endpoint in targets), return_exceptions=True)
    per_instance: list[_Answers] = []
    for result in results:
        if isinstance(result, BaseException):  # not one instance's failure: a bug or a cancellation
            raise result
        per_instance.append(result)
    elapsed = clock.monotonic() - settings.start
    located = {
        sid: Location(sid, tuple(answers[index] for answers in per_instance), elapsed) for index, sid in enumerate(ids)
    }
    for location in located.values() if logger.isEnabledFor(logging.DEBUG) else ():
        logger.debug(
            "located %s in %.3fs: %s",
            location.session_id,
            location.elapsed,
            ", ".join(f"{answer.endpoint}={answer.presence.value}" for answer in location.answers),
        )
    return located


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
        self._endpoints = _endpoints(endpoints)
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

    def route(self, location: Location) -> Route:
        """The fan-out decision for ``location``'s session, its home taken from the pool; a new
        session is placed by the policy among the reachable instances."""
        home = self._homes.get(location.session_id)
        decided = location.route(home if home is not None and home in self._endpoints else None)
        if decided.kind is RouteKind.NEW_SESSION:
            return attrs.evolve(decided, endpoint=self.place(decided.candidates))
        return decided
