"""Fast construction of frozen, slotted attrs values on the hot path. Pure.

attrs' frozen ``__init__`` sets each field through ``object.__setattr__``; a value built once per
streamed update pays for that every time. :func:`direct_constructor` writes a constructor that
sets the slots directly, about twice as fast, with the same result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import attrs

__all__ = ["direct_constructor"]

T = TypeVar("T")


def direct_constructor(cls: type[T]) -> Callable[..., T]:
    """A constructor for a slotted frozen attrs class that sets the slots directly.

    Only for classes without validators or converters (checked here), and only with arguments
    of the right types (not checked: the caller's values are already decoded). Optional arguments
    default to the fields' (immutable) defaults.
    """
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
