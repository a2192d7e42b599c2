"""Replays as agents really send them, reconciled with the conversation the client holds.

Agents without message ids put more than the user's prompts into a replayed user run (Claude's
adapters: ``<command-name>/model…``, ``<local-command-stdout>…``, ``[Request interrupted by user]``),
fuse prompts, fuse answers over the partials the user saw, send them out of order, and leave turns
out. The properties: no prompt lost, duplicated or fused (with another prompt or with agent text);
agent-inserted text kept apart and marked; no seen text deleted; a second identical replay changes
nothing; ``missing_turns`` is exactly the completed prompts the replay lacked.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_client import Transcript
from acp_client._codec import decode_session_update
from acp_client._sessions._conversation import from_entries, to_entries
from acp_client.transcript import TurnStatus
from acp_client.types import TextContent

MODE = {"sessionUpdate": "current_mode_update", "currentModeId": "ask"}
CONFIG = {"sessionUpdate": "config_option_update", "configOptions": []}
COMMANDS = {"sessionUpdate": "available_commands_update", "availableCommands": []}
TOOL = {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "read"}
BOUNDARIES = [MODE, CONFIG, COMMANDS, TOOL]

#: Prompts and answers are made of these; what the agent inserts never holds them, so a prompt
#: cannot be found by chance inside inserted text.
PROMPT_TEXT = st.text(alphabet="XYZ 0", min_size=1, max_size=6).filter(str.strip)
REPLY_TEXT = st.text(alphabet="ab c", min_size=1, max_size=6).filter(str.strip)
MARKERS = [
    "<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args></command-args>",
    "<local-command-stdout>Set model to opus</local-command-stdout>",
    "<local-command-stdout>Set model to sonnet</local-command-stdout>",
    "[Request interrupted by user]",
    "[Request interrupted by user for tool use]",
]
INSERTED = st.one_of(st.sampled_from(MARKERS), st.text(alphabet="qrs<>[]/", min_size=1, max_size=8))


def u(data: dict[str, Any]) -> Any:
    return decode_session_update(data, protocol_version=1)


def chunk(role: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"sessionUpdate": f"{role}_message_chunk", "content": {"type": "text", "text": text}}
    if message_id is not None:
        data["messageId"] = message_id
    return data


def squeeze(text: str) -> str:
    return " ".join(text.split())


@attrs.define
class Turn:
    prompt: str
    #: The agent's answers in full (apart: a tool call between them).
    replies: list[str]
    status: TurnStatus
    #: How much of each answer the user saw (a cancelled or interrupted turn shows a prefix).
    seen: list[int]

    @property
    def partial(self) -> bool:
        return self.status in (TurnStatus.CANCELLED, TurnStatus.INTERRUPTED)

    def shown(self, k: int) -> str:
        return self.replies[k][: self.seen[k]] if self.partial else self.replies[k]


@st.composite
def turn(draw: st.DrawFn, prompt: st.SearchStrategy[str], reply: st.SearchStrategy[str]) -> Turn:
    status = draw(st.sampled_from(list(TurnStatus)[1:]))
    replies = [] if status is TurnStatus.FAILED else draw(st.lists(reply, max_size=2))
    seen = [draw(st.integers(len(r) - len(r.lstrip()) + 1, len(r))) for r in replies]
    return Turn(draw(prompt), replies, status, seen)


def unique(turns: list[Turn]) -> list[Turn]:
    """Make every prompt and answer distinct (and none a part of another): a numbered mark first."""
    for n, item in enumerate(turns):
        item.prompt = f"Y{n}Z{n}Y {item.prompt}"
        item.replies = [f"<{n}.{k}> {r}" for k, r in enumerate(item.replies)]
        item.seen = [len(f"<{n}.{k}> ") + s for k, s in enumerate(item.seen)]
    return turns


def record(turns: list[Turn]) -> Transcript:
    """The conversation as a v1 client saw it live (no ids; the client records its prompts)."""
    t = Transcript("s")
    for item in turns:
        t.begin_turn([TextContent(text=item.prompt)], record=True)
        for k in range(len(item.replies)):
            if k:
                t.apply(u(TOOL))
            t.apply(u(chunk("agent", item.shown(k))))
        t.finish_turn(item.status)
    return t


@attrs.define
class Replay:
    updates: list[dict[str, Any]] = attrs.field(factory=list)
    inserted: list[str] = attrs.field(factory=list)
    missing: list[str] = attrs.field(factory=list)
    #: For each (turn, answer): the text the replay brought for it, when it did.
    brought: dict[tuple[int, int], str] = attrs.field(factory=dict)


@st.composite
def replay_of(draw: st.DrawFn, turns: list[Turn]) -> Replay:
    """A replay without ids in every shape seen: arbitrary chunks, agent text before, after and
    between the prompts (in the same run or alone), fused prompts, fused answers sent after the
    prompts they answer, partial answers left out, turns left out, updates between messages."""
    r = Replay()

    def pieces(role: str, text: str) -> None:
        cuts = sorted(draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=3)))
        for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
            if text[a:b]:
                r.updates.append(chunk(role, text[a:b]))

    def insert() -> None:
        text = draw(INSERTED)
        r.inserted.append(text)
        pieces("user", text)

    def between() -> None:
        if draw(st.integers(0, 3)) == 0:
            r.updates.append(draw(st.sampled_from(BOUNDARIES)))

    present = [n for n, item in enumerate(turns) if item.status is not TurnStatus.FAILED]
    left_out = set(draw(st.sets(st.sampled_from(present)))) if present and draw(st.booleans()) else set()
    for n in present:
        if n in left_out and turns[n].status is TurnStatus.COMPLETE:
            r.missing.append(turns[n].prompt)
    kept = [n for n in present if n not in left_out]
    index = 0
    while index < len(kept):
        n = kept[index]
        item = turns[n]
        between()
        if draw(st.integers(0, 3)) == 0:  # the agent's text before the prompt (a new process: /model)
            insert()
            if draw(st.booleans()):
                r.updates.append(draw(st.sampled_from(BOUNDARIES)))  # alone, then the prompt
        pieces("user", item.prompt)
        nxt = kept[index + 1] if index + 1 < len(kept) else None
        if nxt is not None and len(item.replies) == 1 and len(turns[nxt].replies) == 1 and draw(st.integers(0, 3)) == 0:
            # Unordered: both prompts (fused, maybe with agent text between), then both answers
            # in one agent message.
            if draw(st.booleans()):
                insert()
            pieces("user", turns[nxt].prompt)
            r.updates.append(TOOL)
            first, second = item.replies[0], turns[nxt].replies[0]
            r.brought[(n, 0)], r.brought[(nxt, 0)] = first, second
            pieces("agent", first + second)
            index += 2
            continue
        if draw(st.integers(0, 4)) == 0:  # agent text after the prompt, in its run
            insert()
        for k, reply in enumerate(item.replies):
            if item.partial and draw(st.booleans()):
                continue  # the replay leaves out the partial answer the user saw
            r.updates.append(TOOL if k else draw(st.sampled_from(BOUNDARIES)))
            r.brought[(n, k)] = reply
            pieces("agent", reply)
        if item.partial and draw(st.booleans()):  # after a cancel
            r.updates.append(draw(st.sampled_from([MODE, CONFIG, COMMANDS])))
            insert()
        index += 1
    if r.updates and draw(st.integers(0, 3)) == 0:
        insert()  # at the very end, alone
    return r


def view(t: Transcript) -> list[tuple[str, str, Any, bool, bool]]:
    return [(m.role, m.text, m.status, m.incomplete, m.inserted) for m in t.messages]


def replay(t: Transcript, updates: list[dict[str, Any]]) -> None:
    t.begin_replay()
    for update in updates:
        t.apply(u(update))
    t.end_replay()


def squash(texts: list[str]) -> str:
    return "".join("".join(texts).split())


def check(turns: list[Turn], r: Replay, t: Transcript, *, exact: bool) -> None:
    messages = t.messages
    prompts = [m for m in messages if m.role == "user" and not m.inserted]
    # Every prompt exactly once, alone, with its status: none lost, duplicated or fused.
    assert [(m.text, m.status) for m in prompts] == [(item.prompt, item.status) for item in turns]
    inserted = [m for m in messages if m.inserted]
    assert all(m.role == "user" and m.status is None for m in inserted)
    # What the agent inserted is all there, apart from the prompts, and nothing else is marked.
    assert squash([m.text for m in inserted]) == squash(r.inserted)
    # No answer the user saw is deleted; a fused copy is never added.
    answers = [m for m in messages if m.role == "agent"]
    shown = [(n, k) for n, item in enumerate(turns) for k in range(len(item.replies))]
    assert len(answers) == len(shown)
    for m, (n, k) in zip(answers, shown, strict=True):
        seen = squeeze(turns[n].shown(k))
        assert squeeze(m.text).startswith(seen)
        if exact:
            assert squeeze(m.text) == squeeze(r.brought.get((n, k), turns[n].shown(k)))
    assert t.turns == sum(1 for item in turns if item.status is not TurnStatus.FAILED)
    report = t.last_replay
    assert report is not None
    if exact:
        assert list(report.missing_turns) == r.missing
        assert report.inserted == len(inserted)
    if report.missing_turns:
        assert report.lacks_history() is not None


@settings(max_examples=400, deadline=None)
@given(data=st.data(), turns=st.lists(turn(PROMPT_TEXT, REPLY_TEXT), max_size=6))
def test_any_replay_shape_keeps_every_prompt_once_and_agent_text_apart(data: st.DataObject, turns: list[Turn]) -> None:
    """Prompts and answers made of few letters (some equal, some inside others)."""
    replayed_twice(turns, data.draw(replay_of(turns)))


def replayed_twice(turns: list[Turn], r: Replay) -> None:
    t = record(turns)
    replay(t, r.updates)
    check(turns, r, t, exact=False)
    replay(t, r.updates)  # every recovery replays again: nothing is lost or added twice
    check(turns, r, t, exact=False)


def test_fused_answers_after_fused_prompts_complete_each_partial_even_when_one_starts_the_other() -> None:
    """Found by the property above: turn 2's partial ``a`` is a prefix of turn 1's full answer, so
    the answer meant for turn 1 was taken as turn 2's completion; turn 1's partial was left and
    turn 2's answer added as a third message. Each partial must take its own."""
    turns = [
        Turn("X", [], TurnStatus.COMPLETE, []),
        Turn("0", ["aaaab"], TurnStatus.CANCELLED, [4]),
        Turn("00", ["aa"], TurnStatus.CANCELLED, [1]),
    ]
    model = MARKERS[0]
    updates = [MODE, chunk("user", model), chunk("user", "X"), MODE, chunk("user", model)]
    updates += [chunk("user", "0"), chunk("user", "00"), TOOL, chunk("agent", "aaaabaa"), chunk("user", model)]
    brought = {(1, 0): "aaaab", (2, 0): "aa"}
    replayed_twice(turns, Replay(updates, inserted=[model] * 3, brought=brought))


