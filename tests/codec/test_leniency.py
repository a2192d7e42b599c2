"""Lenient decoding: unknown members and variants, default-on-error, nulls, open enums, errors."""

from __future__ import annotations

from typing import Any

import pytest

from acp_client._codec import (
    decode_session_notification,
    decode_session_update,
    decode_update_params,
    from_wire,
    to_wire,
)
from acp_client.exceptions import InvalidMessage
from acp_client.types import (
    AgentCapabilities,
    AgentMessageChunk,
    AuthMethod,
    ClientCapabilities,
    CommandPermissionSubject,
    ContentBlock,
    ForegroundState,
    ImageContent,
    InitializeResponse,
    ListSessionsResponse,
    McpServerStdio,
    NewSessionRequest,
    NewSessionResponse,
    PlanUpdate,
    Probe,
    PromptRequest,
    RequestPermissionRequest,
    RequestPermissionResponse,
    ResumeSessionRequest,
    SessionConfigOption,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
    SessionInfo,
    SessionNotification,
    SessionStatusResponse,
    TextContent,
    ToolCall,
    ToolCallContentBlock,
    ToolCallLocation,
    ToolCallUpdate,
    UnknownContent,
    UnknownMcpServer,
    UnknownPermissionOutcome,
    UnknownPermissionSubject,
    UnknownPlanContent,
    UnknownReplayFrom,
    UnknownSessionUpdate,
    UnknownToolCallContent,
    UserMessage,
    normalize_status,
)

CHUNK = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}


def notification(update: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"sessionId": "sess_1", "update": update, **extra}


# --------------------------------------------------------------------------------------------
# unknown members and variants


def test_unknown_members_are_ignored_at_every_level() -> None:
    noisy = {
        "sessionId": "sess_1",
        "future": {"a": 1},
        "update": {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "status": "completed",
            "shiny": True,
            "content": [{"type": "content", "extra": 1, "content": {"type": "text", "text": "ok", "x": [1]}}],
            "locations": [{"path": "/a", "line": 3, "column": 7}],
        },
    }
    decoded = from_wire(SessionNotification, noisy)
    assert decoded == SessionNotification(
        "sess_1",
        ToolCallUpdate(
            "call_1",
            status="completed",
            content=(ToolCallContentBlock(TextContent("ok")),),
            locations=(ToolCallLocation("/a", 3),),
        ),
    )
    assert decode_session_notification(noisy) == decoded


def test_unknown_session_update_keeps_the_raw_payload() -> None:
    raw = {"sessionUpdate": "hologram_update", "messageId": "m1", "payload": {"x": [1, 2]}}
    decoded = decode_session_update(raw)
    assert decoded == UnknownSessionUpdate("hologram_update", raw)
    assert decoded.kind == "hologram_update"
    assert decoded.message_id == "m1"
    assert to_wire(decoded) == raw
    assert UnknownSessionUpdate("x", {"messageId": 5}).message_id is None


def test_unknown_content_block_keeps_the_raw_payload() -> None:
    raw = {"type": "video", "url": "https://example.com/v.mp4", "durationMs": 3}
    block = from_wire(ContentBlock, raw)
    assert block == UnknownContent("video", raw)
    assert to_wire(block) == raw
    prompt = from_wire(PromptRequest, {"sessionId": "s", "prompt": [raw, {"type": "text", "text": "x"}]})
    assert prompt.prompt == (UnknownContent("video", raw), TextContent("x"))
    assert to_wire(prompt)["prompt"][0] == raw


