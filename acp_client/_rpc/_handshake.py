"""Version negotiation: ``initialize`` on a fresh connection.

The client proposes a version; an agent that answers ``UnsupportedProtocolVersion`` with the
versions it supports gets one more proposal (the highest common one); an answer in a version this
client cannot speak is fatal (:class:`~acp_client.exceptions.IncompatibleProtocolVersion`). The
request's shape depends on the version (v1 ``clientCapabilities`` / ``clientInfo``, v2
``capabilities`` / ``info``), so an agent that agrees on another version is sent ``initialize``
once more in that version's shape (else a v1 agent never learns the client's fs and terminal
capabilities). An answer that claims v2 in the v1 shape (as fast-agent 0.10 sends) is treated, and
re-initialized, as v1.
"""

from __future__ import annotations

from typing import Any

import attrs

from .._codec import from_wire, to_wire
from .._util._logging import get_logger
from ..exceptions import IncompatibleProtocolVersion, UnsupportedProtocolVersion
from ..types import ClientCapabilities, Implementation, InitializeRequest, InitializeResponse
from ._connection import Connection

logger = get_logger("acp_client.client")

#: The ACP versions this client speaks.
SUPPORTED_PROTOCOL_VERSIONS: tuple[int, ...] = (1, 2)


async def initialize(
    conn: Connection,
    *,
    proposed: int,
    client_info: Implementation,
    capabilities: ClientCapabilities,
    timeout: float | None,
) -> InitializeResponse:
    """Send ``initialize`` (twice at most) and return the agent's answer.

    Raises:
        IncompatibleProtocolVersion: No version both sides speak.
        RpcError / RequestTimeout / ConnectionLost: From the request.
    """
    reshaped = False
    for _ in range(3):
        request = InitializeRequest(
            protocol_version=proposed, client_info=client_info, client_capabilities=capabilities
        )
        try:
            result = await conn.request("initialize", to_wire(request, protocol_version=proposed), timeout=timeout)
        except UnsupportedProtocolVersion as exc:
            supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
            common = [v for v in (supported or []) if v in SUPPORTED_PROTOCOL_VERSIONS and v != proposed]
            if not common:
                raise
            proposed = max(common)
            continue
        answered = result.get("protocolVersion") if isinstance(result, dict) else None
        if answered not in SUPPORTED_PROTOCOL_VERSIONS:
            raise IncompatibleProtocolVersion(
                f"the agent answered protocol version {answered!r}; this client speaks "
                f"{', '.join(map(str, SUPPORTED_PROTOCOL_VERSIONS))}",
                requested=proposed,
                answered=answered,
            )
        assert isinstance(answered, int) and isinstance(result, dict)
        if answered >= 2 and _v1_shaped(result):
            logger.info("the agent answered protocol version %d in the v1 shape: speaking v1", answered)
            answered = 1
        if answered != proposed and not reshaped:
            logger.info("the agent agreed on protocol version %d: initializing again in its shape", answered)
            proposed, reshaped = answered, True
            continue
        response = from_wire(InitializeResponse, result, protocol_version=answered)
        return attrs.evolve(response, protocol_version=answered)
    raise IncompatibleProtocolVersion("no common protocol version", requested=proposed, answered=None)


def _v1_shaped(result: dict[str, Any]) -> bool:
    v1 = "agentCapabilities" in result or "agentInfo" in result
    return v1 and "capabilities" not in result and "info" not in result
