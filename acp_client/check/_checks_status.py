"""Checks of ``session/status`` (the proposal's rules): unknown ids, no side effects, cheap, after a restart."""

from __future__ import annotations

import statistics
import time
from typing import Any, Final

from ._checks_history import restart_scenario
from ._context import CheckContext, Skip, Verdict
from ._link import Answer, Link

ACTIVE: Final = ("active", "open")
INACTIVE: Final = ("inactive", "saved")
#: How many probes ``status.cheap`` times.
PROBES: Final = 50
#: Above this p50 ``status.cheap`` warns.
CHEAP_P50: Final = 0.050


def _status_of(answer: Answer) -> Any:
    return answer.result.get("status") if answer.ok and isinstance(answer.result, dict) else None


async def _status(link: Link, session_id: str) -> Answer:
    return await link.request("session/status", {"sessionId": session_id})


async def status_unknown(ctx: CheckContext) -> Verdict:
    ctx.require("session/status")
    link = await ctx.shared_link()
    unknown = ctx.unknown_id()
    mark = ctx.mark()
    answer = await _status(link, unknown)
    value = _status_of(answer)
    if value in INACTIVE:
        return ctx.verdict(
            "warn",
            f"an id the agent never issued is {value!r}, not -32002 (allowed when telling them apart is costly, "
            "but the client then wastes a load or resume)",
            mark,
        )
    if answer.ok or answer.code != -32002:
        return ctx.verdict(
            "fail", f"an id the agent never issued: session/status {answer.describe()}, not -32002", mark
        )
    data = answer.data if isinstance(answer.data, dict) else {}
    if data.get("sessionId") != unknown:
        return ctx.verdict("fail", "-32002 without data.sessionId naming the probed id", mark)
    return ctx.verdict("pass", "an unknown id answers -32002 with data.sessionId", mark)


async def status_no_side_effects(ctx: CheckContext) -> Verdict:
    ctx.require("session/status")
    first = await ctx.shared_link()
    session_id = await ctx.new_session(first)
    await ctx.turn(first, session_id)
    before = _status_of(await _status(first, session_id))
    second = await ctx.link()
    mark = ctx.mark()
    first_start = len(first.inbound)
    second_start = len(second.inbound)
    answers = [await _status(second, session_id) for _ in range(3)]
    await second.settle(quiet=0.3, limit=2.0)
    # A turn on the first link now: if the probe attached the session, its updates would show on the second.
    turn = await ctx.turn(first, session_id, "still here?")
    await second.settle(quiet=0.3, limit=2.0)
    leaked = second.updates(session_id, start=second_start)
    if leaked:
        kinds = sorted({str(u.get("sessionUpdate")) for u in leaked})
        return ctx.verdict(
            "fail",
            f"session/status attached the session: {len(leaked)} session/update for it arrived on the probing "
            f"link ({', '.join(kinds)})",
            mark,
        )
    if first.updates(session_id, start=first_start, end=turn.start):
        return ctx.verdict("fail", "probing from a second link sent session/update to the first", mark)
    if turn.stop_reason != "end_turn":
        return ctx.verdict("fail", f"after the probes the first link's turn ended with {turn.stop_reason!r}", mark)
    after = _status_of(await _status(first, session_id))
    if after != before:
        return ctx.verdict("fail", f"the first link's status changed from {before!r} to {after!r}", mark)
    seen = ", ".join(sorted({str(_status_of(a)) if a.ok else f"error {a.code}" for a in answers}))
    return ctx.verdict(
        "pass", f"three probes from a second link ({seen}) attached nothing and changed nothing", mark, head=4, tail=2
    )


async def status_cheap(ctx: CheckContext) -> Verdict:
    ctx.require("session/status")
    link = await ctx.shared_link()
    session_id = await ctx.new_session(link)
    mark = ctx.mark()
    times: list[float] = []
    for _ in range(PROBES):
        began = time.perf_counter()
        answer = await _status(link, session_id)
        times.append(time.perf_counter() - began)
        if not answer.ok:
            return ctx.verdict("fail", f"a probe of a live session {answer.describe()}", mark, head=2, tail=2)
    times.sort()
    p50 = statistics.median(times)
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    figures = f"p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms over {PROBES} probes"
    if p50 > CHEAP_P50:
        return ctx.verdict(
            "warn", f"session/status is slow: {figures} (above {CHEAP_P50 * 1000:.0f} ms p50)", mark, head=2, tail=2
        )
    return ctx.verdict("pass", f"session/status is cheap: {figures}", mark, head=2, tail=0)


async def status_after_restart(ctx: CheckContext) -> Verdict:
    ctx.require("session/status")
    scenario = await restart_scenario(ctx)
    answer = scenario.status
    lines = scenario.status_lines
    if answer is None:
        return Verdict("fail", f"after a restart: {scenario.status_error}", lines)
    if answer.ok:
        value = _status_of(answer)
        if value in ACTIVE:
            return Verdict("fail", f"after a restart a session the agent no longer holds is {value!r}", lines)
        if value in INACTIVE:
            return Verdict("pass", f"after a restart the session is {value!r}", lines)
        return Verdict(
            "pass", f"after a restart the session is {value!r} (not a known value: clients read it as saved)", lines
        )
    came_back = scenario.answer is not None and scenario.answer.ok
    if answer.code == -32002:
        if came_back:
            return Verdict(
                "fail",
                f"after a restart session/status answers -32002 but {scenario.request_name} brings the session "
                "back: a client would start over needlessly",
                lines,
            )
        return Verdict(
            "pass", "after a restart the agent does not know the session (-32002; see restart.persists)", lines
        )
    if came_back:
        return Verdict("fail", f"after a restart session/status of a stored session {answer.describe()}", lines)
    raise Skip(
        f"cannot check: after a restart session/status {answer.describe()}, and the session does not come back "
        "(see restart.persists, not-found.code)"
    )
