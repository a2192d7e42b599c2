"""The hot path: hand-written decoders for the common ``session/update`` variants.

Text chunks, simple tool-call updates and plain state updates make up nearly all of a streaming
turn. Each decoder here returns the same value the converter would, or ``None`` to defer to the
converter when the payload has anything it does not handle (annotations, ``_meta``, other
content types, a member of an unexpected type).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .._util._slots import direct_constructor
from ..types.content import TextContent
from ..types.updates import (
    AgentMessageChunk,
    AgentThoughtChunk,
    SessionNotification,
    StateUpdate,
    ToolCallContentBlock,
    ToolCallUpdate,
    UserMessageChunk,
)

_new_text = direct_constructor(TextContent)
new_notification = direct_constructor(SessionNotification)
_new_tool_content = direct_constructor(ToolCallContentBlock)
_new_tool_call_update = direct_constructor(ToolCallUpdate)
_new_state_update = direct_constructor(StateUpdate)


def _fast_text(content: Any) -> TextContent | None:
    if type(content) is not dict or content.get("type") != "text":
        return None
    text = content.get("text")
    if type(text) is not str or "annotations" in content or "_meta" in content:
        return None
    return _new_text(text)


def _fast_chunk(cls: type[UserMessageChunk | AgentMessageChunk | AgentThoughtChunk]) -> Callable[[dict[str, Any]], Any]:
    new_chunk = direct_constructor(cls)
    new_text = _new_text

    def decode_chunk(update: dict[str, Any]) -> Any:
        # the text check of _fast_text inlined: this runs once per streamed chunk
        content = update.get("content")
        if type(content) is not dict or content.get("type") != "text":
            return None
        text = content.get("text")
        if type(text) is not str:
            return None
        # Sizes first: {"type", "text"} has no annotations or _meta, and an update of two members
        # ("sessionUpdate" and "content") no messageId or _meta (a few lookups less per chunk).
        if len(content) != 2 and ("annotations" in content or "_meta" in content):
            return None
        if len(update) == 2:
            return new_chunk(new_text(text))
        if "_meta" in update:
            return None
        message_id = update.get("messageId")
        if message_id is not None and type(message_id) is not str:
            return None
        return new_chunk(new_text(text), message_id)

    return decode_chunk


_TOOL_UPDATE_SIMPLE: Final = frozenset(
    {"sessionUpdate", "toolCallId", "title", "kind", "status", "name", "content", "rawInput", "rawOutput"}
)


def _fast_tool_call_update(update: dict[str, Any]) -> ToolCallUpdate | None:
    tool_call_id = update.get("toolCallId")
    if type(tool_call_id) is not str or not _TOOL_UPDATE_SIMPLE.issuperset(update):
        return None
    title = update.get("title")
    kind = update.get("kind")
    status = update.get("status")
    name = update.get("name")
    for value in (title, kind, status, name):
        if value is not None and type(value) is not str:
            return None
    raw_content = update.get("content")
    content: tuple[ToolCallContentBlock, ...] | None = None
    if raw_content is not None:
        if type(raw_content) is not list:
            return None
        blocks = []
        for item in raw_content:
            if type(item) is not dict or item.get("type") != "content" or "_meta" in item:
                return None
            text = _fast_text(item.get("content"))
            if text is None:
                return None
            blocks.append(_new_tool_content(text))
        content = tuple(blocks)
    raw_input, raw_output = update.get("rawInput"), update.get("rawOutput")
    return _new_tool_call_update(tool_call_id, title, kind, status, name, content, None, raw_input, raw_output)


_STATE_SIMPLE: Final = frozenset({"sessionUpdate", "state", "stopReason"})


def _fast_state_update(update: dict[str, Any]) -> StateUpdate | None:
    state = update.get("state")
    if type(state) is not str or not _STATE_SIMPLE.issuperset(update):
        return None
    stop_reason = update.get("stopReason")
    if stop_reason is not None and type(stop_reason) is not str:
        return None
    return _new_state_update(state, stop_reason)


FAST_UPDATES: Final[dict[Any, Callable[[dict[str, Any]], Any]]] = {
    "agent_message_chunk": _fast_chunk(AgentMessageChunk),
    "user_message_chunk": _fast_chunk(UserMessageChunk),
    "agent_thought_chunk": _fast_chunk(AgentThoughtChunk),
    "tool_call_update": _fast_tool_call_update,
    "state_update": _fast_state_update,
}
