"""Property tests over values generated from the schema definitions of all four schema sets.

For session updates, content blocks, the responses the client decodes and the requests the agent
sends it: decoding never raises anything but :class:`InvalidMessage`; decode → encode → decode is
stable; the encoding is JSON-ready; the hot path agrees with the converter; and when the input was
valid against its schema definition, so is the re-encoding.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_client._codec import (
    decode_session_notification,
    decode_update_params,
    from_wire,
    to_wire,
)
from acp_client.exceptions import InvalidMessage
from acp_client.types import (
    CloseSessionResponse,
    CompleteElicitationNotification,
    ContentBlock,
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
from tests.codec import _schemas
from tests.codec._strategies import SchemaStrategies

SCALE = float(os.environ.get("ACP_TYPES_EXAMPLES_SCALE", "1"))  # raise for a longer local run


def _settings(examples: int) -> settings:
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


SETTINGS = _settings(100)

# $defs name -> class (the name of the session/update params differs between v1 and v2)
UPDATES = {"SessionNotification", "UpdateSessionNotification"}
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


def _decoder(name: str, version: int) -> Callable[[Any], Any]:
    if name == "ContentBlock":
        return lambda data: from_wire(ContentBlock, data, protocol_version=version)
    cls = TARGETS[name]
    return lambda data: from_wire(cls, data, protocol_version=version)


def _check(key: str, name: str, instance: Any) -> None:
    version = _schemas.version_of(key)
    decode = _decoder(name, version)
    try:
        value = decode(instance)
    except InvalidMessage:
        if name in UPDATES:
            with pytest.raises(InvalidMessage):
                decode_session_notification(instance, protocol_version=version)
            with pytest.raises(InvalidMessage):
                decode_update_params(instance, protocol_version=version)
        return
    if name in UPDATES:
        assert decode_session_notification(instance, protocol_version=version) == value  # the hot path agrees
        assert decode_update_params(instance, protocol_version=version) == (value.session_id, value.update)
    encoded = to_wire(value, protocol_version=version)
    json.dumps(encoded, allow_nan=False)  # JSON-ready
    assert decode(encoded) == value  # stable
    assert to_wire(decode(encoded), protocol_version=version) == encoded
    if not _schemas.errors(key, name, instance):
        _schemas.assert_valid(key, name, encoded)


def _instances(key: str, names: list[str]) -> st.SearchStrategy[tuple[str, Any]]:
    """(definition, instance) pairs: valid-ish instances, and ones with garbage in optional members."""
    valid = SchemaStrategies(key)
    garbage = SchemaStrategies(key, garbage=True)
    return st.one_of(
        [
            strategies.for_def(name).map(lambda instance, name=name: (name, instance))
            for name in names
            for strategies in (valid, garbage)
        ]
    )


KEYS = list(_schemas.SCHEMA_SETS)


@pytest.mark.parametrize("key", KEYS)
def test_session_updates(key: str) -> None:
    names = [name for name in UPDATES if _schemas.has_def(key, name)]

    @_settings(80)
    @given(_instances(key, names))
    def check(pair: tuple[str, Any]) -> None:
        _check(key, *pair)

    check()


@pytest.mark.parametrize("key", KEYS)
def test_content_blocks(key: str) -> None:
    @_settings(40)
    @given(_instances(key, ["ContentBlock"]))
    def check(pair: tuple[str, Any]) -> None:
        _check(key, *pair)

    check()


@pytest.mark.parametrize("key", KEYS)
def test_responses_and_agent_requests(key: str) -> None:
    names = [name for name in TARGETS if name not in UPDATES and _schemas.has_def(key, name)]

    @_settings(120)
    @given(_instances(key, names))
    def check(pair: tuple[str, Any]) -> None:
        _check(key, *pair)

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
    with contextlib.suppress(InvalidMessage):
        from_wire(TARGETS[name], data, protocol_version=version)
