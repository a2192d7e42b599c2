"""Requests the agent sends to the client, and the client's answers.

``session/request_permission``, ``fs/read_text_file`` and ``fs/write_text_file`` (v1),
``terminal/*`` (v1), ``elicitation/create`` and the ``elicitation/complete`` notification.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeAlias

import attrs

from ._fields import wire
from ._value import MetaOnly, UnknownVariant, value_types
from .lifecycle import EnvVariable
from .updates import TerminalExitStatus, ToolCallUpdate

__all__ = [
    "CancelledPermissionOutcome",
    "CommandPermissionSubject",
    "CompleteElicitationNotification",
    "CreateElicitationRequest",
    "CreateElicitationResponse",
    "CreateTerminalRequest",
    "CreateTerminalResponse",
    "KillTerminalCommandRequest",
    "KillTerminalCommandResponse",
    "PermissionOption",
    "PermissionOutcome",
    "PermissionSubject",
    "ReadTextFileRequest",
    "ReadTextFileResponse",
    "ReleaseTerminalRequest",
    "ReleaseTerminalResponse",
    "RequestPermissionRequest",
    "RequestPermissionResponse",
    "SelectedPermissionOutcome",
    "TerminalOutputRequest",
    "TerminalOutputResponse",
    "ToolCallPermissionSubject",
    "UnknownPermissionOutcome",
    "UnknownPermissionSubject",
    "WaitForTerminalExitRequest",
    "WaitForTerminalExitResponse",
    "WriteTextFileRequest",
    "WriteTextFileResponse",
]


@attrs.frozen(eq=False, repr=False)
class PermissionOption:
    """A choice offered to the user. ``kind``: ``allow_once``, ``allow_always``, ``reject_once``,
    ``reject_always`` or a future value."""

    option_id: str
    name: str
    kind: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ToolCallPermissionSubject:
    """v2: the permission is about a tool call (wire tag ``tool_call``)."""

    type: ClassVar[str] = "tool_call"

    tool_call: ToolCallUpdate
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CommandPermissionSubject:
    """v2: the permission is about running a command (wire tag ``command``)."""

    type: ClassVar[str] = "command"

    command: str
    cwd: str
    tool_call_id: str | None = None
    terminal_id: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class UnknownPermissionSubject(UnknownVariant):
    """A permission subject of a type this SDK does not know."""


PermissionSubject: TypeAlias = ToolCallPermissionSubject | CommandPermissionSubject | UnknownPermissionSubject


@attrs.frozen(eq=False, repr=False)
class RequestPermissionRequest:
    """``session/request_permission`` params.

    v1 sends ``tool_call``; v2 sends ``title`` (what is being asked; maybe more detail in
    ``description``) and a ``subject`` (what the permission is about). When a v2 subject is a tool
    call, ``tool_call`` is filled from it too, so handlers can read ``tool_call`` in both versions.
    """

    session_id: str
    tool_call: ToolCallUpdate | None = attrs.field(default=None, metadata=wire(versions=(1,), strict=True))
    options: tuple[PermissionOption, ...] = attrs.field(default=(), metadata=wire(strict=True, always=True))
    title: str | None = attrs.field(default=None, metadata=wire(versions=(2,)))
    description: str | None = attrs.field(default=None, metadata=wire(versions=(2,)))
    subject: PermissionSubject | None = attrs.field(default=None, metadata=wire(versions=(2,)))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SelectedPermissionOutcome:
    """The user picked ``option_id`` (wire ``{"outcome": "selected", "optionId": ...}``)."""

    outcome: ClassVar[str] = "selected"

    option_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CancelledPermissionOutcome(MetaOnly):
    """The prompt turn was cancelled before the user answered (wire ``{"outcome": "cancelled"}``)."""

    outcome: ClassVar[str] = "cancelled"


@attrs.frozen(eq=False, repr=False)
class UnknownPermissionOutcome:
    """An outcome of a kind this SDK does not know (raw payload kept)."""

    outcome: str
    raw: dict[str, Any] = attrs.field(factory=dict)


#: What a client answers to ``session/request_permission`` (the one public outcome type: a
#: permission handler returns one of these).
PermissionOutcome: TypeAlias = SelectedPermissionOutcome | CancelledPermissionOutcome


@attrs.frozen(eq=False, repr=False)
class RequestPermissionResponse:
    """The client's answer to ``session/request_permission`` (decoded leniently: an outcome kind
    this SDK does not know is kept as :class:`UnknownPermissionOutcome`)."""

    outcome: PermissionOutcome | UnknownPermissionOutcome
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ReadTextFileRequest:
    """``fs/read_text_file`` params: ``line`` is 1-based, ``limit`` a line count."""

    session_id: str
    path: str
    line: int | None = None
    limit: int | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ReadTextFileResponse:
    """The client's answer to ``fs/read_text_file``."""

    content: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class WriteTextFileRequest:
    """``fs/write_text_file`` params."""

    session_id: str
    path: str
    content: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class WriteTextFileResponse(MetaOnly):
    """The client's answer to ``fs/write_text_file``."""


