"""Pure tests of JSON-RPC framing (no event loop)."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_client._codec import _jsonrpc
from acp_client._codec._jsonrpc import ErrorResponse, Notification, Request, Response, classify, decode_frame
from acp_client.exceptions import MalformedFrame


def test_decode_object_and_batch() -> None:
    assert decode_frame('{"jsonrpc":"2.0","method":"x"}') == {"jsonrpc": "2.0", "method": "x"}
    assert decode_frame(b'[{"a":1}]') == [{"a": 1}]
    assert decode_frame("[]") == []


@pytest.mark.parametrize(
    "frame",
    [
        "not json",
        "{",
        "42",
        '"a string"',
        "null",
        "true",
        b"\xff\xfe",
        "[" * 5000 + "]" * 5000,
        '{"a":' * 5000 + "1" + "}" * 5000,
        '{"id":' + "9" * 5000 + "}",
        "1" * 5000,
    ],
)
def test_decode_rejects_with_malformed_frame(frame: str | bytes) -> None:
    with pytest.raises(MalformedFrame) as info:
        decode_frame(frame)
    assert len(info.value.excerpt) <= 200


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {}}, Request(1, "m", {})),
        ({"jsonrpc": "2.0", "id": "a", "method": "m"}, Request("a", "m", None)),
        ({"jsonrpc": "2.0", "method": "n", "params": [1]}, Notification("n", [1])),
        ({"jsonrpc": "2.0", "id": 3, "result": None}, Response(3, None)),
        (
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "bad"}},
            ErrorResponse(None, -32700, "bad", None),
        ),
        (
            {"jsonrpc": "2.0", "id": 4, "error": {"code": -32002, "message": "nf", "data": {"sessionId": "s"}}},
            ErrorResponse(4, -32002, "nf", {"sessionId": "s"}),
        ),
    ],
)
def test_classify(message: dict[str, object], expected: object) -> None:
    assert classify(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        [],
        42,
        {"id": 1, "method": "m"},
        {"jsonrpc": "1.0", "id": 1, "method": "m"},
        {"jsonrpc": "2.0", "id": True, "method": "m"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "m"},
        {"jsonrpc": "2.0", "method": 5},
        {"jsonrpc": "2.0", "method": "m", "params": "x"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": ""}},
        {"jsonrpc": "2.0", "id": 1, "error": "boom"},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": ""}},
        {"jsonrpc": "2.0", "id": None, "result": {}},
        {"jsonrpc": "2.0"},
    ],
)
def test_classify_rejects(message: object) -> None:
    with pytest.raises(MalformedFrame):
        classify(message)


def test_builders_omit_absent_params() -> None:
    assert _jsonrpc.request_message(1, "m") == {"jsonrpc": "2.0", "id": 1, "method": "m"}
    assert _jsonrpc.notification_message("n") == {"jsonrpc": "2.0", "method": "n"}
    assert _jsonrpc.result_message(1, None) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert _jsonrpc.error_message(1, -1, "x") == {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "x"}}


def test_encode_is_compact_and_keeps_unicode() -> None:
    assert _jsonrpc.encode({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}'
    with pytest.raises(ValueError):
        _jsonrpc.encode({"a": float("nan")})


def test_ids_increase() -> None:
    ids = _jsonrpc.IdAllocator()
    assert [ids(), ids(), ids()] == [0, 1, 2]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_any_json_decodes_or_is_rejected_cleanly(value: object) -> None:
    text = json.dumps(value)
    try:
        decoded = decode_frame(text)
    except MalformedFrame:
        assert not isinstance(value, dict | list)
        return
    with contextlib.suppress(MalformedFrame):
        classify(decoded)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_escape_as_other_errors(data: bytes) -> None:
    with contextlib.suppress(MalformedFrame):
        decode_frame(data)


@pytest.fixture(params=["msgspec", "stdlib"])
def decoder_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "stdlib":
        monkeypatch.setattr(_jsonrpc, "_fast_loads", None)
    else:
        assert _jsonrpc._fast_loads is not None, "msgspec (the speed extra) is part of the dev install"
    return str(request.param)


@pytest.mark.parametrize(
    "frame",
    [
        "garbage",
        "42",
        "[" * 5000 + "]" * 5000,
        '{"n":' + "1" * 5000 + "}",
        '{"a":NaN}',
        '{"s":"\\ud800"}',
        '{"big":123456789012345678901234567890}',
        '{"a":1,"a":2}',
        b"\xff",
        '{"f":1e400}',
    ],
)
def test_the_fast_path_accepts_and_refuses_exactly_like_the_stdlib(frame: str | bytes, decoder_mode: str) -> None:
    try:
        expected: object = json.loads(frame)
    except (ValueError, RecursionError):
        expected = MalformedFrame
    try:
        got: object = decode_frame(frame)
    except MalformedFrame:
        got = MalformedFrame
    if expected is not MalformedFrame and not isinstance(expected, dict | list):
        expected = MalformedFrame
    assert got == expected or (got != got and expected != expected)


@given(_json)
def test_the_fast_path_matches_the_stdlib_on_any_json(value: object) -> None:
    text = json.dumps(value)
    original = _jsonrpc._fast_loads
    try:
        fast = decode_frame(text) if isinstance(value, dict | list) else None
        _jsonrpc._fast_loads = None
        slow = decode_frame(text) if isinstance(value, dict | list) else None
    finally:
        _jsonrpc._fast_loads = original
    assert fast == slow


@given(st.text(alphabet='{}[]":,0123456789.eE-+ntrufalsx\\u\t\n\ufeff\ud800', max_size=40) | st.binary(max_size=40))
def test_the_fast_path_agrees_with_the_stdlib_on_any_input(frame: str | bytes) -> None:
    def outcome() -> object:
        try:
            return decode_frame(frame)
        except MalformedFrame:
            return MalformedFrame

    original = _jsonrpc._fast_loads
    try:
        fast = outcome()
        _jsonrpc._fast_loads = None
        slow = outcome()
    finally:
        _jsonrpc._fast_loads = original
    assert fast == slow or (fast != fast and slow != slow)
