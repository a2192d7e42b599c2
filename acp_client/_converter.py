"""The private cattrs converter: ACP wire JSON ⇄ :mod:`acp_client.types` values.

One :class:`cattrs.Converter` per protocol version (v1, and v2 for every version ≥ 2), configured
from the field declarations of the types (see :mod:`acp_client.types._fields`):

- camelCase only here: ``session_id`` ⇄ ``sessionId``, ``meta`` ⇄ ``_meta``, per-version renames.
- Decoding is lenient, as the protocol's evolution rules require: unknown members are ignored; a
  tagged union's unknown variant becomes its ``Unknown...`` value keeping the raw payload; an
  optional member that is malformed falls back to its default (``x-deserialize-default-on-error``),
  a malformed item of an optional list is dropped (``x-deserialize-skip-invalid-items``); ``null``
  is accepted for every optional member. Primitives are checked strictly (no ``str(5)``, no
  ``bool("false")``). Any failure is an :class:`~acp_client.exceptions.InvalidMessage` naming the
  member, never a cattrs exception.
- Encoding omits optional members that hold their default (never ``"x": null`` for an unset
  optional), writes the members the schemas require even when empty (``mcpServers: []``), adds the
  union tags, and follows the protocol version (v1 ``clientInfo`` vs v2 ``info``, v1 untagged stdio
  MCP servers, v2 capability objects...).

:func:`decode_session_notification` is the hot path: the common ``session/update`` variants are
decoded by hand-written code and everything else falls back to the converter, with the same result.
"""

from __future__ import annotations

import functools
import logging
import types as _pytypes
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, Union, cast

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._version import __version__
from .exceptions import InvalidMessage
from .types import _fields
from .types.agent_requests import (
    CancelledPermissionOutcome,
    CommandPermissionSubject,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
    ToolCallPermissionSubject,
    UnknownPermissionOutcome,
    UnknownPermissionSubject,
)
from .types.capabilities import (
    AgentCapabilities,
    AuthMethod,
    ClientCapabilities,
    Implementation,
    McpCapabilities,
    PromptCapabilities,
    SessionCapabilities,
)
from .types.content import (
    AudioContent,
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    UnknownContent,
)
from .types.lifecycle import (
    ForegroundState,
    InitializeRequest,
    InitializeResponse,
    McpServerAcp,
    McpServerHttp,
    McpServerSse,
    McpServerStdio,
    ReplayFromStart,
    SessionConfigOption,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
    SessionStatusResponse,
    SetSessionConfigOptionRequest,
    UnknownMcpServer,
    UnknownReplayFrom,
    normalize_status,
)
from .types.session import Session
from .types.updates import (
    AgentMessage,
    AgentMessageChunk,
    AgentThought,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    CompactionSummaryChunk,
    CompactionUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Notice,
    Plan,
    PlanFile,
    PlanItems,
    PlanMarkdown,
    PlanRemoved,
    PlanUpdate,
    SessionInfoUpdate,
    SessionMessage,
    SessionMessageChunk,
    SessionNotification,
    SessionUpdate,
    StateUpdate,
    SubagentUpdate,
    TerminalOutputChunk,
    TerminalUpdate,
    ToolCall,
    ToolCallContentBlock,
    ToolCallContentChunk,
    ToolCallDiff,
    ToolCallTerminal,
    ToolCallUpdate,
    UnknownPlanContent,
    UnknownSessionUpdate,
    UnknownToolCallContent,
    UsageUpdate,
    UserMessage,
    UserMessageChunk,
)

