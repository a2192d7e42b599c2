"""How the agent answers a session id it never issued, asked once per run, and ``not-found.code``.

:func:`unknown_session_answers` sends each session method, advertised or not, an id the agent never
issued, once per run (a call costs seconds with some agents: Claude Code's adapter starts its CLI);
``initialize.capabilities`` (which methods are routed), ``load.unknown`` / ``resume.unknown`` (no
false continuity) and ``not-found.code`` all judge those answers.

``not-found.code``: "session not found" has many spellings in the wild (``-32603`` with
``data.details: "Session not found"``, ``-32602 "Unknown sessionId"``, ``-32600 "No sessions
directory found"``); a client can only tell "the agent lost this session" (start over) from "the call
failed" (retry, report) by the code the schema names for it. The check quotes each spelling that is
not ``-32002`` on a method the agent offers.
"""

from __future__ import annotations

from typing import Any

import attrs

from ._context import CheckContext, Skip, Verdict
from ._link import Answer, CheckFailed
from ._protocol import attach_params, replay_request, text_prompt

#: Over Streamable HTTP these go to a session's own stream: the transport refuses an unknown session
#: (HTTP 404) before any JSON-RPC answer, so they are not asked there.
SESSION_SCOPED = ("session/prompt", "session/close")
#: The v2 replay request (``session/resume`` with ``replayFrom``), apart from the plain resume.
REPLAY_V2 = "session/resume+replayFrom"


@attrs.frozen
class Probe:
    """One method's answer to an unknown session: ``answer``, or ``failure`` (no answer), and the wire lines."""

    method: str
    answer: Answer | None
    failure: str | None
    lines: tuple[str, ...]


def _requests(ctx: CheckContext, session_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """``(key, method, params)`` of every probe."""
    attach = attach_params(session_id, ctx.cwd)
    found: list[tuple[str, str, dict[str, Any]]] = []
    if ctx.version == 1:
        found.append(("session/load", "session/load", attach))
    found += [
        ("session/resume", "session/resume", attach),
        ("session/status", "session/status", {"sessionId": session_id}),
        ("session/close", "session/close", {"sessionId": session_id}),
        ("session/fork", "session/fork", attach),
    ]
    if ctx.version >= 2:
        method, params = replay_request(ctx.version, session_id, ctx.cwd)
        found.append((REPLAY_V2, method, params))
    found.append(("session/list", "session/list", {}))  # not about a session: initialize.capabilities asks
    # Last: an agent that takes the prompt runs a whole turn (or, hostile, ends).
    prompt = {"sessionId": session_id, "prompt": text_prompt(ctx.settings.prompt)}
    found.append(("session/prompt", "session/prompt", prompt))
    if ctx.settings.target.kind == "http":
        found = [entry for entry in found if entry[1] not in SESSION_SCOPED]
    return found


async def _probe_all(ctx: CheckContext) -> dict[str, Probe]:
    link = await ctx.shared_link()
    unknown = ctx.unknown_id()
    found: dict[str, Probe] = {}
    for key, method, params in _requests(ctx, unknown):
        mark = ctx.mark()
        try:
            answer: Answer | None = await link.request(method, params)
            failure = None
        except CheckFailed as exc:
            answer, failure = None, exc.finding
        found[key] = Probe(method, answer, failure, ctx.lines(mark))
    return found


async def unknown_session_answers(ctx: CheckContext) -> dict[str, Probe]:
    """Each session method's answer to an id the agent never issued (asked once per run), by method.

    Raises:
        CheckFailed: The shared agent could not be reached.
    """
    probes: dict[str, Probe] = await ctx.run.scenario("unknown-session", lambda: _probe_all(ctx))
    return probes


async def not_found_code(ctx: CheckContext) -> Verdict:
    probes = await unknown_session_answers(ctx)
    right: list[str] = []
    wrong: list[str] = []
    accepted: list[str] = []
    lines: list[str] = []
    for key, probe in probes.items():
        if key in (REPLAY_V2, "session/list") or (key != "session/prompt" and not ctx.supports(key)):
            continue
        answer = probe.answer
        if answer is None:
            wrong.append(f"{key}: {probe.failure}")
            lines += probe.lines
            continue
        if answer.code == -32601:
            continue  # not routed: initialize.capabilities says whether it should be
        if answer.code == -32002:
            right.append(key)
            continue
        lines += probe.lines
        if answer.ok:
            accepted.append(key)
            continue
        spelled = answer.describe().removeprefix("answered ")
        if answer.data is not None:
            spelled += f", data {answer.data!r}"[:200]
        wrong.append(f"{key} {spelled}")
    if not right and not wrong and not accepted:
        raise Skip("cannot check: every session method answers -32601 (see initialize.capabilities)")
    if accepted:
        wrong.append(f"{', '.join(accepted)} accepted it")
    if wrong:
        return Verdict(
            "warn",
            "an unknown session is not -32002 on " + "; ".join(wrong) + ": a client cannot tell a lost session "
            "from a failed call by the code",
            tuple(lines),
        )
    evidence = tuple(line for probe in probes.values() for line in probe.lines)
    return Verdict("pass", f"an unknown session answers -32002 on {', '.join(right)}", evidence[:8])
