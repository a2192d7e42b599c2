"""The session store guide's client example (two runs, an agent restart between them) runs as written."""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "session-store.md"


def test_the_client_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    example = next(block for block in blocks if "session_store=store" in block)
    exec(compile(example, str(GUIDE), "exec"), {})