__all__ = [
    "decode_content_block",
    "decode_foreground_state",
    "decode_session_notification",
    "decode_session_update",
    "from_wire",
    "from_wire_lenient",
    "to_wire",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_Hook = Callable[[Any, Any], Any]


class _DecodeError(Exception):
    """Internal: why a value could not be decoded (becomes :class:`InvalidMessage` at the API)."""


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


#: The identity sent in a v2 ``initialize`` when the app gave none (v2 requires ``info``).
DEFAULT_CLIENT_INFO: Final = Implementation(name="acp-reconnect", version=__version__)


# --------------------------------------------------------------------------------------------
# tagged unions


@attrs.frozen
class _Union:
    """A tagged wire union: ``key`` names the tag member; ``unknown`` keeps unrecognized tags."""

    key: str
    variants: dict[str, type]
    unknown: type
    default: type | None = None  # the variant a payload without a tag is (v1 stdio MCP servers)


def _tagged(key: str, classes: tuple[type, ...], unknown: type, default: type | None = None) -> _Union:
    return _Union(
        key, {getattr(cls, key if key != "sessionUpdate" else "kind"): cls for cls in classes}, unknown, default
    )


_UNIONS: Final = (
    _tagged(
        "type",
        (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource),
        UnknownContent,
    ),
    _tagged("type", (ToolCallContentBlock, ToolCallDiff, ToolCallTerminal), UnknownToolCallContent),
    _tagged("type", (PlanItems, PlanFile, PlanMarkdown), UnknownPlanContent),
    _tagged(
        "type",
        (McpServerStdio, McpServerHttp, McpServerSse, McpServerAcp),
        UnknownMcpServer,
        default=McpServerStdio,
    ),
    _tagged("type", (ReplayFromStart,), UnknownReplayFrom),
    _tagged("outcome", (SelectedPermissionOutcome, CancelledPermissionOutcome), UnknownPermissionOutcome),
    _tagged("type", (ToolCallPermissionSubject, CommandPermissionSubject), UnknownPermissionSubject),
    _tagged(
        "sessionUpdate",
        (
            UserMessageChunk,
            AgentMessageChunk,
            AgentThoughtChunk,
            UserMessage,
            AgentMessage,
            AgentThought,
            ToolCall,
            ToolCallUpdate,
            ToolCallContentChunk,
            TerminalUpdate,
            TerminalOutputChunk,
            Plan,
            PlanUpdate,
            PlanRemoved,
            AvailableCommandsUpdate,
            CurrentModeUpdate,
            ConfigOptionUpdate,
            SessionInfoUpdate,
            UsageUpdate,
            Notice,
            CompactionUpdate,
            CompactionSummaryChunk,
            StateUpdate,
            SubagentUpdate,
            SessionMessage,
            SessionMessageChunk,
        ),
        UnknownSessionUpdate,
    ),
)

# class -> (tag key, tag value), for encoding
_TAG_OF: Final = {cls: (u.key, tag) for u in _UNIONS for tag, cls in u.variants.items()}
# classes written without their tag in v1
_UNTAGGED_IN_V1: Final = frozenset({McpServerStdio})


def _union_members(tp: Any) -> tuple[tuple[Any, ...], bool] | None:
    """``(members without None, has_none)`` for a union type, else ``None``."""
    origin = typing.get_origin(tp)
    if origin is Union or isinstance(tp, _pytypes.UnionType):
        args = typing.get_args(tp)
        members = tuple(a for a in args if a is not type(None))
        return members, len(members) != len(args)
    return None


def _is_union(tp: Any) -> bool:
    return _union_members(tp) is not None


def _is_tuple(tp: Any) -> bool:
    return typing.get_origin(tp) is tuple


def _is_dict(tp: Any) -> bool:
    return tp is dict or typing.get_origin(tp) is dict


# --------------------------------------------------------------------------------------------
# field plumbing


def _camel(name: str) -> str:
    if name == "meta":
        return "_meta"
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _wire_name(field: attrs.Attribute[Any], version: int) -> str:
    name = field.metadata.get(_fields.NAME)
    if name is None:
        return _camel(field.name)
    if isinstance(name, str):
        return name
    return str(name.get(version, _camel(field.name)))


def _on_wire(field: attrs.Attribute[Any], version: int) -> bool:
    versions = field.metadata.get(_fields.VERSIONS)
    return versions is None or version in versions


def _has_default(field: attrs.Attribute[Any]) -> bool:
    return field.default is not attrs.NOTHING


def _default_of(field: attrs.Attribute[Any]) -> Callable[[], Any]:
    default = field.default
    factory = getattr(default, "factory", None)
    if callable(factory) and not getattr(default, "takes_self", False):  # an attrs.Factory
        return factory  # type: ignore[no-any-return]  # getattr() gives Any; it is a zero-argument factory
    return lambda: default


def _is_presence(value: Any, _: Any) -> bool:
    return type(value) is dict


def _presence_out(value: Any) -> Any:
    return {} if value else None


# --------------------------------------------------------------------------------------------
# strict primitive hooks


def _s_str(value: Any, _: Any) -> str:
    if type(value) is str:
        return value
    raise _DecodeError(f"expected a string, got {_kind_of(value)}")


def _s_int(value: Any, _: Any) -> int:
    if type(value) is int:
        return value
    raise _DecodeError(f"expected an integer, got {_kind_of(value)}")


def _s_float(value: Any, _: Any) -> float:
    if type(value) is float or type(value) is int:
        return float(value)
    raise _DecodeError(f"expected a number, got {_kind_of(value)}")


def _s_bool(value: Any, _: Any) -> bool:
    if type(value) is bool:
        return value
    raise _DecodeError(f"expected a boolean, got {_kind_of(value)}")


def _s_dict(value: Any, _: Any) -> dict[str, Any]:
    if type(value) is dict:
        return value
    raise _DecodeError(f"expected an object, got {_kind_of(value)}")


def _s_any(value: Any, _: Any) -> Any:
    return value


_PRIMITIVE_HOOKS: Final[dict[Any, _Hook]] = {str: _s_str, int: _s_int, float: _s_float, bool: _s_bool}


# --------------------------------------------------------------------------------------------
# the converter


class _Builder:
    """Builds and holds the converter of one protocol version."""

    def __init__(self, version: int) -> None:
        self.version = version
        conv = cattrs.Converter(detailed_validation=False)
        self.conv = conv
        for tp, hook in _PRIMITIVE_HOOKS.items():
            conv.register_structure_hook(tp, hook)
        conv.register_structure_hook_func(lambda tp: tp is Any, _s_any)
        conv.register_structure_hook_func(_is_dict, _s_dict)
        conv.register_structure_hook_factory(_is_tuple, self._tuple_hook)
        conv.register_structure_hook_factory(_is_union, self._union_hook)
        conv.register_structure_hook_factory(attrs.has, self._class_hook)
        conv.register_unstructure_hook_factory(attrs.has, self._class_unhook)
        for union in _UNIONS:
            conv.register_unstructure_hook(union.unknown, self._unknown_unhook(union.key))
        self._register_special()

    # -- structure ---------------------------------------------------------------------------

    def hook(self, tp: Any) -> _Hook:
        return self.conv.get_structure_hook(tp)

    @functools.cached_property
    def session_update_hook(self) -> _Hook:
        """The ``SessionUpdate`` hook, looked up once (hashing the big union is not free)."""
        return self.hook(SessionUpdate)

    def _tuple_hook(self, tp: Any) -> _Hook:
        return self._make_tuple_hook(tp, skip_invalid=False)

    def _make_tuple_hook(self, tp: Any, *, skip_invalid: bool, nullable: bool = False) -> _Hook:
        args = typing.get_args(tp)
        item_type = args[0] if args else Any
        resolved: list[_Hook] = []

        def item_hook() -> _Hook:
            if not resolved:
                resolved.append(self.hook(item_type))
            return resolved[0]

        def structure_tuple(value: Any, _: Any) -> tuple[Any, ...] | None:
            if value is None and nullable:
                return None
            if type(value) is not list:
                raise _DecodeError(f"expected an array, got {_kind_of(value)}")
            hook = item_hook()
            if not skip_invalid:
                out = []
                for index, item in enumerate(value):
                    try:
                        out.append(hook(item, item_type))
                    except Exception as exc:
                        raise _DecodeError(f"[{index}]: {_reason(exc)}") from exc
                return tuple(out)
            kept = []
            for item in value:
                try:
                    kept.append(hook(item, item_type))
                except Exception as exc:
                    logger.debug("dropping an invalid list item: %s", _reason(exc))
            return tuple(kept)

        return structure_tuple

    def _union_hook(self, tp: Any) -> _Hook:
        found = _union_members(tp)
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
        if member_set == {TextResourceContents, BlobResourceContents}:
            return self._untagged_hook(
                has_none, (("text", TextResourceContents), ("blob", BlobResourceContents)), "resource contents"
            )
        if member_set == {SessionConfigSelectOption, SessionConfigSelectGroup}:
            return self._untagged_hook(
                has_none,
                (("options", SessionConfigSelectGroup), ("value", SessionConfigSelectOption)),
                "select option",
            )
        if all(m in _PRIMITIVE_HOOKS for m in members):
            allowed = tuple(members)

            def structure_primitive(value: Any, _: Any) -> Any:
                if value is None and has_none:
                    return None
                for member in allowed:
                    if type(value) is member or (member is float and type(value) is int):
                        return value
                names = " or ".join(m.__name__ for m in allowed)
                raise _DecodeError(f"expected {names}, got {_kind_of(value)}")

            return structure_primitive
        raise TypeError(f"no structure strategy for {tp!r}")  # a programming error in the types

    def _tagged_hook(self, union: _Union, has_none: bool) -> _Hook:
        key = union.key
        variants = union.variants
        unknown = union.unknown
        default = union.default
        hooks: dict[type, _Hook] = {}

        def structure_tagged(value: Any, _: Any) -> Any:
            if value is None and has_none:
                return None
            if type(value) is not dict:
                raise _DecodeError(f"expected an object, got {_kind_of(value)}")
            tag = value.get(key)
            if tag is None and default is not None:
                cls = default
            elif type(tag) is not str:
                raise _DecodeError(f"missing or non-string {key!r}")
            else:
                found = variants.get(tag)
                if found is None:
                    return unknown(tag, value)
                cls = found
            hook = hooks.get(cls)
            if hook is None:
                hook = hooks[cls] = self.hook(cls)
            return hook(value, cls)

        return structure_tagged

    def _untagged_hook(self, has_none: bool, table: tuple[tuple[str, type], ...], what: str) -> _Hook:
        def structure_untagged(value: Any, _: Any) -> Any:
            if value is None and has_none:
                return None
            if type(value) is not dict:
                raise _DecodeError(f"expected an object, got {_kind_of(value)}")
            for marker, cls in table:
                if marker in value:
                    return self.hook(cls)(value, cls)
            raise _DecodeError(f"unrecognized {what}: none of {', '.join(repr(m) for m, _ in table)}")

        return structure_untagged

    def _field_hook(self, field: attrs.Attribute[Any]) -> _Hook | None:
        """The per-field structure hook when it differs from the type's own hook."""
        md = field.metadata
        if self.version in md.get(_fields.PRESENCE, ()):
            return _is_presence
        if not _has_default(field) or md.get(_fields.STRICT):
            return None
        # an optional field: default-on-error, and skip invalid items of a list
        inner_type = field.type
        found = _union_members(inner_type)
        nullable = False
        if found is not None and len(found[0]) == 1 and found[1]:
            inner_type, nullable = found[0][0], True
        if _is_tuple(inner_type):
            inner = self._make_tuple_hook(inner_type, skip_invalid=True, nullable=nullable)
        else:
            inner = self.hook(field.type)
        fallback = _default_of(field)
        wire_name = _wire_name(field, self.version)

        def structure_lenient(value: Any, tp: Any) -> Any:
            try:
                return inner(value, tp)
            except Exception as exc:
                logger.debug("%s: using the default for a malformed value: %s", wire_name, _reason(exc))
                return fallback()

        return structure_lenient

    def _class_hook(self, cls: type) -> _Hook:
        fields = attrs.fields(attrs.resolve_types(cls))
        overrides: dict[str, Any] = {}
        checks: list[tuple[str, str, Any]] = []  # (attribute, wire name, type) for diagnostics
        for field in fields:
            if not _on_wire(field, self.version):
                overrides[field.name] = override(omit=True)
                continue
            wire_name = _wire_name(field, self.version)
            hook = self._field_hook(field)
            overrides[field.name] = override(rename=wire_name, struct_hook=hook)
            checks.append((field.name, wire_name, field.type))
        generated: Callable[..., Any] = make_dict_structure_fn(cls, self.conv, **overrides)
        env: dict[str, Any] = getattr(generated, "__globals__", {})
        name = cls.__name__

        def structure_class(value: Any, _: Any) -> Any:
            if type(value) is not dict:
                raise _DecodeError(f"{name}: expected an object, got {_kind_of(value)}")
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
    ) -> _DecodeError:
        """Turn a failure of a generated hook into a message that names the member."""
        if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
            return _DecodeError(f"{name}: missing required member {exc.args[0]!r}")
        for attribute, wire_name, tp in checks:
            if wire_name not in value:
                continue
            hook = env.get(f"__c_structure_{attribute}")
            if hook is None:
                continue
            try:
                hook(value[wire_name], tp)
            except Exception as inner:
                return _DecodeError(f"{name}.{wire_name}: {_reason(inner)}")
        return _DecodeError(f"{name}: {_reason(exc)}")

    # -- unstructure -------------------------------------------------------------------------

    def _class_unhook(self, cls: type) -> Callable[[Any], Any]:
        overrides: dict[str, Any] = {}
        for field in attrs.fields(attrs.resolve_types(cls)):
            if not _on_wire(field, self.version):
                overrides[field.name] = override(omit=True)
                continue
            options: dict[str, Any] = {"rename": _wire_name(field, self.version)}
            if field.metadata.get(_fields.ALWAYS):
                options["omit_if_default"] = False
            if self.version in field.metadata.get(_fields.PRESENCE, ()):
                options["unstruct_hook"] = _presence_out
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

    @staticmethod
    def _unknown_unhook(key: str) -> Callable[[Any], Any]:
        def unstructure_unknown(obj: Any) -> dict[str, Any]:
            out = dict(obj.raw)
            out[key] = getattr(obj, attrs.fields(type(obj))[0].name)
            return out

        return unstructure_unknown

    # -- version-specific shapes -------------------------------------------------------------

    def _register_special(self) -> None:
        conv = self.conv
        conv.register_structure_hook(ForegroundState, _structure_foreground_state)
        conv.register_unstructure_hook(ForegroundState, _unstructure_foreground_state)
        conv.register_structure_hook(SessionStatusResponse, self._structure_status_response)
        conv.register_unstructure_hook(SessionStatusResponse, self._unstructure_status_response)
        conv.register_unstructure_hook(SetSessionConfigOptionRequest, self._unstructure_set_config_option)
        conv.register_structure_hook(AgentCapabilities, self._structure_agent_capabilities)
        conv.register_unstructure_hook(AgentCapabilities, self._unstructure_agent_capabilities)
        version = self.version

        def structure_session(value: Any, _: Any) -> Session:
            try:
                return Session.from_wire(value, protocol_version=version)
            except InvalidMessage as exc:
                raise _DecodeError(str(exc)) from exc

        conv.register_structure_hook(Session, structure_session)
        conv.register_unstructure_hook(Session, lambda obj: obj.to_json(protocol_version=version))
        request_in, request_out, response_in, response_out = _initialize_hooks(self.version)
        conv.register_structure_hook(InitializeRequest, request_in)
        conv.register_unstructure_hook(InitializeRequest, request_out)
        conv.register_structure_hook(InitializeResponse, response_in)
        conv.register_unstructure_hook(InitializeResponse, response_out)
        plain_caps = self._class_hook(ClientCapabilities)
        plain_caps_out = self._class_unhook(ClientCapabilities)
        modeled = {_wire_name(f, self.version) for f in attrs.fields(ClientCapabilities) if _on_wire(f, self.version)}

        def structure_client_capabilities(value: Any, tp: Any) -> ClientCapabilities:
            caps: ClientCapabilities = plain_caps(value, tp)
            extra = {k: v for k, v in value.items() if k not in modeled}
            return attrs.evolve(caps, extra=extra) if extra else caps

        def unstructure_client_capabilities(obj: ClientCapabilities) -> dict[str, Any]:
            out: dict[str, Any] = dict(obj.extra) if obj.extra else {}
            out.update(plain_caps_out(obj))
            return out

        conv.register_structure_hook(ClientCapabilities, structure_client_capabilities)
        conv.register_unstructure_hook(ClientCapabilities, unstructure_client_capabilities)

        plain_option_out = self._class_unhook(SessionConfigOption)

        def unstructure_config_option(obj: SessionConfigOption) -> dict[str, Any]:
            out: dict[str, Any] = plain_option_out(obj)
            if obj.type == "select":
                out.setdefault("options", [])  # required for a select, even when empty
            return out

        conv.register_unstructure_hook(SessionConfigOption, unstructure_config_option)

        plain_permission = self._class_hook(RequestPermissionRequest)

        def structure_permission_request(value: Any, tp: Any) -> RequestPermissionRequest:
            request: RequestPermissionRequest = plain_permission(value, tp)
            if request.tool_call is None and isinstance(request.subject, ToolCallPermissionSubject):
                return attrs.evolve(request, tool_call=request.subject.tool_call)
            return request

        conv.register_structure_hook(RequestPermissionRequest, structure_permission_request)

    def _structure_status_response(self, value: Any, _: Any) -> SessionStatusResponse:
        if type(value) is not dict:
            raise _DecodeError(f"SessionStatusResponse: expected an object, got {_kind_of(value)}")
        raw_status = value.get("status")
        if type(raw_status) is not str:
            raise _DecodeError(f"SessionStatusResponse.status: expected a string, got {_kind_of(raw_status)}")
        state = _structure_foreground_state(value.get("state"), None) if self.version >= 2 else None
        meta = value.get("_meta")
        return SessionStatusResponse(
            status=normalize_status(raw_status),
            raw_status=raw_status,
            state=state,
            meta=meta if type(meta) is dict else None,
        )

    def _unstructure_status_response(self, obj: SessionStatusResponse) -> dict[str, Any]:
        out: dict[str, Any] = {"status": obj.raw_status}
        if obj.state is not None and self.version >= 2:
            out["state"] = _unstructure_foreground_state(obj.state)
        if obj.meta is not None:
            out["_meta"] = obj.meta
        return out

    def _unstructure_set_config_option(self, obj: SetSessionConfigOptionRequest) -> dict[str, Any]:
        out: dict[str, Any] = {"sessionId": obj.session_id, "configId": obj.config_id}
        tag = obj.type
        if tag is None:
            if isinstance(obj.value, bool):
                tag = "boolean"
            elif self.version >= 2:
                tag = "id"
        if tag is not None:
            out["type"] = tag
        out["value"] = self.conv.unstructure(obj.value)
        if obj.meta is not None:
            out["_meta"] = obj.meta
        return out

    def _lenient(self, tp: Any, value: Any, default: Any) -> Any:
        if value is None:
            return default
        try:
            return self.hook(tp)(value, tp)
        except Exception as exc:
            logger.debug("using the default for a malformed %s: %s", getattr(tp, "__name__", tp), _reason(exc))
            return default

    def _structure_agent_capabilities(self, value: Any, _: Any) -> AgentCapabilities:
        if type(value) is not dict:
            raise _DecodeError(f"AgentCapabilities: expected an object, got {_kind_of(value)}")
        meta = value.get("_meta")
        meta = meta if type(meta) is dict else None
        if self.version == 1:
            session_raw = value.get("sessionCapabilities")
            session_raw = session_raw if type(session_raw) is dict else {}
            return AgentCapabilities(
                load_session=value.get("loadSession") is True,
                prompt=self._lenient(PromptCapabilities, value.get("promptCapabilities"), PromptCapabilities()),
                mcp=self._lenient(McpCapabilities, value.get("mcpCapabilities"), McpCapabilities()),
                session=_session_capabilities(session_raw, baseline=False),
                raw=value,
                meta=meta,
            )
        session_raw = value.get("session")
        if type(session_raw) is not dict:
            return AgentCapabilities(raw=value, meta=meta)
        return AgentCapabilities(
            prompt=self._lenient(PromptCapabilities, session_raw.get("prompt"), PromptCapabilities()),
            mcp=self._lenient(McpCapabilities, session_raw.get("mcp"), McpCapabilities()),
            session=_session_capabilities(session_raw, baseline=True),
            raw=value,
            meta=meta,
        )

    def _unstructure_agent_capabilities(self, obj: AgentCapabilities) -> dict[str, Any]:
        conv = self.conv
        prompt = conv.unstructure(obj.prompt)
        mcp = conv.unstructure(obj.mcp)
        if self.version == 1:
            out = {k: v for k, v in obj.raw.items() if k not in _V1_AGENT_CAPS_MODELED}
            if obj.load_session:
                out["loadSession"] = True
            if prompt:
                out["promptCapabilities"] = prompt
            if mcp:
                out["mcpCapabilities"] = mcp
            session_raw = obj.raw.get("sessionCapabilities")
            session = _session_capabilities_out(obj.session, session_raw, _V1_SESSION_FLAGS)
            if session:
                out["sessionCapabilities"] = session
        else:
            out = {k: v for k, v in obj.raw.items() if k not in ("session", "_meta")}
            session_raw = obj.raw.get("session")
            session = _session_capabilities_out(obj.session, session_raw, _V2_SESSION_FLAGS)
            for key, encoded in (("prompt", prompt), ("mcp", mcp)):
                if encoded:
                    session[key] = encoded
                else:
                    session.pop(key, None)
            advertised = type(session_raw) is dict or obj.session.resume or obj.session.close or obj.session.list
            if session or advertised:
                out["session"] = session
        if obj.meta is not None:
            out["_meta"] = obj.meta
        return out


