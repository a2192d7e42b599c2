"""The checks: stable ids, the rule each one checks, and where that rule comes from.

They run in this order: first those that share the run's agent and need nothing else, then
``resume.no-replay`` (it ends the shared agent as a drop would), then the checks of the restart
scenario (a restart ends every agent of the run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

import attrs

from ._checks_cancel import cancel_honoured, cancel_next_turn
from ._checks_history import (
    load_live_ids,
    load_message_ids,
    load_replays_once,
    load_unknown,
    restart_persists,
    resume_no_replay,
    resume_unknown,
)
from ._checks_http import http_session_header
from ._checks_lifecycle import initialize_capabilities, method_unknown, new_fresh_id, notification_unanswered
from ._checks_not_found import not_found_code
from ._checks_objects import session_object_shape, timestamps_zoned
from ._checks_status import status_after_restart, status_cheap, status_no_side_effects, status_unknown
from ._context import CheckContext, Verdict

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
    Check("method.unknown", "a method the agent does not route answers -32601", JSONRPC + " §5.1", method_unknown),
    Check("new.fresh-id", "session/new gives a new session id every time", ACP + " (session/new)", new_fresh_id),
    Check(
        "status.unknown",
        "session/status of an id the agent never issued answers -32002 with data.sessionId",
        PROPOSAL,
        status_unknown,
    ),
    Check("status.cheap", "session/status is cheap (an in-memory lookup): p50 at most 50 ms", PROPOSAL, status_cheap),
    Check(
        "status.no-side-effects",
        "session/status from another connection neither attaches the session nor changes what its connection sees",
        PROPOSAL,
        status_no_side_effects,
    ),
    Check(
        "load.unknown",
        "session/load (v1) or session/resume with replayFrom (v2) of an unknown id is refused, never a success",
        ACP + " (session/load, session/resume) + " + PROPOSAL,
        load_unknown,
    ),
    Check(
        "resume.unknown",
        "session/resume of an unknown id is refused, never a success",
        ACP + " (session/resume) + " + PROPOSAL,
        resume_unknown,
    ),
    Check(
        "not-found.code",
        "every session method answers an unknown session with -32002 (resource not found)",
        ACP + " (error codes) + " + PROPOSAL,
        not_found_code,
    ),
    Check(
        "cancel.honoured",
        'session/cancel during a turn ends it with stopReason "cancelled" within --timeout, and stops its work',
        ACP + " (session/cancel)",
        cancel_honoured,
    ),
    Check(
        "cancel.next-turn",
        "the turn after a cancelled one gets its own answer, within that turn",
        ACP + " (session/cancel, session/prompt)",
        cancel_next_turn,
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
    Check(
        "resume.no-replay",
        "a plain session/resume (no replayFrom) does not re-send history",
        ACP + " (session/resume)",
        resume_no_replay,
    ),
    Check(
        "status.after-restart",
        "after an agent restart a known session is inactive/saved (or -32002 when it keeps nothing), never active",
        PROPOSAL,
        status_after_restart,
    ),
    Check(
        "restart.persists",
        "a session survives an agent restart: session/load or session/resume brings it back (a warn when not)",
        ACP + " (session/load, session/resume) + " + PROPOSAL,
        restart_persists,
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
        "load.live-ids",
        "live message chunks carry messageId wherever the replay does",
        ACP + " (ContentChunk.messageId; v2 message upserts)",
        load_live_ids,
    ),
)


def check_ids() -> list[str]:
    return [check.id for check in CHECKS]
