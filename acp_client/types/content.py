"""Content blocks: what prompts, message chunks and tool calls carry (ACP ``ContentBlock``).

The wire union is tagged by ``type``. A block whose ``type`` this SDK does not know decodes to
:class:`UnknownContent`, which keeps the raw payload and encodes back to it unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeAlias

import attrs

from ._value import UnknownVariant, value_types

__all__ = [
    "Annotations",
    "AudioContent",
    "BlobResourceContents",
    "ContentBlock",
    "EmbeddedResource",
    "EmbeddedResourceContents",
    "ImageContent",
    "ResourceLink",
    "TextContent",
    "TextResourceContents",
    "UnknownContent",
]


@attrs.frozen(eq=False, repr=False)
class Annotations:
    """Hints about how a block is meant to be used or shown: ``audience`` (``"user"``,
    ``"assistant"``; open set), ``last_modified`` (RFC 3339, as sent), ``priority`` (0 to 1)."""

    audience: tuple[str, ...] | None = None
    last_modified: str | None = None
    priority: float | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class TextContent:
    """Plain text (wire tag ``text``)."""

    type: ClassVar[str] = "text"

    text: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ImageContent:
    """A base64-encoded image (wire tag ``image``)."""

    type: ClassVar[str] = "image"

    data: str
    mime_type: str
    uri: str | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class AudioContent:
    """Base64-encoded audio (wire tag ``audio``)."""

    type: ClassVar[str] = "audio"

    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class ResourceLink:
    """A reference to a resource the agent can fetch (wire tag ``resource_link``); ``icons`` (v2):
    the raw icon objects."""

    type: ClassVar[str] = "resource_link"

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: tuple[dict[str, Any], ...] | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class TextResourceContents:
    """The text of an embedded resource."""

    uri: str
    text: str
    mime_type: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class BlobResourceContents:
    """The base64 bytes of an embedded resource."""

    uri: str
    blob: str
    mime_type: str | None = None
    meta: dict[str, Any] | None = None


#: The two shapes of an embedded resource's contents (told apart by ``text`` vs ``blob``).
EmbeddedResourceContents: TypeAlias = TextResourceContents | BlobResourceContents


@attrs.frozen(eq=False, repr=False)
class EmbeddedResource:
    """A resource whose contents travel inside the message (wire tag ``resource``)."""

    type: ClassVar[str] = "resource"

    resource: EmbeddedResourceContents
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(eq=False, repr=False)
class UnknownContent(UnknownVariant):
    """A content block of a type this SDK does not know."""


#: A content block (the ACP ``ContentBlock`` union).
ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | UnknownContent


value_types(globals())