# wire key -> SessionCapabilities attribute
_V1_SESSION_FLAGS: Final = {
    "resume": "resume",
    "close": "close",
    "list": "list",
    "fork": "fork",
    "status": "status",
    "delete": "delete",
    "additionalDirectories": "additional_directories",
    "archive": "archive",
    "title": "title",
}
_V2_SESSION_FLAGS: Final = {
    "fork": "fork",
    "status": "status",
    "delete": "delete",
    "additionalDirectories": "additional_directories",
    "archive": "archive",
    "title": "title",
}
_V1_AGENT_CAPS_MODELED: Final = frozenset(
    {"loadSession", "promptCapabilities", "mcpCapabilities", "sessionCapabilities", "_meta"}
)


def _session_capabilities(raw: dict[str, Any], *, baseline: bool) -> SessionCapabilities:
    flags = _V2_SESSION_FLAGS if baseline else _V1_SESSION_FLAGS
    values = {attribute: type(raw.get(key)) is dict for key, attribute in flags.items()}
    if baseline:
        values.update(resume=True, close=True, list=True)
    return SessionCapabilities(**values)


def _session_capabilities_out(caps: SessionCapabilities, raw: Any, flags: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = dict(raw) if type(raw) is dict else {}
    for key, attribute in flags.items():
        if getattr(caps, attribute):
            existing = out.get(key)
            out[key] = existing if type(existing) is dict else {}
        else:
            out.pop(key, None)
    return out


def _reason(exc: BaseException) -> str:
    if isinstance(exc, _DecodeError):
        return str(exc)
    if isinstance(exc, KeyError) and exc.args:
        return f"missing required member {exc.args[0]!r}"
    return f"{type(exc).__name__}: {exc}"


def _structure_foreground_state(value: Any, _: Any) -> ForegroundState | None:
    """Default-on-error: anything but an object with a string ``state`` is "not reported"."""
    if type(value) is not dict:
        return None
    state = value.get("state")
    if type(state) is not str:
        return None
    stop_reason = value.get("stopReason")
    return ForegroundState(state=state, stop_reason=stop_reason if type(stop_reason) is str else None, raw=value)


def _unstructure_foreground_state(obj: ForegroundState) -> dict[str, Any]:
    out = dict(obj.raw)
    out["state"] = obj.state
    if obj.stop_reason is not None:
        out["stopReason"] = obj.stop_reason
    return out


def _builder(protocol_version: int) -> _Builder:
    return _V2 if protocol_version >= 2 else _V1


def _initialize_shape(value: dict[str, Any], v1_keys: tuple[str, str], v2_keys: tuple[str, str], version: int) -> bool:
    """Whether an ``initialize`` payload has the v2 shape: by its members, else by ``version``."""
    has_v1 = any(k in value for k in v1_keys)
    has_v2 = any(k in value for k in v2_keys)
    if has_v1 != has_v2:
        return has_v2
    return version >= 2


def _initialize_hooks(version: int) -> tuple[_Hook, Callable[[Any], Any], _Hook, Callable[[Any], Any]]:
    """``initialize`` params and result hooks of a converter.

    Encoding follows the converter's protocol version (v1 ``clientInfo`` / ``clientCapabilities`` /
    ``agentInfo`` / ``agentCapabilities``, v2 ``info`` / ``capabilities``); decoding accepts either
    shape, whichever the payload has.
    """

    def structure_request(value: Any, _: Any) -> InitializeRequest:
        if type(value) is not dict:
            raise _DecodeError(f"InitializeRequest: expected an object, got {_kind_of(value)}")
        protocol_version = value.get("protocolVersion")
        if type(protocol_version) is not int:
            raise _DecodeError(
                f"InitializeRequest.protocolVersion: expected an integer, got {_kind_of(protocol_version)}"
            )
        v2_shape = _initialize_shape(value, ("clientInfo", "clientCapabilities"), ("info", "capabilities"), version)
        builder = _V2 if v2_shape else _V1
        info_key, caps_key = ("info", "capabilities") if v2_shape else ("clientInfo", "clientCapabilities")
        meta = value.get("_meta")
        return InitializeRequest(
            protocol_version=protocol_version,
            client_info=builder._lenient(Implementation, value.get(info_key), None),
            client_capabilities=builder._lenient(ClientCapabilities, value.get(caps_key), ClientCapabilities()),
            meta=meta if type(meta) is dict else None,
        )

    def unstructure_request(obj: InitializeRequest) -> dict[str, Any]:
        out: dict[str, Any] = {"protocolVersion": obj.protocol_version}
        if version >= 2:
            out["info"] = _V2.conv.unstructure(obj.client_info or DEFAULT_CLIENT_INFO)
            out["capabilities"] = _V2.conv.unstructure(obj.client_capabilities)
        else:
            out["clientCapabilities"] = _V1.conv.unstructure(obj.client_capabilities)
            if obj.client_info is not None:
                out["clientInfo"] = _V1.conv.unstructure(obj.client_info)
        if obj.meta is not None:
            out["_meta"] = obj.meta
        return out

    def structure_response(value: Any, _: Any) -> InitializeResponse:
        if type(value) is not dict:
            raise _DecodeError(f"InitializeResponse: expected an object, got {_kind_of(value)}")
        protocol_version = value.get("protocolVersion")
        if type(protocol_version) is not int:
            raise _DecodeError(
                f"InitializeResponse.protocolVersion: expected an integer, got {_kind_of(protocol_version)}"
            )
        v2_shape = _initialize_shape(value, ("agentInfo", "agentCapabilities"), ("info", "capabilities"), version)
        builder = _V2 if v2_shape else _V1
        info_key, caps_key = ("info", "capabilities") if v2_shape else ("agentInfo", "agentCapabilities")
        methods = value.get("authMethods")
        auth_methods: tuple[AuthMethod, ...] = ()
        if type(methods) is list:  # default-on-error, and invalid items are skipped
            auth_methods = tuple(
                m for m in (builder._lenient(AuthMethod, item, None) for item in methods) if m is not None
            )
        meta = value.get("_meta")
        return InitializeResponse(
            protocol_version=protocol_version,
            agent_info=builder._lenient(Implementation, value.get(info_key), None),
            agent_capabilities=builder._lenient(AgentCapabilities, value.get(caps_key), AgentCapabilities()),
            auth_methods=auth_methods,
            meta=meta if type(meta) is dict else None,
        )

    def unstructure_response(obj: InitializeResponse) -> dict[str, Any]:
        builder = _V2 if version >= 2 else _V1
        out: dict[str, Any] = {"protocolVersion": obj.protocol_version}
        info = None if obj.agent_info is None else builder.conv.unstructure(obj.agent_info)
        caps = builder.conv.unstructure(obj.agent_capabilities)
        if version >= 2:
            if info is not None:
                out["info"] = info
            out["capabilities"] = caps
        else:
            out["agentCapabilities"] = caps
            if info is not None:
                out["agentInfo"] = info
        if obj.auth_methods:
            out["authMethods"] = [builder.conv.unstructure(m) for m in obj.auth_methods]
        if obj.meta is not None:
            out["_meta"] = obj.meta
        return out

    return structure_request, unstructure_request, structure_response, unstructure_response


_V1: Final = _Builder(1)
_V2: Final = _Builder(2)


# --------------------------------------------------------------------------------------------
# public API


def to_wire(value: Any, *, protocol_version: int = 1) -> Any:
    """Encode a wire value (or a list/tuple of them) into JSON-ready data.

    Args:
        value: An instance of a class from :mod:`acp_client.types`, or a list/tuple of them.
        protocol_version: The protocol version whose shapes to write (for ``initialize``: the
            version the request proposes / the result answers).

    Returns:
        Dicts, lists, strings, numbers, booleans and ``None``, ready for ``json.dumps``.
    """
    conv = _builder(protocol_version).conv
    if isinstance(value, list | tuple):
        return [conv.unstructure(item) for item in value]
    return conv.unstructure(value)


def from_wire(cls: type[T], data: Any, *, protocol_version: int = 1) -> T:
    """Decode JSON data into ``cls``, leniently (see the module docstring).

    Args:
        cls: The class to decode (a class from :mod:`acp_client.types`).
        data: The decoded JSON (usually a message's ``params`` or ``result``).
        protocol_version: The negotiated protocol version.

    Returns:
        The decoded value.

    Raises:
        InvalidMessage: The data cannot be decoded into ``cls``; the message names the member.
    """
    try:
        result: T = _builder(protocol_version).conv.structure(data, cls)
    except RecursionError as exc:
        raise InvalidMessage(f"cannot decode {_name(cls)}: nested too deeply") from exc
    except Exception as exc:
        raise InvalidMessage(_failure(_name(cls), exc)) from exc
    return result


def _failure(name: str, exc: BaseException) -> str:
    reason = _reason(exc)
    if reason.startswith((f"{name}.", f"{name}:")):
        return f"cannot decode {reason}"
    return f"cannot decode {name}: {reason}"


def from_wire_lenient(cls: type[T], data: Any, *, protocol_version: int = 1) -> T | None:
    """Like :func:`from_wire`, but ``None`` (logged at DEBUG) instead of an error, and for ``None``."""
    if data is None:
        return None
    try:
        return from_wire(cls, data, protocol_version=protocol_version)
    except InvalidMessage as exc:
        logger.debug("ignoring a malformed value: %s", exc)
        return None


def decode_content_block(data: Any, *, protocol_version: int = 1) -> ContentBlock:
    """Decode one content block (unknown ``type`` → :class:`~acp_client.types.UnknownContent`).

    Raises:
        InvalidMessage: Not an object, no string ``type``, or a malformed known block.
    """
    result: ContentBlock = from_wire(_CONTENT_BLOCK, data, protocol_version=protocol_version)
    return result


def decode_session_update(data: Any, *, protocol_version: int = 1) -> SessionUpdate:
    """Decode one ``update`` object of a ``session/update`` notification.

    Raises:
        InvalidMessage: Not an object, no string ``sessionUpdate``, or a malformed known variant.
    """
    fast = _FAST_UPDATES.get(data.get("sessionUpdate")) if type(data) is dict else None
    if fast is not None:
        decoded: SessionUpdate | None = fast(data)
        if decoded is not None:
            return decoded
    result: SessionUpdate = from_wire(_SESSION_UPDATE, data, protocol_version=protocol_version)
    return result


def decode_foreground_state(data: Any) -> ForegroundState | None:
    """Decode a v2 foreground state snapshot, default-on-error: ``None`` unless it is an object
    with a string ``state`` (missing, null or malformed means "not reported", never idle)."""
    return _structure_foreground_state(data, None)


def decode_session_notification(params: Any, *, protocol_version: int = 1) -> SessionNotification:
    """Decode ``session/update`` params (the hot path).

    Text chunks, simple tool-call updates and plain state updates are decoded by hand-written
    code; anything else goes through the converter. Both give the same value.

    Raises:
        InvalidMessage: The params are not an object, ``sessionId`` is not a string, or the update
            cannot be decoded.
    """
    if type(params) is not dict:
        raise InvalidMessage(f"cannot decode SessionNotification: expected an object, got {_kind_of(params)}")
    session_id = params.get("sessionId")
    update = params.get("update")
    if type(session_id) is not str:
        raise InvalidMessage(
            f"cannot decode SessionNotification.sessionId: expected a string, got {_kind_of(session_id)}"
        )
    if type(update) is not dict:
        raise InvalidMessage(f"cannot decode SessionNotification.update: expected an object, got {_kind_of(update)}")
    fast = _FAST_UPDATES.get(update.get("sessionUpdate"))
    decoded: SessionUpdate | None = fast(update) if fast is not None else None
    if decoded is None:
        try:
            decoded = _builder(protocol_version).session_update_hook(update, _SESSION_UPDATE)
        except Exception as exc:
            raise InvalidMessage(_failure("SessionNotification.update", exc)) from exc
    meta = params.get("_meta")
    if meta is not None and type(meta) is not dict:
        meta = None
    return _new_notification(session_id, decoded, meta)


# Union aliases are valid structure targets at runtime; typed ``Any`` for the ``type[T]`` parameters.
_SESSION_UPDATE: Final[Any] = SessionUpdate
_CONTENT_BLOCK: Final[Any] = ContentBlock


def _name(cls: Any) -> str:
    return getattr(cls, "__name__", None) or repr(cls)


# --------------------------------------------------------------------------------------------
# hand-written decoders for the hot variants; each returns None to defer to the converter


def _direct_constructor(cls: type[T]) -> Callable[..., T]:
    """A constructor for a slotted frozen attrs class that sets the slots directly.

    About twice as fast as the attrs ``__init__`` (which goes through ``object.__setattr__``); only
    for classes without validators or converters, and only with arguments of the right types.
    Optional arguments default to the fields' (immutable) defaults.
    """
    fields = attrs.fields(cast(Any, cls))
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params = []
    body = []
    for index, field in enumerate(fields):
        assert field.validator is None and field.converter is None, field
        namespace[f"_set{index}"] = cls.__dict__[field.name].__set__
        if field.default is attrs.NOTHING:
            params.append(f"a{index}")
        else:
            namespace[f"_d{index}"] = field.default
            params.append(f"a{index}=_d{index}")
        body.append(f"    _set{index}(o, a{index})")
    source = f"def make({', '.join(params)}):\n    o = _new(_cls)\n" + "\n".join(body) + "\n    return o\n"
    exec(source, namespace)  # a fixed template over attrs field metadata, no outside input
    make: Callable[..., T] = namespace["make"]
    return make


_new_text = _direct_constructor(TextContent)
_new_notification = _direct_constructor(SessionNotification)
_new_tool_content = _direct_constructor(ToolCallContentBlock)
_new_tool_call_update = _direct_constructor(ToolCallUpdate)
_new_state_update = _direct_constructor(StateUpdate)


def _fast_text(content: Any) -> TextContent | None:
    if type(content) is not dict or content.get("type") != "text":
        return None
    text = content.get("text")
    if type(text) is not str or "annotations" in content or "_meta" in content:
        return None
    return _new_text(text)


def _fast_chunk(cls: type[UserMessageChunk | AgentMessageChunk | AgentThoughtChunk]) -> Callable[[dict[str, Any]], Any]:
    new_chunk = _direct_constructor(cls)

    def decode_chunk(update: dict[str, Any]) -> Any:
        if "_meta" in update:
            return None
        content = _fast_text(update.get("content"))
        if content is None:
            return None
        message_id = update.get("messageId")
        if message_id is not None and type(message_id) is not str:
            return None
        return new_chunk(content, message_id)

    return decode_chunk


_TOOL_UPDATE_SIMPLE: Final = frozenset(
    {"sessionUpdate", "toolCallId", "title", "kind", "status", "name", "content", "rawInput", "rawOutput"}
)


def _fast_tool_call_update(update: dict[str, Any]) -> ToolCallUpdate | None:
    tool_call_id = update.get("toolCallId")
    if type(tool_call_id) is not str or not _TOOL_UPDATE_SIMPLE.issuperset(update):
        return None
    title = update.get("title")
    kind = update.get("kind")
    status = update.get("status")
    name = update.get("name")
    for value in (title, kind, status, name):
        if value is not None and type(value) is not str:
            return None
    raw_content = update.get("content")
    content: tuple[ToolCallContentBlock, ...] | None = None
    if raw_content is not None:
        if type(raw_content) is not list:
            return None
        blocks = []
        for item in raw_content:
            if type(item) is not dict or item.get("type") != "content" or "_meta" in item:
                return None
            text = _fast_text(item.get("content"))
            if text is None:
                return None
            blocks.append(_new_tool_content(text))
        content = tuple(blocks)
    return _new_tool_call_update(
        tool_call_id,
        title,
        kind,
        status,
        name,
        content,
        None,
        update.get("rawInput"),
        update.get("rawOutput"),
    )


_STATE_SIMPLE: Final = frozenset({"sessionUpdate", "state", "stopReason"})


def _fast_state_update(update: dict[str, Any]) -> StateUpdate | None:
    state = update.get("state")
    if type(state) is not str or not _STATE_SIMPLE.issuperset(update):
        return None
    stop_reason = update.get("stopReason")
    if stop_reason is not None and type(stop_reason) is not str:
        return None
    return _new_state_update(state, stop_reason)


_FAST_UPDATES: Final[dict[Any, Callable[[dict[str, Any]], Any]]] = {
    "agent_message_chunk": _fast_chunk(AgentMessageChunk),
    "user_message_chunk": _fast_chunk(UserMessageChunk),
    "agent_thought_chunk": _fast_chunk(AgentThoughtChunk),
    "tool_call_update": _fast_tool_call_update,
    "state_update": _fast_state_update,
}
