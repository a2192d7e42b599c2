"""Examples round-trip: decode → encode gives back the example (modulo key order and omitted defaults).

Sources: every ``examples`` / ``example`` in the four schema sets (the current schemas carry none;
the collector is kept so examples added later are checked), the JSON examples of the
``session/status`` proposal, and every payload of the wire recordings.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_client._codec import from_wire, to_wire
from acp_client.exceptions import RpcError, SessionNotFound
from acp_client.types import (
    AgentCapabilities,
    InitializeRequest,
    InitializeResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    Probe,
    PromptRequest,
    PromptResponse,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SessionNotification,
    SessionStatusRequest,
    SessionStatusResponse,
)
from tests.codec import _schemas

# $defs name -> class, for examples found in the schemas
MODELED: dict[str, type] = {
    "InitializeRequest": InitializeRequest,
    "InitializeResponse": InitializeResponse,
    "NewSessionRequest": NewSessionRequest,
    "NewSessionResponse": NewSessionResponse,
    "LoadSessionRequest": LoadSessionRequest,
    "LoadSessionResponse": LoadSessionResponse,
    "ResumeSessionRequest": ResumeSessionRequest,
    "ResumeSessionResponse": ResumeSessionResponse,
    "PromptRequest": PromptRequest,
    "PromptResponse": PromptResponse,
    "SessionNotification": SessionNotification,
    "UpdateSessionNotification": SessionNotification,
    "SessionStatusRequest": SessionStatusRequest,
    "SessionStatusResponse": SessionStatusResponse,
}
EMPTY_DEFAULTS: tuple[Any, ...] = (None, [], {}, False)


def assert_round_trip(original: Any, encoded: Any, path: str = "$") -> None:
    """``encoded`` equals ``original`` except for members ``original`` had at an empty default."""
    if isinstance(original, dict):
        assert isinstance(encoded, dict), path
        for key, value in original.items():
            if key in encoded:
                assert_round_trip(value, encoded[key], f"{path}.{key}")
            else:
                assert value in EMPTY_DEFAULTS, f"{path}.{key} = {value!r} was dropped"
        assert set(encoded) <= set(original), f"{path}: members added: {set(encoded) - set(original)}"
    elif isinstance(original, list):
        assert isinstance(encoded, list) and len(encoded) == len(original), path
        for index, (a, b) in enumerate(zip(original, encoded, strict=True)):
            assert_round_trip(a, b, f"{path}[{index}]")
    else:
        assert encoded == original, path


def _examples_in(definitions: dict[str, dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(schema set, definition, example) for every example under a modeled definition."""
    found: list[tuple[str, str, Any]] = []

    def walk(node: Any, key: str, definition: str) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                if name in ("examples", "example"):
                    for example in value if name == "examples" else [value]:
                        found.append((key, definition, example))
                else:
                    walk(value, key, definition)
        elif isinstance(node, list):
            for item in node:
                walk(item, key, definition)

    for key, defs in definitions.items():
        for definition, schema in defs.items():
            if definition in MODELED:
                walk(schema, key, definition)
    return found


def _schema_examples() -> list[tuple[str, str, Any]]:
    return _examples_in({key: _schemas.defs(key) for key in _schemas.SCHEMA_SETS})


def _seed_json_blocks() -> list[dict[str, Any]]:
    """The JSON objects written out in the ``session/status`` proposal."""
    text = (_schemas.DATA / "seeds" / "session_status_proposal.txt").read_text()
    blocks: list[dict[str, Any]] = []
    current: list[str] = []
    depth = 0
    for line in text.splitlines():
        if not current and not line.startswith("{"):
            continue
        current.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0:
            blocks.append(json.loads("\n".join(current)))
            current = []
    return blocks


def test_schema_examples_round_trip() -> None:
    """Every example the schemas give for a modeled definition round-trips (none today)."""
    for key, definition, example in _schema_examples():
        version = _schemas.version_of(key)
        value = from_wire(MODELED[definition], example, protocol_version=version)
        assert_round_trip(example, to_wire(value, protocol_version=version))