def test_answers_replayed_apart_after_their_prompts_complete_each_partial_even_when_one_starts_the_other() -> None:
    t = conversation(("0", "aaaa", TurnStatus.CANCELLED), ("00", "a", TurnStatus.CANCELLED))
    updates = [chunk("user", "0"), chunk("user", "00"), TOOL, chunk("agent", "aaaab"), TOOL, chunk("agent", "aa")]
    for _ in range(2):
        replay(t, updates)
        assert view(t) == [
            ("user", "0", TurnStatus.CANCELLED, False, False),
            ("agent", "aaaab", None, False, False),
            ("user", "00", TurnStatus.CANCELLED, False, False),
            ("agent", "aa", None, False, False),
        ]


@settings(max_examples=400, deadline=None)
@given(data=st.data(), turns=st.lists(turn(PROMPT_TEXT, REPLY_TEXT), max_size=6).map(unique))
def test_any_replay_shape_with_distinct_texts_is_reconciled_exactly(data: st.DataObject, turns: list[Turn]) -> None:
    """Distinct prompts and answers: the answers the replay brought complete exactly theirs, and
    ``missing_turns`` is exactly the completed prompts left out."""
    t = record(turns)
    r = data.draw(replay_of(turns))
    replay(t, r.updates)
    check(turns, r, t, exact=True)
    stored = from_entries(to_entries(t), "s", path="memory")
    assert view(stored) == view(t)  # inserted survives the store
    once = view(t)
    replay(t, r.updates)  # every recovery replays again: nothing moves, nothing is added twice
    assert view(t) == once
    check(turns, r, t, exact=True)


