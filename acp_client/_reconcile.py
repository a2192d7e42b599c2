"""Replay reconciliation: match the messages an agent replays against the conversation the client
holds, and build the conversation after the replay. Pure: no I/O, no event loop.

The client knows the prompts it sent and the messages it showed; a replay is evidence, not the
truth (DESIGN.md §7). The rules:

* **Fused prompts are split.** An agent that replays user messages without ``messageId`` may send
  two prompts as one message (isaac-acp, fast-agent). A replayed id-less user message whose text is
  the concatenation of consecutive recorded prompts is split at the recorded boundaries.
* **Matching.** A replayed message matches a recorded one of the same role when both carry the same
  ``messageId``, or, when either has none, when the texts are equal. A recorded agent message the
  user saw only in part (a partial answer), or a recorded empty message, also matches a replayed
  message whose text extends it: the replay then completes it. A failed prompt (the agent refused
  it) is never matched: the agent never had it. The alignment keeps the order of both sides and
  matches as many messages as it can (a longest common subsequence; the common start and end are
  matched first, so an ordinary replay costs one pass).
* **Nothing recorded is deleted.** A recorded message the replay left out (the partial answer of
  an interrupted turn, a refused prompt) stays after the message it followed. A matched message
  keeps the recorded copy; when the agent's text contradicts it (same id, another text that does
  not extend it), the recorded copy wins and the discrepancy is reported in the notes.
* **What the agent adds is kept**, in the replay's order (its own synthetic messages).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs

from .types import ContentBlock, TextContent


class _Message(Protocol):
    """What reconciliation reads and writes of a message (``TranscriptMessage``)."""

    role: str
    message_id: str | None
    blocks: list[ContentBlock]
    status: Any
    incomplete: bool

    @property
    def text(self) -> str: ...


M = TypeVar("M", bound=_Message)

__all__ = ["Reconciled", "reconcile", "split_fused"]

#: Above this many cells the middle of an alignment is matched greedily (a pathological replay
#: must not cost quadratic time; an ordinary one is matched by its common start and end).
_MAX_CELLS = 4_000_000


@attrs.define
class Reconciled(Generic[M]):
    """The conversation after a replay, and what the reconciliation noticed.

    Attributes:
        messages: The conversation, in order.
        matched: How many recorded messages the replay brought back.
        added: How many replayed messages were new (the agent's own additions, or history the
            client did not hold).
        kept: How many recorded messages the replay left out (kept where they were).
        replayed_users: How many user messages the replay held (fused prompts counted split).
        notes: Discrepancies, in words (a contradicting replay, a split of fused prompts).
    """

    messages: list[M]
    matched: int = 0
    added: int = 0
    kept: int = 0
    replayed_users: int = 0
    notes: list[str] = attrs.field(factory=list)


def _plain(message: _Message) -> bool:
    return all(isinstance(block, TextContent) for block in message.blocks)


def split_fused(
    replayed: Sequence[M], prompts: Sequence[str], make: Callable[..., M]
) -> tuple[list[M], int]:
    """Split each id-less replayed user message whose text is two or more consecutive recorded
    prompts run together (``prompts``: the recorded prompt texts, in order). Returns the messages
    and how many were split.

    The replay is walked in the recorded order: a cursor stands on the prompt the next replayed
    user message should be. A message equal to that prompt is that prompt, even when its text
    also runs several prompts together; one that is not is split where the prompts from the
    cursor on (or, failing that, from anywhere) run together to its text. So ``"ac"`` replayed
    where ``"a"`` then ``"c"`` are due is split, although ``"ac"`` was a prompt of its own earlier.
    """
    if len(prompts) < 2:
        return list(replayed), 0
    out: list[M] = []
    splits = 0
    cursor = 0
    for message in replayed:
        if message.role != "user":
            out.append(message)
            continue
        text = message.text
        if cursor < len(prompts) and text == prompts[cursor]:
            cursor += 1
            out.append(message)
            continue
        found = None
        if message.message_id is None and _plain(message):
            found = _concatenation(text, prompts, cursor)
        if found is None:
            cursor = _after(prompts, cursor, text)
            out.append(message)
            continue
        pieces, cursor = found
        splits += 1
        for piece in pieces:
            out.append(make("user", None, [TextContent(text=piece)]))
    return out, splits


def _after(prompts: Sequence[str], cursor: int, text: str) -> int:
    """Where the cursor goes after a replayed prompt ``text``: past the first recorded prompt
    equal to it from the cursor on (it stays where it is for a prompt the client never sent)."""
    for index in range(cursor, len(prompts)):
        if prompts[index] == text:
            return index + 1
    return cursor


def _concatenation(text: str, prompts: Sequence[str], cursor: int = 0) -> tuple[list[str], int] | None:
    """``prompts[i:j]`` (two or more, consecutive) whose texts joined are ``text``, and ``j``;
    a run starting at the cursor or after it first, then one before it."""
    for start in [*range(cursor, len(prompts)), *range(cursor)]:
        if not prompts[start] or not text.startswith(prompts[start]):
            continue
        offset, end = 0, start
        while end < len(prompts) and prompts[end] and text.startswith(prompts[end], offset):
            offset += len(prompts[end])
            end += 1
            if offset == len(text):
                if end - start >= 2:
                    return list(prompts[start:end]), end
                break
    return None


def _squeeze(text: str) -> str:
    """The text compared: runs of whitespace as one space, none at the ends (agents replay
    ``"echo: hello"`` for the ``"echo: hello  "`` they streamed, or add a newline)."""
    return " ".join(text.split())


def _score(recorded: _Message, replayed: _Message) -> int:
    """2: the same message; 1: the replay completes the recorded one; 0: no match."""
    if recorded.role != replayed.role or recorded.status == "failed":
        return 0
    if recorded.message_id is not None and replayed.message_id is not None:
        return 2 if recorded.message_id == replayed.message_id else 0
    old, new = _squeeze(recorded.text), _squeeze(replayed.text)
    if old == new and (old or recorded.blocks == replayed.blocks):
        return 2
    if old == "" and not recorded.blocks:
        return 1
    if recorded.role != "user" and old and (new.startswith(old) or new.endswith(old)):
        # The replay completes a partial answer, or renders the answer with what led to it first
        # (fast-agent replays a tool turn's answer as the tool call's text, then the result).
        return 1
    return 0


def _align(recorded: Sequence[M], replayed: Sequence[M]) -> list[tuple[int, int]]:
    """The matched pairs ``(recorded index, replayed index)``, increasing in both."""
    n, m = len(recorded), len(replayed)
    head = 0
    while head < n and head < m and _score(recorded[head], replayed[head]) == 2:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and _score(recorded[n - 1 - tail], replayed[m - 1 - tail]) == 2:
        tail += 1
    pairs = [(index, index) for index in range(head)]
    rows, cols = recorded[head : n - tail], replayed[head : m - tail]
    if rows and cols:
        middle = _lcs(rows, cols) if len(rows) * len(cols) <= _MAX_CELLS else _greedy(rows, cols)
        pairs.extend((i + head, j + head) for i, j in middle)
    pairs.extend((n - tail + index, m - tail + index) for index in range(tail))
    return pairs


def _lcs(rows: Sequence[M], cols: Sequence[M]) -> list[tuple[int, int]]:
    n, m = len(rows), len(cols)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = best[i], best[i + 1]
        for j in range(m - 1, -1, -1):
            score = _score(rows[i], cols[j])
            take = below[j + 1] + score if score else 0
            row[j] = max(take, below[j], row[j + 1])
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < n and j < m:
        score = _score(rows[i], cols[j])
        if score and best[i][j] == best[i + 1][j + 1] + score:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _greedy(rows: Sequence[M], cols: Sequence[M]) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    start = 0
    for j, message in enumerate(cols):
        for i in range(start, len(rows)):
            if _score(rows[i], message):
                pairs.append((i, j))
                start = i + 1
                break
    return pairs


def reconcile(
    recorded: Sequence[M], replayed: Sequence[M], make: Callable[..., M]
) -> Reconciled[M]:
    """The conversation after a replay (see the module docstring). ``recorded`` is never mutated
    except where the replay completes a message or gives an id-less one its ``messageId``."""
    prompts = [message.text for message in recorded if message.role == "user" and message.status != "failed"]
    replayed, splits = split_fused(replayed, prompts, make)
    result: Reconciled[M] = Reconciled(
        [], replayed_users=sum(1 for message in replayed if message.role == "user")
    )
    if splits:
        result.notes.append(f"split {splits} replayed user message(s) that ran recorded prompts together")
    pairs = _align(recorded, replayed)
    i = j = 0
    contradictions = 0
    for ri, pj in [*pairs, (len(recorded), len(replayed))]:
        kept = recorded[i:ri]
        added = replayed[j:pj]
        result.messages.extend(kept)
        result.messages.extend(added)
        result.kept += len(kept)
        result.added += len(added)
        if ri < len(recorded):
            old, new = recorded[ri], replayed[pj]
            if old.message_id is None and new.message_id is not None:
                old.message_id = new.message_id
            if _squeeze(old.text) != _squeeze(new.text) or (not old.text and old.blocks != new.blocks):
                if (old.text == "" and not old.blocks) or (
                    old.role != "user" and _squeeze(new.text).startswith(_squeeze(old.text))
                ):
                    old.blocks = list(new.blocks)
                    old.incomplete = False
                else:
                    contradictions += 1
            result.messages.append(old)
            result.matched += 1
        i, j = ri + 1, pj + 1
    if contradictions:
        result.notes.append(f"the replay contradicted {contradictions} stored message(s): the stored copy was kept")
    return result
