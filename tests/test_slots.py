"""The hot path's attrs constructor: the same values as the attrs ``__init__``."""

from __future__ import annotations

import attrs
import pytest

from acp_client._util._slots import direct_constructor
from acp_client.state import UpdateEvent
from acp_client.types import AgentMessageChunk, TextContent


def test_builds_the_same_value_as_the_attrs_init() -> None:
    new_text = direct_constructor(TextContent)
    assert new_text("hi") == TextContent(text="hi")
    assert new_text("hi", None, {"k": 1}) == TextContent(text="hi", meta={"k": 1})
    new_event = direct_constructor(UpdateEvent)
    update = AgentMessageChunk(content=TextContent(text="x"))
    event = new_event("s1", update, True)
    assert event == UpdateEvent("s1", update, replay=True) and type(event) is UpdateEvent
    assert new_event("s1", update) == UpdateEvent("s1", update)  # the field's default


def test_the_value_stays_frozen() -> None:
    event = direct_constructor(UpdateEvent)("s1", AgentMessageChunk(content=TextContent(text="x")), False)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.replay = True  # type: ignore[misc]


def test_refuses_a_class_with_a_validator_or_converter() -> None:
    @attrs.frozen
    class Checked:
        value: int = attrs.field(validator=attrs.validators.instance_of(int))

    with pytest.raises(TypeError, match="validator"):
        direct_constructor(Checked)
