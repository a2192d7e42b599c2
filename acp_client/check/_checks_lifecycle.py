"""Checks of the lifecycle basics recovery stands on: capabilities, unknown methods, fresh ids, notifications."""

from __future__ import annotations

import contextlib

from ._checks_not_found import unknown_session_answers
from ._context import CheckContext, Verdict
from ._link import Answer, CheckFailed, Link

#: A method no agent routes (not an extension method: those start with ``_``).
UNKNOWN_METHOD = "acp_check/no_such_method"

#: The optional session methods whose capability the checker verifies, in probing order.
PROBED = ("session/load", "session/resume", "session/list", "session/close", "session/fork", "session/status")


async def _unknown_method(link: Link) -> Answer:
    return await link.request(UNKNOWN_METHOD, {})


def _spelling(answer: Answer, method: str) -> tuple[int | None, str]:
    """An error answer with the method's own name taken out (``Unknown method: X`` -> ``Unknown method: ``)."""
    return answer.code, answer.error_text.replace(method, "")


def _answers_as_unknown(answer: Answer, method: str, unknown: Answer) -> bool:
    """Whether ``answer`` to ``method`` is the agent's answer to a method it does not route.

    ``-32601`` always is; another error is when it is spelled as the agent spells its answer to a
    method no agent routes (``-32603 "Unknown method: <name>"``): that agent has the wrong code for
    an unknown method (``method.unknown``), not a method that works.
    """
    if answer.code == -32601:
        return True
    return not answer.ok and not unknown.ok and _spelling(answer, method) == _spelling(unknown, UNKNOWN_METHOD)


async def method_unknown(ctx: CheckContext) -> Verdict:
    link = await ctx.shared_link()
    mark = ctx.mark()
    answer = await _unknown_method(link)
    if answer.code == -32601:
        return ctx.verdict("pass", f"a method no agent routes ({UNKNOWN_METHOD}) answers -32601", mark)
    if answer.ok:
        return ctx.verdict("fail", f"{UNKNOWN_METHOD}, a method no agent routes, {answer.describe()}", mark)
    return ctx.verdict(
        "fail",
        f"a method no agent routes ({UNKNOWN_METHOD}) {answer.describe()}, not -32601: a client cannot tell a "
        "missing method from a failing one",
        mark,
    )


async def initialize_capabilities(ctx: CheckContext) -> Verdict:
    link = await ctx.shared_link()
    missing_answer = await _unknown_method(link)
    probes = await unknown_session_answers(ctx)
    fails: list[str] = []
    warns: list[str] = []
    works: list[str] = []
    evidence: list[str] = []
    for method in PROBED:
        if method == "session/load" and ctx.version != 1:
            continue  # v2 has no session/load
        advertised = ctx.supports(method)
        where = ctx.capability_path(method)
        if method == "session/close":
            # session/close is session-scoped (over HTTP it needs a session the connection knows): close a
            # real one.
            mark = ctx.mark()
            try:
                own = await ctx.new_session(link)
                answer: Answer | None = await link.request(method, {"sessionId": own})
                failure = None
            except CheckFailed as exc:
                answer, failure = None, exc.finding
            lines = ctx.lines(mark)
        else:
            probe = probes[method]
            answer, failure, lines = probe.answer, probe.failure, probe.lines
        if answer is None:
            fails.append(f"{method}: {failure}")
            evidence += lines
            continue
        missing = _answers_as_unknown(answer, method, missing_answer)
        if advertised and missing:
            how = "-32601" if answer.code == -32601 else f"as an unknown method ({answer.describe()})"
            fails.append(f"{method} is advertised ({where}) but answers {how}")
            evidence += lines
        elif not advertised and not missing:
            warns.append(f"{method} works but is not advertised ({where})")
            evidence += lines
        elif advertised:
            works.append(method)
    if fails:
        return Verdict("fail", "; ".join(fails + warns), tuple(evidence))
    if warns:
        return Verdict("warn", "; ".join(warns) + ": a client never calls what is not advertised", tuple(evidence))
    listed = ", ".join(works) if works else "none"
    note = ""
    if missing_answer.code != -32601 and not missing_answer.ok:
        note = f"; unknown methods answer error {missing_answer.code}, not -32601 (see method.unknown)"
    return ctx.verdict("pass", f"every advertised session method answers (advertised: {listed}){note}")


async def new_fresh_id(ctx: CheckContext) -> Verdict:
    link = await ctx.shared_link()
    first = await ctx.new_session(link)
    second = await ctx.new_session(link)
    if first == second:
        return ctx.verdict("fail", "two session/new calls answered the same sessionId")
    ctx.run.idle_sessions += [first, second]  # unused: later checks that need an idle session take them
    return ctx.verdict("pass", "two session/new calls gave two different ids")


async def notification_unanswered(ctx: CheckContext) -> Verdict:
    link = await ctx.shared_link()
    session_id = await ctx.new_session(link, reuse=True)
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
