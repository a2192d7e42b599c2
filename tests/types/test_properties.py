"""Property tests over values generated from the schema definitions of all four schema sets.

For session updates, content blocks, the responses the client decodes and the requests the agent
sends it: decoding never raises anything but :class:`InvalidMessage`; decode → encode → decode is
stable; the encoding is JSON-ready; the hot path agrees with the converter; and when the input was
valid against its schema definition, so is the re-encoding.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_client._converter import decode_content_block, decode_session_notification, from_wire, to_wire
from acp_client.exceptions import InvalidMessage
from acp_client.types import (
    CloseSessionResponse,
    CompleteElicitationNotification,
    CreateElicitationRequest,
    CreateTerminalRequest,
    ForkSessionResponse,
    InitializeResponse,
    KillTerminalCommandRequest,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    ReadTextFileRequest,
    ReleaseTerminalRequest,
    RequestPermissionRequest,
    ResumeSessionResponse,
    SessionNotification,
    SessionStatusResponse,
    SetSessionConfigOptionResponse,
    TerminalOutputRequest,
    WaitForTerminalExitRequest,
    WriteTextFileRequest,
)

from . import _schemas
from ._strategies import SchemaStrategies

EXAMPLES = int(os.environ.get("ACP_TYPES_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# $defs name -> class (the name of the session/update params differs between v1 and v2)
TARGETS: dict[str, type] = {
    "SessionNotification": SessionNotification,
    "UpdateSessionNotification": SessionNotification,
    "InitializeResponse": InitializeResponse,
    "NewSessionResponse": NewSessionResponse,
    "LoadSessionResponse": LoadSessionResponse,
    "ResumeSessionResponse": ResumeSessionResponse,
    "ForkSessionResponse": ForkSessionResponse,
    "ListSessionsResponse": ListSessionsResponse,
    "SessionStatusResponse": SessionStatusResponse,
    "PromptResponse": PromptResponse,
    "SetSessionConfigOptionResponse": SetSessionConfigOptionResponse,
    "CloseSessionResponse": CloseSessionResponse,
    "RequestPermissionRequest": RequestPermissionRequest,
    "ReadTextFileRequest": ReadTextFileRequest,
    "WriteTextFileRequest": WriteTextFileRequest,
    "CreateTerminalRequest": CreateTerminalRequest,
    "TerminalOutputRequest": TerminalOutputRequest,
    "WaitForTerminalExitRequest": WaitForTerminalExitRequest,
    "KillTerminalRequest": KillTerminalCommandRequest,
    "ReleaseTerminalRequest": ReleaseTerminalRequest,
    "CreateElicitationRequest": CreateElicitationRequest,
    "CompleteElicitationNotification": CompleteElicitationNotification,
}

PAIRS = [
    pytest.param(key, name, id=f"{key}-{name}")
    for key in _schemas.SCHEMA_SETS
    for name in [*TARGETS, "ContentBlock"]
    if _schemas.has_def(key, name)
]


def _decoder(name: str, version: int) -> Callable[[Any], Any]:
    if name == "ContentBlock":
        return lambda data: decode_content_block(data, protocol_version=version)
    cls = TARGETS[name]
    return lambda data: from_wire(cls, data, protocol_version=version)


def _check(key: str, name: str, instance: Any) -> None:
    version = _schemas.version_of(key)
    decode = _decoder(name, version)
    try:
        value = decode(instance)
    except InvalidMessage:
        if TARGETS.get(name) is SessionNotification:
            with pytest.raises(InvalidMessage):
                decode_session_notification(instance, protocol_version=version)
        return
    if TARGETS.get(name) is SessionNotification:
        assert decode_session_notification(instance, protocol_version=version) == value  # the hot path agrees
    encoded = to_wire(value, protocol_version=version)
    json.dumps(encoded, allow_nan=False)  # JSON-ready
    assert decode(encoded) == value  # stable
    assert to_wire(decode(encoded), protocol_version=version) == encoded
    if not _schemas.errors(key, name, instance):
        _schemas.assert_valid(key, name, encoded)


@pytest.mark.parametrize(("key", "name"), PAIRS)
def test_generated_valid_instances(key: str, name: str) -> None:
    strategy = SchemaStrategies(key).for_def(name)

    @SETTINGS
    @given(strategy)
    def check(instance: Any) -> None:
        _check(key, name, instance)

    check()


@pytest.mark.parametrize(("key", "name"), PAIRS)
def test_generated_instances_with_garbage(key: str, name: str) -> None:
    """Random JSON in optional members, unknown members and tags: still only InvalidMessage."""
    strategy = SchemaStrategies(key, garbage=True).for_def(name)

    @SETTINGS
    @given(strategy)
    def check(instance: Any) -> None:
        _check(key, name, instance)

    check()


@SETTINGS
@given(
    st.sampled_from(sorted(TARGETS)),
    st.integers(1, 2),
    st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=8,
    ),
)
def test_arbitrary_json_only_ever_raises_invalid_message(name: str, version: int, data: Any) -> None:
    try:
        from_wire(TARGETS[name], data, protocol_version=version)
    except InvalidMessage:
        pass
