"""A transcript as a session store keeps it: a list of JSON objects, and back (docs/conversation.md).

The stored form (conversation format 2) is a flat list, oldest first, so that any store can keep it
as it likes (one JSON text in SQLite, a ``jsonb`` column or one row per entry in PostgreSQL):

* a header first: ``{"format": 2, "dropped": N}`` — ``N`` messages were dropped from the oldest
  end to respect the store's bound (:func:`acp_client.store.bound_conversation`);
* a segment marker where a segment begins: ``{"segment": "<agent session id>" | null, "began":
  "created" | "resumed" | "replayed" | "new_after_loss", "lost": bool}``;
* one entry per message: ``{"role", "text"}``, plus ``"messageId"``, ``"status"`` (a prompt's
  :class:`~acp_client.transcript.TurnStatus`), ``"incomplete": true``, ``"inserted": true`` (text
  the agent put among its replayed prompts) and ``"content"`` (the wire form of the blocks, when
  they are not plain text) when they apply. Older stores without ``"inserted"`` read as before.

Format 1 (before segments: a list of ``{"role", "text", "messageId"?}``) is read as one segment. A
list that is not one of these, or a header of a newer format, is refused with a typed error naming
the store's file (:class:`~acp_client.exceptions.SessionStoreCorrupt`,
:class:`~acp_client.exceptions.SessionStoreTooNew`); nothing is rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._codec import from_wire, to_wire
from ..exceptions import InvalidMessage, SessionStoreCorrupt, SessionStoreTooNew
from ..transcript import SegmentStart, Transcript, TranscriptMessage, TranscriptSegment, TurnStatus
from ..types import ContentBlock, TextContent
from ._bound import plain

#: The newest conversation format this acp_client writes and reads.
CONVERSATION_FORMAT: Final = 2

_ROLES: Final = frozenset({"user", "agent", "thought"})


def _entry(message: TranscriptMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": message.role, "text": message.text}
    if message.message_id is not None:
        entry["messageId"] = message.message_id
    if message.status is not None:
        entry["status"] = message.status.value
    if message.incomplete:
        entry["incomplete"] = True
    if message.inserted:
        entry["inserted"] = True
    if not all(type(block) is TextContent and plain(block) for block in message.blocks):
        entry["content"] = [to_wire(block, protocol_version=1) for block in message.blocks]
    return entry


def to_entries(transcript: Transcript) -> tuple[dict[str, Any], ...]:
    """The whole conversation (every segment) in the stored form."""
    entries: list[dict[str, Any]] = [{"format": CONVERSATION_FORMAT, "dropped": transcript.dropped}]
    for segment in transcript.segments:
        entries.append({"segment": segment.session_id, "began": segment.began.value, "lost": segment.lost})
        entries.extend(_entry(message) for message in segment.messages)
    return tuple(entries)


def _corrupt(path: str, session_id: str, why: str) -> SessionStoreCorrupt:
    return SessionStoreCorrupt(
        f"session store {path}: the stored conversation of session {session_id!r} is damaged ({why}); left as it is",
        path=path,
    )


def _message(entry: Mapping[str, Any], path: str, session_id: str) -> TranscriptMessage:
    role, text = entry.get("role"), entry.get("text")
    if role not in _ROLES or not isinstance(text, str):
        raise _corrupt(path, session_id, f"a message without a known role and a text: {dict(entry)!r:.80}")
    message_id = entry.get("messageId")
    if message_id is not None and not isinstance(message_id, str):
        raise _corrupt(path, session_id, "a messageId that is not a string")
    message = TranscriptMessage(role, message_id)
    content = entry.get("content")
    if content is None:
        if text:
            message.add(TextContent(text=text))
    else:
        if not isinstance(content, list):
            raise _corrupt(path, session_id, "content that is not a list")
        try:
            message.append(from_wire(ContentBlock, block, protocol_version=1) for block in content)  # type: ignore[arg-type]
        except InvalidMessage as exc:
            raise _corrupt(path, session_id, f"undecodable content: {exc}") from exc
    status = entry.get("status")
    try:
        message.status = None if status is None else TurnStatus(status)
    except ValueError as exc:
        raise _corrupt(path, session_id, f"an unknown turn status {status!r}") from exc
    message.incomplete = entry.get("incomplete") is True
    message.inserted = entry.get("inserted") is True
    return message


def from_entries(entries: Sequence[Mapping[str, Any]], session_id: str, *, path: str) -> Transcript:
    """The transcript a stored conversation describes, for the session stored as ``session_id``. When
    the last stored segment has another id (the store renamed the session after a new-session
    recovery before the conversation was saved again), it is all lost history; the current segment is empty.

    Raises:
        SessionStoreTooNew: The conversation was written in a newer format.
        SessionStoreCorrupt: It is not a conversation (damaged, truncated, hand-edited).
    """
    if not isinstance(entries, Sequence) or isinstance(entries, str | bytes):
        raise _corrupt(path, session_id, "not a list")
    items = list(entries)
    dropped = 0
    if items and isinstance(items[0], Mapping) and "format" in items[0]:
        header = items.pop(0)
        version, dropped = header.get("format"), header.get("dropped", 0)
        if not isinstance(version, int) or not isinstance(dropped, int) or version < 2 or dropped < 0:
            raise _corrupt(path, session_id, f"a bad header {dict(header)!r:.80}")
        if version > CONVERSATION_FORMAT:
            raise SessionStoreTooNew(
                f"session store {path}: the conversation of session {session_id!r} has format {version}; this "
                f"acp_client reads up to {CONVERSATION_FORMAT}: upgrade acp_client (left as it is)",
                path=path,
                version=version,
                supported=CONVERSATION_FORMAT,
            )
    segments: list[TranscriptSegment] = []
    for item in items:
        if not isinstance(item, Mapping):
            raise _corrupt(path, session_id, f"an entry that is not an object: {item!r:.80}")
        if "segment" in item:
            sid, began = item.get("segment"), item.get("began")
            if (sid is not None and not isinstance(sid, str)) or began not in {start.value for start in SegmentStart}:
                raise _corrupt(path, session_id, f"a bad segment marker {dict(item)!r:.80}")
            segments.append(TranscriptSegment(sid, SegmentStart(began), [], item.get("lost") is True))
            continue
        if not segments:
            segments.append(TranscriptSegment(None, SegmentStart.CREATED))
        segments[-1].messages.append(_message(item, path, session_id))
    transcript = Transcript(session_id)
    transcript.dropped = dropped
    if segments and segments[-1].session_id not in (None, session_id):
        for segment in segments:
            segment.lost = True
        transcript.earlier, transcript.began = segments, SegmentStart.NEW_AFTER_LOSS
    elif segments:
        transcript.earlier, transcript.began = segments[:-1], segments[-1].began
        for message in segments[-1].messages:
            transcript._insert(message)
    return transcript
