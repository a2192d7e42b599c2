"""``session/update`` notifications: every variant of the v1, v2 and newer (SDK 2.4.0) schemas.

Each variant class is named after its wire tag (``agent_message_chunk`` → :class:`AgentMessageChunk`)
and exposes it as the class attribute ``kind``. Every variant has a ``message_id`` (an attribute, or a
property that is ``None`` for variants without one). A tag this SDK does not know decodes to
:class:`UnknownSessionUpdate`, which keeps the raw payload.

v2 message semantics: ``*_chunk`` variants append to the message ``message_id`` names; the
full-message variants (:class:`UserMessage`, :class:`AgentMessage`, :class:`AgentThought`) replace
it (upsert), which is what makes replay de-duplication possible. A v2 turn ends with an ``idle``
:class:`StateUpdate` carrying the ``stop_reason``.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeAlias

import attrs

from ._fields import wire
from ._value import UnknownVariant, value_types
from .content import ContentBlock
from .lifecycle import AvailableCommand, Cost, ForegroundState, SessionConfigOption, Usage

__all__ = [
    "AgentMessage",
    "AgentMessageChunk",
    "AgentThought",
    "AgentThoughtChunk",
    "AvailableCommandsUpdate",
    "CompactionSummaryChunk",
    "CompactionUpdate",
    "ConfigOptionUpdate",
    "CurrentModeUpdate",
    "Notice",
    "Plan",
    "PlanContent",
    "PlanEntry",
    "PlanFile",
    "PlanItems",
    "PlanMarkdown",
    "PlanRemoved",
    "PlanUpdate",
    "SessionInfoUpdate",
    "SessionMessage",
    "SessionMessageChunk",
    "SessionNotification",
    "SessionUpdate",
    "StateUpdate",
    "SubagentUpdate",
    "TerminalExitStatus",
    "TerminalOutput",
    "TerminalOutputChunk",
    "TerminalUpdate",
    "ToolCall",
    "ToolCallContent",
    "ToolCallContentBlock",
    "ToolCallContentChunk",
    "ToolCallDiff",
    "ToolCallLocation",
    "ToolCallTerminal",
    "ToolCallUpdate",
    "UnknownPlanContent",
    "UnknownSessionUpdate",
    "UnknownToolCallContent",
    "UsageUpdate",
    "UserMessage",
    "UserMessageChunk",
]


class _NoMessageId:
    """Mixin: the variant carries no message id."""

    __slots__ = ()

    @property
    def message_id(self) -> str | None:
        """Always ``None``: this variant belongs to no message."""
        return None


@attrs.frozen(eq=False, repr=False)
class UserMessageChunk:
    """A piece of a user message (appended to ``message_id``'s message when one is given)."""

    kind: ClassVar[str] = "user_message_chunk"

    content: ContentBlock
    message_id: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class AgentMessageChunk:
    """A piece of the agent's reply."""

    kind: ClassVar[str] = "agent_message_chunk"

    content: ContentBlock
    message_id: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class AgentThoughtChunk:
    """A piece of the agent's reasoning."""

    kind: ClassVar[str] = "agent_thought_chunk"

    content: ContentBlock
    message_id: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class UserMessage:
    """v2: a whole user message (upsert by ``message_id``); ``content`` ``None`` when not sent."""

    kind: ClassVar[str] = "user_message"

    message_id: str
    content: tuple[ContentBlock, ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class AgentMessage:
    """v2: a whole agent message (upsert by ``message_id``)."""

    kind: ClassVar[str] = "agent_message"

    message_id: str
    content: tuple[ContentBlock, ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class AgentThought:
    """v2: a whole agent thought (upsert by ``message_id``)."""

    kind: ClassVar[str] = "agent_thought"

    message_id: str
    content: tuple[ContentBlock, ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionMessage:
    """Newer schemas: a message between sessions (e.g. to or from a subagent)."""

    kind: ClassVar[str] = "session_message"

    message_id: str
    sender_session_id: str | None = None
    recipient_session_id: str | None = None
    sender_message_id: str | None = None
    recipient_message_id: str | None = None
    content: tuple[ContentBlock, ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionMessageChunk:
    """Newer schemas: a piece of a :class:`SessionMessage`."""

    kind: ClassVar[str] = "session_message_chunk"

    message_id: str
    content: ContentBlock
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ToolCallContentBlock:
    """Tool-call content that is a plain content block (wire tag ``content``)."""

    type: ClassVar[str] = "content"

    content: ContentBlock
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ToolCallDiff:
    """A file modification (wire tag ``diff``): v1 sends ``path`` / ``old_text`` / ``new_text``; v2
    sends ``changes`` (and maybe a ``patch``), kept as the raw objects."""

    type: ClassVar[str] = "diff"

    path: str | None = None
    new_text: str | None = None
    old_text: str | None = None
    changes: tuple[dict[str, Any], ...] | None = None
    patch: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ToolCallTerminal:
    """A live terminal embedded in a tool call (wire tag ``terminal``)."""

    type: ClassVar[str] = "terminal"

    terminal_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class UnknownToolCallContent(UnknownVariant):
    """Tool-call content of a type this SDK does not know."""


ToolCallContent: TypeAlias = ToolCallContentBlock | ToolCallDiff | ToolCallTerminal | UnknownToolCallContent


@attrs.frozen(eq=False, repr=False)
class ToolCallLocation:
    """A file location a tool call works on."""

    path: str
    line: int | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ToolCall(_NoMessageId):
    """v1: a new tool call. ``tool_kind`` (wire ``kind``; ``kind`` is every update's variant tag)
    and ``status`` are open sets of strings."""

    kind: ClassVar[str] = "tool_call"

    tool_call_id: str
    title: str
    tool_kind: str | None = attrs.field(default=None, metadata=wire(name="kind"))
    status: str | None = None
    name: str | None = None
    content: tuple[ToolCallContent, ...] = ()
    locations: tuple[ToolCallLocation, ...] = ()
    raw_input: Any = None
    raw_output: Any = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ToolCallUpdate(_NoMessageId):
    """An update to a tool call (v2: also its creation); fields left ``None`` are unchanged. Also the ``toolCall`` of a
    permission request. ``tool_kind`` is wire ``kind``; ``capabilities`` (newer v2) is kept as sent."""

    kind: ClassVar[str] = "tool_call_update"

    tool_call_id: str
    title: str | None = None
    tool_kind: str | None = attrs.field(default=None, metadata=wire(name="kind"))
    status: str | None = None
    name: str | None = None
    content: tuple[ToolCallContent, ...] | None = None
    locations: tuple[ToolCallLocation, ...] | None = None
    raw_input: Any = None
    raw_output: Any = None
    capabilities: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ToolCallContentChunk(_NoMessageId):
    """v2: one more piece of content for a tool call."""

    kind: ClassVar[str] = "tool_call_content_chunk"

    tool_call_id: str
    content: ToolCallContent
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class TerminalExitStatus:
    """How a terminal's command ended."""

    exit_code: int | None = None
    signal: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class TerminalOutput:
    """A terminal's output so far."""

    data: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class TerminalUpdate(_NoMessageId):
    """v2: the state of an agent-run terminal. ``size`` / ``capabilities`` are kept as sent."""

    kind: ClassVar[str] = "terminal_update"

    terminal_id: str
    command: str | None = None
    cwd: str | None = None
    output: TerminalOutput | None = None
    exit_status: TerminalExitStatus | None = None
    size: dict[str, Any] | None = None
    capabilities: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class TerminalOutputChunk(_NoMessageId):
    """v2: more output of an agent-run terminal."""

    kind: ClassVar[str] = "terminal_output_chunk"

    terminal_id: str
    data: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class PlanEntry:
    """One step of a plan. ``priority`` and ``status`` are open strings."""

    content: str
    priority: str
    status: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class Plan(_NoMessageId):
    """v1: the agent's whole plan (replaces the previous one)."""

    kind: ClassVar[str] = "plan"

    entries: tuple[PlanEntry, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class PlanItems:
    """Plan content as a list of entries (wire tag ``items``)."""

    type: ClassVar[str] = "items"

    plan_id: str
    entries: tuple[PlanEntry, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class PlanFile:
    """Plan content kept in a file (wire tag ``file``)."""

    type: ClassVar[str] = "file"

    plan_id: str
    uri: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class PlanMarkdown:
    """Plan content as markdown (wire tag ``markdown``)."""

    type: ClassVar[str] = "markdown"

    plan_id: str
    content: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class UnknownPlanContent(UnknownVariant):
    """Plan content of a type this SDK does not know."""


PlanContent: TypeAlias = PlanItems | PlanFile | PlanMarkdown | UnknownPlanContent


@attrs.frozen(eq=False, repr=False)
class PlanUpdate(_NoMessageId):
    """Creates or replaces the plan ``plan.plan_id``."""

    kind: ClassVar[str] = "plan_update"

    plan: PlanContent
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class PlanRemoved(_NoMessageId):
    """Removes the plan ``plan_id``."""

    kind: ClassVar[str] = "plan_removed"

    plan_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class AvailableCommandsUpdate(_NoMessageId):
    """The slash commands the agent now offers."""

    kind: ClassVar[str] = "available_commands_update"

    available_commands: tuple[AvailableCommand, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CurrentModeUpdate(_NoMessageId):
    """v1: the session switched mode."""

    kind: ClassVar[str] = "current_mode_update"

    current_mode_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ConfigOptionUpdate(_NoMessageId):
    """The session's config options changed (all of them, with current values)."""

    kind: ClassVar[str] = "config_option_update"

    config_options: tuple[SessionConfigOption, ...] = attrs.field(default=(), metadata=wire(always=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionInfoUpdate(_NoMessageId):
    """The session's title or update time changed (``updated_at``: RFC 3339 string as sent)."""

    kind: ClassVar[str] = "session_info_update"

    title: str | None = None
    updated_at: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class UsageUpdate(_NoMessageId):
    """Context-window usage: ``used`` of ``size`` tokens, and the cost so far."""

    kind: ClassVar[str] = "usage_update"

    used: int
    size: int
    cost: Cost | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class Notice(_NoMessageId):
    """Something the user should know. ``severity``: ``info``, ``warning``, ``error`` or other."""

    kind: ClassVar[str] = "notice"

    severity: str
    title: str
    description: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CompactionUpdate(_NoMessageId):
    """Progress of a context compaction. ``status``: ``in_progress``, ``completed``... (open)."""

    kind: ClassVar[str] = "compaction_update"

    compaction_id: str
    status: str
    summary: tuple[ContentBlock, ...] | None = None
    error: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CompactionSummaryChunk(_NoMessageId):
    """A piece of a compaction's summary."""

    kind: ClassVar[str] = "compaction_summary_chunk"

    compaction_id: str
    content: ContentBlock
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class StateUpdate(_NoMessageId):
    """v2: the session's foreground state changed.

    ``state``: ``running``, ``idle``, ``requires_action``, ``unknown`` or a future value. An
    ``idle`` update ends a turn and carries its ``stop_reason`` (and maybe ``usage``; ``error`` when
    the stop reason is ``error``). ``background`` (newer v2) is kept as the raw objects.
    """

    kind: ClassVar[str] = "state_update"

    state: str
    stop_reason: str | None = None
    usage: Usage | None = None
    error: dict[str, Any] | None = None
    background: tuple[dict[str, Any], ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SubagentUpdate(_NoMessageId):
    """Newer schemas: a subagent session's metadata or state. ``capabilities`` kept as sent."""

    kind: ClassVar[str] = "subagent_update"

    session_id: str
    title: str | None = None
    description: str | None = None
    capabilities: dict[str, Any] | None = None
    state: ForegroundState | None = None
    cwd: str | None = None
    additional_directories: tuple[str, ...] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class UnknownSessionUpdate:
    """A ``session/update`` variant this SDK does not know: ``kind`` is its wire tag
    (``sessionUpdate``), ``raw`` the whole update object, as received."""

    kind: str
    raw: dict[str, Any] = attrs.field(factory=dict)

    @property
    def message_id(self) -> str | None:
        """The raw ``messageId``, when it is a string."""
        value = self.raw.get("messageId")
        return value if isinstance(value, str) else None


SessionUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | UserMessage
    | AgentMessage
    | AgentThought
    | ToolCall
    | ToolCallUpdate
    | ToolCallContentChunk
    | TerminalUpdate
    | TerminalOutputChunk
    | Plan
    | PlanUpdate
    | PlanRemoved
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | SessionInfoUpdate
    | UsageUpdate
    | Notice
    | CompactionUpdate
    | CompactionSummaryChunk
    | StateUpdate
    | SubagentUpdate
    | SessionMessage
    | SessionMessageChunk
    | UnknownSessionUpdate
)


@attrs.frozen(eq=False, repr=False)
class SessionNotification:
    """``session/update`` params: one update for one session."""

    session_id: str
    update: SessionUpdate
    meta: dict[str, Any] | None = None


value_types(globals())
