"""What the facade hands the host: :class:`SyncEvent` (of an :class:`EventKind`) and
:class:`PermissionRequest`, the agent's question the host answers from any thread."""

from __future__ import annotations

import concurrent.futures
import enum
from typing import Any, ClassVar, Generic, Literal, TypeAlias, TypeVar, get_args

import attrs

from ..exceptions import AcpError, ConfigurationError, SessionStoreError
from ..state import ConnectionState, OwnershipLost, RecoveryOutcome, StreamResumed, TurnInterrupted, UpdateEvent
from ..types import (
    CancelledPermissionOutcome,
    PermissionOption,
    PermissionOutcome,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
)


class EventKind(str, enum.Enum):
    """What a :class:`SyncEvent` reports (see the table in :mod:`acp_client.sync`)."""

    STATE = "state"
    UPDATE = "update"
    RESUME = "resume"
    REPLAY = "replay"
    NEW_SESSION = "new_session"
    RECOVERY_FAILED = "recovery_failed"
    TURN_INTERRUPTED = "turn_interrupted"
    PERMISSION = "permission"
    PROTOCOL_ERROR = "protocol_error"
    NOTIFICATION = "notification"
    OWNERSHIP_LOST = "ownership_lost"
    STORE_ERROR = "store_error"
    STREAM_RESUMED = "stream_resumed"


@attrs.frozen(eq=False)
class PermissionRequest:
    """A ``session/request_permission`` waiting for the host's answer (a ``PERMISSION`` event).

    Answer it once, from any thread. Each answering method returns ``True`` when its answer was
    taken, ``False`` when the request was already answered, timed out (then it was answered
    ``cancelled``), or withdrawn (the turn was cancelled, the client closed).

    Attributes:
        request: The agent's request.
    """

    request: RequestPermissionRequest
    _answer: concurrent.futures.Future[PermissionOutcome] = attrs.field(repr=False)

    @property
    def session_id(self) -> str:
        return self.request.session_id

    @property
    def options(self) -> tuple[PermissionOption, ...]:
        """The choices offered."""
        return self.request.options

    @property
    def title(self) -> str | None:
        """What is asked: the v2 ``title``, or the v1 tool call's title."""
        if self.request.title is not None:
            return self.request.title
        tool_call = self.request.tool_call
        return tool_call.title if tool_call is not None else None

    @property
    def pending(self) -> bool:
        """Whether an answer is still awaited."""
        return not self._answer.done()

    @property
    def outcome(self) -> PermissionOutcome | None:
        """The answer given by the host, once given (``None`` while pending or when withdrawn)."""
        if self._answer.done() and not self._answer.cancelled():
            return self._answer.result()
        return None

    def select(self, option_id: str) -> bool:
        """Answer with the option ``option_id``.

        Raises:
            ConfigurationError: ``option_id`` is not one of :attr:`options`.
        """
        if all(option.option_id != option_id for option in self.options):
            offered = ", ".join(option.option_id for option in self.options)
            raise ConfigurationError(f"{option_id!r} is not an offered option (offered: {offered})")
        return self._settle(SelectedPermissionOutcome(option_id=option_id))

    def allow(self) -> bool:
        """Allow this once: the ``allow_once`` option, wherever the agent listed it; ``cancelled``
        when it is not offered (never the stronger ``allow_always`` the host did not ask for)."""
        return self._choose("allow_once")

    def allow_always(self) -> bool:
        """Allow from now on: the ``allow_always`` option (``cancelled`` when it is not offered,
        never a weaker choice the host did not ask for)."""
        return self._choose("allow_always")

    def reject(self) -> bool:
        """Reject this once: the ``reject_once`` option, else ``reject_always`` (``cancelled``
        when none is offered)."""
        return self._choose("reject_once", "reject_always")

    def _choose(self, *kinds: str) -> bool:
        """The first offered option of the first of ``kinds`` offered at all, else ``cancelled``."""
        option = next((option for kind in kinds for option in self.options if option.kind == kind), None)
        return self._settle(
            SelectedPermissionOutcome(option_id=option.option_id) if option else CancelledPermissionOutcome()
        )

    def cancel(self) -> bool:
        """Answer ``cancelled``."""
        return self._settle(CancelledPermissionOutcome())

    def _settle(self, outcome: PermissionOutcome) -> bool:
        try:
            self._answer.set_result(outcome)
        except concurrent.futures.InvalidStateError:
            return False
        return True


P = TypeVar("P")


@attrs.frozen
class _Event(Generic[P]):
    """An event of the kind its class names, with that kind's typed ``payload``."""

    payload: P


