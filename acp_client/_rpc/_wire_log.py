"""The wire logger: every JSON-RPC frame in and out, at DEBUG on ``acp_client.wire``, after the link's
target: ``>`` a frame the client sent, ``<`` one it received, ``<!`` one it could not read. Nothing is
formatted unless the logger is enabled for DEBUG. Frames are redacted before they are logged:

* the ``value`` of every ``env`` and ``headers`` entry (MCP server credentials travel there);
* the value of any key that names a secret (``token``, ``password``, ``secret``, ``apiKey``,
  ``authorization``, ``cookie``, ``credentials``...), at any depth;
* a frame longer than :data:`MAX_LOGGED_CHARS` is cut (file contents can be megabytes).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any, Final

from .._util._logging import get_logger
from ..exceptions import MalformedFrame
from ..transports.base import Transport, TransportInfo

logger = get_logger("acp_client.wire")

#: The longest frame text logged whole; longer ones are cut and say how much was left out.
MAX_LOGGED_CHARS: Final = 4000
_REDACTED: Final = "<redacted>"
_SECRET_KEY = re.compile(
    r"token|secret|passw(or)?d|api[-_]?key|authori[sz]ation|cookie|credential|private[-_]?key",
    re.IGNORECASE,
)
_NAME_VALUE_LISTS: Final = frozenset({"env", "headers"})


def redact_frame(value: Any, *, key: str | None = None) -> Any:
    """A copy of ``value`` (a decoded frame) with its secrets replaced (see the module docstring)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for name, item in value.items():
            if isinstance(name, str) and _SECRET_KEY.search(name) and item not in (None, "", [], {}):
                out[name] = _REDACTED
            elif name in _NAME_VALUE_LISTS and isinstance(item, list):
                out[name] = [_redact_entry(entry) for entry in item]
            else:
                out[name] = redact_frame(item, key=name)
        return out
    if isinstance(value, list):
        return [redact_frame(item, key=key) for item in value]
    return value


def _redact_entry(entry: Any) -> Any:
    if isinstance(entry, dict) and "value" in entry:
        return {**redact_frame({k: v for k, v in entry.items() if k != "value"}), "value": _REDACTED}
    return redact_frame(entry)


def _render(message: Any) -> str:
    try:
        text = json.dumps(redact_frame(message), ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        text = repr(message)
    if len(text) > MAX_LOGGED_CHARS:
        text = f"{text[:MAX_LOGGED_CHARS]}… ({len(text) - MAX_LOGGED_CHARS} more characters)"
    return text


class WireLog:
    """A :class:`~acp_client.transports.base.Transport` that logs every frame of another one."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self._ready: Callable[[], Any] | None = getattr(inner, "receive_ready", None)

    @property
    def info(self) -> TransportInfo:
        return self._inner.info

    def send(self, message: Any) -> Coroutine[Any, Any, None]:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s > %s", self._inner.info.target, _render(message))
        return self._inner.send(message)

    def receive(self) -> Coroutine[Any, Any, Any]:
        # With the wire logger off (the usual case), no extra coroutine per message.
        if logger.isEnabledFor(logging.DEBUG):
            return self._receive_logged()
        return self._inner.receive()

    def receive_ready(self) -> Any:
        """The inner transport's ``receive_ready()`` (``None`` while frames are logged, or without one)."""
        ready = self._ready
        if ready is None or logger.isEnabledFor(logging.DEBUG):
            return None
        return ready()

    async def _receive_logged(self) -> Any:
        try:
            message = await self._inner.receive()
        except MalformedFrame as exc:
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("%s <! %s: %r", self._inner.info.target, exc, exc.excerpt)
            raise
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s < %s", self._inner.info.target, _render(message))
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()
