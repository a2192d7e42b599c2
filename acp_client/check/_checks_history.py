"""Checks of what recovery replays or resumes: ``session/load`` (v1), ``session/resume`` (+ ``replayFrom``, v2)."""

from __future__ import annotations

from typing import Any

import attrs

from ._context import CheckContext, Skip, Verdict
from ._link import Answer, Link
from ._protocol import Message, attach_params, messages_of, replay_request, tool_call_ids

__all__ = ["load_message_ids", "load_replays_once", "load_unknown", "resume_no_replay", "resume_unknown"]

#: The prompts of the replay scenario's two turns.
TURNS = ("first turn", "second turn")


def _replay_method(ctx: CheckContext) -> str:
    return "session/load" if ctx.version == 1 else "session/resume"


def _not_found_spelled_otherwise(answer: Answer) -> str:
    return f'{answer.describe()}: use -32002 (resource not found) so a client can tell "unknown" from a failure'


async def load_unknown(ctx: CheckContext) -> Verdict:
    ctx.require(_replay_method(ctx))
    link = await ctx.link()
    method, params = replay_request(ctx.version, ctx.unknown_id(), ctx.cwd)
    mark = ctx.mark()
    answer = await link.request(method, params)
    label = method if ctx.version == 1 else "session/resume with replayFrom"
    if answer.ok:
        return ctx.verdict("fail", f"{label} of an unknown id succeeded: false continuity (the history is gone)", mark)
    if answer.code == -32601:
        raise Skip(f"{method} answers -32601 (see initialize.capabilities)")
    if answer.code == -32002:
        return ctx.verdict("pass", f"{label} of an unknown id answers -32002", mark)
    return ctx.verdict("warn", f"{label} of an unknown id {_not_found_spelled_otherwise(answer)}", mark)


async def resume_unknown(ctx: CheckContext) -> Verdict:
    ctx.require("session/resume")
    link = await ctx.link()
    mark = ctx.mark()
    answer = await link.request("session/resume", attach_params(ctx.unknown_id(), ctx.cwd))
    if answer.ok:
        return ctx.verdict("fail", "session/resume of an unknown id succeeded: false continuity", mark)
    if answer.code == -32601:
        raise Skip("session/resume answers -32601 (see initialize.capabilities)")
    if answer.code == -32002:
        return ctx.verdict("pass", "session/resume of an unknown id answers -32002", mark)
    return ctx.verdict("warn", f"session/resume of an unknown id {_not_found_spelled_otherwise(answer)}", mark)


async def resume_no_replay(ctx: CheckContext) -> Verdict:
    ctx.require("session/resume")
    first = await ctx.link()
    session_id = await ctx.new_session(first)
    await ctx.turn(first, session_id)
    await first.aclose()  # as after a drop: the connection that held the session is gone
    second = await ctx.link()
    mark = ctx.mark()
    start = len(second.inbound)
    answer = await second.request("session/resume", attach_params(session_id, ctx.cwd))
    if answer.code == -32601:
        raise Skip("session/resume answers -32601 (see initialize.capabilities)")
    if answer.code == -32002:
        raise Skip("the agent does not know the session on a second link (-32002): nothing to resume")
    if not answer.ok:
        return ctx.verdict("fail", f"session/resume of a known session {answer.describe()}", mark)
    await second.settle(quiet=0.5, limit=ctx.timeout)
    replayed = messages_of(second.updates(session_id, start=start))
    if replayed:
        return ctx.verdict(
            "fail",
            f"a plain session/resume re-sent history: {len(replayed)} messages (only replayFrom/load may replay)",
            mark,
        )
    return ctx.verdict("pass", "a plain session/resume re-sent no history", mark)


@attrs.frozen
class _Replay:
    expected: list[Message]
    live_updates: list[dict[str, Any]]
    updates: list[dict[str, Any]]
    messages: list[Message]
    mark: int


async def _replay_after_restart(ctx: CheckContext, *, tool_turn: bool = False) -> _Replay:
    method = _replay_method(ctx)
    ctx.require(method)
    ctx.require_restart()
    link = await ctx.link()
    session_id = await ctx.new_session(link)
    expected: list[Message] = []
    live_updates: list[dict[str, Any]] = []
    tool = ctx.settings.tool_prompt
    for text in (*TURNS, tool) if tool_turn and tool else TURNS:
        turn = await ctx.turn(link, session_id, text)
        updates = _between(link, session_id, turn.start, turn.end)
        live_updates += updates
        live = messages_of(updates)
        user = next((m for m in live if m.role == "user"), None)
        expected.append(Message("user", text, user.message_id if user else None))
        expected += [m for m in live if m.role == "agent"]
    await ctx.restart()
    after = await ctx.link()
    mark = ctx.mark()
    start = len(after.inbound)
    name, params = replay_request(ctx.version, session_id, ctx.cwd)
    answer = await after.request(name, params)
    if answer.code == -32601:
        raise Skip(f"{name} answers -32601 (see initialize.capabilities)")
    if answer.code == -32002:
        raise Skip("after a restart the agent does not know the session (-32002): nothing to replay")
    if not answer.ok:
        raise _Refused(ctx.verdict("fail", f"{name} of a known session after a restart {answer.describe()}", mark))
    await after.settle(quiet=0.5, limit=ctx.timeout)
    updates = after.updates(session_id, start=start)
    return _Replay(expected, live_updates, updates, messages_of(updates), mark)


