"""The checks: stable ids, the rule each one checks, and where that rule comes from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

import attrs

from ._checks_history import load_message_ids, load_replays_once, load_unknown, resume_no_replay, resume_unknown
from ._checks_http import http_session_header
from ._checks_lifecycle import cancel_honoured, initialize_capabilities, new_fresh_id, notification_unanswered
from ._checks_objects import session_object_shape, timestamps_zoned
from ._checks_status import status_after_restart, status_cheap, status_no_side_effects, status_unknown
from ._context import CheckContext, Verdict

__all__ = ["CHECKS", "Check", "check_ids"]

ACP: Final = "ACP schema"
PROPOSAL: Final = "session/status proposal"
JSONRPC: Final = "JSON-RPC 2.0"
SESSION_SEED: Final = "Session schema"
HTTP: Final = "ACP Streamable HTTP transport"


@attrs.frozen
class Check:
    """One conformance check.

    Attributes:
        id: The stable id (``--only`` / ``--skip``, the report, JUnit test names).
        rule: What the agent must do, in one sentence.
        source: Where the rule comes from.
        run: The check itself.
    """

    id: str
    rule: str
    source: str
    run: Callable[[CheckContext], Awaitable[Verdict]] = attrs.field(repr=False)


CHECKS: Final[tuple[Check, ...]] = (
    Check(
        "initialize.capabilities",
        "every advertised session method answers (not -32601); a method that works is advertised",
        ACP + " (initialize: agentCapabilities / capabilities)",
        initialize_capabilities,
    ),
    Check("new.fresh-id", "session/new gives a new session id every time", ACP + " (session/new)", new_fresh_id),
    Check(
        "status.unknown",
        "session/status of an id the agent never issued answers -32002 with data.sessionId",
        PROPOSAL,
        status_unknown,
    ),
    Check(
        "status.no-side-effects",
        "session/status from another connection neither attaches the session nor changes what its connection sees",
        PROPOSAL,
        status_no_side_effects,
    ),
    Check("status.cheap", "session/status is cheap (an in-memory lookup): p50 at most 50 ms", PROPOSAL, status_cheap),
    Check(
        "status.after-restart",
        "after an agent restart a known session is inactive/saved (or -32002), never active",
        PROPOSAL,
        status_after_restart,
    ),
    Check(
        "load.unknown",
        "session/load (v1) or session/resume with replayFrom (v2) of an unknown id answers -32002, never success",
        ACP + " (session/load, session/resume) + " + PROPOSAL,
        load_unknown,
    ),
    Check(
        "load.replays-once",
        "after a restart, load replays the whole history exactly once, in order",
        ACP + " (session/load, replayFrom)",
        load_replays_once,
    ),
    Check(
        "load.message-ids",
        "replayed messages carry messageId (required in v2), the same as live; tool call ids are stable",
        ACP + " (ContentChunk.messageId; v2 message upserts)",
        load_message_ids,
    ),
    Check(
        "resume.no-replay",
        "a plain session/resume (no replayFrom) does not re-send history",
        ACP + " (session/resume)",
        resume_no_replay,
    ),
    Check(
        "resume.unknown",
        "session/resume of an unknown id answers -32002",
        ACP + " (session/resume) + " + PROPOSAL,
        resume_unknown,
    ),
    Check(
        "cancel.honoured",
        'session/cancel during a turn ends it with stopReason "cancelled" within --timeout',
        ACP + " (session/cancel)",
        cancel_honoured,
    ),
    Check("notification.unanswered", "a notification is never answered", JSONRPC + " §4.1", notification_unanswered),
    Check(
        "timestamps.zoned",
        "createdAt / updatedAt are RFC 3339 with a zone",
        SESSION_SEED + " (RFC 3339) / " + ACP + " (SessionInfo.updatedAt)",
        timestamps_zoned,
    ),
    Check(
        "session-object.shape",
        "returned and listed Session objects keep the required-nullable members (activeTurnId, forkedFrom, modelId, "
        "providerId, workspaceRoot) present, null when empty",
        SESSION_SEED,
        session_object_shape,
    ),
    Check(
        "http.session-header",
        "the server follows one known Acp-Session-Id convention (HTTP targets only)",
        HTTP,
        http_session_header,
    ),
)


def check_ids() -> list[str]:
    return [check.id for check in CHECKS]
