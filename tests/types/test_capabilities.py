"""Normalized agent capabilities: ``supports()`` and ``capability_path()`` in v1 and v2."""

from __future__ import annotations

import pytest

from acp_client._codec import from_wire, to_wire
from acp_client.types import AgentCapabilities, InitializeResponse, McpCapabilities, PromptCapabilities

GATED = ("session/load", "session/resume", "session/status", "session/list", "session/fork", "session/close",
         "session/delete")  # fmt: skip
UNGATED = ("session/new", "session/prompt", "session/cancel", "session/set_mode", "session/set_config_option")


def v1(caps: dict[str, object]) -> AgentCapabilities:
    return from_wire(InitializeResponse, {"protocolVersion": 1, "agentCapabilities": caps}).agent_capabilities


def v2(caps: dict[str, object]) -> AgentCapabilities:
    payload = {"protocolVersion": 2, "info": {"name": "a", "version": "1"}, "capabilities": caps}
    return from_wire(InitializeResponse, payload, protocol_version=2).agent_capabilities


def test_nothing_advertised_means_only_ungated_methods() -> None:
    for caps in (v1({}), v2({}), AgentCapabilities()):
        assert not any(caps.supports(m) for m in GATED)
        assert all(caps.supports(m) for m in UNGATED)


def test_v1_each_capability_gates_its_method() -> None:
    everything = v1(
        {
            "loadSession": True,
            "sessionCapabilities": {
                "resume": {},
                "status": {},
                "list": {},
                "fork": {},
                "close": {},
                "delete": {},
                "additionalDirectories": {},
            },
        }
    )
    assert all(everything.supports(m) for m in GATED)
    assert everything.session.additional_directories
    only_status = v1({"sessionCapabilities": {"status": {}}})
    assert [m for m in GATED if only_status.supports(m)] == ["session/status"]
    only_load = v1({"loadSession": True})
    assert [m for m in GATED if only_load.supports(m)] == ["session/load"]


def test_v1_null_or_malformed_capabilities_are_absent() -> None:
    caps = v1({"loadSession": "yes", "sessionCapabilities": {"resume": None, "status": True, "list": []}})
    assert not any(caps.supports(m) for m in GATED)
    assert v1({"sessionCapabilities": 5}) == AgentCapabilities()


def test_v2_session_object_brings_the_baseline_methods() -> None:
    baseline = v2({"session": {}})
    assert [m for m in GATED if baseline.supports(m)] == ["session/resume", "session/list", "session/close"]
    status = v2({"session": {"status": {}, "fork": {}, "delete": {}}})
    assert [m for m in GATED if status.supports(m)] == [
        "session/resume", "session/status", "session/list", "session/fork", "session/close", "session/delete",
    ]  # fmt: skip
    assert not v2({"session": {"loadSession": True}}).supports("session/load")  # no session/load in v2


def test_prompt_and_mcp_capabilities_in_both_shapes() -> None:
    one = v1({"promptCapabilities": {"image": True, "embeddedContext": True}, "mcpCapabilities": {"http": True}})
    two = v2({"session": {"prompt": {"image": {}, "embeddedContext": {}}, "mcp": {"http": {}, "stdio": {}}}})
    assert one.prompt == two.prompt == PromptCapabilities(image=True, embedded_context=True)
    assert one.mcp == McpCapabilities(http=True)
    assert two.mcp == McpCapabilities(http=True, stdio=True)
    assert to_wire(two, protocol_version=2) == {
        "session": {"prompt": {"image": {}, "embeddedContext": {}}, "mcp": {"http": {}, "stdio": {}}}
    }


@pytest.mark.parametrize(
    ("method", "path_v1", "path_v2"),
    [
        ("session/load", "agentCapabilities.loadSession", "(none: session/load is not part of protocol v2)"),
        ("session/resume", "agentCapabilities.sessionCapabilities.resume", "capabilities.session"),
        ("session/close", "agentCapabilities.sessionCapabilities.close", "capabilities.session"),
        ("session/list", "agentCapabilities.sessionCapabilities.list", "capabilities.session"),
        ("session/status", "agentCapabilities.sessionCapabilities.status", "capabilities.session.status"),
        ("session/fork", "agentCapabilities.sessionCapabilities.fork", "capabilities.session.fork"),
        ("session/delete", "agentCapabilities.sessionCapabilities.delete", "capabilities.session.delete"),
        ("session/new", "", ""),
        ("session/prompt", "", ""),
    ],
)
def test_capability_path(method: str, path_v1: str, path_v2: str) -> None:
    caps = AgentCapabilities()
    assert caps.capability_path(method, 1) == path_v1
    assert caps.capability_path(method, 2) == path_v2


def test_capabilities_encode_back_in_each_version() -> None:
    raw_v1 = {"loadSession": True, "sessionCapabilities": {"status": {}, "resume": {"_meta": {"a": 1}}}}
    assert to_wire(v1(raw_v1)) == raw_v1
    raw_v2 = {"session": {"status": {}}, "auth": {"status": {}}}
    assert to_wire(v2(raw_v2), protocol_version=2) == raw_v2
    built = AgentCapabilities(load_session=True)
    assert to_wire(built) == {"loadSession": True}
    assert to_wire(AgentCapabilities(), protocol_version=2) == {}