def test_unknown_variants_of_every_union_keep_their_payload() -> None:
    tool = from_wire(
        ToolCallUpdate,
        {"toolCallId": "c", "content": [{"type": "hologram", "data": 1}]},
    )
    assert tool.content == (UnknownToolCallContent("hologram", {"type": "hologram", "data": 1}),)
    plan = decode_session_update({"sessionUpdate": "plan_update", "plan": {"type": "kanban", "planId": "p"}})
    assert plan == PlanUpdate(UnknownPlanContent("kanban", {"type": "kanban", "planId": "p"}))
    request = from_wire(NewSessionRequest, {"cwd": "/p", "mcpServers": [{"type": "grpc", "name": "g"}]})
    assert request.mcp_servers == (UnknownMcpServer("grpc", {"type": "grpc", "name": "g"}),)
    assert to_wire(request) == {"cwd": "/p", "mcpServers": [{"type": "grpc", "name": "g"}]}
    resume = from_wire(
        ResumeSessionRequest,
        {"sessionId": "s", "cwd": "/p", "replayFrom": {"type": "msg", "id": 3}},
        protocol_version=2,
    )
    assert resume.replay_from == UnknownReplayFrom("msg", {"type": "msg", "id": 3})
    answer = from_wire(RequestPermissionResponse, {"outcome": {"outcome": "deferred", "until": 3}})
    assert answer.outcome == UnknownPermissionOutcome("deferred", {"outcome": "deferred", "until": 3})
    asked = from_wire(
        RequestPermissionRequest,
        {"sessionId": "s", "title": "t", "options": [], "subject": {"type": "network", "host": "h"}},
        protocol_version=2,
    )
    assert asked.subject == UnknownPermissionSubject("network", {"type": "network", "host": "h"})
    assert asked.tool_call is None


def test_v1_stdio_mcp_servers_are_untagged() -> None:
    request = from_wire(
        NewSessionRequest, {"cwd": "/p", "mcpServers": [{"name": "f", "command": "/bin/f", "args": [], "env": []}]}
    )
    assert request.mcp_servers == (McpServerStdio("f", "/bin/f"),)


# --------------------------------------------------------------------------------------------
# default-on-error, skip-invalid-items, nulls


def test_malformed_optional_members_fall_back_to_their_default() -> None:
    update = decode_session_update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "Read",
            "kind": 42,
            "status": ["pending"],
            "content": "not a list",
            "locations": {"path": "/a"},
            "_meta": "not an object",
        }
    )
    assert update == ToolCall("c", "Read")
    image = from_wire(
        ContentBlock, {"type": "image", "data": "aGk=", "mimeType": "image/png", "uri": 7, "annotations": 3}
    )
    assert image == ImageContent("aGk=", "image/png")


def test_strict_primitives_are_not_coerced() -> None:
    caps = from_wire(ClientCapabilities, {"terminal": "false", "fs": {"readTextFile": 1}})
    assert caps.terminal is False  # not bool("false")
    assert caps.fs.read_text_file is False  # not bool(1)
    with pytest.raises(InvalidMessage, match=r"sessionId: expected a string, got a number"):
        from_wire(SessionNotification, {"sessionId": 5, "update": CHUNK})
    with pytest.raises(InvalidMessage, match=r"UsageUpdate\.used: expected an integer, got a boolean"):
        decode_session_update({"sessionUpdate": "usage_update", "used": True, "size": 10})


def test_invalid_list_items_are_skipped() -> None:
    update = decode_session_update(
        {
            "sessionUpdate": "user_message",
            "messageId": "m",
            "content": [{"type": "text", "text": "a"}, {"type": "image"}, 5, {"type": "text", "text": "b"}],
        }
    )
    assert update == UserMessage("m", (TextContent("a"), TextContent("b")))
    listing = from_wire(
        ListSessionsResponse,
        {"sessions": [{"sessionId": "s1", "cwd": "/p"}, {"cwd": "/q"}, "junk"], "nextCursor": 3},
    )
    assert listing == ListSessionsResponse((SessionInfo("s1", "/p"),), None)
    init = from_wire(
        InitializeResponse,
        {"protocolVersion": 1, "authMethods": [{"id": "a", "name": "Agent"}, {"name": "no id"}, None]},
    )
    assert init.auth_methods == (AuthMethod("a", "Agent"),)


def test_optional_members_accept_null() -> None:
    update = decode_session_update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": None, "content": None, "kind": None}
    )
    assert update == ToolCallUpdate("c")
    chunk = decode_session_update({**CHUNK, "messageId": None, "_meta": None})
    assert chunk == AgentMessageChunk(TextContent("hi"))
    info = from_wire(SessionInfo, {"sessionId": "s", "cwd": "/p", "title": None, "updatedAt": None})
    assert info == SessionInfo("s", "/p")
    response = from_wire(NewSessionResponse, {"sessionId": "s", "modes": None, "configOptions": None})
    assert response == NewSessionResponse("s")


