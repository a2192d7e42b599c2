"""``acp_client.testing.RecordingConnector``: every link and message recorded, rewrites of what the
agent sends, hooks applied to the links opened after they are set."""

from __future__ import annotations

from typing import Any

import pytest

from acp_client import AcpClient
from acp_client.testing import FakeClock, MemoryConnector, RecordingConnector, RecordingTransport, ReferenceAgent
from acp_client.transports.memory import memory_pair


async def test_links_and_messages_are_recorded_in_order() -> None:
    clock = FakeClock()
    memory = MemoryConnector(ReferenceAgent(clock=clock))
    wire = RecordingConnector(memory)
    assert wire.target == memory.target
    with pytest.raises(LookupError):
        _ = wire.current
    seen: list[str] = []
    wire.on_send = lambda message: seen.append(message.get("method", "<response>"))
    async with AcpClient(wire, clock=clock) as client:
        await client.new_session("/project")
        assert wire.current is wire.transports[0]
        assert wire.sent_methods() == seen == ["initialize", "session/new"]
        assert [m.get("id") for m in wire.current.received] == [m["id"] for m in wire.sent()]
    assert wire.messages("session/new")[0]["params"]["cwd"] == "/project"


async def test_a_rewrite_changes_or_drops_what_the_agent_sends_and_received_keeps_the_original() -> None:
    client_end, agent_end = memory_pair("client", "agent")
    dropped: list[Any] = []

    def rewrite(message: Any) -> Any:
        if message.get("method") == "x/drop":
            dropped.append(message)
            return None
        return {**message, "params": {"rewritten": True}}

    transport = RecordingTransport(client_end, rewrite=rewrite)
    await agent_end.send({"jsonrpc": "2.0", "method": "x/drop"})
    await agent_end.send({"jsonrpc": "2.0", "method": "x/keep", "params": {}})
    assert await transport.receive() == {"jsonrpc": "2.0", "method": "x/keep", "params": {"rewritten": True}}
    assert [m["method"] for m in transport.received] == ["x/drop", "x/keep"]
    assert transport.received[1]["params"] == {}
    assert len(dropped) == 1
    await transport.send([{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "method": "b"}])
    assert transport.sent == [[{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "method": "b"}]]
    await transport.aclose()


async def test_hooks_apply_to_links_opened_after_they_are_set() -> None:
    memory = MemoryConnector(ReferenceAgent())
    wire = RecordingConnector(memory)
    first = await wire.connect()
    wire.rewrite = lambda message: message
    second = await wire.connect()
    assert isinstance(first, RecordingTransport) and first._rewrite is None
    assert isinstance(second, RecordingTransport) and second._rewrite is not None
    await memory.aclose()
