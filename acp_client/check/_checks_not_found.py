"""``not-found.code``: every session method answers an unknown session with ``-32002``.

"Session not found" has many spellings in the wild (``-32603`` with ``data.details: "Session not
found"``, ``-32602 "Unknown sessionId"``, ``-32600 "No sessions directory found"``); a client can
only tell "the agent lost this session" (start over) from "the call failed" (retry, report) by the
code the schema names for it. The check sends each session method the agent offers with an id it
never issued and quotes each spelling that is not ``-32002``.
"""

from __future__ import annotations

from typing import Any

from ._context import CheckContext, Skip, Verdict
from ._link import CheckFailed
from ._protocol import attach_params, text_prompt

__all__ = ["not_found_code"]


#: Over Streamable HTTP these go to a session's own stream: the transport refuses an unknown session
#: (HTTP 404) before any JSON-RPC answer, so only the other methods are asked there.
SESSION_SCOPED = ("session/prompt", "session/close")


def _probes(ctx: CheckContext, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    attach = attach_params(session_id, ctx.cwd)
    probes: list[tuple[str, dict[str, Any]]] = [
        ("session/prompt", {"sessionId": session_id, "prompt": text_prompt(ctx.settings.prompt)})
    ]
    if ctx.version == 1 and ctx.supports("session/load"):
        probes.append(("session/load", attach))
    for method, params in (
        ("session/resume", attach),
        ("session/status", {"sessionId": session_id}),
        ("session/close", {"sessionId": session_id}),
        ("session/fork", attach),
    ):
        if ctx.supports(method):
            probes.append((method, params))
    if ctx.settings.target.kind == "http":
        probes = [(method, params) for method, params in probes if method not in SESSION_SCOPED]
    return probes


async def not_found_code(ctx: CheckContext) -> Verdict:
    link = await ctx.shared_link()
    unknown = ctx.unknown_id()
    mark = ctx.mark()
    right: list[str] = []
    wrong: list[str] = []
    accepted: list[str] = []
    for method, params in _probes(ctx, unknown):
        try:
            answer = await link.request(method, params)
        except CheckFailed as exc:
            wrong.append(f"{method}: {exc.finding}")
            continue
        if answer.code == -32601:
            continue  # not routed: initialize.capabilities says whether it should be
        if answer.ok:
            accepted.append(method)
            continue
        if answer.code == -32002:
            right.append(method)
            continue
        spelled = answer.describe().removeprefix("answered ")
        if answer.data is not None:
            spelled += f", data {answer.message['error'].get('data')!r}"[:200]
        wrong.append(f"{method} {spelled}")
    if not right and not wrong and not accepted:
        raise Skip("cannot check: every session method answers -32601 (see initialize.capabilities)")
    if accepted:
        wrong.append(f"{', '.join(accepted)} accepted it")
    if wrong:
        return ctx.verdict(
            "warn",
            "an unknown session is not -32002 on " + "; ".join(wrong) + ": a client cannot tell a lost session "
            "from a failed call by the code",
            mark,
        )
    return ctx.verdict("pass", f"an unknown session answers -32002 on {', '.join(right)}", mark)