def test_schema_example_collector_finds_examples() -> None:
    """The collector is not vacuous: it finds examples placed in a modeled definition."""
    synthetic = {
        "v1": {
            "PromptRequest": {"properties": {"prompt": {"example": [{"type": "text", "text": "x"}]}}},
            "SessionStatusRequest": {"examples": [{"sessionId": "s"}]},
            "Unmodeled": {"examples": [1]},
        }
    }
    assert _examples_in(synthetic) == [
        ("v1", "PromptRequest", [{"type": "text", "text": "x"}]),
        ("v1", "SessionStatusRequest", {"sessionId": "s"}),
    ]


def test_seed_proposal_examples() -> None:
    blocks = _seed_json_blocks()
    assert len(blocks) == 7
    seen = {"request": 0, "result": 0, "error": 0, "capabilities": 0}
    for block in blocks:
        if "method" in block:
            assert block["method"] == "session/status"
            request = from_wire(SessionStatusRequest, block["params"])
            assert request == SessionStatusRequest("sess_abc123")
            for version in (1, 2):
                assert to_wire(request, protocol_version=version) == block["params"]
            seen["request"] += 1
        elif "result" in block:
            result = block["result"]
            version = 2 if "state" in result else 1
            response = from_wire(SessionStatusResponse, result, protocol_version=version)
            assert response.raw_status == result["status"]
            assert response.status in (Probe.ACTIVE, Probe.INACTIVE)
            if version == 2:
                assert response.state is not None and response.state.state == "requires_action"
            assert to_wire(response, protocol_version=version) == result
            seen["result"] += 1
        elif "error" in block:
            error = RpcError.from_error(block["error"]["code"], block["error"]["message"], block["error"]["data"])
            assert isinstance(error, SessionNotFound) and error.session_id == "sess_abc123"
            seen["error"] += 1
        else:
            v1 = "agentCapabilities" in block
            init = from_wire(
                InitializeResponse,
                {"protocolVersion": 1 if v1 else 2, **block, **({} if v1 else {"info": {"name": "a", "version": "1"}})},
                protocol_version=1 if v1 else 2,
            )
            caps: AgentCapabilities = init.agent_capabilities
            assert caps.supports("session/status") and caps.session.status
            encoded = to_wire(init, protocol_version=1 if v1 else 2)
            assert (
                encoded["agentCapabilities" if v1 else "capabilities"]
                == block["agentCapabilities" if v1 else "capabilities"]
            )
            seen["capabilities"] += 1
    assert seen == {"request": 1, "result": 3, "error": 1, "capabilities": 2}


REQUESTS = {
    "initialize": InitializeRequest,
    "session/new": NewSessionRequest,
    "session/load": LoadSessionRequest,
    "session/resume": ResumeSessionRequest,
    "session/status": SessionStatusRequest,
    "session/prompt": PromptRequest,
}
RESULTS = {
    "initialize": InitializeResponse,
    "session/new": NewSessionResponse,
    "session/load": LoadSessionResponse,
    "session/resume": ResumeSessionResponse,
    "session/status": SessionStatusResponse,
    "session/prompt": PromptResponse,
}


def _recorded_payloads() -> list[Any]:
    cases = []
    for path in _schemas.TRANSCRIPTS:
        version = _schemas.transcript_version(path)
        methods: dict[tuple[int, Any], str] = {}
        for line in _schemas.transcript_messages(path):
            msg = line["msg"]
            if "method" in msg:
                if "id" in msg:
                    methods[(line["conn"], msg["id"])] = msg["method"]
                    cls = REQUESTS[msg["method"]]
                else:
                    cls = SessionNotification
                cases.append(pytest.param(cls, msg["params"], version, id=f"{path.stem}:{msg['method']}"))
            elif "result" in msg:
                method = methods[(line["conn"], msg["id"])]
                cases.append(pytest.param(RESULTS[method], msg["result"], version, id=f"{path.stem}:{method}:result"))
    return cases


@pytest.mark.parametrize(("cls", "payload", "version"), _recorded_payloads())
def test_recorded_payloads_round_trip(cls: type, payload: Any, version: int) -> None:
    value = from_wire(cls, payload, protocol_version=version)
    encoded = to_wire(value, protocol_version=version)
    assert_round_trip(payload, encoded)
    assert from_wire(cls, encoded, protocol_version=version) == value
