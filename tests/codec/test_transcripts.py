"""Every message of the wire recordings decodes into the right typed value.

The recordings come from agents built on the official SDKs (Python 0.12.1 v1, TypeScript 2.4.0 v1
and v2). Requests the client sent also re-encode to exactly what was recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from acp_client._codec import decode_session_notification, from_wire, to_wire
from acp_client.exceptions import RpcError, SessionNotFound
from acp_client.types import (
    AgentMessage,
    AgentMessageChunk,
    ForegroundState,
    InitializeRequest,
    InitializeResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    Probe,
    PromptRequest,
    PromptResponse,
    ReplayFromStart,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SessionStatusRequest,
    SessionStatusResponse,
    StateUpdate,
    TextContent,
    UnknownContent,
    UnknownSessionUpdate,
    UserMessage,
    UserMessageChunk,
)
from tests.codec import _schemas

REQUESTS: dict[str, type] = {
    "initialize": InitializeRequest,
    "session/new": NewSessionRequest,
    "session/load": LoadSessionRequest,
    "session/resume": ResumeSessionRequest,
    "session/status": SessionStatusRequest,
    "session/prompt": PromptRequest,
}
RESULTS: dict[str, type] = {
    "initialize": InitializeResponse,
    "session/new": NewSessionResponse,
    "session/load": LoadSessionResponse,
    "session/resume": ResumeSessionResponse,
    "session/status": SessionStatusResponse,
    "session/prompt": PromptResponse,
}
NAMES = {path.name: path for path in _schemas.TRANSCRIPTS}


def _no_unknowns(value: Any) -> None:
    """No ``Unknown...`` value anywhere inside ``value``."""
    assert not isinstance(value, UnknownSessionUpdate | UnknownContent), value
    if attrs.has(type(value)):
        for field in attrs.fields(type(value)):
            _no_unknowns(getattr(value, field.name))
    elif isinstance(value, tuple | list):
        for item in value:
            _no_unknowns(item)


def _decode_all(path: Path) -> list[tuple[str, str, Any]]:
    """(direction, method, decoded value) for every recorded message."""
    version = _schemas.transcript_version(path)
    pending: dict[tuple[int, Any], str] = {}
    decoded: list[tuple[str, str, Any]] = []
    for line in _schemas.transcript_messages(path):
        msg, conn = line["msg"], line["conn"]
        if line["dir"] == "c2a":
            method = msg["method"]
            pending[(conn, msg["id"])] = method
            value = from_wire(REQUESTS[method], msg["params"], protocol_version=version)
            assert to_wire(value, protocol_version=version) == msg["params"], method
            decoded.append(("c2a", method, value))
        elif "method" in msg:
            assert msg["method"] == "session/update"
            decoded.append(
                ("a2c", "session/update", decode_session_notification(msg["params"], protocol_version=version))
            )
        else:
            method = pending.pop((conn, msg["id"]))
            if "error" in msg:
                error = msg["error"]
                decoded.append(("a2c", method, RpcError.from_error(error["code"], error["message"], error.get("data"))))
            else:
                decoded.append(("a2c", method, from_wire(RESULTS[method], msg["result"], protocol_version=version)))
    assert not pending
    return decoded


@pytest.mark.parametrize("path", _schemas.TRANSCRIPTS, ids=lambda p: p.name)
def test_every_message_decodes_to_its_type(path: Path) -> None:
    decoded = _decode_all(path)
    assert len(decoded) >= 30
    for direction, method, value in decoded:
        if isinstance(value, RpcError):
            assert isinstance(value, SessionNotFound)
            assert value.session_id is not None
            continue
        expected = REQUESTS[method] if direction == "c2a" else RESULTS.get(method)
        if expected is not None:
            assert type(value) is expected
        _no_unknowns(value)


@pytest.mark.parametrize("path", _schemas.TRANSCRIPTS, ids=lambda p: p.name)
def test_initialize_capabilities(path: Path) -> None:
    version = _schemas.transcript_version(path)
    inits = [v for d, m, v in _decode_all(path) if m == "initialize" and d == "a2c"]
    assert len(inits) == 3
    for init in inits:
        assert init.protocol_version == version
        assert init.agent_info is not None and init.agent_info.name == "echo-agent"
        caps = init.agent_capabilities
        assert caps.supports("session/status")
        assert caps.supports("session/resume")
        if version == 1:
            assert caps.load_session and caps.supports("session/load")
            assert caps.session.close and caps.session.list
            assert caps.capability_path("session/status", 1) == "agentCapabilities.sessionCapabilities.status"
        else:
            assert not caps.supports("session/load")
            assert caps.capability_path("session/status", 2) == "capabilities.session.status"
        assert not caps.supports("session/fork")


def test_python_sdk_v1_statuses_and_prompt() -> None:
    decoded = _decode_all(NAMES["python-sdk-0.12.1-v1-ws.jsonl"])
    statuses = [v for d, m, v in decoded if m == "session/status" and d == "a2c" and not isinstance(v, RpcError)]
    assert [(s.status, s.raw_status) for s in statuses] == [
        (Probe.ACTIVE, "active"),
        (Probe.ACTIVE, "active"),
        (Probe.INACTIVE, "inactive"),
        (Probe.ACTIVE, "active"),
    ]
    assert all(s.state is None for s in statuses)
    (prompt,) = [v for d, m, v in decoded if m == "session/prompt" and d == "a2c"]
    assert prompt == PromptResponse(stop_reason="end_turn")
    updates = [v.update for d, m, v in decoded if m == "session/update"]
    assert updates[:3] == [AgentMessageChunk(TextContent(t)) for t in ("echo: ", "hello ", "there ")]
    assert updates[3] == UserMessageChunk(TextContent("hello there"))  # replayed by session/load


def test_typescript_sdk_v1_open_and_saved() -> None:
    decoded = _decode_all(NAMES["typescript-sdk-2.4.0-v1-ws.jsonl"])
    statuses = [v for d, m, v in decoded if m == "session/status" and d == "a2c" and not isinstance(v, RpcError)]
    assert [(s.status, s.raw_status) for s in statuses] == [
        (Probe.ACTIVE, "open"),
        (Probe.ACTIVE, "open"),
        (Probe.INACTIVE, "saved"),
        (Probe.ACTIVE, "open"),
    ]
    inits = [v for d, m, v in decoded if m == "initialize" and d == "a2c"]
    assert inits[0].agent_info.title == "echo-agent (TypeScript SDK 2.4.0)"


def test_typescript_sdk_v2_messages_states_and_replay() -> None:
    decoded = _decode_all(NAMES["typescript-sdk-2.4.0-v2-ws.jsonl"])
    statuses = [v for d, m, v in decoded if m == "session/status" and d == "a2c" and not isinstance(v, RpcError)]
    assert [(s.status, s.raw_status, s.state) for s in statuses] == [
        (Probe.ACTIVE, "open", ForegroundState("idle", raw={"state": "idle"})),
        (Probe.ACTIVE, "open", ForegroundState("idle", raw={"state": "idle"})),
        (Probe.INACTIVE, "saved", None),
        (Probe.ACTIVE, "open", ForegroundState("idle", raw={"state": "idle"})),
    ]
    (prompt,) = [v for d, m, v in decoded if m == "session/prompt" and d == "a2c"]
    assert prompt == PromptResponse(message_id="msg_00f155cac75d")
    updates = [v.update for d, m, v in decoded if m == "session/update"]
    assert updates[0] == UserMessage("msg_00f155cac75d", (TextContent("hello there"),))
    assert updates[1] == StateUpdate("running")
    assert [u.message_id for u in updates[2:5]] == ["msg_8676837fd1cd"] * 3
    assert updates[5] == StateUpdate("idle", stop_reason="end_turn")
    # the replay after the restart: full messages (upserts), then the state before the resume answer
    assert updates[6] == UserMessage("msg_00f155cac75d", (TextContent("hello there"),))
    assert updates[7] == AgentMessage("msg_8676837fd1cd", (TextContent("echo: hello there"),))
    assert updates[8] == StateUpdate("idle")
    resumes = [v for d, m, v in decoded if m == "session/resume" and d == "c2a"]
    assert resumes[0].replay_from == ReplayFromStart()
    assert resumes[1].replay_from is None
