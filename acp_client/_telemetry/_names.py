"""The names the client's spans and metrics use (no OpenTelemetry import: tests and docs read them).

The RPC names follow the OpenTelemetry semantic conventions for JSON-RPC (checked against
``opentelemetry-semantic-conventions`` by the tests); ``acp.*`` names are this SDK's own.
"""

from __future__ import annotations

from typing import Final

RPC_SYSTEM_NAME: Final = "rpc.system.name"
#: The older name of ``rpc.system.name``, still read by many backends: both are set.
RPC_SYSTEM: Final = "rpc.system"
RPC_METHOD: Final = "rpc.method"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
JSONRPC_PROTOCOL_VERSION: Final = "jsonrpc.protocol.version"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

SESSION_ID: Final = "acp.session.id"
PREVIOUS_SESSION_ID: Final = "acp.session.previous_id"
PROTOCOL_VERSION: Final = "acp.protocol.version"
TRANSPORT: Final = "acp.transport"
#: ``ok``, ``error`` (the agent answered an error), ``timeout``, ``connection_lost``, ``cancelled``.
REQUEST_OUTCOME: Final = "acp.request.outcome"
MAY_HAVE_EXECUTED: Final = "acp.request.may_have_executed"

RECOVERY_SPAN: Final = "acp.recovery"
RECOVERY_SESSION_SPAN: Final = "acp.recovery.session"
RECONNECT_EVENT: Final = "acp.reconnect"
PROMPT_INTERRUPTED_EVENT: Final = "acp.prompt.interrupted"
RECONNECT_ATTEMPT: Final = "acp.reconnect.attempt"
RECONNECT_DELAY: Final = "acp.reconnect.delay"
RECONNECT_CAUSE: Final = "acp.reconnect.cause"
RECONNECT_ATTEMPTS: Final = "acp.reconnect.attempts"
DISCONNECT_CAUSE: Final = "acp.disconnect.cause"
#: How the episode ended: ``connected``, ``failed`` or ``closed``.
RECOVERY_RESULT: Final = "acp.recovery.result"
RECOVERY_SESSIONS: Final = "acp.recovery.sessions"
RECOVERY_PATH: Final = "acp.recovery.path"
RECOVERY_PLANNED_PATH: Final = "acp.recovery.planned_path"
RECOVERY_PROBE: Final = "acp.recovery.probe"
RECOVERY_RAW_STATUS: Final = "acp.recovery.raw_status"
RECOVERY_CONTINUITY: Final = "acp.recovery.continuity"
RECOVERY_REPLAYED: Final = "acp.recovery.replayed_updates"
RECOVERY_ENDPOINT: Final = "acp.recovery.endpoint"
RECOVERY_STEPS: Final = "acp.recovery.steps"
RECOVERY_NOTES: Final = "acp.recovery.notes"
UPDATE_KIND: Final = "acp.update.kind"

METRIC_RECONNECT_ATTEMPTS: Final = "acp.client.reconnect.attempts"
METRIC_RECOVERIES: Final = "acp.client.recoveries"
METRIC_RECOVERY_DURATION: Final = "acp.client.recovery.duration"
METRIC_DISCONNECTED: Final = "acp.client.disconnected.duration"
METRIC_INTERRUPTED: Final = "acp.client.prompts.interrupted"
METRIC_QUEUED: Final = "acp.client.requests.queued"
METRIC_REQUEST_DURATION: Final = "acp.client.request.duration"
METRIC_UPDATES: Final = "acp.client.session.updates"

#: The instrumentation scope.
SCOPE: Final = "acp_client"