@attrs.frozen(eq=False, repr=False)
class CreateTerminalRequest:
    """``terminal/create`` params."""

    session_id: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[EnvVariable, ...] = ()
    cwd: str | None = None
    output_byte_limit: int | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CreateTerminalResponse:
    """The client's answer to ``terminal/create``."""

    terminal_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class _TerminalParams:
    """Params that name one terminal of a session."""

    session_id: str
    terminal_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class TerminalOutputRequest(_TerminalParams):
    """``terminal/output`` params."""


@attrs.frozen(eq=False, repr=False)
class TerminalOutputResponse:
    """The client's answer to ``terminal/output`` (``truncated`` is always sent)."""

    output: str
    truncated: bool = attrs.field(metadata=wire(always=True))
    exit_status: TerminalExitStatus | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class WaitForTerminalExitRequest(_TerminalParams):
    """``terminal/wait_for_exit`` params."""


@attrs.frozen(eq=False, repr=False)
class WaitForTerminalExitResponse:
    """The client's answer to ``terminal/wait_for_exit``."""

    exit_code: int | None = None
    signal: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class KillTerminalCommandRequest(_TerminalParams):
    """``terminal/kill`` params."""


@attrs.frozen(eq=False, repr=False)
class KillTerminalCommandResponse(MetaOnly):
    """The client's answer to ``terminal/kill``."""


@attrs.frozen(eq=False, repr=False)
class ReleaseTerminalRequest(_TerminalParams):
    """``terminal/release`` params."""


@attrs.frozen(eq=False, repr=False)
class ReleaseTerminalResponse(MetaOnly):
    """The client's answer to ``terminal/release``."""


@attrs.frozen(eq=False, repr=False)
class CreateElicitationRequest:
    """``elicitation/create`` params: ``message`` is what to ask the user.

    ``mode``: ``"form"`` (fill in ``requested_schema``, the answer's JSON schema as sent), ``"url"``
    (open ``url``; a later ``elicitation/complete`` names its ``elicitation_id``) or a future mode.
    The scope is the session, the tool call or the request asking (``session_id``,
    ``tool_call_id``, ``request_id``).
    """

    message: str
    mode: str
    requested_schema: dict[str, Any] | None = None
    elicitation_id: str | None = None
    url: str | None = None
    session_id: str | None = None
    tool_call_id: str | None = None
    request_id: int | str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CreateElicitationResponse:
    """The client's answer to ``elicitation/create``.

    ``action``: ``"accept"`` (with ``content`` for a form), ``"decline"`` or ``"cancel"``.
    """

    action: str
    content: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class CompleteElicitationNotification:
    """``elicitation/complete`` params: the URL elicitation ``elicitation_id`` finished."""

    elicitation_id: str
    meta: dict[str, Any] | None = None


value_types(globals())