# -- the shapes seen on the wire ---------------------------------------------------------------------


def conversation(*turns: tuple[str, str | None, TurnStatus]) -> Transcript:
    t = Transcript("s")
    for prompt, answer, status in turns:
        t.begin_turn([TextContent(text=prompt)], record=True)
        if answer is not None:
            t.apply(u(chunk("agent", answer)))
        t.finish_turn(status)
    return t


def test_claude_agent_acp_cancel_marker_between_two_prompts_is_kept_apart() -> None:
    """claude-agent-acp 0.23.x after a cancel: the cancelled prompt, Claude's marker and the next
    prompt come back as consecutive id-less user chunks, one run:
    ``'SLOW delta, to be cancelled[Request interrupted by user]epsilon: right after the cancel'``."""
    t = conversation(
        ("alpha", "echo: alpha", TurnStatus.COMPLETE),
        ("SLOW delta, to be cancelled", None, TurnStatus.CANCELLED),
        ("epsilon: right after the cancel", "echo: epsilon", TurnStatus.COMPLETE),
    )
    replay(
        t,
        [
            chunk("user", "alpha"),
            chunk("agent", "echo: alpha"),
            chunk("user", "SLOW delta, to be cancelled"),
            chunk("user", "[Request interrupted by user]"),
            chunk("user", "epsilon: right after the cancel"),
            chunk("agent", "echo: epsilon"),
        ],
    )
    assert view(t) == [
        ("user", "alpha", TurnStatus.COMPLETE, False, False),
        ("agent", "echo: alpha", None, False, False),
        ("user", "SLOW delta, to be cancelled", TurnStatus.CANCELLED, False, False),
        ("user", "[Request interrupted by user]", None, False, True),
        ("user", "epsilon: right after the cancel", TurnStatus.COMPLETE, False, False),
        ("agent", "echo: epsilon", None, False, False),
    ]
    assert t.turns == 3
    report = t.last_replay
    assert report is not None and report.inserted == 1 and report.missing_turns == ()
    assert any("agent-inserted" in note for note in report.notes)
    assert "user [inserted]: [Request interrupted by user]" in t.text()


