"""``acp_client._util._version``: the version from the metadata, and install hints that name what exists
(issue 20: ``acp-reconnect[testing]`` is not installable from the package index by that name)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

from acp_client._util._version import DISTRIBUTION, EXTRAS, install_hint

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_distribution_and_extras_are_the_ones_in_pyproject() -> None:
    assert PROJECT["name"] == DISTRIBUTION
    for extra, requirements in EXTRAS.items():
        assert tuple(PROJECT["optional-dependencies"][extra]) == requirements, extra


def test_the_hint_names_installable_requirements_and_the_extra_from_a_checkout() -> None:
    hint = install_hint("testing")
    assert hint.startswith("pip install 'hypercorn>=0.16' ")
    assert "pip install -e '.[testing]' in a checkout of acp-reconnect" in hint


def test_no_message_suggests_an_uninstallable_name() -> None:
    """Every install suggestion in the package and the examples names an extra that exists, and
    none asks the package index for ``acp-reconnect[...]`` (it is installed from a checkout)."""
    extras = set(PROJECT["optional-dependencies"])
    for path in [*(ROOT / "acp_client").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"pip install '?acp-reconnect\[", text), f"{path}: suggests acp-reconnect[...]"
        for extra in re.findall(r"pip install -e '\.\[(\w+)\]'", text):
            assert extra in extras, f"{path}: no extra {extra!r} in pyproject.toml"
