"""Helpers of the Streamable HTTP transport tests: the fixture types, the handshake, reading until an
answer, scripted replies of the fake server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from acp_client._codec._jsonrpc import request_message
from acp_client.transports.base import Transport
from acp_client.transports.http import HttpTransport

from ._http_servers import Hypercorn, Recorded, Reply

SECRET = "Bearer s3cr3t-token-value"
SECRET_API_KEY = "key-0123456789abcdef"


# --------------------------------------------------------------------------------------------
# fixtures and helpers


Serve = Callable[..., Awaitable[Hypercorn]]

Link = Callable[..., Awaitable[HttpTransport]]


async def init(transport: Transport) -> dict[str, Any]:
    await transport.send(request_message(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
    answer = await recv(transport)
    assert answer["id"] == 0 and "result" in answer
    return answer


async def recv(transport: Transport, timeout: float = 5.0) -> Any:
    return await asyncio.wait_for(transport.receive(), timeout)


async def collect_until_response(transport: Transport, request_id: Any, *, reply: bool = True) -> list[Any]:
    """Receive until the response to ``request_id``; answers agent requests on the way."""
    seen: list[Any] = []
    while True:
        message = await recv(transport)
        seen.append(message)
        if "method" in message and "id" in message and reply:
            await transport.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": "ok"}})
        if message.get("id") == request_id and "method" not in message:
            return seen


async def new_session(transport: Transport, request_id: int = 1) -> str:
    await transport.send(request_message(request_id, "session/new", {"cwd": "/", "mcpServers": []}))
    answer = await recv(transport)
    assert answer["id"] == request_id
    return str(answer["result"]["sessionId"])


def texts(messages: list[Any]) -> list[str]:
    return [m["params"]["update"]["content"]["text"] for m in messages if m.get("method") == "session/update"]


def hook_once(predicate: Callable[[Recorded], bool], reply: Reply) -> Callable[[Recorded], Reply | None]:
    fired: list[bool] = []

    def hook(record: Recorded) -> Reply | None:
        if not fired and predicate(record):
            fired.append(True)
            return reply
        return None

    return hook


def is_rpc(method: str) -> Callable[[Recorded], bool]:
    return lambda record: record.method == "POST" and record.rpc_method == method


def json_reply(status: int, value: Any, headers: list[tuple[str, str]] | None = None) -> Reply:
    return Reply(status, [("content-type", "application/json"), *(headers or [])], json.dumps(value).encode())


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
