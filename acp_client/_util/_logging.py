"""The library's loggers: every record shows agent text through :func:`~acp_client.display.printable`.

A log record often carries what an agent sent (its stderr, a session id, an error message); on a
terminal an escape sequence there would act, and a newline would forge a record. Each logger comes
from :func:`get_logger` with :class:`PrintableFilter`, which rewrites a record before any handler
sees it: every argument that is not a number through ``printable(..., one_line=True)`` (its
``repr`` too), the message and a traceback through ``printable``. A record not emitted costs nothing.
"""

from __future__ import annotations

import logging
import numbers
import threading
from collections.abc import Mapping
from typing import Final

from ..display import printable

_formatter: Final = logging.Formatter()
_lock: Final = threading.Lock()


class _Shown:
    """An argument shown as printable text (``%s`` and ``%r``)."""

    __slots__ = ("_value",)

    def __init__(self, value: object) -> None:
        self._value = value

    def __str__(self) -> str:
        return printable(str(self._value), one_line=True)

    def __repr__(self) -> str:
        return printable(repr(self._value), one_line=True)


def _shown(value: object) -> object:
    if value is None or isinstance(value, numbers.Number):  # %d, %g, %x... need the number itself
        return value
    if isinstance(value, str):
        return printable(value, one_line=True)
    return _Shown(value)


class PrintableFilter(logging.Filter):
    """Rewrites a record so that none of its text acts on a terminal (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = printable(record.msg)
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(_shown(arg) for arg in args)
        elif isinstance(args, Mapping):
            record.args = {key: _shown(value) for key, value in args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = printable(_formatter.formatException(record.exc_info))
        return True


_FILTER: Final = PrintableFilter()


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)``, with :class:`PrintableFilter` (added once)."""
    logger = logging.getLogger(name)
    with _lock:
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    return logger
