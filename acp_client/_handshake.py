"""Version negotiation: ``initialize`` on a fresh connection.

The client proposes a version; an agent that answers ``UnsupportedProtocolVersion`` with the
versions it supports gets one more proposal (the highest common one); an answer in a version this
client cannot speak is fatal (:class:`~acp_client.exceptions.IncompatibleProtocolVersion`).
"""

from __future__ import annotations

from ._codec import from_wire, to_wire
from ._connection import Connection
from .exceptions import IncompatibleProtocolVersion, UnsupportedProtocolVersion
from .types import ClientCapabilities, Implementation, InitializeRequest, InitializeResponse

__all__ = ["SUPPORTED_PROTOCOL_VERSIONS", "initialize"]

#: The ACP versions this client speaks.
SUPPORTED_PROTOCOL_VERSIONS: tuple[int, ...] = (1, 2)


async def initialize(
    conn: Connection,
    *,
    proposed: int,
    client_info: Implementation,
    capabilities: ClientCapabilities,
    timeout: float,
) -> InitializeResponse:
    """Send ``initialize`` (twice at most) and return the agent's answer.

    Raises:
        IncompatibleProtocolVersion: No version both sides speak.
        RpcError / RequestTimeout / ConnectionLost: From the request.
    """
    for _ in range(2):
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
        return from_wire(InitializeResponse, result, protocol_version=answered)
    raise IncompatibleProtocolVersion("no common protocol version", requested=proposed, answered=None)
