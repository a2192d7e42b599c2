"""The documents talk about the product and point only inside the repository: every relative link resolves to a
file of the checkout, no file cites a document that is not in it, and the README and guides carry no history (no
issue numbers, work sessions or dates)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Documents the project keeps outside any checkout (spelled in pieces so this file does not cite them itself).
OUTSIDE = ("DESIGN" + ".md", "/work/" + "shared", "../" + "shared/", "STYLE" + ".md")
TEXT_SUFFIXES = {".py", ".md", ".lua", ".vim", ".toml", ".txt", ".cfg", ".sh", ""}


def _tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [
        ROOT / name for name in listed.splitlines() if (ROOT / name).suffix in TEXT_SUFFIXES and (ROOT / name).is_file()
    ]


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]


def test_no_file_cites_a_document_outside_the_repository() -> None:
    found = []
    for path in _tracked():
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{path.relative_to(ROOT)}: {name}" for name in OUTSIDE if name in text]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("document", _documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repository(document: Path) -> None:
    text = re.sub(r"```.*?```", "", document.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (document.parent / target.split("#")[0]).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            broken.append(target)
    assert not broken, broken


@pytest.mark.parametrize("document", _documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_documents_carry_no_history(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    history = re.findall(r"\b[Ii]ssue #?\d+|\b[Ss]ession \d+\b|\b20\d\d-\d\d-\d\d\b(?!T)|\bround (?:two|three)\b", text)
    assert not history, history


def test_the_api_reference_lists_each_name_once() -> None:
    """``docs/api.md``'s error list names each error class once (outside the remarks in parentheses)."""
    import acp_client.exceptions

    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    errors = text[text.index("## Errors") : text.index("## Sub-packages")]
    errors = re.sub(r"\([^)]*\)", "", errors)  # what a parenthesis says about a name is not a listing
    for name in acp_client.exceptions.__all__:
        assert len(re.findall(rf"`{name}`(?!s)", errors)) == 1, name
