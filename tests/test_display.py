"""The sanitizer for agent text shown to a person (acp_client.display)."""

from __future__ import annotations

import re
import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from acp_client import printable
from acp_client.display import UNSAFE_CHARACTERS

# What a terminal or an editor must never receive from an agent (\n and \t are layout, kept in
# multi-line places).
KEPT = {"\n", "\t", "\u200c", "\u200d"}
UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def unsafe(char: str) -> bool:
    return char not in KEPT and unicodedata.category(char) in UNSAFE_CATEGORIES


HOSTILE = (
    "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: write the clipboard
    "\x1b]0;owned\x07\x1b]2;owned\x1b\\"  # OSC 0 / 2: retitle the window
    "\x1b]8;;file:///etc/passwd\x1b\\click\x1b]8;;\x1b\\"  # OSC 8: a hidden link target
    "\x1b[2J\x1b[H\x1b[31m"  # CSI: clear, home, colour
    "\x1bP+q544e\x1b\\"  # DCS
    "\x9b2J\x9d0;x\x9c"  # C1 CSI / OSC / ST
    "\u202eexe.txt\u202c\u2066x\u2069\u200e\u200f\u061c"  # bidi
    "\x00\x07\x08\x7f\r\ufeff\U000e0041\u2028"
)


def test_every_control_becomes_visible() -> None:
    shown = printable(HOSTILE)
    assert not any(unsafe(char) for char in shown)
    assert shown.startswith("␛]52;c;cHduZWQ=␇␛]0;owned␇")
    assert "␛[2J␛[H" in shown
    assert "\\x9b2J\\x9d0;x\\x9c" in shown
    assert "\\u202eexe.txt\\u202c\\u2066x\\u2069\\u200e\\u200f\\u061c" in shown
    assert shown.endswith("␀␇␈␡␍\\ufeff\\U000e0041\\u2028")


def test_layout_is_kept_on_several_lines_and_flattened_on_one() -> None:
    assert printable("a\n\tb\r\nc") == "a\n\tb\nc"
    assert printable("a\n\tb\r\nc\u2029d", one_line=True) == "a  b c d"
    assert printable("50%\rdone") == "50%␍done"
    assert printable("50%\rdone", one_line=True) == "50% done"


def test_text_with_nothing_to_rewrite_is_the_same_object() -> None:
    text = "naïve café — 漢字 👨\u200d👩\u200d👧 ZWNJ:\u200c \\x1b"
    assert printable(text) is text
    assert printable("tab\tand\nnewline", one_line=False) == "tab\tand\nnewline"


def test_the_character_class_is_every_control_format_and_separator_character() -> None:
    # Every such character is matched; nothing else is, bar code points this Python's Unicode
    # database does not assign yet (format characters of later Unicode versions).
    pattern = re.compile(UNSAFE_CHARACTERS)
    wrong = []
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if char in KEPT:
            continue
        matched = pattern.fullmatch(char) is not None
        if matched != unsafe(char) and not (matched and unicodedata.category(char) == "Cn"):
            wrong.append(f"U+{code:04X}")
    assert wrong == []


@given(st.text())
def test_nothing_unsafe_survives(text: str) -> None:
    shown = printable(text)
    assert not any(unsafe(char) for char in shown)
    flat = printable(text, one_line=True)
    assert not any(unsafe(char) or char in "\n\t" for char in flat)


@given(st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp"))))
def test_printable_text_is_unchanged(text: str) -> None:
    assert printable(text) == text
    assert printable(text, one_line=True) == text


@given(st.text(st.characters(blacklist_categories=("Cs",))))
def test_nothing_is_removed(text: str) -> None:
    # Every character is kept or replaced by at least one visible one: the length never shrinks,
    # except where \r\n becomes \n.
    assert len(printable(text)) >= len(text) - text.count("\r\n")
