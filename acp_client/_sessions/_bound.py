"""The byte bound of a transcript's text in memory: how message text is measured, and how the oldest
part of one oversized message is cut behind a marker block. Pure.

Text counts its UTF-8 bytes, any other block :data:`BLOCK_BYTES`. The marker is a text block whose
``_meta`` says it is ours: never merged with the text after it, replaced (not stacked) by a second cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..types import ContentBlock, TextContent

#: What a non-text content block counts for.
BLOCK_BYTES = 64

_MARKER_META = {"acp_client": "dropped"}


def blocks_of(content: Any) -> list[ContentBlock]:
    """An update's ``content`` (one block, several, or none) as a list."""
    if content is None:
        return []
    return list(content) if isinstance(content, list | tuple) else [content]


def text_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def blocks_bytes(blocks: Iterable[Any]) -> int:
    return sum(text_bytes(block.text) if isinstance(block, TextContent) else BLOCK_BYTES for block in blocks)


def plain(block: TextContent) -> bool:
    """A text block with nothing attached (no annotations, no ``_meta``): one that may be merged."""
    return block.annotations is None and block.meta is None


def cut_head(blocks: list[ContentBlock], excess: int, dropped_before: int) -> tuple[list[ContentBlock], int]:
    """Drop the oldest ``excess`` bytes (or a little more) of the plain text in ``blocks``, behind one
    marker counting ``dropped_before`` plus what this cut drops; other blocks are kept. Returns the
    new blocks and the bytes this cut dropped."""
    freed = 0
    kept: list[ContentBlock] = []
    for block in blocks:
        if isinstance(block, TextContent) and block.meta == _MARKER_META:
            continue
        if freed >= excess or not isinstance(block, TextContent) or not plain(block):
            kept.append(block)
            continue
        data = block.text.encode("utf-8", "surrogatepass")
        rest = data[min(len(data), excess - freed) :].decode("utf-8", "ignore")  # a cut character goes whole
        freed += len(data) - text_bytes(rest)
        if rest:
            kept.append(TextContent(text=rest))
    total = dropped_before + freed
    marker = TextContent(text=f"… {total} bytes dropped … ", meta=dict(_MARKER_META))
    return [marker, *kept], freed
