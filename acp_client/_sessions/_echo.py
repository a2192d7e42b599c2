"""A prompt the agent echoes back: which user message updates repeat the prompt just sent. Pure.

Some servers send each prompt back during its turn as ``user_message_chunk`` updates (Qwen Code's
daemon marks them ``_meta.source = "bridge-echo"``, others may not). On v1, where the client records
the prompt itself, such an echo is that same message. Text must continue the prompt's text where the
echo left it (chunks may split it anywhere), any other block must equal the prompt's next block
(``_meta`` aside); the first user message that does not is the agent's own, and ends the echo.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from ..types import ContentBlock, TextContent
from ._bound import blocks_of

#: The updates an echo comes as.
_USER_KINDS = frozenset(("user_message_chunk", "user_message"))


def _bare(block: Any) -> Any:
    """``block`` without its ``_meta`` (an echo may carry the server's own)."""
    if attrs.has(type(block)) and getattr(block, "meta", None) is not None:
        return attrs.evolve(block, meta=None)
    return block


def _continues(block: Any, expected: Any) -> bool:
    if isinstance(block, TextContent) and isinstance(expected, TextContent):
        return bool(block.text) and expected.text.startswith(block.text)
    return bool(_bare(block) == _bare(expected))


class Echo:
    """What of one recorded prompt the agent has not echoed back yet."""

    __slots__ = ("_left",)

    def __init__(self, prompt: Iterable[ContentBlock] = ()) -> None:
        self._left = list(reversed(tuple(prompt)))  # the next block last

    def __bool__(self) -> bool:
        return bool(self._left)

    def begins(self, update: Any) -> bool:
        """Whether the session update ``update`` starts (or continues) the echo; nothing is taken."""
        if not self._left or getattr(update, "kind", None) not in _USER_KINDS:
            return False
        content = blocks_of(getattr(update, "content", None))
        return bool(content) and _continues(content[0], self._left[-1])

    def take(self, update: Any) -> bool:
        """Whether the session update ``update`` is the next part of the echo: taken if so. Any other
        user message ends the echo (nothing later is taken for one); other updates are not looked at."""
        if not self._left or getattr(update, "kind", None) not in _USER_KINDS:
            return False
        left, content = self._left, blocks_of(getattr(update, "content", None))
        if getattr(update, "message_id", None) is not None or not content:
            left.clear()
            return False
        rest = list(left)
        for block in content:
            if not rest or not _continues(block, rest[-1]):
                left.clear()
                return False
            expected = rest[-1]
            if isinstance(block, TextContent) and isinstance(expected, TextContent) and block.text != expected.text:
                rest[-1] = TextContent(text=expected.text[len(block.text) :])
            else:
                rest.pop()
        self._left = rest
        return True