class StateEvent(_Event[ConnectionState]):
    """A ``state`` event: the new connection state (``on_state_change``)."""

    kind: ClassVar[Literal[EventKind.STATE]] = EventKind.STATE


class SessionUpdateEvent(_Event[UpdateEvent]):
    """An ``update`` event: one ``session/update`` (``on_update``; ``payload.replay`` tells history apart)."""

    kind: ClassVar[Literal[EventKind.UPDATE]] = EventKind.UPDATE


class ResumeEvent(_Event[RecoveryOutcome]):
    """A ``resume`` event: a session recovered by ``session/resume`` (``on_resume``)."""

    kind: ClassVar[Literal[EventKind.RESUME]] = EventKind.RESUME


class ReplayEvent(_Event[RecoveryOutcome]):
    """A ``replay`` event: a session recovered with its history replayed (``on_replay``)."""

    kind: ClassVar[Literal[EventKind.REPLAY]] = EventKind.REPLAY


class NewSessionEvent(_Event[RecoveryOutcome]):
    """A ``new_session`` event: the agent lost the session; a new one replaces it (``on_new_session``)."""

    kind: ClassVar[Literal[EventKind.NEW_SESSION]] = EventKind.NEW_SESSION


class RecoveryFailedEvent(_Event[RecoveryOutcome]):
    """A ``recovery_failed`` event: a session could not be recovered (``on_recovery_failed``)."""

    kind: ClassVar[Literal[EventKind.RECOVERY_FAILED]] = EventKind.RECOVERY_FAILED


class TurnInterruptedEvent(_Event[TurnInterrupted]):
    """A ``turn_interrupted`` event: a turn cut off by a drop (``on_turn_interrupted``)."""

    kind: ClassVar[Literal[EventKind.TURN_INTERRUPTED]] = EventKind.TURN_INTERRUPTED


class StreamResumedEvent(_Event[StreamResumed]):
    """A ``stream_resumed`` event: a broken HTTP stream was reattached, nothing lost (``on_stream_resumed``)."""

    kind: ClassVar[Literal[EventKind.STREAM_RESUMED]] = EventKind.STREAM_RESUMED


class PermissionEvent(_Event[PermissionRequest]):
    """A ``permission`` event: the agent asks; answer ``payload`` from any thread."""

    kind: ClassVar[Literal[EventKind.PERMISSION]] = EventKind.PERMISSION


class ProtocolErrorEvent(_Event[AcpError]):
    """A ``protocol_error`` event: the agent broke the protocol (``on_protocol_error``)."""

    kind: ClassVar[Literal[EventKind.PROTOCOL_ERROR]] = EventKind.PROTOCOL_ERROR


class NotificationEvent(_Event[tuple[str, Any]]):
    """A ``notification`` event: another notification, as ``(method, params)`` (``on_notification``)."""

    kind: ClassVar[Literal[EventKind.NOTIFICATION]] = EventKind.NOTIFICATION

    @property
    def method(self) -> str:
        return self.payload[0]

    @property
    def params(self) -> Any:
        return self.payload[1]


class OwnershipLostEvent(_Event[OwnershipLost]):
    """An ``ownership_lost`` event: a stored session this client owned is another's now, or its lease
    ran out (``on_ownership_lost``); the client no longer tracks it."""

    kind: ClassVar[Literal[EventKind.OWNERSHIP_LOST]] = EventKind.OWNERSHIP_LOST


class StoreErrorEvent(_Event[SessionStoreError]):
    """A ``store_error`` event: a write the client made to its session store failed (``on_store_error``)."""

    kind: ClassVar[Literal[EventKind.STORE_ERROR]] = EventKind.STORE_ERROR


#: One event put on the host's ``event_queue``: a class per :class:`EventKind`, each with a typed
#: ``payload`` (the record the matching callback gets), so ``match`` / ``isinstance`` on it is
#: checked by a type checker. ``event.kind`` names the kind too.
SyncEvent: TypeAlias = (
    StateEvent
    | SessionUpdateEvent
    | ResumeEvent
    | ReplayEvent
    | NewSessionEvent
    | RecoveryFailedEvent
    | TurnInterruptedEvent
    | StreamResumedEvent
    | PermissionEvent
    | ProtocolErrorEvent
    | NotificationEvent
    | OwnershipLostEvent
    | StoreErrorEvent
)

#: The event class of each kind.
EVENT_CLASSES: dict[EventKind, type[SyncEvent]] = {cls.kind: cls for cls in get_args(SyncEvent)}
