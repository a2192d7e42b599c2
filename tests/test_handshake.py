"""Version fallback re-initializes in the agreed version's shape (issue 8 item 5)."""

from __future__ import annotations

from typing import Any

from acp_client._codec._jsonrpc import Message

from ._harness import Harness

V1_ANSWER = {
    "agentCapabilities": {"loadSession": True, "sessionCapabilities": {"resume": {}}},
    "agentInfo": {"name": "v1-agent", "version": "1.0"},
    "authMethods": [],
}


def first_initialize_answered(h: Harness, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Replace the agent's answer to the first ``initialize`` by ``answer``; returns the
    ``initialize`` requests the client sends."""
    sent: list[dict[str, Any]] = []

    def on_send(message: Message) -> None:
        if isinstance(message, dict) and message.get("method") == "initialize":
            sent.append(message)

    def rewrite(message: Message) -> Message | None:
        if isinstance(message, dict) and len(sent) == 1 and message.get("id") == sent[0]["id"]:
            return {"jsonrpc": "2.0", "id": message["id"], "result": answer}
        return message

    h.connector.on_send, h.connector.rewrite = on_send, rewrite
    return sent


async def test_a_v1_answer_to_a_v2_request_is_followed_by_a_v1_initialize() -> None:
    h = Harness(protocol_version=2)
    sent = first_initialize_answered(h, {"protocolVersion": 1, **V1_ANSWER})
    async with h:
        assert [m["params"]["protocolVersion"] for m in sent] == [2, 1]
        assert "capabilities" in sent[0]["params"] and "clientCapabilities" not in sent[0]["params"]
        assert "clientCapabilities" in sent[1]["params"] and "clientInfo" in sent[1]["params"]
        assert h.client.protocol_version == 1
        assert h.client.initialize_result.protocol_version == 1
        session = await h.client.new_session("/a")
        assert (await h.clock.run(session.prompt("hi"))).stop_reason == "end_turn"


async def test_a_v2_answer_in_the_v1_shape_is_treated_as_v1_and_reinitialized() -> None:
    h = Harness(protocol_version=2)
    sent = first_initialize_answered(h, {"protocolVersion": 2, **V1_ANSWER})
    async with h:
        assert [m["params"]["protocolVersion"] for m in sent] == [2, 1]
        assert h.client.protocol_version == 1
        assert h.client.agent_capabilities.supports("session/load")


async def test_an_answer_in_the_proposed_version_is_not_repeated() -> None:
    for version in (1, 2):
        h = Harness(protocol_version=version)
        sent = first_initialize_answered(h, {})
        h.connector.rewrite = None
        async with h:
            assert [m["params"]["protocolVersion"] for m in sent] == [version]
            assert h.client.protocol_version == version
