"""The generic cattrs machinery: one :class:`Builder` (a private :class:`cattrs.Converter`) per
protocol version, configured from the field declarations of :mod:`acp_client.types` (see
:mod:`acp_client.types._fields`) and the table of tagged unions below.

Hand-shaped types (``initialize``, capabilities, ``Session``...) are registered on top of it by
:mod:`._shapes`; the hot ``session/update`` variants bypass it in :mod:`._fast`.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from typing import Any, Final

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..types import _fields
from ..types.agent_requests import PermissionOutcome, PermissionSubject, UnknownPermissionOutcome
from ..types.content import BlobResourceContents, ContentBlock, TextResourceContents
from ..types.lifecycle import (
    McpServer,
    McpServerStdio,
    ReplayFrom,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
)
from ..types.updates import PlanContent, SessionUpdate, ToolCallContent
from ._base import (
    PRIMITIVE_HOOKS,
    DecodeError,
    Hook,
    default_of,
    field_wire_name,
    is_dict,
    is_presence,
    is_tuple,
    kind_of,
    logger,
    on_wire,
    presence_out,
    reason,
    s_any,
    s_dict,
    union_members,
)


@attrs.frozen
class _Union:
    """A tagged wire union: ``key`` names the tag member; ``unknown`` keeps unrecognized tags."""

    key: str
    variants: dict[str, type]
    unknown: type
    default: type | None = None  # the variant a payload without a tag is (v1 stdio MCP servers)


def _tagged(key: str, union: Any, unknown: type | None = None, default: type | None = None) -> _Union:
    """The tagged union of ``union``'s members; its last member keeps unknown tags unless ``unknown`` is given."""
    variants: tuple[type, ...] = typing.get_args(union)
    if unknown is None:
        variants, unknown = variants[:-1], variants[-1]
    tag = "kind" if key == "sessionUpdate" else key
    return _Union(key, {getattr(cls, tag): cls for cls in variants}, unknown, default)


_UNIONS: Final = (
    _tagged("type", ContentBlock),
    _tagged("type", ToolCallContent),
    _tagged("type", PlanContent),
    _tagged("type", McpServer, default=McpServerStdio),
    _tagged("type", ReplayFrom),
    _tagged("outcome", PermissionOutcome, UnknownPermissionOutcome),
    _tagged("type", PermissionSubject),
    _tagged("sessionUpdate", SessionUpdate),
)

# class -> (tag key, tag value), for encoding
_TAG_OF: Final = {cls: (u.key, tag) for u in _UNIONS for tag, cls in u.variants.items()}
# classes written without their tag in v1
_UNTAGGED_IN_V1: Final = frozenset({McpServerStdio})
# untagged unions: the variant is the first whose marker member is present
_UNTAGGED: Final = (
    ((("text", TextResourceContents), ("blob", BlobResourceContents)), "resource contents"),
    ((("options", SessionConfigSelectGroup), ("value", SessionConfigSelectOption)), "select option"),
)


def _unstructure_unknown(key: str, obj: Any) -> dict[str, Any]:
    """An unknown variant: its raw payload, with its tag (the first field) under ``key``."""
    return {**obj.raw, key: getattr(obj, attrs.fields(type(obj))[0].name)}


