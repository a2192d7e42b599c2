"""Slots: fast construction of frozen attrs values, and typed places for a layer's own data. Pure.

attrs' frozen ``__init__`` sets each field through ``object.__setattr__``, which a value built per
streamed update pays every time; :func:`direct_constructor` sets the slots directly (about twice as
fast). A :class:`Slot` is where a layer above the core keeps its typed data on a core object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, cast

import attrs

T = TypeVar("T")


class Slotted(Protocol):
    """A core object that carries other layers' data (one entry per :class:`Slot`)."""

    slots: dict[object, object]


class Slot(Generic[T]):
    """One layer's typed place on :class:`Slotted` objects: ``slot(owner)``, made by ``make`` on first use."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make

    def __call__(self, owner: Slotted) -> T:
        value = owner.slots.get(self)
        if value is None:
            value = owner.slots[self] = self._make()
        return cast(T, value)


def direct_constructor(cls: type[T]) -> Callable[..., T]:
    """A constructor for a slotted frozen attrs class that sets the slots directly: only for
    classes without validators or converters (checked), with arguments of the right types (not
    checked: already decoded); optional ones default to the fields' (immutable) defaults."""
    fields = attrs.fields(cast(Any, cls))
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params = []
    body = []
    for index, field in enumerate(fields):
        if field.validator is not None or field.converter is not None:
            raise TypeError(f"{cls.__name__}.{field.name} has a validator or converter")
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
