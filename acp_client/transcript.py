"""A transcript accumulator: applies ``session/update`` notifications into a conversation view,
and rebuilds it from a replay without duplicate messages.

Rules:

* v2 message updates are upserts keyed by ``messageId``: a full message (``user_message``,
  ``agent_message``, ``agent_thought``) replaces that message's content; a chunk with a
  ``messageId`` appends to it.
* Chunks without a ``messageId`` (v1) append to the open message of the same role, or start one.
  :meth:`Transcript.end_turn` closes the open message.
* A replay (v1 ``session/load``, v2 ``session/resume`` with ``replayFrom``) is bracketed by
  :meth:`Transcript.begin_replay` / :meth:`Transcript.end_replay` (the client does this). During
  it, the first update for a message already known restarts that message's content instead of
  appending to it; id-less history (v1) is rebuilt from the replay, and an id-less message is kept
  only if the agent replayed no message of its role (a replay that sends the user's prompts back
  covers the prompts the client recorded itself: the k-th of them stands for the k-th new message
  of that role in the replay, so what followed it and the replay left out, such as the partial
  answer of an interrupted turn, stays after it).
* A replay cut off by a drop is incomplete: ``end_replay(complete=False)`` puts back what the
  transcript held before it began, so nothing finished is lost; the next replay rebuilds it.
* Some agents replay the whole history during a plain ``session/resume`` (DESIGN.md §6).
  :meth:`Transcript.repeats` tells whether an update that arrives there repeats the start of the
  known history (same ``messageId``, else same role and a prefix of the first message's text),
  so the client can treat the rest of that resume as a replay.
* Tool calls are upserts keyed by ``toolCallId``; the latest plan replaces the previous one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from .types import ContentBlock, TextContent

__all__ = ["ToolCallView", "Transcript", "TranscriptMessage"]

_CHUNK_ROLES = {"user_message_chunk": "user", "agent_message_chunk": "agent", "agent_thought_chunk": "thought"}
_FULL_ROLES = {"user_message": "user", "agent_message": "agent", "agent_thought": "thought"}
#: Content that is not a single block (built once: ``isinstance(x, A | B)`` builds it per call).
_NOT_ONE_BLOCK = (list, tuple, type(None))


@attrs.define(eq=False, repr=False)
class TranscriptMessage:
    """One message of the conversation.

    Attributes:
        role: ``"user"``, ``"agent"`` or ``"thought"``.
        message_id: The agent's ``messageId``, when it supplied one.
        blocks: The content blocks, adjacent text merged.
    """

    role: str
    message_id: str | None = None
    _blocks: list[ContentBlock] = attrs.field(factory=list)
    # Plain text chunks waiting to be merged into the last block. Merging each chunk at once copied
    # the whole text every time: quadratic in the number of chunks of a long message.
    _pending: list[str] = attrs.field(factory=list, init=False)

    @property
    def blocks(self) -> list[ContentBlock]:
        if self._pending:
            self._merge_pending()
        return self._blocks

    @blocks.setter
    def blocks(self, value: list[ContentBlock]) -> None:
        self._blocks = value
        self._pending = []

    __hash__ = None  # type: ignore[assignment]  # mutable, like every attrs.define class with eq

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TranscriptMessage):
            return NotImplemented
        return (self.role, self.message_id, self.blocks) == (other.role, other.message_id, other.blocks)

    def __repr__(self) -> str:
        return f"TranscriptMessage(role={self.role!r}, message_id={self.message_id!r}, blocks={self.blocks!r})"

    @property
    def text(self) -> str:
        """The text of the message (non-text blocks are skipped)."""
        return "".join(block.text for block in self.blocks if isinstance(block, TextContent))

    def append(self, blocks: Iterable[ContentBlock]) -> None:
        for block in blocks:
            self.add(block)

    def add(self, block: ContentBlock) -> None:
        """Append one block (plain text after plain text is merged into it)."""
        pending = self._pending
        if isinstance(block, TextContent) and block.annotations is None and block.meta is None:  # plain text
            if pending:
                pending.append(block.text)
                return
            last = self._blocks[-1] if self._blocks else None
            if isinstance(last, TextContent) and _plain(last):
                pending.append(block.text)
                return
        elif pending:
            self._merge_pending()
        self._blocks.append(block)

    def _merge_pending(self) -> None:
        last = self._blocks[-1]
        assert isinstance(last, TextContent)
        self._blocks[-1] = TextContent(text=last.text + "".join(self._pending))
        self._pending.clear()


def _plain(block: TextContent) -> bool:
    return block.annotations is None and block.meta is None


@attrs.define
class ToolCallView:
    """The latest known state of one tool call (fields merged from every update)."""

    tool_call_id: str
    fields: dict[str, Any] = attrs.field(factory=dict)

    @property
    def title(self) -> str | None:
        value = self.fields.get("title")
        return value if isinstance(value, str) else None

    @property
    def status(self) -> str | None:
        value = self.fields.get("status")
        return value if isinstance(value, str) else None


def _blocks_of(content: Any) -> list[ContentBlock]:
    if content is None:
        return []
    if isinstance(content, list | tuple):
        return list(content)
    return [content]


class Transcript:
    """The conversation of one session, built from its updates."""

    def __init__(self) -> None:
        self.messages: list[TranscriptMessage] = []
        self.tool_calls: dict[str, ToolCallView] = {}
        self.plan: Any = None
        #: The v2 foreground state last reported (``None``: not reported).
        self.state: str | None = None
        self.stop_reason: str | None = None
        self._by_id: dict[str, TranscriptMessage] = {}
        self._open: TranscriptMessage | None = None
        self._replaying = False
        self._replay_restarted: set[str] = set()
        self._replayed_roles: set[str] = set()
        self._replay_touched: list[TranscriptMessage] = []
        self._snapshot: list[tuple[TranscriptMessage, list[ContentBlock]]] | None = None

    # -- queries ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.messages)

    def text(self) -> str:
        """The conversation as plain text, one ``role: text`` line per message."""
        return "\n".join(f"{message.role}: {message.text}" for message in self.messages)

    @property
    def replaying(self) -> bool:
        return self._replaying

    # -- updates ------------------------------------------------------------------------------------

    def add_user_prompt(self, blocks: Iterable[ContentBlock], message_id: str | None = None) -> None:
        """Record a prompt the client sent (v1 agents do not echo prompts outside a replay)."""
        if message_id is not None and message_id in self._by_id:
            return
        self._open = None
        message = TranscriptMessage("user", message_id)
        message.append(blocks)
        self._insert(message)

    def end_turn(self) -> None:
        """Close the open message: the next id-less chunk starts a new one."""
        self._open = None

    def apply(self, update: Any) -> None:
        """Apply one session update (any variant; unknown ones are ignored)."""
        kind: Any = getattr(update, "kind", None)
        role = _CHUNK_ROLES.get(kind)
        if role is not None:
            content = update.content
            message_id = getattr(update, "message_id", None)
            if message_id is None and not self._replaying and not isinstance(content, _NOT_ONE_BLOCK):
                # A streamed chunk of one block: the bulk of a turn (what _chunk does, in short).
                open_message = self._open
                if open_message is None or open_message.role != role or open_message.message_id is not None:
                    open_message = self._open = TranscriptMessage(role)
                    self._insert(open_message)
                pending = open_message._pending
                if pending and type(content) is TextContent and content.annotations is None and content.meta is None:
                    pending.append(content.text)  # plain text after plain text: what add() does, in short
                else:
                    open_message.add(content)
                return
            self._chunk(role, message_id, _blocks_of(content))
        elif kind in _FULL_ROLES:
            self._full(_FULL_ROLES[kind], getattr(update, "message_id", None), getattr(update, "content", None))
        elif kind in ("tool_call", "tool_call_update"):
            self._tool_call(update)
        elif kind in ("plan", "plan_update"):
            self.plan = update
        elif kind == "plan_removed":
            self.plan = None
        elif kind == "state_update":
            self.state = getattr(update, "state", None)
            if self.state == "idle":
                self.stop_reason = getattr(update, "stop_reason", None)
                self._open = None

    def repeats(self, update: Any) -> bool:
        """Whether ``update`` repeats the start of the known history.

        For an update that arrives where no replay was announced (a plain ``session/resume``):
        a message update for the first known message — the same ``messageId`` or, failing that,
        the same role with text that the first message's text starts with — means the agent is
        replaying from the start. Non-message updates never decide.
        """
        kind = getattr(update, "kind", None)
        if not isinstance(kind, str) or not self.messages:
            return False
        role = _CHUNK_ROLES.get(kind) or _FULL_ROLES.get(kind)
        if role is None:
            return False
        first = self.messages[0]
        if first.role != role:
            return False
        message_id = getattr(update, "message_id", None)
        if message_id is not None and message_id == first.message_id:
            return True
        text = "".join(block.text for block in _blocks_of(update.content) if isinstance(block, TextContent))
        return bool(text) and first.text.startswith(text)

    def begin_replay(self) -> None:
        """The agent is about to replay history: rebuild instead of appending."""
        self._replaying = True
        self._replay_restarted = set()
        self._replayed_roles = set()
        self._replay_touched = []
        self._snapshot = [(message, list(message.blocks)) for message in self.messages]
        self.messages = [message for message in self.messages if message.message_id is not None]
        self._open = None

    def end_replay(self, *, complete: bool = True) -> None:
        """The replay is over: the load/resume answer arrived (``complete``), or a drop cut it off.

        A complete replay is the history in the agent's order: the messages it brought back, with
        what it did not bring back (known messages it did not touch, and id-less ones of a role it
        did not replay) kept after the message they followed before. An incomplete replay puts
        back the history the transcript held before it began (what part of the replay arrived is
        dropped; the next replay brings it again).
        """
        if not self._replaying:
            return
        self._replaying = False
        snapshot = self._snapshot or []
        if complete:
            self.messages = self._merge_replay(snapshot)
        else:
            self.messages = []
            self._by_id = {}
            for message, blocks in snapshot:
                message.blocks = blocks
                self._insert(message)
        self._replay_touched = []
        self._snapshot = None
        self._open = None

    def _merge_replay(self, snapshot: list[tuple[TranscriptMessage, list[ContentBlock]]]) -> list[TranscriptMessage]:
        touched = {id(message) for message in self._replay_touched}
        known = {id(message) for message, _ in snapshot}
        # The replayed messages that are new to the transcript, per role, in order: the k-th id-less
        # message of a role the replay rebuilt is the k-th of them (what followed it follows that).
        fresh: dict[str, list[TranscriptMessage]] = {}
        for message in self._replay_touched:
            if id(message) not in known:
                fresh.setdefault(message.role, []).append(message)
        front: list[TranscriptMessage] = []
        after: dict[int, list[TranscriptMessage]] = {}
        anchor: TranscriptMessage | None = None
        for message, _ in snapshot:
            if id(message) in touched:
                anchor = message
                continue
            if message.message_id is None and message.role in self._replayed_roles:
                # The replay rebuilt this role's id-less history: this message is its counterpart.
                counterparts = fresh.get(message.role)
                if counterparts:
                    anchor = counterparts.pop(0)
                continue
            (after.setdefault(id(anchor), []) if anchor is not None else front).append(message)
        merged = front
        for message in self._replay_touched:
            merged.append(message)
            merged.extend(after.get(id(message), ()))
        return merged

    # -- internals ----------------------------------------------------------------------------------

    def _insert(self, message: TranscriptMessage) -> None:
        self.messages.append(message)
        if message.message_id is not None:
            self._by_id[message.message_id] = message

    def _restart_if_replayed(self, message: TranscriptMessage) -> None:
        if self._replaying and message.message_id is not None and message.message_id not in self._replay_restarted:
            self._replay_restarted.add(message.message_id)
            self._replay_touched.append(message)
            message.blocks = []

    def _insert_new(self, message: TranscriptMessage) -> None:
        self._insert(message)
        if self._replaying:
            self._replay_touched.append(message)
            if message.message_id is not None:
                self._replay_restarted.add(message.message_id)

    def _chunk(self, role: str, message_id: str | None, blocks: list[ContentBlock]) -> None:
        if self._replaying:
            self._replayed_roles.add(role)
        if message_id is not None:
            message = self._by_id.get(message_id)
            if message is None:
                message = TranscriptMessage(role, message_id)
                self._insert_new(message)
            else:
                self._restart_if_replayed(message)
            message.append(blocks)
            self._open = message
            return
        open_message = self._open
        if open_message is None or open_message.role != role or open_message.message_id is not None:
            open_message = TranscriptMessage(role)
            self._insert_new(open_message)
            self._open = open_message
        open_message.append(blocks)

    def _full(self, role: str, message_id: str | None, content: Any) -> None:
        if message_id is None:
            self._chunk(role, None, _blocks_of(content))
            self._open = None
            return
        if self._replaying:
            self._replayed_roles.add(role)
        message = self._by_id.get(message_id)
        if message is None:
            message = TranscriptMessage(role, message_id)
            self._insert_new(message)
        elif self._replaying and message_id not in self._replay_restarted:
            self._replay_restarted.add(message_id)
            self._replay_touched.append(message)
        if content is not None:
            message.blocks = []
            message.append(_blocks_of(content))
        self._open = None

    def _tool_call(self, update: Any) -> None:
        tool_call_id = getattr(update, "tool_call_id", None)
        if not isinstance(tool_call_id, str):
            return
        view = self.tool_calls.get(tool_call_id)
        if view is None:
            view = ToolCallView(tool_call_id)
            self.tool_calls[tool_call_id] = view
        if attrs.has(type(update)):
            for field in attrs.fields(type(update)):
                value = getattr(update, field.name)
                if value is not None and field.name not in ("tool_call_id", "meta"):
                    view.fields[field.name] = value
