"""Showing agent text to a person: :func:`printable`.

Everything an agent sends is data. A message chunk, a tool call title, a session title, an error
message or a line of the agent's stderr may carry bytes a terminal or an editor acts on: an ESC
sequence that rewrites the screen, retitles the window (OSC 0/2), writes the clipboard (OSC 52) or
hides a link target (OSC 8); a C1 control (``U+009B`` is a one-character CSI); a bidirectional
override (``U+202E``) that makes ``txt.exe`` read as ``exe.txt``. :func:`printable` makes all of
them visible and inert, at the edge where text meets a person: a terminal, an editor buffer, a log
record, an XML report. The transcript itself keeps the agent's exact text; the app decides how to
show it.

How each character is shown:

* ESC (``U+001B``): ``␛``; the rest of its sequence stays, as plain text (``␛]52;c;…``).
* The other C0 controls and DEL: their control picture, ``␀`` to ``␟`` and ``␡`` (a bare
  carriage return is ``␍``); ``\n`` and ``\t`` are kept, and ``\r\n`` becomes ``\n``.
* C1 controls (``U+0080`` to ``U+009F``): ``\x80`` to ``\x9f``.
* Bidirectional and other format controls (category ``Cf``), line and paragraph separators, lone
  surrogates: their Python escape, ``\u202e``, ``\u2066``, ``\ufeff``, ``\u2028``,
  ``\U000e0041``, ``\ud800``.
* ``one_line=True`` (banners, status lines, list items): ``\n``, ``\r``, ``\r\n``, ``\t`` and the
  line / paragraph separators become one space each.

Kept as they are: every other character, the zero-width joiner and non-joiner included (``U+200D``,
``U+200C``: emoji sequences and several scripts need them). Text with none of the characters above
comes back unchanged (the same object).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["UNSAFE_CHARACTERS", "printable"]

# The format characters (Unicode category Cf) less ZWNJ / ZWJ, the separators (Zl, Zp), the
# surrogates (Cs) and every control (Cc). tests/test_display.py checks this against unicodedata.
_FORMAT: Final = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_CONTROLS: Final = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_SEPARATORS: Final = "\u2028\u2029"
_SURROGATES: Final = "\ud800-\udfff"

#: A regular-expression character class of every character :func:`printable` rewrites (``\\n``
#: and ``\\t`` aside, which only ``one_line=True`` rewrites).
UNSAFE_CHARACTERS: Final = f"[{_CONTROLS}{_FORMAT}{_SEPARATORS}{_SURROGATES}]"

_UNSAFE: Final = re.compile(f"\r\n|{UNSAFE_CHARACTERS}")
_UNSAFE_ONE_LINE: Final = re.compile(f"\r\n|[\n\t{UNSAFE_CHARACTERS[1:-1]}]")


def _shown(char: str) -> str:
    code = ord(char)
    if code == 0x7F:
        return "\u2421"
    if code < 0x20:
        return chr(0x2400 + code)
    return ascii(char)[1:-1]  # its Python escape: \x80, \u202e, \U000e0041


def _multi_line(match: re.Match[str]) -> str:
    text = match.group()
    return "\n" if text == "\r\n" else _shown(text)


def _one_line(match: re.Match[str]) -> str:
    text = match.group()
    return " " if text in ("\r\n", "\n", "\r", "\t", "\u2028", "\u2029") else _shown(text)


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` made safe to show to a person: no character in it acts on a terminal or an editor.

    Each such character gets a visible form (see the module's table); nothing is removed, so what
    the agent sent can still be read.

    Args:
        one_line: For a place that holds one line (a banner, a status line, a list item): newlines,
            carriage returns, tabs and line separators become spaces too.

    Returns:
        The text to show; ``text`` itself when it holds nothing to rewrite.
    """
    pattern, replace = (_UNSAFE_ONE_LINE, _one_line) if one_line else (_UNSAFE, _multi_line)
    if pattern.search(text) is None:
        return text
    return pattern.sub(replace, text)
