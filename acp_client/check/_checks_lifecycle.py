"""Checks of the lifecycle basics recovery stands on: capabilities, fresh ids, notifications, cancel."""

from __future__ import annotations

import contextlib
from typing import Any

from ._context import CheckContext, Verdict
from ._link import CheckFailed
from ._protocol import attach_params, ended, finish_prompt, start_prompt

__all__ = ["cancel_honoured", "initialize_capabilities", "new_fresh_id", "notification_unanswered"]

#: The optional session methods whose capability the checker verifies, in probing order.
PROBED = ("session/load", "session/resume", "session/list", "session/close", "session/fork", "session/status")


def _probe_params(method: str, session_id: str, cwd: str) -> dict[str, Any]:
    if method == "session/list":
        return {}
    if method in ("session/load", "session/resume", "session/fork"):
        return attach_params(session_id, cwd)
    return {"sessionId": session_id}


async def initialize_capabilities(ctx: CheckContext) -> Verdict:
    link = await ctx.link()
    unknown = ctx.unknown_id()
    # session/close is session-scoped (over HTTP it needs a session the connection knows): close a real one.
    own = await ctx.new_session(link)
    fails: list[str] = []
    warns: list[str] = []
    works: list[str] = []
    evidence: list[str] = []
    for method in PROBED:
        if method == "session/load" and ctx.version != 1:
            continue  # v2 has no session/load
        advertised = ctx.supports(method)
        where = ctx.capability_path(method)
        mark = ctx.mark()
        try:
            target = own if method == "session/close" else unknown
            answer = await link.request(method, _probe_params(method, target, ctx.cwd))
        except CheckFailed as exc:
            fails.append(f"{method}: {exc.finding}")
            evidence += ctx.lines(mark)
            continue
        missing = answer.code == -32601
        if advertised and missing:
            fails.append(f"{method} is advertised ({where}) but answers -32601")
            evidence += ctx.lines(mark)
        elif not advertised and not missing:
            warns.append(f"{method} works but is not advertised ({where})")
            evidence += ctx.lines(mark)
        elif advertised:
            works.append(method)
    if fails:
        return _verdict("fail", "; ".join(fails + warns), evidence)
    if warns:
        return _verdict("warn", "; ".join(warns) + ": a client never calls what is not advertised", evidence)
    listed = ", ".join(works) if works else "none"
    return ctx.verdict("pass", f"every advertised session method answers (advertised: {listed})")


def _verdict(status: Any, finding: str, lines: list[str]) -> Verdict:
    return Verdict(status, finding, tuple(lines))


async def new_fresh_id(ctx: CheckContext) -> Verdict:
    link = await ctx.link()
    first = await ctx.new_session(link)
    second = await ctx.new_session(link)
    if first == second:
        return ctx.verdict("fail", "two session/new calls answered the same sessionId")
    return ctx.verdict("pass", "two session/new calls gave two different ids")


async def notification_unanswered(ctx: CheckContext) -> Verdict:
    link = await ctx.link()
    session_id = await ctx.new_session(link)
    mark = ctx.mark()
    strays = len(link.stray_answers)
    await link.notify("_acp_check/notice", {"note": "a notification: never answer it"})
    await link.notify("session/cancel", {"sessionId": session_id})  # no turn runs: nothing to cancel
    with contextlib.suppress(CheckFailed):  # answered: the agent has read the notifications before it
        await link.request("_acp_check/barrier", {})
    await link.settle(quiet=0.3, limit=2.0)
    answered = link.stray_answers[strays:]
    if answered:
        return ctx.verdict(
            "fail", f"the agent answered a notification ({len(answered)} responses with no request)", mark
        )
    return ctx.verdict("pass", "no answer to a notification (an unknown one and session/cancel)")


def _working(message: dict[str, Any], session_id: str) -> bool:
    """Whether ``message`` shows the agent working on the turn (an agent update, or a request to the client)."""
    if message.get("method") == "session/update":
        params = message.get("params") or {}
        update = params.get("update") if isinstance(params, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        return params.get("sessionId") == session_id and kind in (
            "agent_message_chunk",
            "agent_thought_chunk",
            "agent_message",
            "tool_call",
            "tool_call_update",
            "plan",
        )
    return "method" in message and "id" in message


async def cancel_honoured(ctx: CheckContext) -> Verdict:
    link = await ctx.link()
    session_id = await ctx.new_session(link)
    mark = ctx.mark()
    pending = await start_prompt(link, session_id, ctx.settings.cancel_prompt)
    # During the turn: after the agent's first update, or after a second of work (some agents stream nothing
    # until the end of the turn).
    await link.wait_for(lambda m: _working(m, session_id), start=pending.start, timeout=min(1.0, ctx.timeout))
    if any(ended(pending, m, ctx.version) for m in link.inbound[pending.start :]):
        return ctx.verdict(
            "warn",
            "the turn ended before the cancel could be sent: inconclusive (pass a longer --cancel-prompt)",
            mark,
        )
    cancelled_at = len(link.inbound)
    await link.notify("session/cancel", {"sessionId": session_id})
    try:
        turn = await finish_prompt(link, ctx.version, pending, ctx.timeout)
    except CheckFailed as exc:
        return ctx.verdict("fail", f"after session/cancel: {exc.finding}", mark)
    if turn.stop_reason == "cancelled":
        return ctx.verdict("pass", 'session/cancel ended the turn with stopReason "cancelled"', mark, head=4, tail=4)
    stop = turn.stop_reason
    if not any(_working(m, session_id) for m in link.inbound[cancelled_at:]):
        # The agent did no more work after the cancel was sent: its turn was over as the cancel
        # crossed it on the wire (a short turn), which ACP allows.
        return ctx.verdict(
            "warn",
            f"the turn ended ({stop!r}) as the cancel was sent, with nothing after it: inconclusive "
            "(pass a longer --cancel-prompt)",
            mark,
        )
    return ctx.verdict("fail", f'the cancelled turn ended with stopReason {stop!r}, not "cancelled"', mark)