def test_claude_code_acp_model_command_before_the_first_prompt_is_kept_apart() -> None:
    """claude-code-acp (and claude-agent-acp) replay the ``/model`` command the adapter ran at the
    start of each process, and its output, glued to the first prompt of that process."""
    t = conversation(("first prompt", "echo: first prompt", TurnStatus.COMPLETE))
    command = MARKERS[0]
    stdout = "<local-command-stdout>Set model to x</local-command-stdout>"
    first = [chunk("user", command), chunk("user", stdout), chunk("user", "first prompt")]
    replay(t, [*first, chunk("agent", "echo: first prompt")])
    assert [(m.role, m.text, m.inserted) for m in t.messages] == [
        ("user", command + stdout, True),
        ("user", "first prompt", False),
        ("agent", "echo: first prompt", False),
    ]
    assert t.messages[1].status is TurnStatus.COMPLETE and t.turns == 1
    again = view(t)
    replay(t, [chunk("user", command + stdout + "first prompt"), chunk("agent", "echo: first prompt")])
    assert view(t) == again  # the next replay finds them again: nothing added twice


def test_claude_marker_alone_at_the_end_after_a_cancel_is_inserted() -> None:
    """claude-agent-acp: a cancel, then the agent killed: the marker is the replay's last user
    message, answered by nothing."""
    t = conversation(("long task", "step one", TurnStatus.CANCELLED))
    marker = chunk("user", "[Request interrupted by user]")
    replay(t, [chunk("user", "long task"), chunk("agent", "step one, step two"), MODE, marker])
    assert view(t) == [
        ("user", "long task", TurnStatus.CANCELLED, False, False),
        ("agent", "step one, step two", None, False, False),
        ("user", "[Request interrupted by user]", None, False, True),
    ]


