"""Replay reconciliation: match the messages an agent replays against the conversation the client
holds, and build the conversation after the replay. Pure: no I/O, no event loop.

A replay is evidence, not the truth (docs/conversation.md has the rules as the user sees them,
with the agents that need each). Texts are compared with whitespace squeezed (runs as one space,
none at the ends). The rules:

* **Replayed user runs are read against the prompts the client sent.** An id-less replayed user
  message that is not a recorded prompt as a whole is aligned against the recorded prompts as a
  sequence with insertions: the prompts found inside it, at any offset, are matched in the
  recorded order from the prompt due next (covering as much text as possible, skipping as few
  prompts as possible, leaving the rest in as few pieces as possible), each becomes a message of
  its own, and the text around and between them is *agent-inserted*: a user-role message marked
  ``inserted``, never a prompt, never fused with one.
* **Text that holds no recorded prompt** is agent-inserted when the client holds prompts, the
  replay has reached the history the client holds (it holds the conversation from its start, or
  the replay already brought back one of its prompts), and the next replayed message is not the
  agent's. Otherwise it is a turn (another client's prompt, text before the first prompt a store
  dropped, anything when the client holds no prompt). A rule about where the text sits, not a
  list of markers: an agent not seen yet is handled too.
* **Fused answers are split.** An id-less replayed agent message that runs two or more recorded
  agent messages together (each whole, or a partial the user saw extended up to where the next
  one's text first appears; in the recorded order, passing over a few the replay left out) is
  split along them, each completing its own. The run must begin
  with the first recorded message due that it begins with; it is not split when it equals one,
  nor when the next replayed message of its role is one of them on its own (one answer, extended).
* **Matching.** A replayed message matches a recorded one of the same role (both agent-inserted
  or neither) with the same ``messageId``, or, when either has none, the same text; a recorded
  partial or empty message also matches a replayed one that extends it (the replay completes
  it). A failed prompt never matches. The alignment keeps both orders and matches as many as it
  can (a longest common subsequence; common start and end first, so an ordinary replay is one
  pass); then a replayed message left over takes a recorded one left over that it matches
  (answers replayed after all their prompts), or one taken as a completion whose partner then takes
  a recorded one left over that it matches; and a replayed answer taken as the completion of a
  partial goes to the recorded answer equal to it when that one was left over.
* **Nothing recorded is deleted**: a message the replay left out stays after the one it followed;
  a matched message keeps the recorded copy, where it was, and when the agent's text contradicts
  it the recorded copy wins and the notes say so. **What the agent adds is kept**, in order.
* **A second replay finds the same partners**: agent-inserted messages match only each other,
  and the alignment prefers the same message over a completion.

Cost: a run is searched for the prompts due next (a window after the cursor), and for the others
only when none of those is in it, up to ``_MAX_CELLS`` prompts looked at; the middle of an
alignment past ``_MAX_CELLS`` cells is matched greedily.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs

from ..types import ContentBlock, TextContent


class _Message(Protocol):
    """What reconciliation reads and writes of a message (``TranscriptMessage``)."""

    role: str
    message_id: str | None
    blocks: list[ContentBlock]
    status: Any
    incomplete: bool
    inserted: bool

    @property
    def text(self) -> str: ...


M = TypeVar("M", bound=_Message)

#: A pathological replay must not cost quadratic time: past this many cells an alignment's middle
#: is matched greedily and only the ``_WINDOW`` prompts (or answers) due next are searched.
_MAX_CELLS = 4_000_000
_WINDOW = 64
#: Occurrences of one prompt looked at in one run, and in all.
_MAX_HITS = 16
_MAX_ITEMS = 256
#: Recorded answers a fused answer may pass over between two of its pieces (those of turns the replay left out).
_SKIP = 4


@attrs.define
class Reconciled(Generic[M]):
    """The conversation after a replay, and the counts of :class:`~acp_client.transcript.ReplayReport`
    (``left_out``: the recorded messages the replay did not bring back)."""

    messages: list[M]
    matched: int = 0
    added: int = 0
    replayed_users: int = 0
    inserted: int = 0
    left_out: list[M] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)


def _plain(message: _Message) -> bool:
    return all(isinstance(block, TextContent) for block in message.blocks)


def _squeeze(text: str) -> str:
    """The text compared: runs of whitespace as one space, none at the ends (agents replay
    ``"echo: hello"`` for the ``"echo: hello  "`` they streamed, or add a newline)."""
    return " ".join(text.split())


def _squeezed(text: str) -> tuple[str, list[int]]:
    """``_squeeze(text)``, and for each of its characters where it stands in ``text`` (a space
    stands where its run of whitespace begins), so that a cut in one is a cut in the other."""
    chars: list[str] = []
    where: list[int] = []
    gap = -1
    for index, char in enumerate(text):
        if char.isspace():
            if gap < 0 and chars:
                gap = index
            continue
        if gap >= 0:
            chars.append(" ")
            where.append(gap)
            gap = -1
        chars.append(char)
        where.append(index)
    return "".join(chars), where


class _Budget:
    """Search cells left before searches fall back to a window after the cursor."""

    def __init__(self) -> None:
        self.cells = _MAX_CELLS

    def stop(self, cursor: int, total: int) -> int:
        """Where a search from ``cursor`` over ``total`` recorded messages stops."""
        if total - cursor <= self.cells:
            self.cells -= total - cursor
            return total
        return min(total, cursor + _WINDOW)


def _split_users(
    replayed: Sequence[M], recorded: Sequence[M], make: Callable[..., M], *, whole: bool
) -> tuple[list[M], int, int]:
    """Read each replayed user message against the recorded prompts (the module docstring's first two
    rules); returns the messages, how many runs of prompts were split, and how many pieces were inserted."""
    sent = [m for m in recorded if m.role == "user" and m.status != "failed" and not m.inserted]
    raw = [m.text for m in sent]
    prompts = [_squeeze(text) for text in raw]
    prompt_ids = {m.message_id for m in sent if m.message_id is not None}
    where: dict[str, list[int]] = {}
    for index, text in enumerate(prompts):
        where.setdefault(text, []).append(index)
    out: list[M] = []
    fused = inserted = 0
    budget = _Budget()
    cursor = 0
    reached = whole  # the replay has reached the history the client holds
    for position, message in enumerate(replayed):
        if message.role != "user" or message.message_id is not None:
            reached = reached or (message.role == "user" and message.message_id in prompt_ids)
            out.append(message)
            continue
        text = _squeeze(message.text)
        if not text and _plain(message):  # blank: a blank prompt, or a run of them, as they were sent
            same = next((i for i in range(cursor, min(len(raw), cursor + _WINDOW)) if raw[i] == message.text), None)
            blanks = [] if same is not None else _blank_run(message.text, raw, cursor)
            if blanks:
                fused += 1
                cursor = blanks[-1] + 1
                out.extend(make("user", None, [TextContent(text=raw[index])]) for index in blanks)
                continue
            if same is not None:
                cursor = same + 1
        indices = where.get(text, ()) if text else ()
        due = bisect.bisect_left(indices, cursor)
        if due < len(indices):  # the next recorded prompt with this text
            cursor, reached = indices[due] + 1, True
        if due < len(indices) or not prompts or not _plain(message) or not text:
            out.append(message)
            continue
        squeezed, spots = _squeezed(message.text)
        chain = _prompts_in(squeezed, prompts, cursor, budget)
        if indices and not (chain and len(chain) >= 2 and _covers(chain, squeezed)):
            reached = True  # a prompt replayed again, or out of order: matched by the alignment
            out.append(message)
            continue
        if not chain:
            answered = position + 1 < len(replayed) and replayed[position + 1].role != "user"
            if reached and not answered:
                message.inserted = True
                inserted += 1
            out.append(message)
            continue
        if len(chain) >= 2:
            fused += 1
        original = message.text
        done = 0  # where the text not yet given out begins, in ``original``
        for index, start, end in chain:
            begin, finish = spots[start], spots[end - 1] + 1
            inserted += _leftover(original[done:begin], reached, make, out)
            out.append(make("user", None, [TextContent(text=original[begin:finish])]))
            done, reached, cursor = finish, True, index + 1
        inserted += _leftover(original[done:], reached, make, out)
    return out, fused, inserted


def _blank_run(text: str, raw: Sequence[str], cursor: int) -> list[int]:
    """The recorded prompts from the cursor on (two or more, consecutive, all blank) that run together are ``text``."""
    end, offset = cursor, 0
    while end < len(raw) and raw[end] and not raw[end].strip() and text.startswith(raw[end], offset):
        offset += len(raw[end])
        end += 1
        if offset == len(text):
            return list(range(cursor, end)) if end - cursor >= 2 else []
    return []


def _leftover(text: str, reached: bool, make: Callable[..., M], out: list[M]) -> int:
    """Give out the text of a run left over around its prompts; 1 when it is agent-inserted."""
    if not text.strip():
        return 0
    message = make("user", None, [TextContent(text=text)])
    message.inserted = reached
    out.append(message)
    return 1 if reached else 0


def _covers(chain: list[tuple[int, int, int]], squeezed: str) -> bool:
    """The prompts of ``chain`` run together are the whole text (nothing left over)."""
    done = 0
    for _, start, end in chain:
        if squeezed[done:start].strip():
            return False
        done = end
    return not squeezed[done:].strip()


def _prompts_in(squeezed: str, prompts: Sequence[str], cursor: int, budget: _Budget) -> list[tuple[int, int, int]]:
    """The best chain of recorded prompts found inside ``squeezed``, as ``(prompt index, start,
    end)``: in the recorded order from the cursor, not overlapping, ranked as the module docstring
    says, then with as few prompts as possible."""
    items: list[tuple[int, int, int]] = []
    length = len(squeezed)
    # The prompts due next first; the rest (within the budget) only when none of those is there.
    window = min(len(prompts), cursor + _WINDOW)
    for first, stop in ((cursor, window), (window, budget.stop(window, len(prompts)))):
        for index in range(first, stop):
            prompt = prompts[index]
            if not prompt or len(prompt) > length:
                continue
            start = squeezed.find(prompt)
            hits = 0
            while start >= 0 and hits < _MAX_HITS:
                items.append((index, start, start + len(prompt)))
                hits += 1
                start = squeezed.find(prompt, start + 1)
            if len(items) >= _MAX_ITEMS:
                break
        if items:
            break
    if not items:
        return []
    items.sort(key=lambda item: (item[1], item[0]))

    def gap(a: int, b: int) -> int:  # 1: text (not a space alone) between a and b
        return 1 if b - a > 1 or (b - a == 1 and squeezed[a] != " ") else 0

    # best[i]: the best chain ending with items[i] as (characters covered, minus the recorded
    # prompts it skips, minus the pieces of text it leaves, minus its prompts: one long prompt
    # rather than short ones inside it); back[i]: the item before it.
    best: list[tuple[int, int, int, int]] = []
    back: list[int] = []
    for i, (index, start, end) in enumerate(items):
        score, before = (end - start, cursor - index, -gap(0, start), -1), -1
        for j in range(i):
            other, _, other_end = items[j]
            if other < index and other_end <= start:
                covered, skipped, pieces, count = best[j]
                candidate = (
                    covered + end - start,
                    skipped - (index - other - 1),
                    pieces - gap(other_end, start),
                    count - 1,
                )
                if candidate > score:
                    score, before = candidate, j
        best.append(score)
        back.append(before)

    def final(i: int) -> tuple[tuple[int, int, int, int], int]:
        covered, skipped, pieces, count = best[i]
        return (covered, skipped, pieces - gap(items[i][2], length), count), -i

    last = max(range(len(items)), key=final)
    chain: list[tuple[int, int, int]] = []
    while last >= 0:
        chain.append(items[last])
        last = back[last]
    chain.reverse()
    return chain


def _split_answers(replayed: Sequence[M], recorded: Sequence[M], make: Callable[..., M]) -> tuple[list[M], int]:
    """Split each id-less replayed agent (or thought) message that runs recorded ones of its role together."""
    known: dict[str, list[tuple[str, bool]]] = {}
    for message in recorded:
        if message.role != "user":
            known.setdefault(message.role, []).append((_squeeze(message.text), message.incomplete))
    where: dict[tuple[str, str], list[int]] = {}
    for role, texts in known.items():
        for index, (own, _) in enumerate(texts):
            where.setdefault((role, own), []).append(index)
    cursors = dict.fromkeys(known, 0)
    out: list[M] = []
    splits = 0
    # The next replayed message of each one's role: a split is not made when the replay brings a
    # piece of it on its own next (the message was one answer extended, not answers run together).
    after: list[str | None] = [None] * len(replayed)
    last: dict[str, str] = {}
    for position in range(len(replayed) - 1, -1, -1):
        role = replayed[position].role
        after[position] = last.get(role)
        if role in known:
            last[role] = _squeeze(replayed[position].text)
    for position, message in enumerate(replayed):
        if message.role not in known or message.message_id is not None or not _plain(message):
            out.append(message)
            continue
        texts = known[message.role]
        cursor = cursors[message.role]
        text = _squeeze(message.text)
        indices = where.get((message.role, text), ())
        due = bisect.bisect_left(indices, cursor)
        if due < len(indices):  # the next recorded message with this text: that one
            cursors[message.role] = indices[due] + 1
            out.append(message)
            continue
        # The first recorded message from the cursor on that this one is or extends: answers run
        # together begin with the first of them, so only there is a split tried.
        window = range(cursor, min(len(texts), cursor + _WINDOW))
        start = next((k for k in window if texts[k][0] and text.startswith(texts[k][0])), None)
        found = None
        if start is not None:
            found = _answers_from(text, texts, start, min(len(texts), start + _WINDOW))
            pieces, following = range(start, found[1] if found else start), after[position]
            if following is not None and any(texts[k][0] and following.startswith(texts[k][0]) for k in pieces):
                found = None
            cursors[message.role] = start + 1
        if found is None:
            out.append(message)
            continue
        cuts, cursors[message.role] = found
        _, spots = _squeezed(message.text)
        original = message.text
        bounds = [spots[cut] for cut in cuts[1:]]
        for begin, finish in zip([0, *bounds], [*bounds, len(original)], strict=True):
            out.append(make(message.role, None, [TextContent(text=original[begin:finish])]))
        splits += 1
    return out, splits


def _answers_from(text: str, texts: Sequence[tuple[str, bool]], first: int, stop: int) -> tuple[list[int], int] | None:
    """Where ``text`` is cut into recorded messages from ``texts[first]`` on (two or more, in order,
    up to ``_SKIP`` left out between two), and the index after the last: a whole message is its own
    text, a partial one (``incomplete``) its text and more (the earliest cut that lets the rest be read)."""
    failed: set[tuple[int, int]] = set()

    def read(index: int, at: int) -> tuple[list[int], int] | None:
        own, partial = texts[index]
        if (index, at) in failed or not own or not text.startswith(own, at):
            return None
        end = at + len(own)
        for following in range(index + 1, min(stop, index + 2 + _SKIP)):
            after = texts[following][0]
            if not after:
                continue
            if partial:
                nexts: list[int] = []
                spot = text.find(after, end)
                while spot >= 0 and len(nexts) < 4:
                    nexts.append(spot)
                    spot = text.find(after, spot + 1)
            else:
                nexts = [end + 1] if text[end : end + 1] == " " else [end]
            for spot in nexts:
                rest = read(following, spot)
                if rest is not None:
                    return [at, *rest[0]], rest[1]
        if index > first and (end == len(text) or partial):
            return [at], index + 1
        failed.add((index, at))
        return None

    return read(first, 0)


#: How well a replayed message matches a recorded one (:func:`_score`).
_SAME = 3


def _score(recorded: _Message, replayed: _Message) -> int:
    """3 (``_SAME``): the same message; 2: the replay completes a partial (or empty) recorded
    message; 1: it extends or ends with a complete one; 0: no match. The alignment prefers the
    better matches, so that a replay matched again finds the same partners."""
    if recorded.role != replayed.role or recorded.status == "failed" or recorded.inserted != replayed.inserted:
        return 0
    if recorded.message_id is not None and replayed.message_id is not None:
        return _SAME if recorded.message_id == replayed.message_id else 0
    old, new = _squeeze(recorded.text), _squeeze(replayed.text)
    if old == new and (old or recorded.blocks == replayed.blocks):
        return _SAME
    if old == "" and not recorded.blocks:
        return 2
    if recorded.role != "user" and old and (new.startswith(old) or new.endswith(old)):
        # The replay completes a partial answer, or renders the answer with what led to it first
        # (fast-agent replays a tool turn's answer as the tool call's text, then the result).
        return 2 if recorded.incomplete and new.startswith(old) else 1
    return 0


def _align(recorded: Sequence[M], replayed: Sequence[M]) -> list[tuple[int, int]]:
    """The matched pairs ``(recorded index, replayed index)``, increasing in both."""
    n, m = len(recorded), len(replayed)
    head = 0
    while head < n and head < m and _score(recorded[head], replayed[head]) == _SAME:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and _score(recorded[n - 1 - tail], replayed[m - 1 - tail]) == _SAME:
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
    """In order, each replayed message takes the first recorded one after the last taken that is
    the same message (found through an index), or failing that one of the next ``_WINDOW`` it
    matches at all: linear for a replay too long to align cell by cell."""
    same: dict[tuple[Any, ...], list[int]] = {}
    for i, message in enumerate(rows):
        if message.message_id is not None:
            same.setdefault(("id", message.message_id), []).append(i)
        same.setdefault(("text", message.role, message.inserted, _squeeze(message.text)), []).append(i)
    pairs: list[tuple[int, int]] = []
    start = 0
    for j, message in enumerate(cols):
        found = None
        keys: list[tuple[Any, ...]] = [("text", message.role, message.inserted, _squeeze(message.text))]
        if message.message_id is not None:
            keys.append(("id", message.message_id))
        for key in keys:
            indices = same.get(key, ())
            for i in indices[bisect.bisect_left(indices, start) :][:_WINDOW]:
                if _score(rows[i], message) == _SAME:
                    found = i if found is None else min(found, i)
                    break
        if found is None:
            found = next((i for i in range(start, min(len(rows), start + _WINDOW)) if _score(rows[i], message)), None)
        if found is not None:
            pairs.append((found, j))
            start = found + 1
    return pairs


def _out_of_order(
    recorded: Sequence[M], replayed: Sequence[M], pairs: list[tuple[int, int]]
) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """Match what the agent replayed out of order (the module docstring's matching rule): returns
    the pairs still in order, and ``{recorded: replayed}`` for the others."""
    taken = {i for i, _ in pairs}
    free = [i for i in range(len(recorded)) if i not in taken and recorded[i].status != "failed"]
    used = {j for _, j in pairs}
    cols = [j for j in range(len(replayed)) if j not in used]
    if not free or len(free) * (len(cols) + len(pairs)) > _MAX_CELLS:
        return pairs, {}
    extra: dict[int, int] = {}
    kept_pairs: list[tuple[int, int]] = []
    for i, j in pairs:
        if _score(recorded[i], replayed[j]) < _SAME:
            equal = next((k for k in free if k not in extra and _score(recorded[k], replayed[j]) == _SAME), None)
            if equal is not None:
                extra[equal] = j
                free.append(i)
                continue
        kept_pairs.append((i, j))
    absorbed = set(extra.values())
    for want in (_SAME, 2, 1):
        for j in cols:
            if j in absorbed:
                continue
            for i in free:
                if i not in extra and _score(recorded[i], replayed[j]) == want:
                    extra[i] = j
                    absorbed.add(j)
                    break
    # The partials "aaaa" then "a", replayed "aaaab" then "aa" after both prompts: "a" took "aaaab" in
    # order; "aa" takes "a" and "aaaab" goes to "aaaa", rather than a partial left and a copy added.
    partner = dict(kept_pairs) | extra
    weak = [i for i, j in partner.items() if _score(recorded[i], replayed[j]) < _SAME]
    left = [j for j in cols if j not in absorbed]
    if any(k not in partner for k in free) and len(left) * len(weak) <= _MAX_CELLS:
        for j in left:
            for i in weak:
                other = partner[i]
                if other == j or not _score(recorded[i], replayed[j]):
                    continue
                spare = next((k for k in free if k not in partner and _score(recorded[k], replayed[other])), None)
                if spare is not None:
                    partner[i], partner[spare] = j, other
                    weak.append(spare)
                    break
        kept_pairs = [(i, j) for i, j in kept_pairs if partner[i] == j]
        in_order = set(kept_pairs)
        extra = {i: j for i, j in partner.items() if (i, j) not in in_order}
    return kept_pairs, extra


def _take(old: _Message, new: _Message) -> bool:
    """The replayed ``new`` matched the recorded ``old``: complete it or give it its id. False
    when the replay contradicts it (the recorded copy is kept)."""
    if old.message_id is None and new.message_id is not None:
        old.message_id = new.message_id
    if _squeeze(old.text) == _squeeze(new.text) and (old.text or old.blocks == new.blocks):
        return True
    if (old.text or old.blocks) and (old.role == "user" or not _squeeze(new.text).startswith(_squeeze(old.text))):
        return False
    old.blocks = list(new.blocks)
    old.incomplete = False
    return True


def reconcile(
    recorded: Sequence[M], replayed: Sequence[M], make: Callable[..., M], *, whole: bool = True
) -> Reconciled[M]:
    """The conversation after a replay (see the module docstring). ``recorded`` is never mutated
    except where the replay completes a message or gives an id-less one its ``messageId``.
    ``whole``: the client holds the conversation from its start (no message was dropped)."""
    users, fused, inserted = _split_users(replayed, recorded, make, whole=whole)
    replayed, answers = _split_answers(users, recorded, make)
    prompts = sum(message.role == "user" and not message.inserted for message in replayed)
    result: Reconciled[M] = Reconciled([], replayed_users=prompts, inserted=inserted)
    if fused:
        result.notes.append(f"split {fused} replayed user message(s) that ran recorded prompts together")
    if inserted:
        result.notes.append(
            f"kept {inserted} piece(s) of text the agent put among the replayed prompts apart, "
            "as agent-inserted messages"
        )
    if answers:
        result.notes.append(
            f"split {answers} replayed agent message(s) that ran recorded answers together, to complete each"
        )
    pairs = _align(recorded, replayed)
    pairs, extra = _out_of_order(recorded, replayed, pairs)
    absorbed = set(extra.values())
    contradictions = 0
    i = j = 0
    for ri, pj in [*pairs, (len(recorded), len(replayed))]:
        for index in range(i, ri):
            old = recorded[index]
            if index in extra:
                contradictions += not _take(old, replayed[extra[index]])
                result.matched += 1
            else:
                result.left_out.append(old)
            result.messages.append(old)
        added = [replayed[index] for index in range(j, pj) if index not in absorbed]
        result.messages.extend(added)
        result.added += len(added)
        if ri < len(recorded):
            old = recorded[ri]
            contradictions += not _take(old, replayed[pj])
            result.messages.append(old)
            result.matched += 1
        i, j = ri + 1, pj + 1
    if contradictions:
        result.notes.append(f"the replay contradicted {contradictions} stored message(s): the stored copy was kept")
    return result
