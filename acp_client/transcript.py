"""A transcript: the conversation of one session, built from its ``session/update`` notifications,
kept across replays, recoveries and restarts (what it guarantees: docs/conversation.md).

Rules:

* v2 message updates are upserts keyed by ``messageId``: a full message (``user_message``,
  ``agent_message``, ``agent_thought``) replaces that message's content; a chunk appends to it.
  Chunks without a ``messageId`` (v1) append to the open message of the same role, or start one;
  a prompt, the end of a turn and any non-message update close the open message.
* **Turns have a status.** Each prompt the client sent is a user message whose
  :attr:`TranscriptMessage.status` is a :class:`TurnStatus`; the agent's messages of a cancelled
  or interrupted turn are marked :attr:`~TranscriptMessage.incomplete`.
* **A replay is reconciled, not trusted.** Between :meth:`Transcript.begin_replay` and
  :meth:`Transcript.end_replay` the replayed messages are collected apart (the app keeps seeing the
  conversation it had), then matched against it by the rules of
  :mod:`acp_client._sessions._reconcile`; :attr:`Transcript.last_replay` says what the replay
  brought. A replay cut off by a drop is dropped: the next replay brings it again.
* **Segments.** The conversation is made of :class:`TranscriptSegment` values, one per agent
  session id. When the agent lost a session and recovery started a new one, the old conversation
  stays as an earlier segment marked ``lost``; :attr:`Transcript.messages` is the current one's.
* Tool calls are upserts keyed by ``toolCallId``; the latest plan replaces the previous one.
* **Bounded in memory.** Past :attr:`Transcript.max_bytes` of message text (UTF-8), the oldest
  whole messages go, then the head of the newest message itself (a turn streaming without end),
  behind ``… N bytes dropped … ``; the newest prompt is never dropped or cut. Trimming goes down to
  three quarters of the bound, so the work is amortized.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

import attrs

from ._sessions._bound import BLOCK_BYTES, blocks_bytes, blocks_of, cut_head, plain, text_bytes
from ._sessions._echo import Echo
from ._sessions._reconcile import reconcile
from .types import ContentBlock, TextContent

__all__ = [
    "DEFAULT_MAX_TRANSCRIPT_BYTES",
    "ReplayReport",
    "SegmentStart",
    "ToolCallView",
    "Transcript",
    "TranscriptMessage",
    "TranscriptSegment",
    "TurnStatus",
]


class TurnStatus(str, enum.Enum):
    """How a prompt turn ended (on the turn's user message: :attr:`TranscriptMessage.status`)."""

    RUNNING = "running"
    COMPLETE = "complete"
    CANCELLED = "cancelled"
    #: Cut off by a drop: the agent had the prompt and may have acted on it.
    INTERRUPTED = "interrupted"
    #: The agent refused the prompt (an error answer): not an ordinary turn.
    FAILED = "failed"


class SegmentStart(str, enum.Enum):
    """How a segment of the conversation (one agent session id) began."""

    CREATED = "created"
    RESUMED = "resumed"
    REPLAYED = "replayed"
    #: Recovery started a new session because the agent had lost the previous one.
    NEW_AFTER_LOSS = "new_after_loss"


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
        status: On a prompt (a user message the client sent): how its turn ended
            (:class:`TurnStatus`); ``None`` on other messages.
        incomplete: The message is partial: its turn was cancelled or interrupted before the
            agent finished it (and no replay completed it).
        inserted: A user-role message the *agent* put into its replay among the user's prompts
            (Claude's ``<command-name>/model…``): never a prompt the user typed, never a turn.
    """

    role: str
    message_id: str | None = None
    _blocks: list[ContentBlock] = attrs.field(factory=list)
    status: TurnStatus | None = None
    incomplete: bool = False
    inserted: bool = False
    dropped_bytes: int = 0  #: of its oldest text, dropped past the bound (behind ``… N bytes dropped … ``)
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

    def _key(self) -> tuple[Any, ...]:
        return self.role, self.message_id, self.blocks, self.inserted

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, TranscriptMessage) else NotImplemented

    def __repr__(self) -> str:
        extra = f", status={self.status.value!r}" if self.status is not None else ""
        extra += ", incomplete=True" if self.incomplete else ""
        extra += ", inserted=True" if self.inserted else ""
        return f"TranscriptMessage(role={self.role!r}, message_id={self.message_id!r}, blocks={self.blocks!r}{extra})"

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
            last = self._blocks[-1] if self._blocks else None
            if pending or (isinstance(last, TextContent) and plain(last)):
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


@attrs.define
class ToolCallView:
    """The latest known state of one tool call (fields merged from every update)."""

    tool_call_id: str
    fields: dict[str, Any] = attrs.field(factory=dict)

    @property
    def title(self) -> str | None:
        return self._text("title")

    @property
    def status(self) -> str | None:
        return self._text("status")

    def _text(self, key: str) -> str | None:
        value = self.fields.get(key)
        return value if isinstance(value, str) else None


#: The default bound of a transcript's message text in memory (see :attr:`Transcript.max_bytes`).
DEFAULT_MAX_TRANSCRIPT_BYTES = 64 * 1024 * 1024


@attrs.define
class TranscriptSegment:
    """The part of a conversation held under one agent session id.

    Attributes:
        session_id: The agent's id for this part (``None``: not known, from an older store).
        began: How it began (:class:`SegmentStart`).
        messages: Its messages, in order.
        lost: The agent lost this part (recovery had to start a new session).
    """

    session_id: str | None
    began: SegmentStart
    messages: list[TranscriptMessage] = attrs.field(factory=list)
    lost: bool = False

    @property
    def turns(self) -> int:
        """How many prompts in it the agent accepted (failed ones do not count)."""
        return _turns(self.messages)

    def text(self) -> str:
        """This segment alone as plain text (lines as in :meth:`Transcript.text`)."""
        return "\n".join(_line(message) for message in self.messages)


#: How a line marks a message that is not an ordinary, finished one.
_MARKED = (TurnStatus.FAILED, TurnStatus.INTERRUPTED, TurnStatus.CANCELLED)


def _line(message: TranscriptMessage) -> str:
    mark = f" [{message.status.value}]" if message.status in _MARKED else ""
    mark += " [inserted]" if message.inserted else ""
    mark += " [incomplete]" if message.incomplete else ""
    return f"{message.role}{mark}: {message.text}"


def _divider(previous: TranscriptSegment, segment: TranscriptSegment) -> str:
    session = segment.session_id or "unknown"  # the line says what became of the conversation above it
    if previous.lost:
        return f"--- the agent lost the conversation above; it goes on in a new session ({session}) ---"
    return f"--- the conversation goes on in session {session} ({segment.began.value}) ---"


@attrs.frozen
class ReplayReport:
    """What the last complete replay brought (:attr:`Transcript.last_replay`).

    Attributes:
        replayed_messages: Messages the agent replayed (fused prompts counted once split).
        replayed_turns: User messages among them (agent-inserted ones not counted).
        known_turns: Prompts the client held before the replay (failed ones not counted).
        matched: Recorded messages the replay brought back.
        added: Replayed messages that were new to the client.
        kept: Recorded messages the replay left out (kept in place).
        notes: What the reconciliation noticed.
        missing_turns: The texts of the completed prompts (:attr:`TurnStatus.COMPLETE`) the client
            held that the replay did not bring back, in order: turns the agent lacks.
        inserted: Agent-inserted user messages the replay held (:attr:`TranscriptMessage.inserted`).
        completed_turns: Completed prompts the client held before the replay.
    """

    replayed_messages: int
    replayed_turns: int
    known_turns: int
    matched: int
    added: int
    kept: int
    notes: tuple[str, ...] = ()
    missing_turns: tuple[str, ...] = ()
    inserted: int = 0
    completed_turns: int = 0

    def lacks_history(self) -> str | None:
        """Why the agent provably lacks the history after this replay (nothing replayed for a session
        with turns, or a completed turn left out: an agent that had it would replay it), or ``None``."""
        if self.known_turns == 0:
            return None
        if self.replayed_messages == 0:
            return f"the agent replayed nothing for a session with {self.known_turns} turn(s)"
        if self.missing_turns:
            first = " ".join(self.missing_turns[0].split())
            first = first if len(first) <= 60 else first[:57] + "..."
            of = max(self.completed_turns, len(self.missing_turns))
            return (
                f"the replay lacks {len(self.missing_turns)} of the {of} completed turn(s) the client holds "
                f"(first: {first!r})"
            )
        return None


def _turns(messages: Iterable[TranscriptMessage]) -> int:
    return sum(m.role == "user" and m.status is not TurnStatus.FAILED and not m.inserted for m in messages)


def _completed(message: TranscriptMessage) -> bool:
    return message.role == "user" and message.status is TurnStatus.COMPLETE and not message.inserted


#: The update kinds that carry a message.
MESSAGE_KINDS = frozenset((*_CHUNK_ROLES, *_FULL_ROLES))


class Transcript:
    """The conversation of one session, built from its updates (see the module docstring);
    ``session_id`` and ``began`` describe its first segment."""

    #: The bound of message text held in memory, in UTF-8 bytes: set it on one transcript, or on the class for all.
    max_bytes: int = DEFAULT_MAX_TRANSCRIPT_BYTES

    def __init__(self, session_id: str | None = None, began: SegmentStart = SegmentStart.CREATED) -> None:
        self.messages: list[TranscriptMessage] = []  # the current segment's: what the agent holds now
        self.earlier: list[TranscriptSegment] = []  # oldest first
        self.session_id = session_id
        self.began = began
        self.dropped = 0  #: messages dropped past a bound (a session store's, or :attr:`max_bytes`)
        self.dropped_bytes = 0  #: bytes of message text dropped past :attr:`max_bytes`
        self._bytes = 0  # message text taken in since the last measure (an estimate between trims)
        self.tool_calls: dict[str, ToolCallView] = {}
        self.plan: Any = None
        self.state: str | None = None  #: the v2 foreground state last reported, if any
        self.stop_reason: str | None = None
        self.last_replay: ReplayReport | None = None  #: what the last complete replay brought, if any
        self._by_id: dict[str, TranscriptMessage] = {}
        self._open: TranscriptMessage | None = None
        self._replaying = False
        self._replayed: list[TranscriptMessage] = []
        self._replay_by_id: dict[str, TranscriptMessage] = {}
        self._replay_open: TranscriptMessage | None = None
        self._turn_start: int | None = None
        self._turn_prompt: tuple[ContentBlock, ...] = ()
        self._echo = Echo()  # what of the recorded prompt the agent has not echoed back yet
        self.echoes_prompts = False  #: the agent was seen echoing a recorded prompt back

    def __len__(self) -> int:
        return len(self.messages)

    def text(self) -> str:
        """The whole conversation as plain text, one ``role: text`` line per message, each segment
        followed by a divider saying what became of it; marked after the role: ``[failed]``,
        ``[interrupted]``, ``[cancelled]``, ``[incomplete]``, ``[inserted]``. A first line counts
        what was dropped (``… N bytes dropped``, ``… N earlier message(s) not kept``)."""
        dropped = f"… {self.dropped_bytes} bytes dropped" if self.dropped_bytes else ""
        dropped = dropped or (f"… {self.dropped} earlier message(s) not kept" if self.dropped else "")
        lines = [dropped] if dropped else []
        segments = self.segments
        for index, segment in enumerate(segments):
            if index:
                lines.append(_divider(segments[index - 1], segment))
            lines.extend(_line(message) for message in segment.messages)
        return "\n".join(lines)

    @property
    def replaying(self) -> bool:
        return self._replaying

    @property
    def segments(self) -> list[TranscriptSegment]:
        """Every segment, oldest first; the last one is the current segment (its messages are
        :attr:`messages` itself)."""
        return [*self.earlier, TranscriptSegment(self.session_id, self.began, self.messages)]

    def all_messages(self) -> list[TranscriptMessage]:
        """The whole conversation: earlier segments' messages, then the current ones."""
        return [message for segment in self.segments for message in segment.messages]

    @property
    def turns(self) -> int:
        """How many prompts of the current segment the agent accepted."""
        return _turns(self.messages)

    def start_segment(self, session_id: str, began: SegmentStart, *, lost: bool = False) -> int:
        """Continue the conversation under a new agent session id. The current segment becomes
        earlier history (``lost``: the agent no longer has it). Returns how many turns it held."""
        turns = self.turns
        if self.messages or self.session_id is not None:
            self.earlier.append(TranscriptSegment(self.session_id, self.began, self.messages, lost))
        self.messages = []
        self.session_id, self.began = session_id, began
        self._by_id = {}
        self.tool_calls = {}
        self._open = self.plan = self.state = self.stop_reason = self.last_replay = None
        return turns

    def lost_context(self) -> str:
        """The conversation the agent lost (every ``lost`` segment) as plain text, for an app that
        carries it into the new session (empty when nothing was lost)."""
        lost = (message for segment in self.earlier if segment.lost for message in segment.messages)
        return "\n".join(f"{m.role}: {m.text}" for m in lost if m.status != "failed" and not m.inserted)

    def begin_turn(self, prompt: Iterable[ContentBlock], *, record: bool) -> None:
        """A prompt goes out: ``record`` it as the user's message (v1 agents do not echo prompts;
        v2 agents do, and their echo becomes the turn's message). A recorded prompt the agent still
        echoes back is that same message (:mod:`acp_client._sessions._echo`)."""
        blocks = tuple(prompt)
        self._turn_start = len(self.messages)
        self._turn_prompt = blocks
        self._echo = Echo(blocks if record else ())
        if record:
            self.add_user_prompt(blocks)
            self.messages[-1].status = TurnStatus.RUNNING

    def _end_turn(self) -> int | None:
        """Forget the running turn; returns where its messages began."""
        start, self._turn_start = self._turn_start, None
        self._open = None
        self._echo = Echo()
        return start

    def finish_turn(self, status: TurnStatus) -> None:
        """The running turn ended with ``status``: its prompt carries it; a cancelled or
        interrupted turn's agent messages are marked incomplete; a refused prompt the agent did
        not echo is recorded as a failed one."""
        start = self._end_turn()
        if start is None:
            return
        start = min(start, len(self.messages))
        prompt = next((m for m in self.messages[start:] if m.role == "user" and not m.inserted), None)
        if prompt is None:
            if status is not TurnStatus.FAILED:
                return
            prompt = TranscriptMessage("user")
            prompt.append(self._turn_prompt)
            self.messages.insert(start, prompt)
        prompt.status = status
        if status in (TurnStatus.CANCELLED, TurnStatus.INTERRUPTED):
            index = self.messages.index(prompt)
            for message in self.messages[index + 1 :]:
                if message.role == "user" and not message.inserted:
                    break
                if message.role != "user":
                    message.incomplete = True

    def withdraw_turn(self) -> None:
        """The running turn's prompt was refused before the agent did anything with it ("session
        not found"): it is taken out again (the client sends it once more, on a new session)."""
        start = self._end_turn()
        if start is not None:
            tail = self.messages[start:]
            self.messages[start:] = [m for m in tail if m.role != "user" or m.status is not TurnStatus.RUNNING]

    def add_user_prompt(self, blocks: Iterable[ContentBlock], message_id: str | None = None) -> None:
        """Record a prompt the client sent (v1 agents do not echo prompts outside a replay)."""
        if message_id is not None and message_id in self._by_id:
            return
        self._open = None
        message = TranscriptMessage("user", message_id)
        message.append(blocks)
        self._insert(message)
        self._took(blocks_bytes(message.blocks))

    def end_turn(self) -> None:
        """Close the open message: the next id-less chunk starts a new one."""
        self._open = None

    def apply(self, update: Any) -> None:
        """Apply one session update (any variant; unknown ones are ignored). During a replay, message
        updates are assembled apart (:meth:`begin_replay`)."""
        kind: Any = getattr(update, "kind", None)
        replay = self._replaying
        if not replay and self._echo and self._echo.take(update):
            self.echoes_prompts = True
            return
        full = kind in _FULL_ROLES
        role = _FULL_ROLES[kind] if full else _CHUNK_ROLES.get(kind)
        if role is None:  # never fuse a message across a non-message update (a replay would not)
            self._replay_open = self._open = None  # whichever is open: the replay's or the live one
            self._other(kind, update)
            return
        content, message_id = getattr(update, "content", None), getattr(update, "message_id", None)
        if not (replay or full or message_id is not None or isinstance(content, _NOT_ONE_BLOCK)):
            # A streamed chunk of one block: the bulk of a turn (what _assemble does, in short).
            open_message = self._open
            if open_message is None or open_message.role != role or open_message.message_id is not None:
                open_message = self._open = TranscriptMessage(role)
                self._insert(open_message)
            pending = open_message._pending
            if pending and type(content) is TextContent and content.annotations is None and content.meta is None:
                text = content.text
                pending.append(text)  # plain text after plain text: what add() does, in short
                # UTF-8 bytes: as many as characters for ASCII text (the bulk), measured otherwise
                self._bytes += len(text) if text.isascii() else text_bytes(text)
                if self._bytes > self.max_bytes:
                    self._trim()
                return
            open_message.add(content)
            self._took(text_bytes(content.text) if type(content) is TextContent else BLOCK_BYTES)
            return
        self._assemble(role, message_id, content, full=full, replay=replay)
        if not replay:
            self._took(blocks_bytes(blocks_of(content)))  # for a full message, an upper bound

    def begins_echo(self, update: Any) -> bool:
        """Whether ``update`` starts the echo of the prompt just recorded (nothing taken)."""
        return self._echo.begins(update)

    def _other(self, kind: Any, update: Any) -> None:
        if kind in ("tool_call", "tool_call_update"):
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
        """Whether ``update`` (during a plain ``session/resume``) repeats the first known message:
        its ``messageId``, or its role with text that message starts with."""
        role = _CHUNK_ROLES.get(update.kind) or _FULL_ROLES.get(update.kind)
        first = next((m for m in self.messages if m.status is not TurnStatus.FAILED), None)
        if role is None or first is None or first.role != role:
            return False
        message_id = getattr(update, "message_id", None)
        if message_id is not None and message_id == first.message_id:
            return True
        text = "".join(block.text for block in blocks_of(update.content) if isinstance(block, TextContent))
        return bool(text) and first.text.startswith(text)

    def begin_replay(self) -> None:
        """The agent is about to replay history: collect it apart, to reconcile at the end."""
        self._replaying = True
        self._forget_replay()

    def _forget_replay(self) -> list[TranscriptMessage]:
        """Drop the replayed messages collected so far; returns them."""
        replayed, self._replayed = self._replayed, []
        self._replay_by_id = {}
        self._replay_open = self._open = None
        return replayed

    def end_replay(self, *, complete: bool = True) -> None:
        """The replay is over: reconciled with the conversation when ``complete`` (the answer
        arrived), dropped when a drop cut it off."""
        if not self._replaying:
            return
        self._replaying = False
        replayed = self._forget_replay()
        if not complete:
            return
        known_turns, completed_turns = self.turns, sum(map(_completed, self.messages))
        result = reconcile(self.messages, replayed, TranscriptMessage, whole=self.dropped == 0)
        self.messages = result.messages
        self._by_id = {m.message_id: m for m in self.messages if m.message_id is not None}
        self._trim()  # measure (and bound) the reconciled conversation now
        self.last_replay = ReplayReport(
            replayed_messages=result.matched + result.added,
            replayed_turns=result.replayed_users,
            known_turns=known_turns,
            matched=result.matched,
            added=result.added,
            kept=len(result.left_out),
            notes=tuple(result.notes),
            missing_turns=tuple(message.text for message in result.left_out if _completed(message)),
            inserted=result.inserted,
            completed_turns=completed_turns,
        )

    def _took(self, size: int) -> None:
        self._bytes += size
        if self._bytes > self.max_bytes:
            self._trim()

    def _trim(self) -> None:
        """Bring the message text under three quarters of :attr:`max_bytes` (module docstring)."""
        target = self.max_bytes * 3 // 4
        held = self.all_messages()
        sizes = [blocks_bytes(m.blocks) for m in held]
        total = sum(sizes)
        if total <= target:
            self._bytes = total
            return
        prompt = next((m for m in reversed(self.messages) if m.role == "user" and not m.inserted), None)
        last = self.messages[-1] if self.messages else None
        gone: set[int] = set()
        for message, size in zip(held, sizes, strict=True):
            if total <= target:
                break
            if message is prompt or message is last:
                continue
            gone.add(id(message))
            if message.message_id is not None and self._by_id.get(message.message_id) is message:
                del self._by_id[message.message_id]
            if self._open is message:
                self._open = None
            self.dropped_bytes += size
            total -= size
        if gone:
            for segment in self.earlier:
                segment.messages[:] = [m for m in segment.messages if id(m) not in gone]
            self.earlier = [segment for segment in self.earlier if segment.messages]
            if self._turn_start is not None:
                self._turn_start -= sum(1 for m in self.messages[: self._turn_start] if id(m) in gone)
            kept = [m for m in self.messages if id(m) not in gone]
            self.dropped += len(self.messages) - len(kept)
            self.messages[:] = kept
        if total > target and last is not None and last is not prompt:  # the head of the newest message
            before = blocks_bytes(last.blocks)
            last.blocks, freed = cut_head(last.blocks, total - target, last.dropped_bytes)
            last.dropped_bytes += freed
            self.dropped_bytes += freed
            total -= before - blocks_bytes(last.blocks)
        self._bytes = total

    def _insert(self, message: TranscriptMessage) -> None:
        self.messages.append(message)
        if message.message_id is not None:
            self._by_id[message.message_id] = message

    def _assemble(self, role: str, message_id: str | None, content: Any, *, full: bool, replay: bool) -> None:
        """Put one message update into the conversation, or (``replay``) among the replayed messages, by
        the module's first rule; a full message closes the open one (a replayed one without an id starts one)."""
        messages, by_id = (self._replayed, self._replay_by_id) if replay else (self.messages, self._by_id)
        message = self._replay_open if replay else self._open
        if message_id is not None:
            message = by_id.get(message_id)
            if message is None:
                message = by_id[message_id] = TranscriptMessage(role, message_id)
                messages.append(message)
            if full and content is not None:
                message.blocks = []
        elif (full and replay) or message is None or message.role != role or message.message_id is not None:
            message = TranscriptMessage(role)
            messages.append(message)
        if not full or content is not None:
            message.append(blocks_of(content))
        if replay:
            self._replay_open = None if full else message
        else:
            self._open = None if full else message

    def _tool_call(self, update: Any) -> None:
        tool_call_id = getattr(update, "tool_call_id", None)
        if not isinstance(tool_call_id, str):
            return
        view = self.tool_calls.setdefault(tool_call_id, ToolCallView(tool_call_id))
        if attrs.has(type(update)):
            for field in attrs.fields(type(update)):
                value = getattr(update, field.name)
                if value is not None and field.name not in ("tool_call_id", "meta"):
                    view.fields[field.name] = value