def test_an_answered_user_message_the_client_never_held_is_a_turn() -> None:
    """Another client's prompt in the replay (answered by the agent) is history, not agent text."""
    t = conversation(("one", "echo: one", TurnStatus.COMPLETE))
    other = [chunk("user", "from elsewhere"), chunk("agent", "ok")]
    replay(t, [chunk("user", "one"), chunk("agent", "echo: one"), *other])
    assert [(m.text, m.inserted) for m in t.messages][2:] == [("from elsewhere", False), ("ok", False)]


def test_with_no_prompts_held_a_replay_is_history_as_it_comes() -> None:
    """An editor restarted without a store: the client holds nothing; nothing is called inserted."""
    t = Transcript("s")
    replay(t, [chunk("user", "[Request interrupted by user]"), chunk("user", "hello"), chunk("agent", "hi")])
    assert [(m.role, m.text, m.inserted) for m in t.messages] == [
        ("user", "[Request interrupted by user]hello", False),
        ("agent", "hi", False),
    ]


def test_text_before_the_first_prompt_is_history_when_the_store_dropped_the_oldest() -> None:
    """A bounded store dropped the oldest messages: what the replay brings before the first prompt
    the client holds is history it no longer has (a user message of its own), not agent text."""
    t = conversation(("kept prompt", "ok", TurnStatus.COMPLETE))
    t.dropped = 2
    replay(t, [chunk("user", "old prompt"), chunk("user", "kept prompt"), chunk("agent", "ok")])
    assert [(m.text, m.inserted) for m in t.messages] == [("old prompt", False), ("kept prompt", False), ("ok", False)]


def test_websocket_soak_a_run_of_several_prompts_is_split() -> None:
    """Official-SDK peer over WebSocket, after faults: one replayed user message fused several
    prompts (some cancelled, answered by nothing) and sat beside the originals."""
    prompts = [f"prompt {n}" for n in range(7)]
    t = conversation(*((p, None, TurnStatus.CANCELLED) for p in prompts))
    replay(t, [chunk("user", "".join(prompts))])
    assert [(m.text, m.inserted) for m in t.messages] == [(p, False) for p in prompts]
    assert t.last_replay is not None and t.last_replay.added == 0


def test_http_soak_fused_answers_complete_the_partials_they_continue() -> None:
    """Official-SDK peer over HTTP, after faults: two interrupted turns, partial answers shown;
    the replay sent both prompts, then ONE agent message running both full answers together. Each
    partial is completed; no fused copy is added."""
    t = conversation(
        ("first question", "The first ans", TurnStatus.INTERRUPTED),
        ("second question", "The second", TurnStatus.INTERRUPTED),
    )
    replay(
        t,
        [
            chunk("user", "first question"),
            chunk("user", "second question"),
            TOOL,
            chunk("agent", "The first answer, in full. "),
            chunk("agent", "The second answer, in full."),
        ],
    )
    assert [(m.role, m.text, m.incomplete) for m in t.messages] == [
        ("user", "first question", False),
        ("agent", "The first answer, in full. ", False),
        ("user", "second question", False),
        ("agent", "The second answer, in full.", False),
    ]
    report = t.last_replay
    assert report is not None and report.added == 0
    assert any("ran recorded answers together" in note for note in report.notes)


