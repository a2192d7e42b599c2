"""Value semantics for the wire types, written once instead of once per class. Pure.

attrs compiles ``__eq__``, ``__hash__`` and ``__repr__`` for every class it decorates; for the
~130 wire types that was about a seventh of ``import acp_client``. So the wire types are declared
``@attrs.frozen(eq=False, repr=False)``, and each module ends with ``value_types(globals())``,
which gives them the behaviour attrs would have generated (equal only to the very same class,
hashed alike when equal, ``Name(field=value, ...)``) from shared functions. Also the field sets
several wire types share (each subclass is still its own type, equal only to itself).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import attrs

_T = TypeVar("_T")


def value(cls: type[_T]) -> type[_T]:
    """Give an attrs class declared with ``eq=False, repr=False`` attrs' value semantics."""
    fields = attrs.fields(cast(Any, cls))
    for field in fields:
        if callable(field.eq_key) or callable(field.repr):
            raise TypeError(f"{cls.__name__}.{field.name}: custom eq/repr callables are not supported here")
    compared = tuple(field.name for field in fields if field.eq)
    shown = tuple(field.name for field in fields if field.repr)
    key: Callable[[Any], Any] = operator.attrgetter(*compared) if compared else _nothing
    salt = f"{cls.__module__}.{cls.__qualname__}"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(key(self) == key(other))

    def __hash__(self: Any) -> int:
        return hash((salt, key(self)))

    def __repr__(self: Any) -> str:
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({body})"

    for method in (__eq__, __hash__, __repr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        setattr(cls, method.__name__, method)
    return cls


def value_types(namespace: Mapping[str, Any]) -> None:
    """Apply :func:`value` to every attrs class declared with ``eq=False`` in the module whose
    ``globals()`` is ``namespace`` (call it at the module's end)."""
    module = namespace["__name__"]
    for obj in list(namespace.values()):
        if isinstance(obj, type) and obj.__module__ == module and attrs.has(obj) and "__eq__" not in vars(obj):
            value(obj)


def _nothing(_: object) -> tuple[()]:
    return ()


@attrs.frozen(eq=False, repr=False)
class UnknownVariant:
    """A variant of a tagged union this SDK does not know: ``type`` is its tag, ``raw`` the whole
    payload as received (encoded back unchanged)."""

    type: str
    raw: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(eq=False, repr=False)
class MetaOnly:
    """A message that carries nothing but its ``_meta``."""

    meta: dict[str, Any] | None = None


value_types(globals())
