"""Checks of the session objects an agent returns and lists: zoned timestamps, the ``Session`` schema's shape."""

from __future__ import annotations

from typing import Any, Final

from ..types.session import parse_timestamp
from ._context import CheckContext, Skip, Verdict

#: The ``Session`` schema's required-nullable members: always present, ``null`` when empty.
REQUIRED_NULLABLE: Final = ("activeTurnId", "forkedFrom", "modelId", "providerId", "workspaceRoot")
#: Members only the ``Session`` schema has (not ACP's ``SessionInfo``): an object with one follows it.
SESSION_SCHEMA_MEMBERS: Final = (*REQUIRED_NULLABLE, "turnCount", "path", "approvalMode")
TIMESTAMPS: Final = ("createdAt", "updatedAt")


async def _session_objects(ctx: CheckContext) -> tuple[list[tuple[str, dict[str, Any]]], tuple[str, ...]]:
    """Every session object seen (``(where, object)``) and the wire lines: a scenario run once per run."""
    found: tuple[list[tuple[str, dict[str, Any]]], tuple[str, ...]] = await ctx.run.scenario(
        "session-objects", lambda: _gather(ctx)
    )
    return found


async def _gather(ctx: CheckContext) -> tuple[list[tuple[str, dict[str, Any]]], tuple[str, ...]]:
    """One session with one turn, then every session object seen: ``(where, object)``; and the wire lines."""
    link = await ctx.shared_link()
    mark = ctx.mark()
    found: list[tuple[str, dict[str, Any]]] = []
    answer = await link.request("session/new", {"cwd": ctx.cwd, "mcpServers": []})
    if not answer.ok or not isinstance(answer.result, dict) or not isinstance(answer.result.get("sessionId"), str):
        raise Skip(f"session/new {answer.describe()}")
    session_id = answer.result["sessionId"]
    session = answer.result.get("session")
    if isinstance(session, dict):
        found.append(("session/new", session))
    elif any(member in answer.result for member in SESSION_SCHEMA_MEMBERS):
        found.append(("session/new", answer.result))
    start = len(link.inbound)
    await ctx.turn(link, session_id)
    for update in link.updates(session_id, start=start):
        if update.get("sessionUpdate") == "session_info_update":
            found.append(("session_info_update", update))
    if ctx.supports("session/list"):
        listed = await link.request("session/list", {})
        sessions = listed.result.get("sessions") if listed.ok and isinstance(listed.result, dict) else None
        for entry in sessions if isinstance(sessions, list) else []:
            if isinstance(entry, dict):
                found.append(("session/list", entry))
    return found, ctx.lines(mark)


async def timestamps_zoned(ctx: CheckContext) -> Verdict:
    objects, lines = await _session_objects(ctx)
    zoned: list[str] = []
    naive: list[str] = []
    broken: list[str] = []
    for where, obj in objects:
        for member in TIMESTAMPS:
            value = obj.get(member)
            if value is None:
                continue
            label = f"{where} {member} {value!r}"
            if not isinstance(value, str):
                broken.append(label)
                continue
            try:
                parsed = parse_timestamp(value)
            except ValueError:
                broken.append(label)
                continue
            (zoned if parsed.tzinfo is not None else naive).append(label)
    if not (zoned or naive or broken):
        raise Skip("no createdAt / updatedAt in any session object (session/list, session_info_update)")
    if broken:
        return Verdict("warn", f"timestamps that are not RFC 3339 (e.g. {broken[0]})", lines)
    if naive:
        return Verdict("warn", f"timestamps without a zone (e.g. {naive[0]})", lines)
    return Verdict("pass", "every createdAt / updatedAt carries a zone", lines)


def _shape_problems(obj: dict[str, Any]) -> list[str]:
    problems = [f"{member} missing" for member in REQUIRED_NULLABLE if member not in obj]
    for member in ("activeTurnId", "modelId", "providerId", "workspaceRoot"):
        if member in obj and obj[member] is not None and not isinstance(obj[member], str):
            problems.append(f"{member} is {type(obj[member]).__name__}, not a string or null")
    if "forkedFrom" in obj and obj["forkedFrom"] is not None and not isinstance(obj["forkedFrom"], dict):
        problems.append("forkedFrom is not an object or null")
    return problems


async def session_object_shape(ctx: CheckContext) -> Verdict:
    objects, lines = await _session_objects(ctx)
    candidates = [(where, obj) for where, obj in objects if where != "session_info_update"]
    if not candidates:
        raise Skip("no session objects returned or listed (session/list is not advertised)")
    following = [(where, obj) for where, obj in candidates if any(m in obj for m in SESSION_SCHEMA_MEMBERS)]
    if not following:
        raise Skip("the session objects are ACP SessionInfo (no member of the Session schema): nothing to check")
    bad = [(where, problems) for where, obj in following if (problems := _shape_problems(obj))]
    if bad:
        where, problems = bad[0]
        return Verdict("fail", f"session objects break the Session schema ({where}: {', '.join(problems)})", lines)
    return Verdict("pass", "every Session object keeps its required-nullable members", lines)
