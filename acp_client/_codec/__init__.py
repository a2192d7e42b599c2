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

:func:`decode_session_notification` is the hot path: the common ``session/update`` variants are
decoded by hand-written code and everything else falls back to the converter, with the same result.

Layout: :mod:`._base` (decode errors, field plumbing, strict primitives), :mod:`._converter`
(the generic cattrs machinery and the tagged-union table), :mod:`._shapes` (hand-shaped types:
``initialize``, capabilities, status...), :mod:`._session` (the ``Session`` record),
:mod:`._fast` (hand-written decoders for the hot ``session/update`` variants) and :mod:`._api`
(the functions below). :mod:`acp_client.types` declares the values and knows nothing of the wire.
"""

from __future__ import annotations

from ._api import (
    decode_content_block,
    decode_foreground_state,
    decode_session_notification,
    decode_session_update,
    from_wire,
    from_wire_lenient,
    session_from_json,
    session_to_json,
    to_wire,
)

__all__ = [
    "decode_content_block",
    "decode_foreground_state",
    "decode_session_notification",
    "decode_session_update",
    "from_wire",
    "from_wire_lenient",
    "session_from_json",
    "session_to_json",
    "to_wire",
]
