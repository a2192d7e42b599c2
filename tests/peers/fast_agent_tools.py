"""A tiny MCP server (stdio) that gives the fast-agent peer tools to call (run by ``tests/peers/real_agents.py``).

It runs inside the cached fast-agent virtual environment (which holds the ``mcp`` package), started
by fast-agent itself (``fast-agent acp --stdio "PYTHON THIS_FILE"``); it imports nothing from
``acp_client`` or ``tests``. fast-agent asks the ACP client's permission
(``session/request_permission``) before it calls any of these tools.

Tools:

- ``write_note(text)``: answers ``saved TEXT`` at once.
- ``wait(seconds)``: sleeps, then answers ``waited SECONDS`` (a turn that stays busy long enough to
  be cancelled or to have its agent killed mid-turn).
"""

from __future__ import annotations

import asyncio

from mcp.server import MCPServer

server = MCPServer("acp-test-tools")


@server.tool()
def write_note(text: str) -> str:
    """Save a note."""
    return f"saved {text}"


@server.tool()
async def wait(seconds: float) -> str:
    """Wait ``seconds``, then answer."""
    await asyncio.sleep(seconds)
    return f"waited {seconds:g}"


if __name__ == "__main__":
    server.run("stdio")