def test_config_options_both_versions() -> None:
    v1 = {
        "id": "model",
        "name": "Model",
        "type": "select",
        "currentValue": "fast",
        "options": [{"group": "g", "name": "G", "options": [{"value": "fast", "name": "Fast"}]}],
    }
    v2 = {**{k: v for k, v in v1.items() if k != "id"}, "configId": "model"}
    v2["options"] = [{"groupId": "g", "name": "G", "options": [{"value": "fast", "name": "Fast"}]}]
    expected = SessionConfigOption(
        "model",
        "Model",
        "select",
        "fast",
        (SessionConfigSelectGroup("g", "G", (SessionConfigSelectOption("fast", "Fast"),)),),
    )
    assert from_wire(SessionConfigOption, v1, protocol_version=1) == expected
    assert from_wire(SessionConfigOption, v2, protocol_version=2) == expected
    assert to_wire(expected, protocol_version=1) == v1
    assert to_wire(expected, protocol_version=2) == v2


# --------------------------------------------------------------------------------------------
# session/status: open status enum, default-on-error state


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("active", Probe.ACTIVE),
        ("open", Probe.ACTIVE),
        ("inactive", Probe.INACTIVE),
        ("saved", Probe.INACTIVE),
        ("archived", Probe.INACTIVE),
        ("", Probe.INACTIVE),
        ("ACTIVE", Probe.INACTIVE),
        ("unknown", Probe.INACTIVE),  # UNKNOWN is only ever the client's reading of -32002
    ],
)
@pytest.mark.parametrize("version", [1, 2])
def test_status_strings_normalize_and_keep_the_raw_value(raw: str, expected: Probe, version: int) -> None:
    assert normalize_status(raw) is expected
    response = from_wire(SessionStatusResponse, {"status": raw}, protocol_version=version)
    assert response == SessionStatusResponse(expected, raw)
    assert to_wire(response, protocol_version=version) == {"status": raw}


@pytest.mark.parametrize(
    "state",
    [None, "idle", 3, [], {}, {"state": 5}, {"state": None}, {"stopReason": "end_turn"}],
    ids=repr,
)
def test_malformed_state_is_not_reported_never_idle(state: Any) -> None:
    response = from_wire(SessionStatusResponse, {"status": "active", "state": state}, protocol_version=2)
    assert response.state is None
    assert response.status is Probe.ACTIVE
    missing = from_wire(SessionStatusResponse, {"status": "active"}, protocol_version=2)
    assert missing.state is None


def test_state_snapshot_is_decoded_in_v2_and_ignored_in_v1() -> None:
    payload = {"status": "open", "state": {"state": "idle", "stopReason": "end_turn", "usage": {"x": 1}}}
    v2 = from_wire(SessionStatusResponse, payload, protocol_version=2)
    assert v2.state == ForegroundState("idle", "end_turn", raw=payload["state"])
    assert to_wire(v2, protocol_version=2) == payload
    assert from_wire(SessionStatusResponse, payload, protocol_version=1).state is None
    future = from_wire(ForegroundState, {"state": "hibernating", "stopReason": 7}, protocol_version=2)
    assert future == ForegroundState("hibernating", None, raw={"state": "hibernating", "stopReason": 7})


def test_status_must_be_a_string() -> None:
    for payload in ({}, {"status": None}, {"status": 1}, []):
        with pytest.raises(InvalidMessage, match="SessionStatusResponse"):
            from_wire(SessionStatusResponse, payload, protocol_version=2)


