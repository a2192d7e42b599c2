"""The validators every option value goes through (one copy of each rule). Pure: no I/O.

One rule for every option that is a number of seconds or a count:

* It is a real ``int`` or ``float``: not a ``bool`` (an ``int`` to Python, never a number of
  seconds to a user), nor a string or another number type.
* It is finite. **"No limit" is spelled ``None``**, only where the option documents it
  (``Timeouts.request``, a call's ``timeout=None``...); ``float("inf")`` never says it.
* Seconds are above zero unless the option says zero is meaningful (a retry delay of 0: at once).
  Counts are whole numbers of at least their minimum (1 unless the option says otherwise).

A bad value raises :class:`~acp_client.exceptions.ConfigurationError` naming the option, where the
value is given (never at the first reconnect).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from ..exceptions import ConfigurationError

#: The port a URL of each scheme the transports speak means when it names none.
DEFAULT_PORTS: Final = {"ws": 80, "http": 80, "wss": 443, "https": 443}


def _shown(value: object) -> str:
    return f"{type(value).__name__} ({value!r})"


def check_instance(name: str, value: object, kind: type | tuple[type, ...], *, optional: bool = False) -> None:
    """Raise ``ConfigurationError`` unless ``value`` is a ``kind`` (or ``None`` when ``optional``;
    never a ``bool`` where an ``int`` or ``float`` is asked for)."""
    if value is None and optional:
        return
    kinds = kind if isinstance(kind, tuple) else (kind,)
    numeric = any(k in (int, float) for k in kinds) and bool not in kinds
    if not isinstance(value, kinds) or (numeric and isinstance(value, bool)):
        wanted = " or ".join(k.__name__ for k in kinds) + (" or None" if optional else "")
        raise ConfigurationError(f"{name} must be {wanted}, not {_shown(value)}")


def check_number(name: str, value: object, *, minimum: float = 0.0, optional: bool = False) -> None:
    """A finite real number (not a ``bool``) of at least ``minimum`` (``None`` when ``optional``)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number{' or None' if optional else ''}, not {_shown(value)}")
    if not math.isfinite(value) or value < minimum:
        raise ConfigurationError(f"{name} must be a finite number of at least {minimum:g}, not {value!r}")


def check_seconds(name: str, value: object, *, optional: bool = False, zero: bool = False) -> None:
    """A finite number of seconds above zero (zero too when ``zero``); ``None`` when ``optional``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        wanted = "a number of seconds" + (" or None" if optional else "")
        raise ConfigurationError(f"{name} must be {wanted}, not {_shown(value)}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        bound = "zero or more" if zero else "more than zero"
        limit = " (use None for no limit)" if optional and math.isinf(value) else ""
        raise ConfigurationError(f"{name} must be a finite number of seconds, {bound}, not {value!r}{limit}")


def check_count(name: str, value: object, *, minimum: int = 1, optional: bool = False, unit: str = "") -> None:
    """A whole number (not a ``bool``) of at least ``minimum``; ``None`` when ``optional``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = f"a whole number of {unit}" if unit else "a whole number"
        raise ConfigurationError(
            f"{name} must be {what}, at least {minimum}{' (or None)' if optional else ''}, not {_shown(value)}"
        )


def check_flag(name: str, value: object) -> None:
    """``True`` or ``False`` (not 1, 0 or a string)."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, not {_shown(value)}")


def field_check(check: Callable[..., None], **options: Any) -> Callable[[object, Any, object], None]:
    """An ``attrs`` validator running ``check`` with the option named ``Class.field``."""

    def validate(instance: object, attribute: Any, value: object) -> None:
        check(f"{type(instance).__name__}.{attribute.name}", value, **options)

    return validate
