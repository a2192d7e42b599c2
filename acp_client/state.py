"""Observable connection states and the records the client reports to the app.

::

    connecting ──► connected ──► reconnecting(attempt, retry_in) ──► recovering ──► connected
         │             │              │    ▲        │                    │
         │             │              ▼    │        └──► suspended ──────┘ (down too long; still retrying)
         └─────────────┴──────────────┴────┴──► closed (by the app) | failed (fatal or exhausted)

    connecting ──► recovering ──► connected       (sessions restored from a session store are
                                                   recovered on the first connection)

The client never reports the same state twice in a row; each reconnect attempt is a distinct
``reconnecting`` (or ``suspended``) state carrying its attempt number.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from .types import Probe, Session, SessionUpdate, StopReason, TextContent

__all__ = [
    "LEGAL_TRANSITIONS",
    "ConnectionState",
    "Continuity",
    "OwnershipLost",
    "Probe",
    "PromptResult",
    "RecoveryContext",
    "RecoveryOutcome",
    "RecoveryPath",
    "SessionPage",
    "State",
    "StreamResumed",
    "TurnInterrupted",
    "UpdateEvent",
]


class RecoveryPath(str, enum.Enum):
    """How a session came back (or did not)."""

    RESUME = "resume"
    REPLAY = "replay"
    NEW_SESSION = "new_session"
    ABANDON = "abandon"


class Continuity(str, enum.Enum):
    """Whether the agent still holds the conversation after a recovery, from evidence only:
    ``KEPT`` (proven), ``LOST`` (the evidence shows it lacks it) or ``UNVERIFIED`` (nothing shows
    either way); docs/conversation.md says which evidence gives which.

    ``bool(continuity)`` is ``True`` only for ``KEPT``; ``str()`` and f-strings give the value.
    """

    KEPT = "kept"
    LOST = "lost"
    UNVERIFIED = "unverified"

    def __bool__(self) -> bool:
        return self is Continuity.KEPT

    def __str__(self) -> str:
        return self.value

    def weaker(self, other: Continuity) -> Continuity:
        """The weaker of the two claims (``LOST < UNVERIFIED < KEPT``): what two recoveries of one
        session, reported as one, can still claim."""
        return min(self, other, key=_CONTINUITY_STRENGTH.__getitem__)


_CONTINUITY_STRENGTH = {Continuity.LOST: 0, Continuity.UNVERIFIED: 1, Continuity.KEPT: 2}


class State(str, enum.Enum):
    """The kinds of connection state."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    RECOVERING = "recovering"
    SUSPENDED = "suspended"
    CLOSED = "closed"
    FAILED = "failed"


#: Which state may follow which (a state may follow itself only with another attempt number).
LEGAL_TRANSITIONS: dict[State, frozenset[State]] = {
    State.CONNECTING: frozenset({State.CONNECTED, State.RECONNECTING, State.RECOVERING, State.CLOSED, State.FAILED}),
    State.CONNECTED: frozenset({State.RECONNECTING, State.CLOSED, State.FAILED}),
    State.RECONNECTING: frozenset({State.RECONNECTING, State.RECOVERING, State.SUSPENDED, State.CLOSED, State.FAILED}),
    State.RECOVERING: frozenset({State.CONNECTED, State.RECONNECTING, State.SUSPENDED, State.CLOSED, State.FAILED}),
    State.SUSPENDED: frozenset({State.SUSPENDED, State.RECOVERING, State.CLOSED, State.FAILED}),
    State.CLOSED: frozenset(),
    State.FAILED: frozenset(),
}


@attrs.frozen
class ConnectionState:
    """One observable state of the client.

    Attributes:
        attempt: The reconnect attempt number (``reconnecting`` and ``suspended``).
        retry_in: Seconds until that attempt starts (``reconnecting`` and ``suspended``).
        cause: Why the client is in this state (the drop reason, the fatal error), if any.
    """

    state: State
    attempt: int | None = None
    retry_in: float | None = None
    cause: str | None = attrs.field(default=None, eq=False)

    def __str__(self) -> str:
        if self.attempt is not None:
            return f"{self.state.value}(attempt={self.attempt}, retry_in={self.retry_in or 0:.2f}s)"
        return self.state.value

    @property
    def is_terminal(self) -> bool:
        return self.state in (State.CLOSED, State.FAILED)


@attrs.frozen
class RecoveryContext:
    """What a recovery decision hook sees for one session.

    Attributes:
        session_id: The session as the app knew it before the drop.
        probe: The normalized ``session/status`` answer (``not_probed`` without the capability).
        raw_status: The status string on the wire, if the agent answered one.
        state: The v2 foreground state snapshot, if reported (never assumed idle).
        proposed: The path the decision table picked.
        protocol_version: The version negotiated on the new connection.
        capabilities: ``{"status": bool, "resume": bool, "load": bool}`` as advertised.
        endpoint: With several endpoints: the instance this recovery runs on; ``None`` otherwise.
        also_active: With several endpoints: the other instances that also claimed the session
            ``active`` (docs/many-instances.md: no copy is closed; the hook may choose).
    """

    session_id: str
    probe: Probe
    raw_status: str | None
    state: Any
    proposed: RecoveryPath
    protocol_version: int
    capabilities: dict[str, bool]
    endpoint: str | None = None
    also_active: tuple[str, ...] = ()


