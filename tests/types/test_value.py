"""The wire types' equality, hashing and repr (``acp_client.types._value``) match what attrs generates."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

import acp_client.types as types
from acp_client.types import AgentCapabilities, AgentMessageChunk, TextContent
from acp_client.types._value import value


@attrs.frozen
class _ByAttrs:
    name: str
    items: tuple[int, ...] = ()
    note: str | None = attrs.field(default=None, eq=False, repr=False)


@value
@attrs.frozen(eq=False, repr=False)
class _ByValue:
    name: str
    items: tuple[int, ...] = ()
    note: str | None = attrs.field(default=None, eq=False, repr=False)


def test_equality_hash_and_repr_follow_attrs() -> None:
    ours, theirs = _ByValue("a", (1, 2), note="x"), _ByAttrs("a", (1, 2), note="x")
    assert ours == _ByValue("a", (1, 2), note="other note")  # a field with eq=False is not compared
    assert ours != _ByValue("a", (1,))
    assert ours != _ByValue("b", (1, 2))
    assert hash(ours) == hash(_ByValue("a", (1, 2), note="y"))
    assert len({ours, _ByValue("a", (1, 2)), _ByValue("a")}) == 2
    assert repr(ours).replace("_ByValue", "_ByAttrs") == repr(theirs) == "_ByAttrs(name='a', items=(1, 2))"


def test_another_class_is_never_equal() -> None:
    assert _ByValue("a") != _ByAttrs("a")
    assert _ByValue("a").__eq__(_ByAttrs("a")) is NotImplemented
    assert _ByValue("a") != "a"


def test_a_value_holding_a_list_is_unhashable_as_with_attrs() -> None:
    holding = _ByValue("a", [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unhashable"):
        hash(holding)
    with pytest.raises(TypeError, match="unhashable"):
        hash(_ByAttrs("a", [1]))  # type: ignore[arg-type]


def test_wire_types() -> None:
    one = AgentMessageChunk(content=TextContent(text="hi"), message_id="m1")
    assert one == AgentMessageChunk(content=TextContent(text="hi"), message_id="m1")
    assert one != AgentMessageChunk(content=TextContent(text="hi"), message_id="m2")
    assert hash(one) == hash(AgentMessageChunk(content=TextContent(text="hi"), message_id="m1"))
    assert repr(one).startswith("AgentMessageChunk(content=TextContent(text='hi'")
    # AgentCapabilities.raw is documented as not part of equality
    assert AgentCapabilities(raw={"a": 1}) == AgentCapabilities(raw={})


def test_custom_eq_or_repr_callables_are_refused() -> None:
    with pytest.raises(TypeError, match="custom eq/repr"):

        @value
        @attrs.frozen(eq=False, repr=False)
        class _Bad:
            name: str = attrs.field(eq=str.lower)


def _wire_classes() -> list[type[Any]]:
    found = []
    for module in (
        types.content,
        types.updates,
        types.lifecycle,
        types.agent_requests,
        types.capabilities,
        types.session,
    ):
        found += [cls for _, cls in inspect.getmembers(module, inspect.isclass) if attrs.has(cls)]
    return found


@pytest.mark.parametrize("cls", _wire_classes(), ids=lambda cls: cls.__name__)
def test_every_wire_type_has_value_semantics(cls: type[Any]) -> None:
    # an attrs class left with eq=False and no value() compares by identity: a silent regression
    assert cls.__eq__ is not object.__eq__, cls
    assert cls.__repr__ is not object.__repr__, cls
    assert cls.__hash__ is not None and cls.__hash__ is not object.__hash__, cls
