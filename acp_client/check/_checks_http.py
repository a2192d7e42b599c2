"""The Streamable HTTP check: which ``Acp-Session-Id`` convention the server follows.

Two conventions are in the wild (docs/conformance.md): the TypeScript server wants the header on every
POST whose params carry a ``sessionId`` (``400`` without it); the Python server wants it only on
session-scoped methods and answers ``404`` to it for a session not established on the connection.
The check POSTs ``session/status`` (no side effects) three ways on the checker's own connection and
reads only the HTTP status codes; the JSON-RPC answers arrive on that connection's streams.
"""

from __future__ import annotations

import json
from typing import Any

from .._codec._jsonrpc import request_message
from ._context import CheckContext, Skip, Verdict


async def http_session_header(ctx: CheckContext) -> Verdict:
    if ctx.settings.target.kind != "http":
        raise Skip("not a Streamable HTTP target")
    import httpx

    link = await ctx.link()
    session_id = await ctx.new_session(link)
    connection_id = link.transport.info.connection_id
    if not connection_id:
        return ctx.verdict("fail", "the initialize answer carried no Acp-Connection-Id")
    mark = ctx.mark()
    url = ctx.settings.target.spec

    async def post(number: int, sid: str, header: bool) -> int:
        body = request_message(f"acp-check-header-{number}", "session/status", {"sessionId": sid})
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Acp-Connection-Id": connection_id,
        }
        if header:
            headers["Acp-Session-Id"] = sid
        async with httpx.AsyncClient(timeout=ctx.timeout, trust_env=False, follow_redirects=False) as client:
            response = await client.post(url, content=json.dumps(body), headers=headers)
        ctx.log.add(link.name, ">", f"raw POST session/status {'with' if header else 'without'} Acp-Session-Id")
        ctx.log.add(link.name, "<", f"HTTP {response.status_code} {response.text[:200]}")
        return response.status_code

    try:
        without = await post(1, session_id, False)
        with_header = await post(2, session_id, True)
        unknown = await post(3, ctx.unknown_id(), True)
    except httpx.HTTPError as exc:
        return ctx.verdict("fail", f"a raw POST failed: {exc}", mark)
    codes: dict[str, Any] = {"without": without, "with": with_header, "unknown": unknown}
    accepted = {name: 200 <= code < 300 for name, code in codes.items()}
    if accepted["without"] and accepted["with"] and unknown == 404:
        dialect = "header only where session-scoped; 404 for a session not established here (Python SDK convention)"
    elif without == 400 and accepted["with"]:
        dialect = "header on every POST naming a session; 400 without (TypeScript SDK convention)"
    elif accepted["without"] and accepted["with"]:
        dialect = "the header is accepted and not required (both conventions work)"
    else:
        return ctx.verdict(
            "fail", f"neither convention: without header {without}, with {with_header}, unknown session {unknown}", mark
        )
    return ctx.verdict("pass", f"Acp-Session-Id: {dialect}", mark)
