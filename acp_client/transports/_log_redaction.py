"""Keeps secrets out of the logs of the third-party libraries our transports drive.

At DEBUG level (INFO for httpx) httpx, httpcore, hpack, h2 and websockets print URLs with their
query strings and request and response headers. :class:`RedactingFilter` rewrites such records,
never drops them: query strings and URL user-info become ``<redacted>``, and so does the value of
every secret header (``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``Set-Cookie`` and
those the app declared) in each shape these libraries print it.

:func:`install_log_redaction` adds the filter to those loggers and to each child logger (a filter
does not see its children's records), including the children they create lazily. Every connector
calls it with its secret header names; the names accumulate (the loggers are process-wide).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Final

from ._security import DEFAULT_SECRET_HEADERS

#: The loggers of the libraries under our transports (each with its child loggers).
THIRD_PARTY_LOGGERS: Final = ("httpx", "httpcore", "hpack", "h2", "websockets")
#: Child loggers those libraries create lazily (on first connection, or on import of an optional
#: part): created here so they have the filter before their first record.
_KNOWN_CHILDREN: Final = (
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "hpack.hpack",
    "hpack.table",
    "h2.connection",
    "websockets.client",
)
_REDACTED: Final = "<redacted>"
#: Always secret, whatever the app declares: credentials and cookies both ways.
_ALWAYS_SECRET: Final = DEFAULT_SECRET_HEADERS | {"set-cookie", "set-cookie2"}

# A query string: a "?" after a path segment, up to whitespace, a quote or a fragment.
_QUERY: Final = re.compile(r"(/[^\s'\"<>?]*\?)[^\s'\"<>#]+")
# The user-info of a URL: "scheme://user:password@".
_USERINFO: Final = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s'\"@]+@")


def _header_patterns(names: frozenset[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    # (b'name', b'value') / b'name'=b'value' / 'name': 'value' — a quoted name, then a quoted value.
    quoted = re.compile(
        rf"""(b?(['"])(?:{alternatives})\2\s*[,:=]\s*b?)(['"])(?:\\.|(?!\3).)*\3""",
        re.IGNORECASE,
    )
    # "Name: value" (websockets prints "< Set-Cookie: ..." and "> Authorization: ..."): the rest of
    # the line goes.
    line = re.compile(rf"(?<![\w-])((?:{alternatives})\s*:[ \t]*)[^\r\n]*", re.IGNORECASE)
    return quoted, line


class RedactingFilter(logging.Filter):
    """Rewrites a log record's message without secrets (see the module doc); never drops one."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._names: frozenset[str] = _ALWAYS_SECRET
        self._patterns = _header_patterns(self._names)

    def add_secret_names(self, names: Iterable[str]) -> None:
        """Also redact the values of these headers (names are case-insensitive)."""
        wanted = self._names | {name.lower() for name in names}
        if wanted != self._names:
            with self._lock:
                self._patterns = _header_patterns(wanted)
                self._names = wanted

    def redact(self, text: str) -> str:
        """``text`` without query strings, URL user-info or secret header values."""
        quoted, line = self._patterns
        text = quoted.sub(lambda m: f"{m.group(1)}{m.group(3)}{_REDACTED}{m.group(3)}", text)
        text = line.sub(lambda m: f"{m.group(1)}{_REDACTED}", text)
        text = _QUERY.sub(lambda m: f"{m.group(1)}{_REDACTED}", text)
        return _USERINFO.sub(lambda m: f"{m.group(1)}{_REDACTED}@", text)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record: let logging report it as it would have
            return True
        redacted = self.redact(message)
        if redacted != message:
            record.msg = redacted
            record.args = ()
        return True


_FILTER: Final = RedactingFilter()


def install_log_redaction(secret_headers: Iterable[str] = ()) -> RedactingFilter:
    """Add the (process-wide, returned) redacting filter to the third-party loggers and their
    children; idempotent: a later call adds ``secret_headers`` and reaches children created since."""
    _FILTER.add_secret_names(secret_headers)
    manager = logging.Logger.manager
    names = {*THIRD_PARTY_LOGGERS, *_KNOWN_CHILDREN}
    for name in list(manager.loggerDict):
        if any(name.startswith(f"{root}.") for root in THIRD_PARTY_LOGGERS):
            names.add(name)
    for name in names:
        target = logging.getLogger(name)
        if _FILTER not in target.filters:
            target.addFilter(_FILTER)
    return _FILTER
