"""The shape of the public types: exports, frozen values, variant tags and message ids."""

from __future__ import annotations

import typing

import attrs
import pytest

import acp_client.types as types_pkg
from acp_client.types import (
    AgentMessageChunk,
    ContentBlock,
    SessionUpdate,
    TextContent,
    ToolCall,
    UnknownSessionUpdate,
    _fields,
)
from tests.codec import _schemas

VARIANTS = [cls for cls in typing.get_args(SessionUpdate) if cls is not UnknownSessionUpdate]


def test_all_is_sorted_unique_and_complete() -> None:
    names = types_pkg.__all__
    assert names == sorted(names) and len(names) == len(set(names))
    for name in names:
        assert hasattr(types_pkg, name), name
    modules = (
        types_pkg.content,
        types_pkg.capabilities,
        types_pkg.lifecycle,
        types_pkg.updates,
        types_pkg.agent_requests,
        types_pkg.session,
    )
    public = {name for module in modules for name in module.__all__}
    assert public == set(names)


def test_every_value_class_is_frozen() -> None:
    for name in types_pkg.__all__:
        cls = getattr(types_pkg, name)
        if isinstance(cls, type) and attrs.has(cls):
            instance_fields = attrs.fields(cls)
            assert cls.__setattr__ is not object.__setattr__ or not instance_fields, name
    chunk = AgentMessageChunk(TextContent("x"))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        chunk.content = TextContent("y")  # type: ignore[misc]


def test_every_schema_variant_has_a_class() -> None:
    tags = set()
    for key in _schemas.SCHEMA_SETS:
        union = _schemas.defs(key)["SessionUpdate"]
        for alternative in union.get("oneOf", []) + union.get("anyOf", []):
            tag = alternative.get("properties", {}).get("sessionUpdate", {}).get("const")
            if tag is not None:
                tags.add(tag)
    assert len(tags) == 26
    assert {cls.kind for cls in VARIANTS} == tags


@pytest.mark.parametrize("cls", VARIANTS, ids=lambda c: c.__name__)
def test_variants_have_a_kind_and_a_message_id(cls: type) -> None:
    assert isinstance(cls.kind, str)
    assert "kind" not in {f.name for f in attrs.fields(cls)}  # a class-level tag, not a field
    assert hasattr(cls, "message_id")
    required = {f.name: "x" for f in attrs.fields(cls) if f.default is attrs.NOTHING}
    if "content" in required:
        required["content"] = TextContent("x")  # type: ignore[assignment]
    instance = cls(**required)
    assert instance.message_id in (None, "x")
    assert instance.kind == cls.kind


def test_unknown_update_kind_is_per_instance() -> None:
    update = UnknownSessionUpdate("future_update", {"sessionUpdate": "future_update"})
    assert update.kind == "future_update" and update.message_id is None


def test_tool_kind_does_not_clash_with_the_variant_tag() -> None:
    call = ToolCall("c", "Read", tool_kind="read")
    assert call.kind == "tool_call" and call.tool_kind == "read"


def test_content_block_alias_covers_every_block() -> None:
    assert {cls.__name__ for cls in typing.get_args(ContentBlock)} == {
        "TextContent", "ImageContent", "AudioContent", "ResourceLink", "EmbeddedResource", "UnknownContent",
    }  # fmt: skip


def test_field_metadata_helper() -> None:
    metadata = _fields.wire(name={2: "configId"}, versions=(1, 2), strict=True, always=True, presence=(2,))
    assert metadata == {
        _fields.NAME: {2: "configId"},
        _fields.VERSIONS: frozenset({1, 2}),
        _fields.STRICT: True,
        _fields.ALWAYS: True,
        _fields.PRESENCE: frozenset({2}),
    }
