"""Where a session is: the instances of an agent, what each said about a session, and the route.

An :class:`Endpoint` names one instance. :meth:`acp_client.AcpClient.locate` gives a
:class:`Location`: every instance's :class:`InstanceAnswer`; :meth:`Location.route` names the
instance a session goes to (:class:`Route`). Values only, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from ._recovery import _decisions as _recovery
from ._recovery._decisions import Route, RouteKind
from .exceptions import ConfigurationError
from .state import Probe
from .transports._security import redact_url
from .transports.base import Connector
from .transports.endpoint import connector_for
from .types import ForegroundState, Implementation

__all__ = ["Endpoint", "InstanceAnswer", "Location", "Probe", "Route", "RouteKind"]


@attrs.frozen
class Endpoint:
    """One instance of the agent.

    Attributes:
        url: ``ws://``, ``wss://``, ``http://``, ``https://``; with ``connector`` set, any label.
            Its repr shows it redacted.
        name: A short name for logs, outcomes, handles and span attributes (default: ``url``
            redacted: user-info and the values of secret-looking query parameters are ``***``).
        connector: Opens links to this instance instead of a connector built from ``url``
            (e.g. a :class:`~acp_client.testing.MemoryConnector`). Not part of equality.
    """

    url: str = attrs.field(repr=lambda url: repr(redact_url(url)))
    name: str = attrs.field(default=attrs.Factory(lambda self: redact_url(self.url), takes_self=True))
    connector: Connector | None = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def of(cls, value: str | Connector | Endpoint) -> Endpoint:
        """An endpoint from a URL, a connector (named by its ``target``) or an endpoint."""
        if isinstance(value, Endpoint):
            return value
        if isinstance(value, str):
            return cls(value)
        return cls(value.target, connector=value)

    def open(self, **options: Any) -> Connector:
        """``connector``, or one built from ``url`` with ``options`` (``headers``, ``tls``, ...).

        Raises:
            ConfigurationError: ``url`` has an unsupported scheme.
        """
        if self.connector is not None:
            return self.connector
        return connector_for(self.url, **options)

    @classmethod
    def many(cls, values: Iterable[str | Connector | Endpoint]) -> tuple[Endpoint, ...]:
        """Endpoints from URLs, connectors or endpoints (at least one, names distinct).

        Raises:
            ConfigurationError: No endpoints, or two with one name.
        """
        endpoints = tuple(cls.of(value) for value in values)
        if not endpoints:
            raise ConfigurationError("at least one endpoint is needed")
        names = [endpoint.name for endpoint in endpoints]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigurationError(f"endpoint names must be distinct; repeated: {', '.join(duplicates)}")
        return endpoints

    def __str__(self) -> str:
        return self.name


@attrs.frozen
class InstanceAnswer:
    """What one instance said about one session.

    Attributes:
        endpoint: The instance.
        probe: ``active``, ``inactive``, ``unknown`` (-32002) or ``unreachable``.
        raw_status: The status string on the wire, when the instance answered one.
        state: The v2 foreground state snapshot, when reported.
        agent: The identity the instance gave in ``initialize`` (``agentInfo`` / ``info``).
        elapsed: Seconds from the start of the locate to this answer.
        error: Why the instance is ``unreachable`` (a connect error, a timeout, ...), else ``None``.
    """

    endpoint: Endpoint
    probe: Probe
    raw_status: str | None = None
    state: ForegroundState | None = None
    agent: Implementation | None = None
    elapsed: float = 0.0
    error: BaseException | None = attrs.field(default=None, eq=False)


@attrs.frozen
class Location:
    """Every instance's answer about one session (from a locate).

    Attributes:
        session_id: The session asked about.
        answers: One answer per instance, in the order the endpoints were given.
        elapsed: Seconds the whole fan-out took.
    """

    session_id: str
    answers: tuple[InstanceAnswer, ...]
    elapsed: float = 0.0

    def _with(self, probe: Probe) -> tuple[Endpoint, ...]:
        return tuple(answer.endpoint for answer in self.answers if answer.probe is probe)

    @property
    def active(self) -> tuple[Endpoint, ...]:
        """The instances that have the session in memory."""
        return self._with(Probe.ACTIVE)

    @property
    def inactive(self) -> tuple[Endpoint, ...]:
        """The instances that know the session but do not have it in memory."""
        return self._with(Probe.INACTIVE)

    @property
    def unknown(self) -> tuple[Endpoint, ...]:
        """The instances that answered -32002."""
        return self._with(Probe.UNKNOWN)

    @property
    def unreachable(self) -> tuple[Endpoint, ...]:
        """The instances that gave no usable answer."""
        return self._with(Probe.UNREACHABLE)

    def answer(self, endpoint: str | Endpoint) -> InstanceAnswer:
        """The answer of one instance (by endpoint or name).

        Raises:
            KeyError: No such instance in this location.
        """
        for answer in self.answers:
            if endpoint in (answer.endpoint, answer.endpoint.name):
                return answer
        raise KeyError(str(endpoint))

    def route(self, home: str | Endpoint | None = None) -> Route[Endpoint]:
        """The fan-out decision for this session, given the instance it lived on (``home``), if
        known. Among several ``inactive`` (or ``active``) instances the first to answer wins; a
        new session's ``endpoint`` is ``None`` and ``candidates`` lists the reachable instances.

        Raises:
            KeyError: ``home`` is not one of the instances.
        """
        if home is not None:
            home = self.answer(home).endpoint
        order = [answer.endpoint for answer in sorted(self.answers, key=lambda answer: answer.elapsed)]
        return _recovery.route([(answer.endpoint, answer.probe) for answer in self.answers], home, order)
