"""docs/security.md names the test that proves each protection: every one it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def test_every_test_named_in_the_security_doc_exists() -> None:
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    references = _REFERENCE.findall(text)
    assert len(references) > 50
    missing = [
        f"{path}::{name}"
        for path, name in references
        if not (ROOT / path).is_file()
        or not re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(encoding="utf-8"), re.M)
    ]
    assert missing == []


def test_every_hostile_network_row_names_a_test() -> None:
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    for topic in ("Decompression bombs", "SSE parser", "retry:", "Forged session streams", "oversized, skipped"):
        row = next(line for line in text.splitlines() if topic in line)
        assert _REFERENCE.search(row), row