def test_fused_answers_around_a_turn_the_replay_left_out_are_split_along_their_own() -> None:
    """Found by the exact property: turns 2 and 4 replayed (prompts fused, answers in one message),
    turn 3 left out. The answer of turn 2 must not swallow turn 4's; turn 4's partial is completed."""
    t = conversation(
        ("two?", "two.", TurnStatus.COMPLETE),
        ("three?", "three.", TurnStatus.COMPLETE),
        ("four?", "fo", TurnStatus.CANCELLED),
    )
    updates = [chunk("user", "two?"), chunk("user", "four?"), TOOL, chunk("agent", "two.four, in full.")]
    for _ in range(2):
        replay(t, updates)
        assert [(m.text, m.incomplete) for m in t.messages] == [
            ("two?", False),
            ("two.", False),
            ("three?", False),
            ("three.", False),
            ("four?", False),
            ("four, in full.", False),
        ]
        report = t.last_replay
        assert report is not None and report.missing_turns == ("three?",) and report.added == 0


def test_claude_code_acp_replay_of_one_of_two_completed_turns_lacks_history() -> None:
    """claude-code-acp: the load replayed 1 of 2 completed turns (the last one had not reached its
    disk yet). A completed turn missing is proof the agent lacks it."""
    t = conversation(("one", "echo: one", TurnStatus.COMPLETE), ("two", "echo: two", TurnStatus.COMPLETE))
    replay(t, [chunk("user", "one"), chunk("agent", "echo: one")])
    report = t.last_replay
    assert report is not None and report.missing_turns == ("two",)
    assert report.lacks_history() == "the replay lacks 1 of the 2 completed turn(s) the client holds (first: 'two')"
    assert [m.text for m in t.messages] == ["one", "echo: one", "two", "echo: two"]


def test_a_cancelled_turn_left_out_is_not_a_missing_turn_and_a_long_one_is_quoted_short() -> None:
    long = "please " + "x" * 100
    t = conversation(("a", None, TurnStatus.CANCELLED), (long, "ok", TurnStatus.COMPLETE))
    replay(t, [chunk("user", "unrelated"), chunk("agent", "?")])
    report = t.last_replay
    assert report is not None and report.missing_turns == (long,)
    reason = report.lacks_history()
    assert reason is not None and "1 of the 1 completed" in reason and "'please xxx" in reason and "...'" in reason
    assert len(reason) < 140


def test_inserted_messages_are_stored_and_old_stores_still_load() -> None:
    t = conversation(("q", "a", TurnStatus.COMPLETE))
    replay(t, [chunk("user", "[Request interrupted by user]q"), chunk("agent", "a")])
    entries = to_entries(t)
    assert {"role": "user", "text": "[Request interrupted by user]", "inserted": True} in entries
    restored = from_entries(entries, "s", path="memory")
    assert view(restored) == view(t) and restored.turns == 1
    assert "inserted=True" in repr(restored.messages[0])
    old = [{"role": "user", "text": "q", "status": "complete"}, {"role": "agent", "text": "a"}]
    assert [m.inserted for m in from_entries(old, "s", path="memory").messages] == [False, False]


def test_a_pathological_replay_costs_no_more_than_the_cap() -> None:
    """3000 prompts, each replayed with agent text glued before it and none in order: bounded."""
    t = conversation(*((f"prompt number {n}", None, TurnStatus.COMPLETE) for n in range(3000)))
    updates: list[dict[str, Any]] = []
    for n in range(3000):
        updates += [chunk("user", f"[Request interrupted by user]prompt number {n}"), MODE]
    replay(t, updates)
    assert t.turns == 3000 and t.last_replay is not None and t.last_replay.inserted == 3000
