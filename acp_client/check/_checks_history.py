"""Checks of what recovery replays or resumes: ``session/load`` (v1), ``session/resume`` (+ ``replayFrom``, v2).

The checks that need a restart judge one scenario, run once (:func:`restart_scenario`): a session
with two turns (three with ``--tool-prompt``) on the run's shared agent, a restart, then on a fresh
link ``session/status`` (when advertised, before anything could load the session) and the replay
(``session/load`` in v1, ``session/resume`` with ``replayFrom`` in v2; a plain ``session/resume``
when only that is advertised). Whatever "not found" spelling comes back after the restart, the
agent keeps no sessions across restarts: ``restart.persists`` says so (a ``warn``), and the checks
that need a replay cannot check.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from ._checks_not_found import REPLAY_V2, Probe, unknown_session_answers
from ._context import CheckContext, Skip, Verdict
from ._link import Answer, CheckFailed
from ._protocol import Message, attach_params, messages_of, replay_request, tool_call_ids

#: The prompts of the replay scenario's two turns.
TURNS = ("first turn", "second turn")
#: How long after its last turn the restart scenario kills the agent.
SAVED_AFTER = 1.5
#: The message updates of a conversation (v1 chunks, v2 whole messages).
MESSAGE_UPDATES = ("agent_message_chunk", "user_message_chunk", "agent_message", "user_message")


def _replay_method(ctx: CheckContext) -> str:
    return "session/load" if ctx.version == 1 else "session/resume"


async def load_unknown(ctx: CheckContext) -> Verdict:
    ctx.require(_replay_method(ctx))
    probes = await unknown_session_answers(ctx)
    probe = probes["session/load" if ctx.version == 1 else REPLAY_V2]
    label = "session/load" if ctx.version == 1 else "session/resume with replayFrom"
    return _judge_unknown(probe, label)


async def resume_unknown(ctx: CheckContext) -> Verdict:
    ctx.require("session/resume")
    probes = await unknown_session_answers(ctx)
    return _judge_unknown(probes["session/resume"], "session/resume")


def _judge_unknown(probe: Probe, label: str) -> Verdict:
    answer = probe.answer
    if answer is None:
        return Verdict("fail", f"{label} of an unknown id: {probe.failure}", probe.lines)
    if answer.ok:
        return Verdict(
            "fail", f"{label} of an unknown id succeeded: false continuity (the history is gone)", probe.lines
        )
    if answer.code == -32601:
        raise Skip(f"{probe.method} answers -32601 (see initialize.capabilities)")
    if answer.code == -32002:
        return Verdict("pass", f"{label} of an unknown id answers -32002", probe.lines)
    spelled = answer.describe().removeprefix("answered ")
    return Verdict("pass", f"{label} of an unknown id is refused (spelled {spelled}: see not-found.code)", probe.lines)


async def resume_no_replay(ctx: CheckContext) -> Verdict:
    ctx.require("session/resume")
    first = await ctx.shared_link()
    session_id = await ctx.new_session(first)
    await ctx.turn(first, session_id)
    # As after a drop: the connection (for stdio, the agent process) that held the session is gone.
    # The fresh one is the run's shared link from now on.
    await ctx.run.retire()
    second = await ctx.shared_link()
    mark = ctx.mark()
    start = len(second.inbound)
    answer = await second.request("session/resume", attach_params(session_id, ctx.cwd))
    if answer.code == -32601:
        raise Skip("session/resume answers -32601 (see initialize.capabilities)")
    if not answer.ok:
        raise Skip(
            f"cannot check: on a new link the agent does not know the session ({answer.describe()}): nothing to "
            "resume (see restart.persists)"
        )
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
class RestartScenario:
    """What the restart scenario saw.

    Attributes:
        expected: The conversation as sent live (the prompts, and the agent's messages).
        live_lines: Evidence: the first live turn.
        status: The ``session/status`` answer after the restart (``None``: not advertised, or no answer).
        status_error: Why there was no answer to it.
        status_lines: Evidence: the status probe.
        method: The request sent to bring the session back (``None``: nothing to send).
        updates: The updates that came with it (the replay).
        lines: Evidence: the request and the replay.
    """

    expected: list[Message]
    live_updates: list[dict[str, Any]]
    live_lines: tuple[str, ...]
    status: Answer | None
    status_error: str | None
    status_lines: tuple[str, ...]
    method: str | None
    answer: Answer | None
    updates: list[dict[str, Any]]
    messages: list[Message]
    lines: tuple[str, ...]

    def lost(self) -> str | None:
        """How the agent said it no longer knows the session, or ``None``."""
        if self.answer is not None and not self.answer.ok and self.answer.code != -32601:
            return f"{self.request_name} {self.answer.describe()}"
        if self.answer is None and self.status is not None and not self.status.ok:
            return f"session/status {self.status.describe()}"
        return None

    @property
    def request_name(self) -> str:
        return (self.method or "").replace(" (plain)", "")


async def _restart_scenario(ctx: CheckContext) -> RestartScenario:
    link = await ctx.shared_link()
    session_id = await ctx.new_session(link)
    expected: list[Message] = []
    live_updates: list[dict[str, Any]] = []
    live_lines: tuple[str, ...] = ()
    tool = ctx.settings.tool_prompt
    for text in (*TURNS, tool) if tool else TURNS:
        mark = ctx.mark()
        turn = await ctx.turn(link, session_id, text)
        if not live_lines:
            live_lines = ctx.lines(mark, head=6, tail=4)
        turn_updates = link.updates(session_id, start=turn.start, end=turn.end)
        live_updates += turn_updates
        live = messages_of(turn_updates)
        user = next((m for m in live if m.role == "user"), None)
        expected.append(Message("user", text, user.message_id if user else None))
        expected += [m for m in live if m.role == "agent"]
    # Agents write a turn to their store shortly after it ends (Claude Code's CLI: up to a second): a kill
    # in that window is a crash-timing question, not this scenario's, and would make verdicts flip.
    await asyncio.sleep(SAVED_AFTER)
    await ctx.restart()
    after = await ctx.link()
    status: Answer | None = None
    status_lines: tuple[str, ...] = ()
    status_error: str | None = None
    if ctx.supports("session/status"):
        mark = ctx.mark()
        try:
            status = await after.request("session/status", {"sessionId": session_id})
        except CheckFailed as exc:  # status.after-restart fails on it; the replay can still be judged
            status_error = exc.finding
        status_lines = ctx.lines(mark)
    method: str | None = None
    if ctx.supports(_replay_method(ctx)):
        method, params = replay_request(ctx.version, session_id, ctx.cwd)
    elif ctx.supports("session/resume"):
        method, params = "session/resume (plain)", attach_params(session_id, ctx.cwd)
    mark = ctx.mark()
    start = len(after.inbound)
    answer: Answer | None = None
    updates: list[dict[str, Any]] = []
    if method is not None:
        answer = await after.request(method.replace(" (plain)", ""), params)
        if answer.ok:
            await after.settle(quiet=0.5, limit=ctx.timeout)
        updates = after.updates(session_id, start=start)
    return RestartScenario(
        expected,
        live_updates,
        live_lines,
        status,
        status_error,
        status_lines,
        method,
        answer,
        updates,
        messages_of(updates),
        ctx.lines(mark),
    )


async def restart_scenario(ctx: CheckContext) -> RestartScenario:
    """The restart scenario (run once per run).

    Raises:
        Skip: The agent cannot be restarted by the checker, or nothing can ask it about a session.
    """
    ctx.require_restart()
    if not any(ctx.supports(m) for m in ("session/status", "session/resume", _replay_method(ctx))):
        where = "session/load, session/resume or session/status" if ctx.version == 1 else "session/resume or status"
        raise Skip(f"{where} is not advertised: nothing can ask about a session after a restart")
    scenario: RestartScenario = await ctx.run.scenario("restart", lambda: _restart_scenario(ctx))
    return scenario


async def _replay(ctx: CheckContext) -> RestartScenario:
    """The scenario, for a check that needs the replay.

    Raises:
        Skip: No replay to judge (not advertised, -32601, or the agent lost the session).
    """
    method = _replay_method(ctx)
    ctx.require(method)
    scenario = await restart_scenario(ctx)
    answer = scenario.answer
    assert answer is not None
    if answer.code == -32601:
        raise Skip(f"{method} answers -32601 (see initialize.capabilities)")
    if not answer.ok:
        raise Skip(
            f"cannot check: after a restart {method} {answer.describe()}: sessions do not survive a restart "
            "(see restart.persists)"
        )
    return scenario


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
    """``None`` when ``replayed`` is ``expected`` exactly once in order, else what is wrong.

    A live message that is missing but whose text is part of a longer replayed message of its role was
    *fused* with other content (the agent's own messages replayed as chunks of the same message, say),
    not dropped: the finding says which.
    """
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
    fused = [k for k in missing if k[1] and any(role == k[0] and k[1] in text for role, text in got)]
    dropped = [k for k in missing if k not in fused]
    repeated = sorted({k for k in got if got.count(k) > max(1, want.count(k))})
    parts: list[str] = []
    if repeated:
        parts.append("repeats " + ", ".join(f"{role} {text!r}" for role, text in repeated))
    if fused:
        parts.append("fuses " + ", ".join(f"{role} {text!r}" for role, text in fused) + " with other content")
    if dropped:
        parts.append("drops " + ", ".join(f"{role} {text!r}" for role, text in dropped))
    extra = [k for k in got if k not in want and not any(f[1] in k[1] and f[0] == k[0] for f in fused)]
    if extra:
        parts.append(f"adds {len(extra)} messages the live turns did not have")
    if not parts:
        parts.append("replays the messages out of order")
    return "; ".join(parts)


async def load_replays_once(ctx: CheckContext) -> Verdict:
    replay = await _replay(ctx)
    problem = _diagnose(replay.expected, replay.messages, replay.updates)
    if problem is None:
        return Verdict(
            "pass",
            f"after a restart the history ({len(replay.expected)} messages) was replayed once, in order",
            replay.lines,
        )
    return Verdict(
        "fail",
        f"after a restart the replay {problem} ({len(replay.messages)} messages for {len(replay.expected)})",
        replay.lines,
    )


def _message_updates(updates: list[dict[str, Any]], roles: tuple[str, ...] = ("agent", "user")) -> list[dict[str, Any]]:
    kinds = [k for k in MESSAGE_UPDATES if k.split("_", 1)[0] in roles]
    return [u for u in updates if u.get("sessionUpdate") in kinds]


def _has_id(update: dict[str, Any]) -> bool:
    value = update.get("messageId")
    return isinstance(value, str) and bool(value)


async def load_message_ids(ctx: CheckContext) -> Verdict:
    replay = await _replay(ctx)
    if not replay.messages:
        raise Skip("nothing was replayed (see load.replays-once)")
    chunks = _message_updates(replay.updates)
    without = [u for u in chunks if not _has_id(u)]
    fails: list[str] = []
    warns: list[str] = []
    if without:
        note = f"{len(without)} of {len(chunks)} replayed message updates carry no messageId"
        (fails if ctx.version >= 2 else warns).append(note + (" (v2 requires it)" if ctx.version >= 2 else ""))
    compared = False
    for role in ("agent", "user"):
        live_ids = {m.message_id for m in replay.expected if m.role == role and m.message_id}
        replay_ids = {m.message_id for m in replay.messages if m.role == role and m.message_id}
        if live_ids and replay_ids:
            compared = True
            if replay_ids - live_ids:
                fails.append(f"the replayed {role} messages carry other messageIds than live")
    live_tools = tool_call_ids(replay.live_updates)
    replay_tools = tool_call_ids(replay.updates)
    if live_tools and set(live_tools) != set(replay_tools):
        missing = len(set(live_tools) - set(replay_tools))
        fails.append(f"tool call ids are not stable: {missing} of {len(set(live_tools))} live tool calls not replayed")
    if fails:
        return Verdict("fail", "; ".join(fails + warns), replay.lines)
    if warns:
        return Verdict("warn", "; ".join(warns) + ": a client cannot de-duplicate a replay by id", replay.lines)
    if not compared and not live_tools:
        raise Skip(
            "cannot check: the replay carries messageIds but the live turns carried none to compare them with "
            "(see load.live-ids)"
        )
    tools = "tool call ids stable" if live_tools else "no tool calls in the live turns: pass --tool-prompt"
    what = "replayed messages carry the live messageIds" if compared else "replayed messages carry messageIds"
    return Verdict("pass", f"{what} ({tools})", replay.lines[:6])


async def load_live_ids(ctx: CheckContext) -> Verdict:
    replay = await _replay(ctx)
    if not replay.messages:
        raise Skip("nothing was replayed (see load.replays-once)")
    roles = tuple(
        role for role in ("agent", "user") if any(_has_id(u) for u in _message_updates(replay.updates, (role,)))
    )
    if not roles:
        raise Skip("the replay carries no messageId: nothing to match live chunks with (see load.message-ids)")
    live = _message_updates(replay.live_updates, roles)
    if not live:
        raise Skip(f"cannot check: no live {' or '.join(roles)} message updates")
    without = [u for u in live if not _has_id(u)]
    if without:
        return Verdict(
            "fail",
            f"{len(without)} of {len(live)} live message updates carry no messageId while the replay gives every "
            "message one: a client cannot match the replay with what it showed",
            replay.live_lines,
        )
    return Verdict("pass", "live message updates carry messageId, as the replay does", replay.live_lines[:6])


async def restart_persists(ctx: CheckContext) -> Verdict:
    scenario = await restart_scenario(ctx)
    lost = scenario.lost()
    answer = scenario.answer
    if answer is not None and answer.code == -32601:
        raise Skip(f"{scenario.request_name} answers -32601 (see initialize.capabilities)")
    if lost is not None:
        lines = scenario.lines if scenario.answer is not None else scenario.status_lines
        return Verdict(
            "warn",
            f"sessions do not survive a restart: after it, {lost}: a client can only start over, and the user's "
            "conversation lives on in the client alone",
            lines,
        )
    if answer is not None:
        return Verdict(
            "pass", f"a session from before the restart came back ({scenario.request_name} succeeded)", scenario.lines
        )
    status = scenario.status
    if status is None:
        raise Skip(f"cannot check: after a restart {scenario.status_error}")
    value = status.result.get("status") if isinstance(status.result, dict) else None
    return Verdict("pass", f"after a restart session/status knows the session ({value!r})", scenario.status_lines)
