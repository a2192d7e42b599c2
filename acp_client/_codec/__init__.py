"""The one codec: ACP wire JSON ⇄ :mod:`acp_client.types` values (private).

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

:func:`decode_update_params` is the hot path: the common ``session/update`` variants are decoded
by hand-written code (:mod:`._fast`), everything else by the converter, with the same result.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from ..exceptions import InvalidMessage
from ..types.session import Session
from ..types.updates import SessionNotification, SessionUpdate
from . import _session
from ._base import failure, kind_of, type_name
from ._converter import Builder
from ._fast import FAST_UPDATES, new_notification
from ._shapes import register_shapes

__all__ = [
    "decode_session_notification",
    "decode_session_update",
    "decode_update_params",
    "from_wire",
    "session_from_json",
    "session_to_json",
    "to_wire",
]

T = TypeVar("T")


def _builder(protocol_version: int) -> Builder:
    version = 2 if protocol_version >= 2 else 1
    builder = _BUILDERS.get(version)
    if builder is None:
        # Built on first use (a cattrs converter per version costs ~6 ms, a tenth of the import);
        # two threads racing here build two equal builders and keep one.
        builder = _BUILDERS.setdefault(version, _make(version))
    return builder


def _make(version: int) -> Builder:
    builder = Builder(version)
    register_shapes(builder, _builder)
    _session.register_session(builder)
    return builder


_BUILDERS: Final[dict[int, Builder]] = {}


def to_wire(value: Any, *, protocol_version: int = 1) -> Any:
    """Encode a wire value (or a list/tuple of them) into JSON-ready data, in the shapes of
    ``protocol_version`` (for ``initialize``: the version the request proposes / the result answers)."""
    conv = _builder(protocol_version).conv
    if isinstance(value, list | tuple):
        return [conv.unstructure(item) for item in value]
    return conv.unstructure(value)


def from_wire(cls: type[T], data: Any, *, protocol_version: int = 1) -> T:
    """Decode JSON data (usually a message's ``params`` or ``result``) into ``cls``, leniently.

    Raises:
        InvalidMessage: The data cannot be decoded into ``cls``; the message names the member.
    """
    try:
        result: T = _builder(protocol_version).conv.structure(data, cls)
    except RecursionError as exc:
        raise InvalidMessage(f"cannot decode {type_name(cls)}: nested too deeply") from exc
    except Exception as exc:
        raise InvalidMessage(failure(type_name(cls), exc)) from exc
    return result


def decode_session_update(data: Any, *, protocol_version: int = 1) -> SessionUpdate:
    """Decode one ``update`` object of a ``session/update`` notification.

    Raises:
        InvalidMessage: Not an object, no string ``sessionUpdate``, or a malformed known variant.
    """
    fast = FAST_UPDATES.get(data.get("sessionUpdate")) if type(data) is dict else None
    decoded: SessionUpdate | None = fast(data) if fast is not None else None
    return decoded if decoded is not None else from_wire(_SESSION_UPDATE, data, protocol_version=protocol_version)


def decode_session_notification(params: Any, *, protocol_version: int = 1) -> SessionNotification:
    """Decode ``session/update`` params (the common variants by the hand-written fast path).

    Raises:
        InvalidMessage: The params are not an object, ``sessionId`` is not a string, or the update
            cannot be decoded.
    """
    session_id, decoded = decode_update_params(params, protocol_version=protocol_version)
    meta = params.get("_meta")
    return new_notification(session_id, decoded, meta if meta is None or type(meta) is dict else None)


def decode_update_params(params: Any, *, protocol_version: int = 1) -> tuple[str, SessionUpdate]:
    """The hot path: ``session/update`` params as ``(session id, decoded update)``, without the
    notification around them.

    Raises:
        InvalidMessage: As :func:`decode_session_notification`.
    """
    if type(params) is not dict:
        raise InvalidMessage(f"cannot decode SessionNotification: expected an object, got {kind_of(params)}")
    session_id = params.get("sessionId")
    if type(session_id) is not str:
        raise InvalidMessage(
            f"cannot decode SessionNotification.sessionId: expected a string, got {kind_of(session_id)}"
        )
    update = params.get("update")
    if type(update) is not dict:
        raise InvalidMessage(f"cannot decode SessionNotification.update: expected an object, got {kind_of(update)}")
    fast = FAST_UPDATES.get(update.get("sessionUpdate"))
    decoded: SessionUpdate | None = fast(update) if fast is not None else None
    if decoded is None:
        try:
            decoded = _builder(protocol_version).session_update_hook(update, _SESSION_UPDATE)
        except Exception as exc:
            raise InvalidMessage(failure("SessionNotification.update", exc)) from exc
    return session_id, decoded


# Union aliases are valid structure targets at runtime; typed ``Any`` for the ``type[T]`` parameters.
_SESSION_UPDATE: Final[Any] = SessionUpdate


def session_to_json(session: Session, *, protocol_version: int = 1) -> dict[str, Any]:
    """A :class:`~acp_client.types.Session` record as a JSON-ready object (see :mod:`._session`);
    nested protocol values (config options, the foreground state) in ``protocol_version``'s shapes."""
    return _session.session_to_json(session, _builder(protocol_version))


def session_from_json(data: Any, *, protocol_version: int = 1) -> Session:
    """Decode a ``Session`` object (the form :func:`session_to_json` writes, or an agent's), leniently.

    Raises:
        InvalidMessage: ``data`` is not an object or has no string ``sessionId``.
    """
    return _session.session_from_json(data, _builder(protocol_version))
