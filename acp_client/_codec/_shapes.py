"""Hand-shaped wire types: the shapes the generic machinery cannot derive from field declarations.

``initialize`` and agent capabilities (v1 and v2 put them in different places; v1 flags, v2
capability objects), the ``session/status`` answer and the v2 foreground state (default-on-error),
``session/set_config_option`` (its inferred ``type`` tag), client capabilities (extra members
kept), config options and permission requests; the ``Session`` record has :mod:`._session`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from .._util._version import __version__
from ..types.agent_requests import RequestPermissionRequest, ToolCallPermissionSubject
from ..types.capabilities import (
    AgentCapabilities,
    AuthMethod,
    ClientCapabilities,
    Implementation,
    McpCapabilities,
    PromptCapabilities,
    SessionCapabilities,
)
from ..types.lifecycle import (
    ForegroundState,
    InitializeRequest,
    InitializeResponse,
    SessionConfigOption,
    SessionStatusResponse,
    SetSessionConfigOptionRequest,
    normalize_status,
)
from ._base import DecodeError, Hook, camel, field_wire_name, kind_of, on_wire
from ._converter import Builder

ByVersion = Callable[[int], Builder]


#: The identity sent in a v2 ``initialize`` when the app gave none (v2 requires ``info``).
DEFAULT_CLIENT_INFO: Final = Implementation(name="acp-reconnect", version=__version__)


def register_shapes(builder: Builder, by_version: ByVersion) -> None:
    """Install the hand-shaped hooks on ``builder`` (``initialize`` decodes whichever version's
    shape the payload has: ``by_version`` finds that version's builder)."""
    shapes = _Shapes(builder, by_version)
    # class -> (structure hook, unstructure hook); None: the generic one
    hooks: dict[type, tuple[Hook | None, Callable[[Any], Any] | None]] = {
        ForegroundState: (structure_foreground_state, unstructure_foreground_state),
        SessionStatusResponse: (shapes.status_response_in, shapes.status_response_out),
        SetSessionConfigOptionRequest: (None, shapes.set_config_option_out),
        AgentCapabilities: (shapes.agent_capabilities_in, shapes.agent_capabilities_out),
        InitializeRequest: (shapes.initialize_request_in, shapes.initialize_request_out),
        InitializeResponse: (shapes.initialize_response_in, shapes.initialize_response_out),
        ClientCapabilities: (shapes.client_capabilities_in, shapes.client_capabilities_out),
        SessionConfigOption: (None, shapes.config_option_out),
        RequestPermissionRequest: (shapes.permission_request_in, None),
    }
    for cls, (structure, unstructure) in hooks.items():
        if structure is not None:
            builder.conv.register_structure_hook(cls, structure)
        if unstructure is not None:
            builder.conv.register_unstructure_hook(cls, unstructure)


def _meta_in(value: dict[str, Any]) -> dict[str, Any] | None:
    meta = value.get("_meta")
    return meta if type(meta) is dict else None


def _with_meta(out: dict[str, Any], meta: dict[str, Any] | None) -> dict[str, Any]:
    if meta is not None:
        out["_meta"] = meta
    return out


def structure_foreground_state(value: Any, _: Any) -> ForegroundState | None:
    """Default-on-error: anything but an object with a string ``state`` is "not reported"."""
    if type(value) is not dict:
        return None
    state = value.get("state")
    if type(state) is not str:
        return None
    stop_reason = value.get("stopReason")
    return ForegroundState(state=state, stop_reason=stop_reason if type(stop_reason) is str else None, raw=value)


def unstructure_foreground_state(obj: ForegroundState) -> dict[str, Any]:
    out = dict(obj.raw)
    out["state"] = obj.state
    if obj.stop_reason is not None:
        out["stopReason"] = obj.stop_reason
    return out


class _Shapes:
    """The hand-shaped hooks of one builder (one protocol version)."""

    def __init__(self, builder: Builder, by_version: ByVersion) -> None:
        self.builder = builder
        self.version = builder.version
        self.by_version = by_version
        self.plain_caps_in = builder.class_hook(ClientCapabilities)
        self.plain_caps_out = builder.class_unhook(ClientCapabilities)
        self.modeled_caps = {
            field_wire_name(f, self.version) for f in attrs.fields(ClientCapabilities) if on_wire(f, self.version)
        }
        self.plain_option_out = builder.class_unhook(SessionConfigOption)
        self.plain_permission_in = builder.class_hook(RequestPermissionRequest)

    def client_capabilities_in(self, value: Any, tp: Any) -> ClientCapabilities:
        """Capability members this class does not model are kept in ``extra`` (and written back)."""
        caps: ClientCapabilities = self.plain_caps_in(value, tp)
        extra = {k: v for k, v in value.items() if k not in self.modeled_caps}
        return attrs.evolve(caps, extra=extra) if extra else caps

    def client_capabilities_out(self, obj: ClientCapabilities) -> dict[str, Any]:
        out: dict[str, Any] = dict(obj.extra) if obj.extra else {}
        out.update(self.plain_caps_out(obj))
        return out

    def config_option_out(self, obj: SessionConfigOption) -> dict[str, Any]:
        out: dict[str, Any] = self.plain_option_out(obj)
        if obj.type == "select":
            out.setdefault("options", [])  # required for a select, even when empty
        return out

    def permission_request_in(self, value: Any, tp: Any) -> RequestPermissionRequest:
        """A v2 tool-call subject fills ``tool_call`` too, so handlers read it in both versions."""
        request: RequestPermissionRequest = self.plain_permission_in(value, tp)
        if request.tool_call is None and isinstance(request.subject, ToolCallPermissionSubject):
            return attrs.evolve(request, tool_call=request.subject.tool_call)
        return request

    def status_response_in(self, value: Any, _: Any) -> SessionStatusResponse:
        if type(value) is not dict:
            raise DecodeError(f"SessionStatusResponse: expected an object, got {kind_of(value)}")
        raw_status = value.get("status")
        if type(raw_status) is not str:
            raise DecodeError(f"SessionStatusResponse.status: expected a string, got {kind_of(raw_status)}")
        state = structure_foreground_state(value.get("state"), None) if self.version >= 2 else None
        return SessionStatusResponse(
            status=normalize_status(raw_status),
            raw_status=raw_status,
            state=state,
            meta=_meta_in(value),
        )

    def status_response_out(self, obj: SessionStatusResponse) -> dict[str, Any]:
        out: dict[str, Any] = {"status": obj.raw_status}
        if obj.state is not None and self.version >= 2:
            out["state"] = unstructure_foreground_state(obj.state)
        return _with_meta(out, obj.meta)

    def set_config_option_out(self, obj: SetSessionConfigOptionRequest) -> dict[str, Any]:
        out: dict[str, Any] = {"sessionId": obj.session_id, "configId": obj.config_id}
        tag = obj.type
        if tag is None:
            if isinstance(obj.value, bool):
                tag = "boolean"
            elif self.version >= 2:
                tag = "id"
        if tag is not None:
            out["type"] = tag
        out["value"] = self.builder.conv.unstructure(obj.value)
        return _with_meta(out, obj.meta)

    def agent_capabilities_in(self, value: Any, _: Any) -> AgentCapabilities:
        if type(value) is not dict:
            raise DecodeError(f"AgentCapabilities: expected an object, got {kind_of(value)}")
        lenient = self.builder.lenient
        meta = _meta_in(value)
        if self.version == 1:
            session_raw = value.get("sessionCapabilities")
            session_raw = session_raw if type(session_raw) is dict else {}
            return AgentCapabilities(
                load_session=value.get("loadSession") is True,
                prompt=lenient(PromptCapabilities, value.get("promptCapabilities"), PromptCapabilities()),
                mcp=lenient(McpCapabilities, value.get("mcpCapabilities"), McpCapabilities()),
                session=_session_capabilities(session_raw, baseline=False),
                raw=value,
                meta=meta,
            )
        session_raw = value.get("session")
        if type(session_raw) is not dict:
            return AgentCapabilities(raw=value, meta=meta)
        return AgentCapabilities(
            prompt=lenient(PromptCapabilities, session_raw.get("prompt"), PromptCapabilities()),
            mcp=lenient(McpCapabilities, session_raw.get("mcp"), McpCapabilities()),
            session=_session_capabilities(session_raw, baseline=True),
            raw=value,
            meta=meta,
        )

    def agent_capabilities_out(self, obj: AgentCapabilities) -> dict[str, Any]:
        conv = self.builder.conv
        prompt = conv.unstructure(obj.prompt)
        mcp = conv.unstructure(obj.mcp)
        if self.version == 1:
            out = {k: v for k, v in obj.raw.items() if k not in _V1_AGENT_CAPS_MODELED}
            session = _session_capabilities_out(obj.session, obj.raw.get("sessionCapabilities"), _V1_SESSION_FLAGS)
            members = (
                ("loadSession", obj.load_session),
                ("promptCapabilities", prompt),
                ("mcpCapabilities", mcp),
                ("sessionCapabilities", session),
            )
            out.update((key, value) for key, value in members if value)  # each written only when set
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
        return _with_meta(out, obj.meta)

    # ``initialize`` params and result: encoding follows this builder's protocol version, decoding
    # accepts either shape (v1 ``clientInfo``... / v2 ``info`` and ``capabilities``).

    def _initialize_head(self, value: Any, what: str, v1_keys: tuple[str, str]) -> tuple[int, Builder, str, str, Any]:
        """An object with an integer ``protocolVersion``; which shape it has (its builder and keys)."""
        if type(value) is not dict:
            raise DecodeError(f"{what}: expected an object, got {kind_of(value)}")
        protocol_version = value.get("protocolVersion")
        if type(protocol_version) is not int:
            raise DecodeError(f"{what}.protocolVersion: expected an integer, got {kind_of(protocol_version)}")
        has_v1 = any(k in value for k in v1_keys)
        has_v2 = "info" in value or "capabilities" in value
        v2_shape = has_v2 if has_v1 != has_v2 else self.version >= 2  # by its members, else by the version
        info_key, caps_key = ("info", "capabilities") if v2_shape else v1_keys
        return protocol_version, self.by_version(2 if v2_shape else 1), info_key, caps_key, _meta_in(value)

    def initialize_request_in(self, value: Any, _: Any) -> InitializeRequest:
        protocol_version, builder, info_key, caps_key, meta = self._initialize_head(
            value, "InitializeRequest", _V1_REQUEST_KEYS
        )
        return InitializeRequest(
            protocol_version=protocol_version,
            client_info=builder.lenient(Implementation, value.get(info_key), None),
            client_capabilities=builder.lenient(ClientCapabilities, value.get(caps_key), ClientCapabilities()),
            meta=meta,
        )

    def initialize_request_out(self, obj: InitializeRequest) -> dict[str, Any]:
        conv = self.builder.conv
        out: dict[str, Any] = {"protocolVersion": obj.protocol_version}
        if self.version >= 2:
            out["info"] = conv.unstructure(obj.client_info or DEFAULT_CLIENT_INFO)
            out["capabilities"] = conv.unstructure(obj.client_capabilities)
        else:
            out["clientCapabilities"] = conv.unstructure(obj.client_capabilities)
            if obj.client_info is not None:
                out["clientInfo"] = conv.unstructure(obj.client_info)
        return _with_meta(out, obj.meta)

    def initialize_response_in(self, value: Any, _: Any) -> InitializeResponse:
        protocol_version, builder, info_key, caps_key, meta = self._initialize_head(
            value, "InitializeResponse", _V1_RESPONSE_KEYS
        )
        methods = value.get("authMethods")  # default-on-error, and invalid items are skipped
        auth_methods = builder.lenient_items(AuthMethod, methods) if type(methods) is list else ()
        return InitializeResponse(
            protocol_version=protocol_version,
            agent_info=builder.lenient(Implementation, value.get(info_key), None),
            agent_capabilities=builder.lenient(AgentCapabilities, value.get(caps_key), AgentCapabilities()),
            auth_methods=auth_methods,
            meta=meta,
        )

    def initialize_response_out(self, obj: InitializeResponse) -> dict[str, Any]:
        conv = self.builder.conv
        out: dict[str, Any] = {"protocolVersion": obj.protocol_version}
        info = None if obj.agent_info is None else conv.unstructure(obj.agent_info)
        caps = conv.unstructure(obj.agent_capabilities)
        if self.version >= 2:
            if info is not None:
                out["info"] = info
            out["capabilities"] = caps
        else:
            out["agentCapabilities"] = caps
            if info is not None:
                out["agentInfo"] = info
        if obj.auth_methods:
            out["authMethods"] = [conv.unstructure(m) for m in obj.auth_methods]
        return _with_meta(out, obj.meta)


# wire key -> SessionCapabilities attribute; in v2, resume, close and list are baseline, not flags
_V1_SESSION_FLAGS: Final = {camel(f.name): f.name for f in attrs.fields(SessionCapabilities)}
_V2_SESSION_FLAGS: Final = {k: v for k, v in _V1_SESSION_FLAGS.items() if k not in ("resume", "close", "list")}
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


_V1_REQUEST_KEYS: Final = ("clientInfo", "clientCapabilities")
_V1_RESPONSE_KEYS: Final = ("agentInfo", "agentCapabilities")
