"""How an attribute of a wire type maps to the wire (read by the private converter).

Most fields need no declaration at all: the converter derives the wire name by camelCasing the
attribute name (``session_id`` → ``sessionId``, ``meta`` → ``_meta``), treats a field with a default
as optional and lenient (a malformed value falls back to the default instead of failing the whole
message, the schema's ``x-deserialize-default-on-error``), drops malformed items of an optional
list (``x-deserialize-skip-invalid-items``), and omits a field that still holds its default when
encoding. :func:`wire` builds the ``metadata`` for the few fields that differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

#: The wire name: a string, or a mapping ``{protocol_version: name}`` (missing versions: camelCase).
NAME: Final = "acp.name"
#: The protocol versions in which the field exists on the wire (absent: all versions).
VERSIONS: Final = "acp.versions"
#: A malformed value fails the message even though the field has a default.
STRICT: Final = "acp.strict"
#: Written even when it holds its default (a list the schema requires, a required-nullable value).
ALWAYS: Final = "acp.always"
#: Protocol versions in which a ``bool`` is sent as an empty object when true and omitted when
#: false (v2 "capability objects" such as ``{"image": {}}``); decoded as "is an object".
PRESENCE: Final = "acp.presence"


def wire(
    *,
    name: str | Mapping[int, str] | None = None,
    versions: Iterable[int] | None = None,
    strict: bool = False,
    always: bool = False,
    presence: Iterable[int] | None = None,
) -> dict[str, Any]:
    """The ``attrs.field(metadata=...)`` of a field's wire mapping (the keys above say what each means)."""
    metadata: dict[str, Any] = {}
    if name is not None:
        metadata[NAME] = name if isinstance(name, str) else dict(name)
    if versions is not None:
        metadata[VERSIONS] = frozenset(versions)
    if strict:
        metadata[STRICT] = True
    if always:
        metadata[ALWAYS] = True
    if presence is not None:
        metadata[PRESENCE] = frozenset(presence)
    return metadata
