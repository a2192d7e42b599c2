"""A stdio agent built on the official ACP Python SDK (``agent-client-protocol``) and its stdio
helper ``acp.run_agent``: an independent peer for the stdio transport tests.

It answers ``initialize`` and ``session/new`` (session ids ``sdk-session-1``, ``-2``...), and logs
one line to stderr per call.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from acp import PROTOCOL_VERSION, InitializeResponse, NewSessionResponse, run_agent
from acp.schema import AgentCapabilities, Implementation


class TinyAgent:
    def __init__(self) -> None:
        self._sessions = 0

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        print(f"sdk agent: initialize v{protocol_version}", file=sys.stderr, flush=True)
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="tiny-sdk-agent", version="0.0.1"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self._sessions += 1
        print(f"sdk agent: new session in {cwd}", file=sys.stderr, flush=True)
        return NewSessionResponse(session_id=f"sdk-session-{self._sessions}")


if __name__ == "__main__":
    asyncio.run(run_agent(TinyAgent()))  # type: ignore[arg-type]  # only the two methods the test calls
