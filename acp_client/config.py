"""Configuration as values: what :class:`~acp_client.AcpClient` and
:class:`~acp_client.sync.SyncAcpClient` are told, as small frozen objects checked when built.

::

    client = AcpClient(
        "ws://127.0.0.1:8000/acp",
        callbacks=Callbacks(on_new_session=warn_user, on_update=render),
        timeouts=Timeouts(request=30.0),
        queue=QueueOptions(max_size=20),
    )

Every value is checked when built, and an invalid one raises
:class:`~acp_client.exceptions.ConfigurationError` naming the option, so a mistake fails where it
is made, not at the first reconnect. Seconds and counts are finite ``int``/``float`` values, never
a ``bool``, NaN or an infinity; "no limit" is ``None`` where an option allows it. Derive a variant
with ``attrs.evolve(value, ...)``.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Final, TypedDict

import attrs

from ._util._checks import check_count, check_flag, check_instance, check_seconds, field_check
from .exceptions import ConfigurationError, SessionStoreError
from .state import (
    ConnectionState,
    OwnershipLost,
    RecoveryContext,
    RecoveryOutcome,
    StreamResumed,
    TurnInterrupted,
    UpdateEvent,
)

if TYPE_CHECKING:
    from .clock import Clock
    from .handlers import ClientHandlers
    from .retry import RetryPolicy
    from .store.base import SessionStore, StoredSession
    from .telemetry import Telemetry
    from .transports import CookieStore, Limits, TlsConfig
    from .types import Implementation

__all__ = [
    "USE_CLIENT_DEFAULT",
    "Callbacks",
    "ClientOptions",
    "QueueOptions",
    "Timeouts",
    "UseClientDefault",
    "check_instance",
    "check_seconds",
]


class UseClientDefault(enum.Enum):
    """The type of :data:`USE_CLIENT_DEFAULT` (one value; compare with ``is``)."""

    USE_CLIENT_DEFAULT = "USE_CLIENT_DEFAULT"

    def __repr__(self) -> str:
        return "USE_CLIENT_DEFAULT"

    __str__ = __repr__


#: A call's ``timeout=`` when not given: the client's configured timeout for that kind of call
#: (``Timeouts.request`` for a request, ``Timeouts.probe`` for ``locate``, ``default_timeout`` on
#: the sync facade). ``timeout=None`` always means *no limit*; a number is that many seconds.
USE_CLIENT_DEFAULT: Final = UseClientDefault.USE_CLIENT_DEFAULT


def _callable(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not callable(value):
        raise ConfigurationError(f"{attribute.name} must be callable or None, not {type(value).__name__} ({value!r})")


@attrs.frozen(kw_only=True)
class Callbacks:
    """What the client tells the app, and what it asks it. Every field is optional.

    Each may be a plain function or an ``async def``; one that raises is logged, never fatal (see
    :mod:`acp_client._util._delivery`). On :class:`~acp_client.sync.SyncAcpClient` they run on the
    host's callback executor.

    Attributes:
        on_state_change: Every new :class:`~acp_client.state.ConnectionState`.
        on_update: Every :class:`~acp_client.state.UpdateEvent` (see also
            :meth:`AcpClient.add_update_listener <acp_client.AcpClient.add_update_listener>`).
        on_resume, on_replay, on_new_session: A session recovered on that path, with its
            :class:`~acp_client.state.RecoveryOutcome` (awaited before queued requests are sent).
        on_recovery_failed: A session was abandoned (its outcome).
        on_turn_interrupted: A drop cut a prompt turn off (a :class:`~acp_client.state.TurnInterrupted`).
        on_stream_resumed: A broken Streamable HTTP stream was reattached from its last event id
            (a :class:`~acp_client.transports.base.StreamResumed`): nothing lost, the turn goes on.
        on_protocol_error: A protocol error the agent committed (an :class:`~acp_client.exceptions.AcpError`).
        on_notification: ``(method, params)`` of a notification other than ``session/update``.
        decide_recovery: Sees a :class:`~acp_client.state.RecoveryContext`, returns a
            :class:`~acp_client.state.RecoveryPath` (or ``None`` to keep the proposed one).
        refresh_credentials: Called once when the agent refuses the credentials (401/403) during
            a (re)connect, to update the connector's headers; a second refusal fails the client.
        decide_adoption: With a shared session store: returns ``True`` to adopt an adoptable
            :class:`~acp_client.store.StoredSession` (``lease`` says who held it). Without it,
            every adoptable session is adopted (unless ``auto_adopt=False``).
        on_ownership_lost: With a shared session store: this client lost a session it owned
            (an :class:`~acp_client.state.OwnershipLost`); it no longer tracks it.
        on_store_error: A write the client made on its own to the ``session_store`` failed (the
            :class:`~acp_client.exceptions.SessionStoreError`; also logged at WARNING). The session
            goes on in memory, out of the store until a later write succeeds. A fenced write is
            ``on_ownership_lost`` instead.

    Raises:
        ConfigurationError: A field is neither callable nor ``None``.
    """

    on_state_change: Callable[[ConnectionState], Any] | None = attrs.field(default=None, validator=_callable)
    on_update: Callable[[UpdateEvent], Any] | None = attrs.field(default=None, validator=_callable)
    on_resume: Callable[[RecoveryOutcome], Any] | None = attrs.field(default=None, validator=_callable)
    on_replay: Callable[[RecoveryOutcome], Any] | None = attrs.field(default=None, validator=_callable)
    on_new_session: Callable[[RecoveryOutcome], Any] | None = attrs.field(default=None, validator=_callable)
    on_recovery_failed: Callable[[RecoveryOutcome], Any] | None = attrs.field(default=None, validator=_callable)
    on_turn_interrupted: Callable[[TurnInterrupted], Any] | None = attrs.field(default=None, validator=_callable)
    on_stream_resumed: Callable[[StreamResumed], Any] | None = attrs.field(default=None, validator=_callable)
    on_protocol_error: Callable[[Exception], Any] | None = attrs.field(default=None, validator=_callable)
    on_notification: Callable[[str, Any], Any] | None = attrs.field(default=None, validator=_callable)
    decide_recovery: Callable[[RecoveryContext], Any] | None = attrs.field(default=None, validator=_callable)
    refresh_credentials: Callable[[], Any] | None = attrs.field(default=None, validator=_callable)
    decide_adoption: Callable[[StoredSession], Any] | None = attrs.field(default=None, validator=_callable)
    on_ownership_lost: Callable[[OwnershipLost], Any] | None = attrs.field(default=None, validator=_callable)
    on_store_error: Callable[[SessionStoreError], Any] | None = attrs.field(default=None, validator=_callable)


@attrs.frozen(kw_only=True)
class Timeouts:
    """How long the client waits, in seconds.

    Attributes:
        request: Default timeout of requests other than prompts (``None``: no limit). A prompt
            waits as long as its turn runs unless given its own ``timeout``.
        connect: Bounds the whole opening of each (re)connection (TCP, TLS, handshake,
            ``initialize`` and its answer), whatever the transport; then
            :class:`~acp_client.exceptions.ConnectTimeout`.
        probe: Timeout of each ``session/status`` probe during recovery.
        cancel_grace: How long the agent gets to end a turn after ``session/cancel`` (sent when
            a prompt times out or its task is cancelled); the next prompt on that session waits
            as long, then fails with :class:`~acp_client.exceptions.TurnInProgress`
            (docs/conversation.md).

    Raises:
        ConfigurationError: Not a finite number of seconds above zero.
    """

    request: float | None = attrs.field(default=60.0, validator=field_check(check_seconds, optional=True))
    connect: float = attrs.field(default=30.0, validator=field_check(check_seconds))
    probe: float = attrs.field(default=10.0, validator=field_check(check_seconds))
    cancel_grace: float = attrs.field(default=5.0, validator=field_check(check_seconds))


@attrs.frozen(kw_only=True)
class QueueOptions:
    """How requests made while reconnecting are held until recovery ends.

    Attributes:
        enabled: Hold them (``True``) or fail them at once with
            :class:`~acp_client.exceptions.ConnectionLost`.
        max_size: The most requests held at once; more fail with
            :class:`~acp_client.exceptions.QueueFull`.
        max_age: Seconds a request may wait before failing with ``ConnectionLost``.

    Raises:
        ConfigurationError: A value of the wrong type or out of range.
    """

    enabled: bool = attrs.field(default=True, validator=field_check(check_flag))
    max_size: int = attrs.field(default=100, validator=field_check(check_count))
    max_age: float = attrs.field(default=60.0, validator=field_check(check_seconds))


class ClientOptions(TypedDict, total=False):
    """The keyword options of :class:`~acp_client.AcpClient` and
    :class:`~acp_client.sync.SyncAcpClient`, declared once: a misspelt or mistyped keyword is a
    type error in both, and at run time a :class:`~acp_client.exceptions.ConfigurationError` that
    suggests the closest option. Build them once and pass them to either: ``AcpClient(url, **options)``.

    Every key is optional (its default in brackets):

    * ``protocol_version`` (1): the ACP version proposed in ``initialize`` (2 = draft); the client
      speaks whatever supported version the agent answers with.
    * ``client_info`` (this library's name and version): sent to the agent.
    * ``handlers`` (none): answers to agent→client requests (:mod:`acp_client.handlers`).
    * ``retry`` (``RetryPolicy()``): the reconnect policy; ``None``: a drop fails the client.
    * ``callbacks`` (none), ``timeouts`` (``Timeouts()``), ``queue`` (``QueueOptions()``).
    * ``recovery_concurrency`` (4): how many sessions recover at once after a reconnect.
    * ``headers``, ``secret_headers``, ``tls``, ``cookies``, ``limits`` (none): network settings
      (:mod:`acp_client.transports`). ``cookies`` defaults to one store per client, cleared by
      ``aclose()`` (a store the app passes is left as it is).
    * ``transport_options`` (none): extra keyword arguments for the connector built from the URL.
    * ``clock`` (the system clock), ``rng`` (a private one): time and the retry jitter's random
      source (a :class:`~acp_client.testing.FakeClock` in tests).
    * ``keep_transcripts`` (``True``): keep a :class:`~acp_client.transcript.Transcript` per session.
    * ``replays_on_resume`` (``None``: detect): whether the agent replays the whole history during
      a plain ``session/resume`` (some do). Detected: a resume whose first message repeats the
      start of the known history is a replay (de-duplicated, reported as one). ``True``: every
      resume is; ``False``: none is.
    * ``retry_unsent_prompts`` (``False``): once recovery ends, re-send a prompt that failed with
      ``ConnectionLost(may_have_executed=False)``; one the agent may have acted on never is.
    * ``carry_lost_context`` (``False``): when recovery had to start a new session, the next
      prompt carries the lost conversation as a text block before it (``docs/conversation.md``).
    * ``max_incoming_requests`` (64): agent→client requests handled at once per connection
      (more are refused with -32603 until one finishes).
    * ``session_store`` (none), ``session_store_key`` (the endpoint's key; required with a
      connector): keep the sessions in this :class:`~acp_client.store.SessionStore` (the app owns
      it); ``connect()`` recovers the ones stored for this endpoint (``docs/session-store.md``).
    * ``owner`` (host, pid and a random suffix), ``lease_duration`` (30 s), ``auto_adopt``
      (``True``): with a shared store, the name this client owns its sessions under, how long a
      lease lasts unless renewed (each third of it), and whether sessions nobody holds are adopted
      automatically (through ``Callbacks.decide_adoption`` when set).
    * ``telemetry`` (on with the ``otel`` extra): where spans and metrics go
      (:class:`~acp_client.telemetry.Telemetry`, ``docs/telemetry.md``).
    """

    protocol_version: int
    client_info: Implementation | None
    handlers: ClientHandlers | None
    retry: RetryPolicy | None
    callbacks: Callbacks | None
    timeouts: Timeouts | None
    queue: QueueOptions | None
    recovery_concurrency: int
    headers: Mapping[str, str] | None
    secret_headers: Collection[str]
    tls: TlsConfig | None
    cookies: CookieStore | None
    limits: Limits | None
    transport_options: Mapping[str, Any] | None
    clock: Clock | None
    rng: random.Random | None
    keep_transcripts: bool
    replays_on_resume: bool | None
    retry_unsent_prompts: bool
    carry_lost_context: bool
    max_incoming_requests: int
    session_store: SessionStore | None
    session_store_key: str | None
    owner: str | None
    lease_duration: float
    auto_adopt: bool
    telemetry: Telemetry | None
