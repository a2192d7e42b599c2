"""Lifecycle messages the client sends (``initialize``, ``session/*``, ``$/cancel_request``), the
answers it gets, and the values they carry (MCP servers, modes, config options, usage, foreground state).

Open string enumerations of the protocol (stop reasons, tool kinds, states, config categories)
are plain ``str`` so values from newer agents survive a round trip.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar, TypeAlias

import attrs

from ._fields import wire
from ._value import MetaOnly, UnknownVariant, value_types
from .capabilities import AgentCapabilities, AuthMethod, ClientCapabilities, Implementation
from .content import ContentBlock

__all__ = [
    "AvailableCommand",
    "CancelNotification",
    "CancelRequestNotification",
    "CloseSessionRequest",
    "CloseSessionResponse",
    "Cost",
    "DeleteSessionRequest",
    "DeleteSessionResponse",
    "EnvVariable",
    "ForegroundState",
    "ForkSessionRequest",
    "ForkSessionResponse",
    "HttpHeader",
    "InitializeRequest",
    "InitializeResponse",
    "ListSessionsRequest",
    "ListSessionsResponse",
    "LoadSessionRequest",
    "LoadSessionResponse",
    "McpServer",
    "McpServerAcp",
    "McpServerHttp",
    "McpServerSse",
    "McpServerStdio",
    "NewSessionRequest",
    "NewSessionResponse",
    "Probe",
    "PromptRequest",
    "PromptResponse",
    "ReplayFrom",
    "ReplayFromStart",
    "ResumeSessionRequest",
    "ResumeSessionResponse",
    "SessionConfigOption",
    "SessionConfigSelectGroup",
    "SessionConfigSelectOption",
    "SessionInfo",
    "SessionMode",
    "SessionModeState",
    "SessionStatusRequest",
    "SessionStatusResponse",
    "SetSessionConfigOptionRequest",
    "SetSessionConfigOptionResponse",
    "SetSessionModeRequest",
    "SetSessionModeResponse",
    "SetSessionModelRequest",
    "SetSessionModelResponse",
    "StopReason",
    "UnknownMcpServer",
    "UnknownReplayFrom",
    "Usage",
    "normalize_status",
]


@attrs.frozen(eq=False, repr=False)
class InitializeRequest:
    """``initialize`` params, encoded in the shape of the version being proposed: v1 ``clientInfo`` /
    ``clientCapabilities``, v2 ``info`` (required: ``None`` sends the SDK's own identity) /
    ``capabilities``. Decoding accepts either shape."""

    protocol_version: int
    client_info: Implementation | None = None
    client_capabilities: ClientCapabilities = attrs.field(factory=ClientCapabilities)
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class InitializeResponse:
    """``initialize`` result, decoded from either the v1 or the v2 shape (see :mod:`.capabilities`);
    malformed ``auth_methods`` entries are dropped."""

    protocol_version: int
    agent_info: Implementation | None = None
    agent_capabilities: AgentCapabilities = attrs.field(factory=AgentCapabilities)
    auth_methods: tuple[AuthMethod, ...] = ()
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class EnvVariable:
    """An environment variable for a spawned process."""

    name: str
    value: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class HttpHeader:
    """An HTTP header sent to an MCP server."""

    name: str
    value: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class McpServerStdio:
    """An MCP server the agent spawns (untagged in v1, ``"type": "stdio"`` in v2)."""

    type: ClassVar[str] = "stdio"

    name: str
    command: str
    args: tuple[str, ...] = attrs.field(default=(), metadata=wire(always=True))
    env: tuple[EnvVariable, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class McpServerHttp:
    """An MCP server reached over streamable HTTP."""

    type: ClassVar[str] = "http"

    name: str
    url: str
    headers: tuple[HttpHeader, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class McpServerSse:
    """An MCP server reached over SSE (v1 only)."""

    type: ClassVar[str] = "sse"

    name: str
    url: str
    headers: tuple[HttpHeader, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class McpServerAcp:
    """An MCP server tunnelled over the ACP connection itself."""

    type: ClassVar[str] = "acp"

    name: str
    server_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class UnknownMcpServer(UnknownVariant):
    """An MCP server description of a type this SDK does not know."""


McpServer: TypeAlias = McpServerStdio | McpServerHttp | McpServerSse | McpServerAcp | UnknownMcpServer


@attrs.frozen(eq=False, repr=False)
class SessionMode:
    """A mode the agent can run in (v1 ``session/set_mode``)."""

    id: str
    name: str
    description: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionModeState:
    """The current mode and the available ones."""

    current_mode_id: str
    available_modes: tuple[SessionMode, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionConfigSelectOption:
    """One choice of a ``select`` config option."""

    value: str
    name: str
    description: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionConfigSelectGroup:
    """A named group of choices (v1 ``group``, v2 ``groupId``)."""

    group: str = attrs.field(metadata=wire(name={1: "group", 2: "groupId"}))
    name: str
    options: tuple[SessionConfigSelectOption, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionConfigOption:
    """A session configuration option (a model picker, a mode, a reasoning level...). ``type``:
    ``"select"`` (``options``: the choices, flat or grouped), ``"boolean"`` or a future kind;
    ``current_value``: a value id for ``select``, a bool for ``boolean``. ``category``: ``"mode"``,
    ``"model"``, ``"model_config"``, ``"thought_level"`` or other."""

    id: str = attrs.field(metadata=wire(name={1: "id", 2: "configId"}))
    name: str
    type: str
    current_value: Any = None
    options: tuple[SessionConfigSelectOption | SessionConfigSelectGroup, ...] = ()
    description: str | None = None
    category: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class AvailableCommand:
    """A slash command the agent offers: ``name`` without the slash, ``input`` as sent (e.g.
    ``{"hint": "..."}``), ``type`` the newer v2 variant tag (``"command"``) when sent."""

    name: str
    description: str
    input: dict[str, Any] | None = None
    type: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class NewSessionRequest:
    """``session/new`` params (``mcpServers`` is always sent, as v1 requires it)."""

    cwd: str
    mcp_servers: tuple[McpServer, ...] = attrs.field(default=(), metadata=wire(always=True))
    additional_directories: tuple[str, ...] = ()
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class _NewSessionResult:
    """A new session and its settings. ``None`` means the agent did not send the member."""

    session_id: str
    modes: SessionModeState | None = None
    models: dict[str, Any] | None = None
    config_options: tuple[SessionConfigOption, ...] | None = None
    available_commands: tuple[AvailableCommand, ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class NewSessionResponse(_NewSessionResult):
    """``session/new`` result."""


@attrs.frozen(eq=False, repr=False)
class _ExistingSessionParams:
    """Params that open an existing session in a working directory."""

    session_id: str
    cwd: str
    mcp_servers: tuple[McpServer, ...] = attrs.field(default=(), metadata=wire(always=True))
    additional_directories: tuple[str, ...] = ()
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class LoadSessionRequest(_ExistingSessionParams):
    """``session/load`` params (v1 only): the agent replays the history as ``session/update``."""


@attrs.frozen(eq=False, repr=False)
class LoadSessionResponse:
    """``session/load`` result. ``session_id`` is not in the schemas, but the official SDKs' agents send it (and the
    Python SDK's HTTP server only knows a session on a connection after a result that carries it)."""

    session_id: str | None = None
    modes: SessionModeState | None = None
    models: dict[str, Any] | None = None
    config_options: tuple[SessionConfigOption, ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ReplayFromStart(MetaOnly):
    """v2 ``replayFrom``: replay the whole history."""

    type: ClassVar[str] = "start"


@attrs.frozen(eq=False, repr=False)
class UnknownReplayFrom(UnknownVariant):
    """A ``replayFrom`` of a type this SDK does not know."""


ReplayFrom: TypeAlias = ReplayFromStart | UnknownReplayFrom


@attrs.frozen(eq=False, repr=False)
class ResumeSessionRequest:
    """``session/resume`` params. ``replay_from`` exists in v2 only (not sent in v1)."""

    session_id: str
    cwd: str
    mcp_servers: tuple[McpServer, ...] = attrs.field(default=(), metadata=wire(always=True))
    additional_directories: tuple[str, ...] = ()
    replay_from: ReplayFrom | None = attrs.field(default=None, metadata=wire(versions=(2,)))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ResumeSessionResponse:
    """``session/resume`` result (``session_id``: sent by the official SDKs' agents, as for load)."""

    session_id: str | None = None
    modes: SessionModeState | None = None
    models: dict[str, Any] | None = None
    config_options: tuple[SessionConfigOption, ...] | None = None
    available_commands: tuple[AvailableCommand, ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ForkSessionRequest(_ExistingSessionParams):
    """``session/fork`` params."""


@attrs.frozen(eq=False, repr=False)
class ForkSessionResponse(_NewSessionResult):
    """``session/fork`` result: the new session."""


@attrs.frozen(eq=False, repr=False)
class _SessionParams:
    """Params that name one session and nothing else."""

    session_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CloseSessionRequest(_SessionParams):
    """``session/close`` params."""


@attrs.frozen(eq=False, repr=False)
class CloseSessionResponse(MetaOnly):
    """``session/close`` result."""


@attrs.frozen(eq=False, repr=False)
class DeleteSessionRequest(_SessionParams):
    """``session/delete`` params."""


@attrs.frozen(eq=False, repr=False)
class DeleteSessionResponse(MetaOnly):
    """``session/delete`` result."""


@attrs.frozen(eq=False, repr=False)
class ListSessionsRequest:
    """``session/list`` params (both filters optional)."""

    cwd: str | None = None
    cursor: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionInfo:
    """One entry of ``session/list``. ``updated_at`` is the RFC 3339 string as sent."""

    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None
    additional_directories: tuple[str, ...] | None = None
    archived: bool | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ListSessionsResponse:
    """``session/list`` result. ``next_cursor`` is ``None`` on the last page."""

    sessions: tuple[SessionInfo, ...] = attrs.field(default=(), metadata=wire(always=True))
    next_cursor: str | None = None
    meta: dict[str, Any] | None = None


class Probe(str, enum.Enum):
    """What an instance said to ``session/status`` about one session: the one vocabulary of a
    probe answer (a :class:`~acp_client.types.Session` record's ``status``, the recovery's own
    probe, a fan-out's answers, ``RecoveryContext`` and ``RecoveryOutcome``).

    ``ACTIVE``: in memory there (wire ``active`` / ``open``). ``INACTIVE``: known and resumable,
    not in memory (``inactive``, ``saved`` or a value this SDK does not recognize). ``UNKNOWN``:
    the instance answered -32002 (never a wire value). Only a probe that got no answer says more:
    ``UNREACHABLE``: no usable answer (the probe failed or timed out, the instance could not be
    connected or initialized in time, or its answer was malformed). ``NOT_PROBED``: the instance
    does not offer ``session/status``, so it was not asked. A session record's ``status`` is
    never one of these two.
    """

    ACTIVE = "active"
    INACTIVE = "inactive"
    UNKNOWN = "unknown"
    UNREACHABLE = "unreachable"
    NOT_PROBED = "not_probed"


#: The answers an instance can give (what a session record's ``status`` may be).
ANSWERED: frozenset[Probe] = frozenset({Probe.ACTIVE, Probe.INACTIVE, Probe.UNKNOWN})


_ACTIVE_SPELLINGS = frozenset({"active", "open"})


def normalize_status(raw: str) -> Probe:
    """A wire status string as a :class:`Probe` answer: ``active`` and ``open`` are ACTIVE, anything
    else (``inactive``, ``saved``, future values) INACTIVE, as the protocol requires."""
    return Probe.ACTIVE if raw in _ACTIVE_SPELLINGS else Probe.INACTIVE


@attrs.frozen(eq=False, repr=False)
class ForegroundState:
    """A v2 foreground-state snapshot (``idle``, ``running``, ``requires_action``, ``unknown``...):
    context, not a transition (an ``idle`` snapshot's ``stop_reason`` is the last turn's, not a new
    completion). ``raw`` is the whole state object as received."""

    state: str
    stop_reason: str | None = None
    raw: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(eq=False, repr=False)
class SessionStatusRequest(_SessionParams):
    """``session/status`` params."""


@attrs.frozen(eq=False, repr=False)
class SessionStatusResponse:
    """``session/status`` result: ``status`` normalized from ``raw_status`` (``open`` reads as
    active, ``saved`` and unknown values as inactive); ``state`` (v2 only) decoded default-on-error
    (missing, null or malformed → ``None``: "not reported", never idle)."""

    status: Probe
    raw_status: str
    state: ForegroundState | None = None
    meta: dict[str, Any] | None = None

    @classmethod
    def from_raw(cls, raw_status: str, state: ForegroundState | None = None) -> SessionStatusResponse:
        """Build one from the wire status string (normalizing it)."""
        return cls(status=normalize_status(raw_status), raw_status=raw_status, state=state)


@attrs.frozen(eq=False, repr=False)
class PromptRequest:
    """``session/prompt`` params."""

    session_id: str
    prompt: tuple[ContentBlock, ...] = attrs.field(metadata=wire(strict=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class Cost:
    """A monetary cost."""

    amount: float
    currency: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class Usage:
    """Token usage of a turn."""

    total_tokens: int
    input_tokens: int
    output_tokens: int
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None
    meta: dict[str, Any] | None = None


class StopReason(str, enum.Enum):
    """Why a prompt turn ended: the reasons ACP defines (v1 and v2 agree).

    It is an open set on the wire: :attr:`PromptResult.stop_reason
    <acp_client.state.PromptResult.stop_reason>` is one of these members when the agent sent a
    known reason, and the agent's own string, kept verbatim, when it sent another one. Members are
    strings, so ``result.stop_reason == "end_turn"`` holds too.
    """

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    MAX_TURN_REQUESTS = "max_turn_requests"
    REFUSAL = "refusal"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: str | None) -> StopReason | str | None:
        """The member for a known reason; anything else unchanged (an unknown string is kept)."""
        if isinstance(value, str) and not isinstance(value, StopReason):
            try:
                return cls(value)
            except ValueError:
                return value
        return value


@attrs.frozen(eq=False, repr=False)
class PromptResponse:
    """``session/prompt`` result.

    v1 answers when the turn ends, with ``stop_reason`` (``end_turn``, ``max_tokens``,
    ``max_turn_requests``, ``refusal``, ``cancelled``, or a future value). v2 answers when the prompt
    is accepted: ``{}`` (2026-08 draft) or ``{messageId}`` (newer), and the turn's end arrives as an
    ``idle`` :class:`~acp_client.types.StateUpdate`.
    """

    stop_reason: str | None = None
    message_id: str | None = None
    usage: Usage | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CancelNotification(_SessionParams):
    """``session/cancel`` params (a notification: cancels the session's current turn)."""


@attrs.frozen(eq=False, repr=False)
class CancelRequestNotification:
    """``$/cancel_request`` params: cancels one pending request."""

    request_id: int | str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SetSessionModeRequest:
    """``session/set_mode`` params (v1)."""

    session_id: str
    mode_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SetSessionModeResponse(MetaOnly):
    """``session/set_mode`` result."""


@attrs.frozen(eq=False, repr=False)
class SetSessionModelRequest:
    """``session/set_model`` params (unstable in the schemas; agents that offer ``models`` serve it)."""

    session_id: str
    model_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SetSessionModelResponse(MetaOnly):
    """``session/set_model`` result."""


@attrs.frozen(eq=False, repr=False)
class SetSessionConfigOptionRequest:
    """``session/set_config_option`` params. ``value``: a value id (``str``) for ``select`` options,
    a ``bool`` for ``boolean`` ones, any JSON value for a future type. ``type``: its tag; ``None``
    infers it: ``"boolean"`` for a bool, else a value id (untagged in v1, ``"id"`` in v2)."""

    session_id: str
    config_id: str
    value: Any
    type: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SetSessionConfigOptionResponse:
    """``session/set_config_option`` result: every option with its new value."""

    config_options: tuple[SessionConfigOption, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


value_types(globals())