class _Refused(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.finding)
        self.verdict = verdict


def _between(link: Link, session_id: str, start: int, end: int) -> list[dict[str, Any]]:
    return link.updates(session_id, start=start, end=end)


def _key(message: Message) -> tuple[str, str]:
    return (message.role, " ".join(message.text.split()))


def _resent(updates: list[dict[str, Any]]) -> list[str]:
    """The ids of whole messages (v2 ``user_message`` / ``agent_message``) sent more than once."""
    ids = [
        str(u.get("messageId"))
        for u in updates
        if u.get("sessionUpdate") in ("user_message", "agent_message") and isinstance(u.get("messageId"), str)
    ]
    return sorted({i for i in ids if ids.count(i) > 1})


def _diagnose(expected: list[Message], replayed: list[Message], updates: list[dict[str, Any]]) -> str | None:
    """``None`` when ``replayed`` is ``expected`` exactly once in order, else what is wrong."""
    want = [_key(m) for m in expected]
    got = [_key(m) for m in replayed]
    resent = _resent(updates)
    if resent:
        return f"sends {len(resent)} messages twice (the same messageId)"
    if got == want:
        return None
    if not got:
        return "nothing was replayed"
    missing = [k for k in want if k not in got]
    repeated = sorted({k for k in got if got.count(k) > max(1, want.count(k))})
    parts: list[str] = []
    if repeated:
        parts.append("repeats " + ", ".join(f"{role} {text!r}" for role, text in repeated))
    if missing:
        parts.append("drops " + ", ".join(f"{role} {text!r}" for role, text in missing))
    extra = [k for k in got if k not in want]
    if extra:
        parts.append(f"adds {len(extra)} messages the live turns did not have")
    if not parts:
        parts.append("replays the messages out of order")
    return "; ".join(parts)


async def load_replays_once(ctx: CheckContext) -> Verdict:
    try:
        replay = await _replay_after_restart(ctx)
    except _Refused as exc:
        return exc.verdict
    problem = _diagnose(replay.expected, replay.messages, replay.updates)
    if problem is None:
        return ctx.verdict(
            "pass",
            f"after a restart the history ({len(replay.expected)} messages) was replayed once, in order",
            replay.mark,
        )
    return ctx.verdict(
        "fail",
        f"after a restart the replay {problem} ({len(replay.messages)} messages for {len(replay.expected)})",
        replay.mark,
    )


async def load_message_ids(ctx: CheckContext) -> Verdict:
    try:
        replay = await _replay_after_restart(ctx, tool_turn=True)
    except _Refused as exc:
        return exc.verdict
    if not replay.messages:
        raise Skip("nothing was replayed (see load.replays-once)")
    chunks = [
        u
        for u in replay.updates
        if u.get("sessionUpdate") in ("agent_message_chunk", "user_message_chunk", "agent_message", "user_message")
    ]
    without = [u for u in chunks if not isinstance(u.get("messageId"), str) or not u.get("messageId")]
    fails: list[str] = []
    warns: list[str] = []
    if without:
        note = f"{len(without)} of {len(chunks)} replayed message updates carry no messageId"
        (fails if ctx.version >= 2 else warns).append(note + (" (v2 requires it)" if ctx.version >= 2 else ""))
    for role in ("agent", "user"):
        live_ids = {m.message_id for m in replay.expected if m.role == role and m.message_id}
        replay_ids = {m.message_id for m in replay.messages if m.role == role and m.message_id}
        if live_ids and replay_ids - live_ids:
            fails.append(f"the replayed {role} messages carry other messageIds than live")
    live_tools = tool_call_ids(replay.live_updates)
    replay_tools = tool_call_ids(replay.updates)
    if live_tools and set(live_tools) != set(replay_tools):
        missing = len(set(live_tools) - set(replay_tools))
        fails.append(f"tool call ids are not stable: {missing} of {len(set(live_tools))} live tool calls not replayed")
    if fails:
        return ctx.verdict("fail", "; ".join(fails + warns), replay.mark)
    if warns:
        return ctx.verdict("warn", "; ".join(warns) + ": a client cannot de-duplicate a replay by id", replay.mark)
    tools = "tool call ids stable" if live_tools else "no tool calls in the live turns: pass --tool-prompt"
    return ctx.verdict("pass", f"replayed messages carry the live messageIds ({tools})", replay.mark, head=4, tail=2)