# --------------------------------------------------------------------------------------------
# failures are InvalidMessage, naming the member


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (None, "expected an object, got null"),
        ([], "expected an object, got an array"),
        ({"update": CHUNK}, "sessionId"),
        ({"sessionId": "s"}, "update"),
        ({"sessionId": "s", "update": {"content": {}}}, "sessionUpdate"),
        ({"sessionId": "s", "update": {"sessionUpdate": 3}}, "sessionUpdate"),
        ({"sessionId": "s", "update": {"sessionUpdate": "tool_call", "title": "t"}}, "toolCallId"),
        ({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}}, "content"),
        (
            {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}}},
            "TextContent: missing required member 'text'",
        ),
    ],
)
def test_undecodable_notifications_raise_invalid_message(payload: Any, message: str) -> None:
    with pytest.raises(InvalidMessage, match=message):
        decode_session_notification(payload)
    with pytest.raises(InvalidMessage, match=message):
        decode_update_params(payload)
    with pytest.raises(InvalidMessage, match=message):
        from_wire(SessionNotification, payload)


def test_invalid_message_chains_the_cause_and_hides_cattrs() -> None:
    with pytest.raises(InvalidMessage) as caught:
        from_wire(PromptRequest, {"sessionId": "s", "prompt": [{"type": "text", "text": 1}]})
    assert "PromptRequest.prompt: [0]: TextContent.text: expected a string" in str(caught.value)
    assert caught.value.__cause__ is not None


def test_deeply_nested_raw_values_are_kept_not_walked() -> None:
    deep: Any = 0
    for _ in range(5000):
        deep = [deep]
    update = decode_session_update({"sessionUpdate": "tool_call_update", "toolCallId": "c", "rawInput": deep})
    assert isinstance(update, ToolCallUpdate) and update.raw_input is deep


# --------------------------------------------------------------------------------------------
# version differences on decode


def test_initialize_response_decodes_both_shapes() -> None:
    v1 = from_wire(
        InitializeResponse,
        {
            "protocolVersion": 1,
            "agentInfo": {"name": "a", "version": "1"},
            "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}},
        },
    )
    v2 = from_wire(
        InitializeResponse,
        {
            "protocolVersion": 2,
            "info": {"name": "a", "version": "1"},
            "capabilities": {"session": {"prompt": {"image": {}}, "status": {}}},
        },
        protocol_version=2,
    )
    assert v1.agent_info == v2.agent_info
    assert v1.agent_capabilities.prompt.image and v2.agent_capabilities.prompt.image
    assert v1.agent_capabilities.load_session and not v2.agent_capabilities.load_session
    assert v2.agent_capabilities.session.status and not v1.agent_capabilities.session.status
    garbage = from_wire(InitializeResponse, {"protocolVersion": 1, "agentCapabilities": 3, "agentInfo": "x"})
    assert garbage == InitializeResponse(1)
    with pytest.raises(InvalidMessage, match="protocolVersion"):
        from_wire(InitializeResponse, {"protocolVersion": "1"})


def test_permission_request_v1_and_v2() -> None:
    tool = {"toolCallId": "c", "title": "rm -rf build", "kind": "execute"}
    options = [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]
    v1 = from_wire(RequestPermissionRequest, {"sessionId": "s", "toolCall": tool, "options": options})
    assert v1.tool_call == ToolCallUpdate("c", "rm -rf build", "execute")
    assert v1.options[0].kind == "allow_once"
    v2 = from_wire(
        RequestPermissionRequest,
        {"sessionId": "s", "title": "Run?", "options": options, "subject": {"type": "tool_call", "toolCall": tool}},
        protocol_version=2,
    )
    assert v2.tool_call == v1.tool_call and v2.title == "Run?"
    command = from_wire(
        RequestPermissionRequest,
        {
            "sessionId": "s",
            "title": "Run?",
            "options": options,
            "subject": {"type": "command", "command": "make", "cwd": "/p"},
        },
        protocol_version=2,
    )
    assert command.subject == CommandPermissionSubject("make", "/p") and command.tool_call is None
    with pytest.raises(InvalidMessage, match="options"):
        from_wire(RequestPermissionRequest, {"sessionId": "s", "toolCall": tool, "options": [{"optionId": 1}]})


def test_agent_capabilities_keep_unmodeled_members() -> None:
    raw = {
        "loadSession": True,
        "providers": {"x": 1},
        "sessionCapabilities": {"resume": {"_meta": {"a": 1}}, "future": {}},
    }
    caps = from_wire(AgentCapabilities, raw)
    assert caps.raw == raw
    assert to_wire(caps) == raw
