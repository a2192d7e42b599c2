"""The library's loggers: every record shows agent text through :func:`~acp_client.display.printable`.

A log record often carries what an agent sent: a line of its stderr, a session id, the message of
an error it answered, a method name, a path it asked for. Sent to a terminal or a log viewer as
is, an escape sequence there would act on it, and a newline would forge a record. Each logger of
the package comes from :func:`get_logger`, which gives it :class:`PrintableFilter`; the filter
rewrites a record where it is about to be formatted, before any handler sees it:

* every argument that is not a number (strings, exceptions, ids, objects whose ``str`` holds
  agent text) is shown through ``printable(..., one_line=True)`` (also its ``repr`` for ``%r``);
* the message itself, and a traceback's text, through ``printable`` (their newlines are ours).

It costs nothing for a record that is not emitted (a disabled level creates no record), and
nothing more than a regular-expression search for text with nothing to rewrite.
"""

from __future__ import annotations

import logging
import numbers
import threading
from collections.abc import Mapping
from typing import Final

from ..display import printable

__all__ = ["PrintableFilter", "get_logger"]

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