@attrs.frozen
class RecoveryOutcome:
    """The result of recovering one session after a reconnect.

    Attributes:
        path: The path actually taken (``abandon`` when the app or every step gave up).
        planned: The path the table (or the app's hook) picked before any degradation.
        previous_session_id: The session id before the drop.
        session_id: The id to use from now on (a new one on the new-session path; ``None`` when
            abandoned).
        continuity: Whether the agent still holds the conversation (:class:`Continuity`); the
            notes say why.
        probe: The normalized probe answer (``raw_status`` and ``state`` as in
            :class:`RecoveryContext`).
        steps: The calls made, in order, with how each ended (``"ok"``, ``"not_found"``, ...).
        notes: Degradations and fallbacks, in words.
        replayed_updates: How many ``session/update`` notifications the replay delivered.
        lost_turns: On the new-session path: how many turns the agent lost (kept as lost history).
        duration: Seconds the recovery of this session took (probe included).
        error: The last error, when the session was abandoned after failures.
        endpoint: With several endpoints: the instance the session ended on (or where the last
            step was tried when abandoned); ``None`` otherwise.
    """

    path: RecoveryPath
    planned: RecoveryPath
    previous_session_id: str
    session_id: str | None
    continuity: Continuity = attrs.field(converter=Continuity)  # a bool is refused: say which of the three
    probe: Probe
    raw_status: str | None = None
    state: Any = None
    steps: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    replayed_updates: int = 0
    duration: float = 0.0
    lost_turns: int = 0
    error: BaseException | None = attrs.field(default=None, eq=False)
    endpoint: str | None = None


@attrs.frozen
class TurnInterrupted:
    """A prompt turn that a drop cut off. It is never re-sent by the client.

    Attributes:
        session_id: The session (its id before the drop).
        prompt: The prompt content blocks as sent.
        may_have_executed: Always ``True``: the agent received the prompt.
    """

    session_id: str
    prompt: tuple[Any, ...]
    may_have_executed: bool = True


@attrs.frozen
class OwnershipLost:
    """This client no longer owns a stored session (``Callbacks.on_ownership_lost``) and has stopped
    tracking it: another client took it over, or its lease ran out (docs/session-store.md).

    Attributes:
        session_id: The session.
        owner: This client's owner name.
        holder: The owner that holds it now, when known.
        reason: What happened, for a log line.
    """

    session_id: str
    owner: str
    holder: str | None
    reason: str


@attrs.frozen
class UpdateEvent:
    """One ``session/update`` delivered to the app.

    Attributes:
        session_id: The session it belongs to (as the agent named it).
        update: The decoded update (an ``Unknown...`` value keeps unrecognized variants).
        replay: ``True`` for history a ``session/load`` or ``session/resume`` replays, not new activity.
    """

    session_id: str
    update: SessionUpdate
    replay: bool = False

    @property
    def text(self) -> str | None:
        """The text of a message or message chunk (the user's, the agent's, or its thoughts), else
        ``None``. A chunk's text is only that chunk (join them, or read the session's transcript
        for whole messages); non-text content (images, resources) does not count."""
        if not self.update.kind.endswith(("_message", "_message_chunk", "_thought", "_thought_chunk")):
            return None
        content = getattr(self.update, "content", None)
        blocks = content if isinstance(content, tuple | list) else (content,)
        texts = [block.text for block in blocks if isinstance(block, TextContent)]
        return "".join(texts) if texts else None


def _stop_reason(value: str | None) -> StopReason | str | None:
    return StopReason.parse(value)  # a named function: what the attrs plugin reads


@attrs.frozen
class PromptResult:
    """How a prompt turn ended.

    Attributes:
        stop_reason: A :class:`~acp_client.types.StopReason` member for the reasons ACP defines,
            the agent's string verbatim for any other (the set is open), or ``None``.
        message_id: The id of the inserted user message (v2), when the agent supplied one.
        usage: Token usage, when the agent reported it.
        stored: With a session store keeping transcripts: ``True`` once the turn's conversation is
            written (returned only then), ``False`` when the store failed through its retries
            (docs/session-store.md); ``None`` without a store.
    """

    stop_reason: StopReason | str | None = attrs.field(converter=_stop_reason)
    message_id: str | None = None
    usage: Any = None
    stored: bool | None = None


@attrs.frozen
class SessionPage:
    """One page of ``session/list``."""

    sessions: tuple[Session, ...]
    next_cursor: str | None = None


@attrs.frozen
class StreamResumed:
    """A broken stream was reattached to the same server-side connection (``Callbacks.on_stream_resumed``):
    the server replayed what it missed, nothing was lost or recovered (docs/reconnect-flows.md).

    Attributes:
        session_id: The session whose stream it is; ``None`` for the connection stream.
        from_event_id: The last event id the client had seen (sent as ``Last-Event-ID``).
        connection_id: The connection the stream belongs to.
        reason: Why the stream had to be reopened (reset, idle past the deadline, ended).
    """

    session_id: str | None
    from_event_id: str
    connection_id: str | None = None
    reason: str = ""
