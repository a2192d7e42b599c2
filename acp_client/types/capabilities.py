"""Capabilities exchanged by ``initialize``, normalized across protocol versions.

The two protocol versions advertise the same things in different places:

=====================  ==============================================  =================================
what                   v1                                              v2
=====================  ==============================================  =================================
client identity        ``clientInfo``                                  ``info``
client capabilities    ``clientCapabilities`` (``fs``, ``terminal``)   ``capabilities`` (no fs/terminal)
agent identity         ``agentInfo``                                   ``info``
load                   ``agentCapabilities.loadSession``               (no ``session/load``)
session methods        ``agentCapabilities.sessionCapabilities.*``     ``capabilities.session.*``
prompt content         ``agentCapabilities.promptCapabilities``        ``capabilities.session.prompt``
=====================  ==============================================  =================================

:class:`AgentCapabilities` is one normalized value for both, with :meth:`AgentCapabilities.supports`
and :meth:`AgentCapabilities.capability_path` for the client's capability gate. In v2,
``session/resume``, ``session/close`` and ``session/list`` are baseline methods: every agent that
advertises a ``session`` capability object supports them.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from ._fields import wire
from ._value import value_types

__all__ = [
    "AgentCapabilities",
    "AuthMethod",
    "ClientAuthCapabilities",
    "ClientCapabilities",
    "ElicitationCapabilities",
    "FileSystemCapability",
    "Implementation",
    "McpCapabilities",
    "PromptCapabilities",
    "SessionCapabilities",
]


@attrs.frozen(eq=False, repr=False)
class Implementation:
    """The name and version of a client or agent implementation."""

    name: str
    version: str
    title: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class FileSystemCapability:
    """Which ``fs/*`` methods the client serves (v1 only)."""

    read_text_file: bool = False
    write_text_file: bool = False
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ElicitationCapabilities:
    """Which ``elicitation/create`` modes the client supports (each sent as ``{}`` when true)."""

    form: bool = attrs.field(default=False, metadata=wire(presence=(1, 2)))
    url: bool = attrs.field(default=False, metadata=wire(presence=(1, 2)))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ClientAuthCapabilities:
    """Authentication features of the client (``terminal``: v1 a boolean, v2 an object)."""

    terminal: bool = attrs.field(default=False, metadata=wire(presence=(2,)))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ClientCapabilities:
    """What the client advertises in ``initialize``.

    ``fs`` and ``terminal`` (whether ``terminal/*`` is served) exist in v1 only. ``extra``: further
    capability members sent verbatim (e.g. ``{"positionEncodings": [...]}``); on decode, the
    members this class does not model.
    """

    fs: FileSystemCapability = attrs.field(factory=FileSystemCapability, metadata=wire(versions=(1,)))
    terminal: bool = attrs.field(default=False, metadata=wire(versions=(1,)))
    elicitation: ElicitationCapabilities | None = None
    auth: ClientAuthCapabilities | None = None
    extra: dict[str, Any] | None = attrs.field(default=None, metadata=wire(versions=()))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class PromptCapabilities:
    """Prompt content the agent accepts beyond text and resource links."""

    image: bool = attrs.field(default=False, metadata=wire(presence=(2,)))
    audio: bool = attrs.field(default=False, metadata=wire(presence=(2,)))
    embedded_context: bool = attrs.field(default=False, metadata=wire(presence=(2,)))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class McpCapabilities:
    """MCP server transports the agent can connect to (stdio is implied in v1)."""

    http: bool = attrs.field(default=False, metadata=wire(presence=(2,)))
    sse: bool = attrs.field(default=False, metadata=wire(versions=(1,)))
    acp: bool = attrs.field(default=False, metadata=wire(presence=(2,)))
    stdio: bool = attrs.field(default=False, metadata=wire(versions=(2,), presence=(2,)))
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class SessionCapabilities:
    """Optional session methods the agent supports: each ``True`` when advertised.

    In v2, ``resume``, ``close`` and ``list`` are baseline methods and are ``True`` whenever the
    agent advertised a ``session`` capability object.
    """

    resume: bool = False
    close: bool = False
    list: bool = False
    fork: bool = False
    status: bool = False
    delete: bool = False
    additional_directories: bool = False
    archive: bool = False
    title: bool = False


@attrs.frozen(eq=False, repr=False)
class AuthMethod:
    """An authentication method the agent offers.

    ``type``: ``"agent"`` (the agent handles it), ``"terminal"``, or a future kind. For
    ``terminal``: extra ``args``, and the ``env`` as sent (v1 an object, v2 a list).
    """

    id: str = attrs.field(metadata=wire(name={1: "id", 2: "methodId"}))
    name: str
    type: str = attrs.field(default="agent", metadata=wire(always=True))
    description: str | None = None
    args: tuple[str, ...] = ()
    env: Any = None
    meta: dict[str, Any] | None = None


_V1_SESSION_PATH: Final = "agentCapabilities.sessionCapabilities."
_V2_SESSION_PATH: Final = "capabilities.session"

# method -> SessionCapabilities attribute gating it
_SESSION_GATES: Final = {f"session/{name}": name for name in ("resume", "close", "list", "fork", "status", "delete")}
# methods that are baseline in v2 (gated by the presence of the ``session`` object itself)
_V2_BASELINE: Final = frozenset({"session/resume", "session/close", "session/list"})


@attrs.frozen(eq=False, repr=False)
class AgentCapabilities:
    """What the agent advertised in ``initialize``, normalized across protocol versions.

    ``load_session`` is always false in v2. ``raw``: the capability object exactly as received
    (``agentCapabilities`` in v1, ``capabilities`` in v2), for anything not modeled here; not part
    of equality.
    """

    load_session: bool = False
    prompt: PromptCapabilities = attrs.field(factory=PromptCapabilities)
    mcp: McpCapabilities = attrs.field(factory=McpCapabilities)
    session: SessionCapabilities = attrs.field(factory=SessionCapabilities)
    raw: dict[str, Any] = attrs.field(factory=dict, eq=False)
    meta: dict[str, Any] | None = None

    def supports(self, method: str) -> bool:
        """Whether the agent advertised what the client→agent ``method`` needs.

        Methods that need no capability (``session/new``, ``session/prompt``, ``session/cancel``,
        ``session/set_mode``, ...) are always supported.
        """
        if method == "session/load":
            return self.load_session
        gate = _SESSION_GATES.get(method)
        if gate is None:
            return True
        return bool(getattr(self.session, gate))

    def capability_path(self, method: str, protocol_version: int) -> str:
        """Where the capability gating ``method`` is advertised in ``protocol_version``, as a dotted path.

        For example ``"agentCapabilities.sessionCapabilities.status"`` (v1),
        ``"capabilities.session.status"`` (v2), ``"agentCapabilities.loadSession"``;
        ``"capabilities.session"`` for a v2 baseline method; ``""`` for a method that needs no
        capability; and a note for ``session/load`` in v2, where the method does not exist.
        """
        v2 = protocol_version >= 2
        if method == "session/load":
            return "(none: session/load is not part of protocol v2)" if v2 else "agentCapabilities.loadSession"
        gate = _SESSION_GATES.get(method)
        if gate is None:
            return ""
        if v2:
            return _V2_SESSION_PATH if method in _V2_BASELINE else f"{_V2_SESSION_PATH}.{gate}"
        return _V1_SESSION_PATH + gate


value_types(globals())
