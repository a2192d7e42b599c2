"""A session a recovery brought back that the agent lost after all.

Some agents answer ``session/load`` of a session they no longer have with success and replay
nothing (pydantic-acp, isaac-acp); the loss shows only when a later session method is answered
"session not found" (any spelling :mod:`acp_client._recovery._not_found` knows). The session then
goes through recovery again, as unknown, reported as usual; a prompt refused that way never ran, so
it is sent once more on the new session (:func:`to_resend`). Nothing is left stuck.
"""

from __future__ import annotations

from typing import Protocol

from .._link._links import Links
from .._recovery._not_found import quote, says_session_not_found
from .._recovery._recoverer import Answer, Recoverer, capabilities
from .._sessions._table import SessionTable, Tracked, Turn
from ..exceptions import ConnectionLost, RpcError, TransportError
from ..state import RecoveryOutcome, RecoveryPath
from ..types import InitializeResponse, Probe


class _Engine(Protocol):
    """What of the engine this needs."""

    init: InitializeResponse | None
    version: int
    links: Links
    recoverer: Recoverer
    table: SessionTable

    def recovered(self, outcomes: list[RecoveryOutcome], in_episode: bool) -> None: ...


async def recover_lost(engine: _Engine, tracked: Tracked, method: str, error: RpcError) -> RecoveryOutcome | None:
    """``method`` was answered ``error`` for ``tracked``: when it says "session not found" and a
    recovery had brought the session back, recover it again as unknown (the outcome, also
    reported; ``None`` when the error is not "not found" or the session was not recovered)."""
    spelling = says_session_not_found(error, tracked.session_id)
    if spelling is None or not tracked.recovered or tracked.abandoned or engine.init is None:
        return None
    link = await engine.links.link_for(tracked, "session/new")
    conn = link.connection
    if conn is None:
        return None
    tracked.recovered = False
    reason = (
        f"{method}: not found ({quote(error)}, the spelling of {spelling.seen_in}) after a recovery: "
        "the agent lost the session"
    )
    outcome = await engine.recoverer.recover_session(
        conn,
        tracked,
        capabilities(engine.init, engine.version),
        answer=Answer(Probe.UNKNOWN),
        endpoint=engine.links.endpoint_of(tracked),
        reason=reason,
    )
    await engine.recoverer.report(outcome)
    engine.recovered([outcome], False)
    return outcome


async def to_resend(engine: _Engine, tracked: Tracked, turn: Turn, error: RpcError) -> RecoveryOutcome | None:
    """Recover the session of a prompt refused as "not found" for it to be sent once more (the
    outcome; ``None``: something was heard of the turn, or it was cancelled). The prompt leaves the
    transcript first (not in the lost segment), and is put back, to be marked failed, if not resent."""
    if turn.heard or turn.cancel_sent or not says_session_not_found(error, tracked.session_id):
        return None
    table = engine.table
    table.withdraw_prompt(tracked, turn)
    try:
        outcome = await recover_lost(engine, tracked, "session/prompt", error)
    except (ConnectionLost, TransportError):  # the next reconnect recovers it; the refusal stands
        outcome = None
    if outcome is None or outcome.path is RecoveryPath.ABANDON or tracked.abandoned:
        table.prompt_sent(tracked, echoes_prompts=engine.version >= 2)  # back, to be marked failed
    return outcome
