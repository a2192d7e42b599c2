"""Checks of a cancelled turn: ``cancel.honoured`` (the cancel ends the turn) and ``cancel.next-turn``
(the turn after it gets its own answer), both judged on one scenario run once.

The scenario, on the run's shared link: a new session, a pause until the agent is quiet (some agents
send a greeting chunk right after ``session/new``, before any prompt: it is no work on a turn), an
ordinary turn (what an answer looks like), the cancel prompt, ``session/cancel`` once the agent
works on it (its first update, or a second of silence) and never in the same instant as the prompt,
the end of that turn, a pause (work that goes on after a ``cancelled`` answer shows there), and an
ordinary turn again; when that one is empty, one more turn, whose stream shows where its answer went.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

import attrs

from ._context import CheckContext, Skip, Verdict
from ._link import CheckFailed, Link
from ._protocol import Turn, ended, finish_prompt, messages_of, start_prompt

#: The least time between the cancel prompt and its cancel: a cancel in the same instant as the
#: prompt may reach an agent that has not started the turn yet, and says nothing about its cancel.
MIN_WORK: Final = 0.3
#: How long the scenario waits for the agent's first work on the cancel prompt.
FIRST_WORK: Final = 1.0
#: A pause with nothing arriving for this long means the agent is quiet.
QUIET: Final = 0.5


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


def _agent_text(link: Link, session_id: str, start: int, end: int | None = None) -> str:
    return "".join(m.text for m in messages_of(link.updates(session_id, start=start, end=end)) if m.role == "agent")


@attrs.frozen
class CancelScenario:
    """What the cancel scenario saw (evidence lines rendered from the check that ran it)."""

    baseline_text: str
    lines: tuple[str, ...]
    #: ``None`` when the cancel was sent during the turn; else why the scenario could not cancel.
    not_sent: str | None = None
    #: The cancelled turn's end, or the failure that ended the scenario there.
    cancelled: Turn | None = None
    cancel_error: str | None = None
    #: Work for the session after the cancelled turn ended, while no turn ran.
    worked_after_cancel: bool = False
    streamed_after_cancel: bool = False
    next_turn: Turn | None = None
    next_error: str | None = None
    next_text: str = ""
    #: Agent text that arrived after the next turn had ended, before any other prompt.
    late_text: str = ""
    #: The turn after the next one, run only when the next one was empty: its text.
    third_text: str | None = None


async def _scenario(ctx: CheckContext) -> CancelScenario:
    link = await ctx.shared_link()
    session_id = await ctx.new_session(link, reuse=True)
    await link.settle(quiet=QUIET, limit=min(3.0, ctx.timeout))
    baseline = await ctx.turn(link, session_id)
    baseline_text = _agent_text(link, session_id, baseline.start, baseline.end)
    await link.settle(quiet=QUIET, limit=min(3.0, ctx.timeout))
    mark = ctx.mark()
    pending = await start_prompt(link, session_id, ctx.settings.cancel_prompt)
    sent = time.monotonic()
    await link.wait_for(lambda m: _working(m, session_id), start=pending.start, timeout=min(FIRST_WORK, ctx.timeout))
    early = MIN_WORK - (time.monotonic() - sent)
    if early > 0:
        await asyncio.sleep(early)

    def done(not_sent: str | None = None, **rest: Any) -> CancelScenario:
        return CancelScenario(baseline_text, ctx.lines(mark, head=8, tail=8), not_sent=not_sent, **rest)

    if any(ended(pending, m, ctx.version) for m in link.inbound[pending.start :]):
        return done("the turn ended before the cancel could be sent")
    cancelled_at = len(link.inbound)
    await link.notify("session/cancel", {"sessionId": session_id})
    try:
        turn = await finish_prompt(link, ctx.version, pending, ctx.timeout)
    except CheckFailed as exc:
        await ctx.run.retire()  # the turn may still run: the next check gets a fresh agent
        return done(cancel_error=exc.finding)
    streamed = any(_working(m, session_id) for m in link.inbound[cancelled_at : turn.end])
    after_end = len(link.inbound)
    await link.settle(quiet=QUIET, limit=min(3.0, ctx.timeout))
    worked_after = any(_working(m, session_id) for m in link.inbound[after_end:])
    if turn.stop_reason != "cancelled":
        return done(cancelled=turn, streamed_after_cancel=streamed, worked_after_cancel=worked_after)
    try:
        following = await ctx.turn(link, session_id)
    except CheckFailed as exc:
        await ctx.run.retire()
        return done(cancelled=turn, worked_after_cancel=worked_after, next_error=exc.finding)
    next_text = _agent_text(link, session_id, following.start, following.end)
    await link.settle(quiet=QUIET, limit=min(3.0, ctx.timeout))
    late = _agent_text(link, session_id, following.end)
    third: str | None = None
    if not next_text.strip() and baseline_text.strip():
        try:
            extra = await ctx.turn(link, session_id)
        except CheckFailed:
            await ctx.run.retire()
        else:
            third = _agent_text(link, session_id, extra.start, extra.end)
    return done(
        cancelled=turn,
        worked_after_cancel=worked_after,
        next_turn=following,
        next_text=next_text,
        late_text=late,
        third_text=third,
    )


async def _cancel_scenario(ctx: CheckContext) -> CancelScenario:
    scenario: CancelScenario = await ctx.run.scenario("cancel", lambda: _scenario(ctx))
    return scenario


def _broken_next_turn(scenario: CancelScenario) -> str | None:
    """What is wrong with the turn after the cancel, or ``None``."""
    if scenario.next_error is not None:
        return f"the turn after the cancel: {scenario.next_error}"
    turn = scenario.next_turn
    if turn is None or not scenario.baseline_text.strip():
        return None
    if not scenario.next_text.strip():
        where = ""
        if scenario.late_text.strip():
            where = f"; its answer arrived after the turn had ended ({len(scenario.late_text)} chars)"
        elif scenario.third_text is not None and scenario.third_text.strip():
            where = f"; the turn after it streamed {scenario.third_text.strip()[:60]!r}"
        return f"the turn after the cancel ended ({turn.stop_reason!r}, {turn.seconds:.3f} s) with no answer{where}"
    if scenario.late_text.strip():
        return "part of the answer of the turn after the cancel arrived after that turn had ended"
    return None


async def cancel_honoured(ctx: CheckContext) -> Verdict:
    scenario = await _cancel_scenario(ctx)
    if scenario.not_sent is not None:
        return Verdict("warn", f"{scenario.not_sent}: inconclusive (pass a longer --cancel-prompt)", scenario.lines)
    if scenario.cancel_error is not None:
        return Verdict("fail", f"after session/cancel: {scenario.cancel_error}", scenario.lines)
    turn = scenario.cancelled
    assert turn is not None
    if turn.stop_reason == "cancelled":
        if scenario.worked_after_cancel:
            return Verdict(
                "fail", 'the turn answered "cancelled" but the agent went on working on it afterwards', scenario.lines
            )
        broken = _broken_next_turn(scenario)
        if broken is not None:
            return Verdict(
                "fail",
                f'the turn answered "cancelled" but its work was not stopped: {broken} (see cancel.next-turn)',
                scenario.lines,
            )
        return Verdict("pass", 'session/cancel ended the turn with stopReason "cancelled"', scenario.lines)
    stop = turn.stop_reason
    if not scenario.streamed_after_cancel:
        # The agent did no more work after the cancel was sent: its turn was over as the cancel
        # crossed it on the wire (a short turn), which ACP allows.
        return Verdict(
            "warn",
            f"the turn ended ({stop!r}) as the cancel was sent, with nothing after it: inconclusive "
            "(pass a longer --cancel-prompt)",
            scenario.lines,
        )
    return Verdict("fail", f'the cancelled turn ended with stopReason {stop!r}, not "cancelled"', scenario.lines)


async def cancel_next_turn(ctx: CheckContext) -> Verdict:
    scenario = await _cancel_scenario(ctx)
    turn = scenario.cancelled
    if scenario.not_sent is not None or scenario.cancel_error is not None or turn is None:
        raise Skip("cannot check: no turn was cancelled (see cancel.honoured)")
    if turn.stop_reason != "cancelled":
        raise Skip(f"cannot check: the cancelled turn ended {turn.stop_reason!r} (see cancel.honoured)")
    if scenario.next_error is None and not scenario.baseline_text.strip():
        raise Skip("cannot check: an ordinary turn gives no agent text to compare with")
    broken = _broken_next_turn(scenario)
    if broken is not None:
        return Verdict("fail", broken, scenario.lines)
    return Verdict(
        "pass", f"the turn after the cancel got its own answer ({len(scenario.next_text)} chars)", scenario.lines
    )
