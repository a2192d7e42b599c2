"""The error tree's JSON-RPC side: ``RpcError.from_error`` builds the subclass declared for a code."""

from __future__ import annotations

from acp_client.exceptions import InvalidParams, RpcError, SessionNotFound


class _ByKeyword(RpcError, code=-32990, message="Declared by keyword"):
    pass


class _ByAttribute(RpcError):
    code = -32991
    default_message = "Declared as attributes"


def test_the_built_in_codes_build_their_subclasses() -> None:
    assert type(RpcError.from_error(-32002, "gone")) is SessionNotFound
    assert type(RpcError.from_error(-32602)) is InvalidParams


def test_a_subclass_declared_either_way_is_the_one_from_error_builds() -> None:
    keyword = RpcError.from_error(-32990)
    attribute = RpcError.from_error(-32991, None, {"why": 1})
    assert type(keyword) is _ByKeyword and keyword.message == "Declared by keyword"
    assert type(attribute) is _ByAttribute and attribute.message == "Declared as attributes"
    assert attribute.to_wire() == {"code": -32991, "message": "Declared as attributes", "data": {"why": 1}}


def test_an_unlisted_code_is_a_plain_rpc_error_with_that_code() -> None:
    error = RpcError.from_error(-31999, "custom")
    assert type(error) is RpcError and error.code == -31999 and str(error) == "custom (code -31999)"
