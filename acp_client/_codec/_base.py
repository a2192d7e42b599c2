"""Shared pieces of the codec: decode errors, field plumbing (wire names, defaults) and strict
primitive hooks. Knows no wire type by name."""

from __future__ import annotations

import types as _pytypes
import typing
from collections.abc import Callable
from typing import Any, Final, Union

import attrs

from .._util._logging import get_logger
from ..types import _fields

logger = get_logger("acp_client._codec")

Hook = Callable[[Any, Any], Any]


class DecodeError(Exception):
    """Internal: why a value could not be decoded (becomes :class:`InvalidMessage` at the API)."""


_KINDS: Final = (
    (type(None), "null"),
    (bool, "a boolean"),
    (int | float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


def kind_of(value: Any) -> str:
    for kind, name in _KINDS:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def union_members(tp: Any) -> tuple[tuple[Any, ...], bool] | None:
    """``(members without None, has_none)`` for a union type, else ``None``."""
    origin = typing.get_origin(tp)
    if origin is Union or isinstance(tp, _pytypes.UnionType):
        args = typing.get_args(tp)
        members = tuple(a for a in args if a is not type(None))
        return members, len(members) != len(args)
    return None


def is_tuple(tp: Any) -> bool:
    return typing.get_origin(tp) is tuple


def is_dict(tp: Any) -> bool:
    return tp is dict or typing.get_origin(tp) is dict


def camel(name: str) -> str:
    if name == "meta":
        return "_meta"
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def field_wire_name(field: attrs.Attribute[Any], version: int) -> str:
    name = field.metadata.get(_fields.NAME)
    if name is None:
        return camel(field.name)
    if isinstance(name, str):
        return name
    return str(name.get(version, camel(field.name)))


def on_wire(field: attrs.Attribute[Any], version: int) -> bool:
    versions = field.metadata.get(_fields.VERSIONS)
    return versions is None or version in versions


def default_of(field: attrs.Attribute[Any]) -> Callable[[], Any]:
    default = field.default
    factory = getattr(default, "factory", None)
    if callable(factory) and not getattr(default, "takes_self", False):  # an attrs.Factory
        return factory  # type: ignore[no-any-return]  # getattr() gives Any; it is a zero-argument factory
    return lambda: default


def is_presence(value: Any, _: Any) -> bool:
    return type(value) is dict


def presence_out(value: Any) -> Any:
    return {} if value else None


def _strict(kind: type, what: str) -> Hook:
    """A structure hook that accepts exactly ``kind`` (no ``str(5)``, no ``bool("false")``)."""

    def structure_strict(value: Any, _: Any) -> Any:
        if type(value) is kind:
            return value
        raise DecodeError(f"expected {what}, got {kind_of(value)}")

    return structure_strict


def _s_float(value: Any, _: Any) -> float:
    if type(value) is float or type(value) is int:
        return float(value)
    raise DecodeError(f"expected a number, got {kind_of(value)}")


def s_dict(value: Any, _: Any) -> dict[str, Any]:
    if type(value) is dict:
        return value
    raise DecodeError(f"expected an object, got {kind_of(value)}")


def s_any(value: Any, _: Any) -> Any:
    return value


PRIMITIVE_HOOKS: Final[dict[Any, Hook]] = {
    str: _strict(str, "a string"),
    int: _strict(int, "an integer"),
    float: _s_float,
    bool: _strict(bool, "a boolean"),
}


def reason(exc: BaseException) -> str:
    if isinstance(exc, DecodeError):
        return str(exc)
    if isinstance(exc, KeyError) and exc.args:
        return f"missing required member {exc.args[0]!r}"
    return f"{type(exc).__name__}: {exc}"


def failure(name: str, exc: BaseException) -> str:
    """The text of an :class:`InvalidMessage` about ``name``, from the failure ``exc``."""
    why = reason(exc)
    if why.startswith((f"{name}.", f"{name}:")):
        return f"cannot decode {why}"
    return f"cannot decode {name}: {why}"


def type_name(cls: Any) -> str:
    return getattr(cls, "__name__", None) or repr(cls)
