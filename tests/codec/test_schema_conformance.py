"""Every message the client builds validates against the ACP JSON schemas.

Each client→agent request / notification and each client→agent response, minimal and fully
populated, is encoded for every schema set whose protocol defines the method, then validated
against the method's definition and, wrapped in a JSON-RPC envelope, against the ``ClientRequest``
/ ``ClientNotification`` / ``ClientResponse`` definitions and the whole document.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from acp_client._codec import to_wire
from acp_client.types import (
    Annotations,
    AudioContent,
    BlobResourceContents,
    CancelledPermissionOutcome,
    CancelNotification,
    CancelRequestNotification,
    ClientAuthCapabilities,
    ClientCapabilities,
    CloseSessionRequest,
    CreateElicitationResponse,
    CreateTerminalResponse,
    DeleteSessionRequest,
    ElicitationCapabilities,
    EmbeddedResource,
    EnvVariable,
    FileSystemCapability,
    ForkSessionRequest,
    HttpHeader,
    ImageContent,
    Implementation,
    InitializeRequest,
    KillTerminalCommandResponse,
    ListSessionsRequest,
    LoadSessionRequest,
    McpServerAcp,
    McpServerHttp,
    McpServerSse,
    McpServerStdio,
    NewSessionRequest,
    PromptRequest,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    ReplayFromStart,
    RequestPermissionResponse,
    ResourceLink,
    ResumeSessionRequest,
    SelectedPermissionOutcome,
    SessionStatusRequest,
    SetSessionConfigOptionRequest,
    SetSessionModeRequest,
    TerminalExitStatus,
    TerminalOutputResponse,
    TextContent,
    TextResourceContents,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from tests.codec import _schemas

META = {"trace": {"id": "abc"}}
V1_ONLY = ("v1", "s1")
V2_ONLY = ("v2", "s2")
ALL = ("v1", "v2", "s1", "s2")
NEWER = ("s1", "s2")  # session/status exists only in the SDK 2.4.0 schemas

MCP_V1 = (
    McpServerStdio("files", "/usr/bin/mcp-files", ("--root", "/srv"), (EnvVariable("TOKEN", "t"),)),
    McpServerHttp("web", "https://mcp.example.com/mcp", (HttpHeader("X-Key", "k"),)),
    McpServerSse("events", "https://mcp.example.com/sse"),
    McpServerAcp("tunnel", "srv-1"),
)
MCP_V2 = (
    McpServerStdio("files", "/usr/bin/mcp-files", ("--root", "/srv"), (EnvVariable("TOKEN", "t"),)),
    McpServerHttp("web", "https://mcp.example.com/mcp"),
    McpServerAcp("tunnel", "srv-1"),
)
PROMPT = (
    TextContent("hello", annotations=Annotations(audience=("user",), priority=0.5), meta=META),
    ImageContent("aGk=", "image/png", uri="file:///tmp/a.png"),
    AudioContent("aGk=", "audio/wav"),
    ResourceLink("file:///tmp/a.txt", "a.txt", title="A", description="a file", mime_type="text/plain", size=2),
    EmbeddedResource(TextResourceContents("file:///tmp/b.txt", "bee", mime_type="text/plain")),
    EmbeddedResource(BlobResourceContents("file:///tmp/c.bin", "aGk=")),
)
FULL_CAPS = ClientCapabilities(
    fs=FileSystemCapability(read_text_file=True, write_text_file=True),
    terminal=True,
    elicitation=ElicitationCapabilities(form=True, url=True),
    auth=ClientAuthCapabilities(terminal=True),
    meta=META,
)
INFO = Implementation("editor", "1.2.3", title="Editor")


@attrs.frozen
class Case:
    """One value to encode: its method, kind, the schema sets that define it and the def names."""

    label: str
    method: str
    kind: str  # "request" | "notification" | "response"
    value: Any
    sets: tuple[str, ...]
    definition: str | dict[str, str]

    def def_for(self, key: str) -> str:
        return self.definition if isinstance(self.definition, str) else self.definition[key]


CASES = [
    # initialize: the shape follows the request's own protocol version
    Case("initialize v1 minimal", "initialize", "request", InitializeRequest(1), V1_ONLY, "InitializeRequest"),
    Case(
        "initialize v1 full",
        "initialize",
        "request",
        InitializeRequest(1, INFO, FULL_CAPS, meta=META),
        V1_ONLY,
        "InitializeRequest",
    ),
    Case("initialize v2 minimal", "initialize", "request", InitializeRequest(2), V2_ONLY, "InitializeRequest"),
    Case(
        "initialize v2 full",
        "initialize",
        "request",
        InitializeRequest(2, INFO, FULL_CAPS, meta=META),
        V2_ONLY,
        "InitializeRequest",
    ),
    # session lifecycle
    Case("new minimal", "session/new", "request", NewSessionRequest("/home/u/p"), ALL, "NewSessionRequest"),
    Case(
        "new full v1",
        "session/new",
        "request",
        NewSessionRequest("/home/u/p", MCP_V1, ("/home/u/lib",), meta=META),
        V1_ONLY,
        "NewSessionRequest",
    ),
    Case(
        "new full v2",
        "session/new",
        "request",
        NewSessionRequest("/home/u/p", MCP_V2, ("/home/u/lib",), meta=META),
        V2_ONLY,
        "NewSessionRequest",
    ),
    Case("load minimal", "session/load", "request", LoadSessionRequest("sess_1", "/p"), V1_ONLY, "LoadSessionRequest"),
    Case(
        "load full",
        "session/load",
        "request",
        LoadSessionRequest("sess_1", "/p", MCP_V1, ("/q",), meta=META),
        V1_ONLY,
        "LoadSessionRequest",
    ),
    Case(
        "resume minimal",
        "session/resume",
        "request",
        ResumeSessionRequest("sess_1", "/p"),
        ALL,
        "ResumeSessionRequest",
    ),
    Case(
        "resume full v1",
        "session/resume",
        "request",
        ResumeSessionRequest("sess_1", "/p", MCP_V1, ("/q",), meta=META),
        V1_ONLY,
        "ResumeSessionRequest",
    ),
    Case(
        "resume replay v2",
        "session/resume",
        "request",
        ResumeSessionRequest("sess_1", "/p", MCP_V2, ("/q",), replay_from=ReplayFromStart(), meta=META),
        V2_ONLY,
        "ResumeSessionRequest",
    ),
    Case("close", "session/close", "request", CloseSessionRequest("sess_1", meta=META), ALL, "CloseSessionRequest"),
    Case("delete", "session/delete", "request", DeleteSessionRequest("sess_1"), ALL, "DeleteSessionRequest"),
    Case("list minimal", "session/list", "request", ListSessionsRequest(), ALL, "ListSessionsRequest"),
    Case(
        "list full",
        "session/list",
        "request",
        ListSessionsRequest(cwd="/p", cursor="c2", meta=META),
        ALL,
        "ListSessionsRequest",
    ),
    Case("fork minimal", "session/fork", "request", ForkSessionRequest("sess_1", "/p"), ALL, "ForkSessionRequest"),
    Case(
        "fork full v1",
        "session/fork",
        "request",
        ForkSessionRequest("sess_1", "/p", MCP_V1, ("/q",), meta=META),
        V1_ONLY,
        "ForkSessionRequest",
    ),
    Case(
        "fork full v2",
        "session/fork",
        "request",
        ForkSessionRequest("sess_1", "/p", MCP_V2, ("/q",), meta=META),
        V2_ONLY,
        "ForkSessionRequest",
    ),
    Case(
        "status",
        "session/status",
        "request",
        SessionStatusRequest("sess_1", meta=META),
        NEWER,
        "SessionStatusRequest",
    ),
    # turns
    Case("prompt", "session/prompt", "request", PromptRequest("sess_1", PROMPT, meta=META), ALL, "PromptRequest"),
    Case(
        "cancel",
        "session/cancel",
        "notification",
        CancelNotification("sess_1"),
        ALL,
        {
            "v1": "CancelNotification",
            "s1": "CancelNotification",
            "v2": "CancelSessionNotification",
            "s2": "CancelSessionNotification",
        },
    ),
    Case(
        "cancel request (int)",
        "$/cancel_request",
        "notification",
        CancelRequestNotification(7),
        ALL,
        "CancelRequestNotification",
    ),
    Case(
        "cancel request (str)",
        "$/cancel_request",
        "notification",
        CancelRequestNotification("req-7", meta=META),
        ALL,
        "CancelRequestNotification",
    ),
    Case(
        "set mode",
        "session/set_mode",
        "request",
        SetSessionModeRequest("sess_1", "architect"),
        V1_ONLY,
        "SetSessionModeRequest",
    ),
    Case(
        "set config option (value id)",
        "session/set_config_option",
        "request",
        SetSessionConfigOptionRequest("sess_1", "model", "fast"),
        ALL,
        "SetSessionConfigOptionRequest",
    ),
    Case(
        "set config option (boolean)",
        "session/set_config_option",
        "request",
        SetSessionConfigOptionRequest("sess_1", "thinking", True, meta=META),
        ALL,
        "SetSessionConfigOptionRequest",
    ),
    # the client's answers to agent requests
    Case(
        "permission selected",
        "session/request_permission",
        "response",
        RequestPermissionResponse(SelectedPermissionOutcome("allow-once", meta=META)),
        ALL,
        "RequestPermissionResponse",
    ),
    Case(
        "permission cancelled",
        "session/request_permission",
        "response",
        RequestPermissionResponse(CancelledPermissionOutcome(), meta=META),
        ALL,
        "RequestPermissionResponse",
    ),
    Case(
        "read file", "fs/read_text_file", "response", ReadTextFileResponse("line 1\n"), V1_ONLY, "ReadTextFileResponse"
    ),
    Case("write file", "fs/write_text_file", "response", WriteTextFileResponse(), V1_ONLY, "WriteTextFileResponse"),
    Case(
        "create terminal",
        "terminal/create",
        "response",
        CreateTerminalResponse("term_1"),
        V1_ONLY,
        "CreateTerminalResponse",
    ),
    Case(
        "terminal output (running)",
        "terminal/output",
        "response",
        TerminalOutputResponse("building...", False),
        V1_ONLY,
        "TerminalOutputResponse",
    ),
    Case(
        "terminal output (exited)",
        "terminal/output",
        "response",
        TerminalOutputResponse("done", True, TerminalExitStatus(exit_code=0), meta=META),
        V1_ONLY,
        "TerminalOutputResponse",
    ),
    Case(
        "wait for exit (code)",
        "terminal/wait_for_exit",
        "response",
        WaitForTerminalExitResponse(exit_code=2),
        V1_ONLY,
        "WaitForTerminalExitResponse",
    ),
    Case(
        "wait for exit (signal)",
        "terminal/wait_for_exit",
        "response",
        WaitForTerminalExitResponse(signal="SIGKILL"),
        V1_ONLY,
        "WaitForTerminalExitResponse",
    ),
    Case("kill terminal", "terminal/kill", "response", KillTerminalCommandResponse(), V1_ONLY, "KillTerminalResponse"),
    Case(
        "release terminal",
        "terminal/release",
        "response",
        ReleaseTerminalResponse(),
        V1_ONLY,
        "ReleaseTerminalResponse",
    ),
    Case(
        "elicitation accept",
        "elicitation/create",
        "response",
        CreateElicitationResponse("accept", {"name": "Ada", "age": 36}),
        ALL,
        "CreateElicitationResponse",
    ),
    Case(
        "elicitation decline",
        "elicitation/create",
        "response",
        CreateElicitationResponse("decline"),
        ALL,
        "CreateElicitationResponse",
    ),
    Case(
        "elicitation cancel",
        "elicitation/create",
        "response",
        CreateElicitationResponse("cancel", meta=META),
        ALL,
        "CreateElicitationResponse",
    ),
]

PARAMS = [pytest.param(case, key, id=f"{case.label} [{key}]") for case in CASES for key in case.sets]


def _envelope(case: Case, payload: Any) -> tuple[dict[str, Any], str | None]:
    if case.kind == "request":
        return {"jsonrpc": "2.0", "id": 7, "method": case.method, "params": payload}, "ClientRequest"
    if case.kind == "notification":
        message = {"jsonrpc": "2.0", "method": case.method, "params": payload}
        return message, (None if case.method.startswith("$/") else "ClientNotification")
    return {"jsonrpc": "2.0", "id": 7, "result": payload}, "ClientResponse"


@pytest.mark.parametrize(("case", "key"), PARAMS)
def test_encoded_message_validates(case: Case, key: str) -> None:
    payload = to_wire(case.value, protocol_version=_schemas.version_of(key))
    _schemas.assert_valid(key, case.def_for(key), payload)
    message, envelope_def = _envelope(case, payload)
    if envelope_def is not None:
        inner = {k: v for k, v in message.items() if k != "jsonrpc"}
        _schemas.assert_valid(key, envelope_def, inner)
    _schemas.assert_valid(key, None, message)


def test_every_method_is_covered_in_each_version_that_has_it() -> None:
    """Guard the table: the methods the client sends all appear, for v1 and v2."""
    by_version: dict[int, set[str]] = {1: set(), 2: set()}
    for case in CASES:
        for key in case.sets:
            by_version[_schemas.version_of(key)].add(case.method)
    common = {
        "initialize", "session/new", "session/resume", "session/close", "session/list", "session/fork",
        "session/delete", "session/status", "session/prompt", "session/cancel", "$/cancel_request",
        "session/set_config_option", "session/request_permission", "elicitation/create",
    }  # fmt: skip
    v1_only = {
        "session/load", "session/set_mode", "fs/read_text_file", "fs/write_text_file", "terminal/create",
        "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release",
    }  # fmt: skip
    assert by_version[1] >= common | v1_only
    assert by_version[2] >= common


def test_encoding_omits_unset_optionals_and_never_writes_null() -> None:
    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for member in value.values():
                assert member is not None
                walk(member)
        elif isinstance(value, list):
            for member in value:
                walk(member)

    for case in CASES:
        for version in (1, 2):
            walk(to_wire(case.value, protocol_version=version))
    assert to_wire(ListSessionsRequest()) == {}
    assert to_wire(NewSessionRequest("/p")) == {"cwd": "/p", "mcpServers": []}


def test_version_specific_shapes() -> None:
    assert to_wire(InitializeRequest(1, INFO, FULL_CAPS)) == {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
            "elicitation": {"form": {}, "url": {}},
            "auth": {"terminal": True},
            "_meta": META,
        },
        "clientInfo": {"name": "editor", "version": "1.2.3", "title": "Editor"},
    }
    assert to_wire(InitializeRequest(2, INFO, FULL_CAPS), protocol_version=2) == {
        "protocolVersion": 2,
        "info": {"name": "editor", "version": "1.2.3", "title": "Editor"},
        "capabilities": {"elicitation": {"form": {}, "url": {}}, "auth": {"terminal": {}}, "_meta": META},
    }
    # v2 requires "info": the SDK's own identity is sent when the app gave none
    assert to_wire(InitializeRequest(2), protocol_version=2)["info"]["name"] == "acp-reconnect"
    # stdio MCP servers are untagged in v1 and tagged in v2
    stdio = McpServerStdio("files", "/bin/mcp")
    assert to_wire(stdio, protocol_version=1) == {"name": "files", "command": "/bin/mcp", "args": [], "env": []}
    assert to_wire(stdio, protocol_version=2)["type"] == "stdio"
    # replayFrom exists in v2 only
    resume = ResumeSessionRequest("s", "/p", replay_from=ReplayFromStart())
    assert "replayFrom" not in to_wire(resume, protocol_version=1)
    assert to_wire(resume, protocol_version=2)["replayFrom"] == {"type": "start"}
    # config option values: untagged value ids in v1, "id" in v2, "boolean" in both
    assert to_wire(SetSessionConfigOptionRequest("s", "m", "fast"), protocol_version=1) == {
        "sessionId": "s",
        "configId": "m",
        "value": "fast",
    }
    assert to_wire(SetSessionConfigOptionRequest("s", "m", "fast"), protocol_version=2)["type"] == "id"
    assert to_wire(SetSessionConfigOptionRequest("s", "t", False), protocol_version=1)["type"] == "boolean"
    # required members are written even when empty or false
    assert to_wire(TerminalOutputResponse("", False)) == {"output": "", "truncated": False}
    assert to_wire(RequestPermissionResponse(CancelledPermissionOutcome())) == {"outcome": {"outcome": "cancelled"}}


def test_to_wire_accepts_lists_and_tuples() -> None:
    blocks = [TextContent("a"), TextContent("b")]
    assert to_wire(blocks) == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert to_wire(tuple(blocks)) == to_wire(blocks)


@pytest.mark.parametrize("key", ALL)
def test_the_validator_rejects_what_the_schema_forbids(key: str) -> None:
    """The checks above are not vacuous: a missing required member or a wrong type is caught."""
    assert _schemas.errors(key, "NewSessionRequest", {"mcpServers": []})
    assert _schemas.errors(key, "PromptRequest", {"sessionId": "s", "prompt": [{"type": "text"}]})
    assert _schemas.errors(key, "CancelRequestNotification", {"requestId": [1]})
    assert _schemas.errors(key, "ClientResponse", {"id": 1})
