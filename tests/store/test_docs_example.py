"""The session store guide's example runs as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from acp_client.store import SqliteSessionStore

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "session-store.md"


def test_the_store_example_runs() -> None:
    example = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)[0]
    namespace: dict[str, Any] = {}
    exec(compile(example, str(GUIDE), "exec"), namespace)
    assert namespace["key"] == "wss://agent.example/acp"


def test_a_home_relative_path_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "state").mkdir()
    with SqliteSessionStore("~/state/sessions.db") as store:
        assert store.path == str(tmp_path / "state" / "sessions.db")
    assert (tmp_path / "state" / "sessions.db").is_file()