class Builder:
    """Builds and holds the converter of one protocol version."""

    def __init__(self, version: int) -> None:
        self.version = version
        conv = cattrs.Converter(detailed_validation=False)
        self.conv = conv
        for tp, hook in PRIMITIVE_HOOKS.items():
            conv.register_structure_hook(tp, hook)
        conv.register_structure_hook_func(lambda tp: tp is Any, s_any)
        conv.register_structure_hook_func(is_dict, s_dict)
        conv.register_structure_hook_factory(is_tuple, functools.partial(self._make_tuple_hook, skip_invalid=False))
        conv.register_structure_hook_factory(lambda tp: union_members(tp) is not None, self._union_hook)
        conv.register_structure_hook_factory(attrs.has, self.class_hook)
        conv.register_unstructure_hook_factory(attrs.has, self.class_unhook)
        for union in _UNIONS:
            conv.register_unstructure_hook(union.unknown, functools.partial(_unstructure_unknown, union.key))

    def hook(self, tp: Any) -> Hook:
        return self.conv.get_structure_hook(tp)

    @functools.cached_property
    def session_update_hook(self) -> Hook:
        """The ``SessionUpdate`` hook, looked up once (hashing the big union is not free)."""
        return self.hook(SessionUpdate)

    def _make_tuple_hook(self, tp: Any, *, skip_invalid: bool, nullable: bool = False) -> Hook:
        args = typing.get_args(tp)
        item_type = args[0] if args else Any
        item_hook = functools.cache(functools.partial(self.hook, item_type))  # resolved late: types may recurse

        def structure_tuple(value: Any, _: Any) -> tuple[Any, ...] | None:
            if value is None and nullable:
                return None
            if type(value) is not list:
                raise DecodeError(f"expected an array, got {kind_of(value)}")
            hook = item_hook()
            kept = []
            for index, item in enumerate(value):
                try:
                    kept.append(hook(item, item_type))
                except Exception as exc:
                    if not skip_invalid:
                        raise DecodeError(f"[{index}]: {reason(exc)}") from exc
                    logger.debug("dropping an invalid list item: %s", reason(exc))
            return tuple(kept)

        return structure_tuple

    def _union_hook(self, tp: Any) -> Hook:
        found = union_members(tp)
        assert found is not None
        members, has_none = found
        member_set = set(members)
        for union in _UNIONS:
            if member_set == {*union.variants.values(), union.unknown}:
                return self._tagged_hook(union, has_none)
        if len(members) == 1:
            (inner_type,) = members
            inner = self.hook(inner_type)

            def structure_optional(value: Any, _: Any) -> Any:
                return None if value is None else inner(value, inner_type)

            return structure_optional
        for table, what in _UNTAGGED:
            if member_set == {cls for _, cls in table}:
                return self._untagged_hook(has_none, table, what)
        if all(m in PRIMITIVE_HOOKS for m in members):
            allowed = tuple(members)

            def structure_primitive(value: Any, _: Any) -> Any:
                if value is None and has_none:
                    return None
                for member in allowed:
                    if type(value) is member or (member is float and type(value) is int):
                        return value
                names = " or ".join(m.__name__ for m in allowed)
                raise DecodeError(f"expected {names}, got {kind_of(value)}")

            return structure_primitive
        raise TypeError(f"no structure strategy for {tp!r}")  # a programming error in the types

    def _tagged_hook(self, union: _Union, has_none: bool) -> Hook:
        key = union.key
        variants = union.variants
        unknown = union.unknown
        default = union.default
        hook_of = functools.cache(self.hook)

        def structure_tagged(value: Any, _: Any) -> Any:
            if value is None and has_none:
                return None
            if type(value) is not dict:
                raise DecodeError(f"expected an object, got {kind_of(value)}")
            tag = value.get(key)
            if tag is None and default is not None:
                cls = default
            elif type(tag) is not str:
                raise DecodeError(f"missing or non-string {key!r}")
            else:
                found = variants.get(tag)
                if found is None:
                    return unknown(tag, value)
                cls = found
            return hook_of(cls)(value, cls)

        return structure_tagged

    def _untagged_hook(self, has_none: bool, table: tuple[tuple[str, type], ...], what: str) -> Hook:
        def structure_untagged(value: Any, _: Any) -> Any:
            if value is None and has_none:
                return None
            if type(value) is not dict:
                raise DecodeError(f"expected an object, got {kind_of(value)}")
            for marker, cls in table:
                if marker in value:
                    return self.hook(cls)(value, cls)
            raise DecodeError(f"unrecognized {what}: none of {', '.join(repr(m) for m, _ in table)}")

        return structure_untagged

    def _field_hook(self, field: attrs.Attribute[Any]) -> Hook | None:
        """The per-field structure hook when it differs from the type's own hook."""
        md = field.metadata
        if self.version in md.get(_fields.PRESENCE, ()):
            return is_presence
        if field.default is attrs.NOTHING or md.get(_fields.STRICT):
            return None
        # an optional field: default-on-error, and skip invalid items of a list
        inner_type = field.type
        found = union_members(inner_type)
        nullable = False
        if found is not None and len(found[0]) == 1 and found[1]:
            inner_type, nullable = found[0][0], True
        if is_tuple(inner_type):
            inner = self._make_tuple_hook(inner_type, skip_invalid=True, nullable=nullable)
        else:
            inner = self.hook(field.type)
        fallback = default_of(field)
        wire_name = field_wire_name(field, self.version)

        def structure_lenient(value: Any, tp: Any) -> Any:
            try:
                return inner(value, tp)
            except Exception as exc:
                logger.debug("%s: using the default for a malformed value: %s", wire_name, reason(exc))
                return fallback()

        return structure_lenient

    def class_hook(self, cls: type) -> Hook:
        fields = attrs.fields(attrs.resolve_types(cls))
        overrides: dict[str, Any] = {}
        checks: list[tuple[str, str, Any]] = []  # (attribute, wire name, type) for diagnostics
        for field in fields:
            if not on_wire(field, self.version):
                overrides[field.name] = override(omit=True)
                continue
            wire_name = field_wire_name(field, self.version)
            hook = self._field_hook(field)
            overrides[field.name] = override(rename=wire_name, struct_hook=hook)
            checks.append((field.name, wire_name, field.type))
        generated: Callable[..., Any] = make_dict_structure_fn(cls, self.conv, **overrides)
        env: dict[str, Any] = getattr(generated, "__globals__", {})
        name = cls.__name__

        def structure_class(value: Any, _: Any) -> Any:
            if type(value) is not dict:
                raise DecodeError(f"{name}: expected an object, got {kind_of(value)}")
            try:
                return generated(value, cls)
            except Exception as exc:
                raise self._explain(name, value, exc, checks, env) from exc

        return structure_class

    def _explain(
        self,
        name: str,
        value: dict[str, Any],
        exc: Exception,
        checks: list[tuple[str, str, Any]],
        env: dict[str, Any],
    ) -> DecodeError:
        """Turn a failure of a generated hook into a message that names the member."""
        if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
            return DecodeError(f"{name}: missing required member {exc.args[0]!r}")
        for attribute, wire_name, tp in checks:
            if wire_name not in value:
                continue
            hook = env.get(f"__c_structure_{attribute}")
            if hook is None:
                continue
            try:
                hook(value[wire_name], tp)
            except Exception as inner:
                return DecodeError(f"{name}.{wire_name}: {reason(inner)}")
        return DecodeError(f"{name}: {reason(exc)}")

    def class_unhook(self, cls: type) -> Callable[[Any], Any]:
        overrides: dict[str, Any] = {}
        for field in attrs.fields(attrs.resolve_types(cls)):
            if not on_wire(field, self.version):
                overrides[field.name] = override(omit=True)
                continue
            options: dict[str, Any] = {"rename": field_wire_name(field, self.version)}
            if field.metadata.get(_fields.ALWAYS):
                options["omit_if_default"] = False
            if self.version in field.metadata.get(_fields.PRESENCE, ()):
                options["unstruct_hook"] = presence_out
            overrides[field.name] = override(**options)
        generated: Callable[[Any], Any] = make_dict_unstructure_fn(
            cls, self.conv, _cattrs_omit_if_default=True, **overrides
        )
        tag = _TAG_OF.get(cls)
        if tag is None or (self.version == 1 and cls in _UNTAGGED_IN_V1):
            return generated
        key, value = tag

        def unstructure_tagged(obj: Any) -> dict[str, Any]:
            return {key: value, **generated(obj)}

        return unstructure_tagged

    def lenient(self, tp: Any, value: Any, default: Any) -> Any:
        """``value`` decoded as ``tp``, or ``default`` when it is absent or malformed (for the hand-shaped types)."""
        if value is None:
            return default
        try:
            return self.hook(tp)(value, tp)
        except Exception as exc:
            logger.debug("using the default for a malformed %s: %s", getattr(tp, "__name__", tp), reason(exc))
            return default

    def lenient_items(self, tp: Any, items: list[Any]) -> tuple[Any, ...]:
        """The items that decode as ``tp``; malformed ones are dropped (``x-deserialize-skip-invalid-items``)."""
        return tuple(item for item in (self.lenient(tp, raw, None) for raw in items) if item is not None)
