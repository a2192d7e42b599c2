"""The import-layers contract: the package's layers (DESIGN §3) as folders, and imports only downward.

Each top-level name of ``acp_client`` (a public module, a public package, or a private package of one
concept) sits in one layer. A module may import its own layer and the layers below it, never one
above: the wire does not know the session table, the session table does not know recovery, nothing
in the one-link core knows the pool, and nothing shipped knows the test kit or the checker. Lazy,
relative and ``TYPE_CHECKING`` imports count as much as any other.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "acp_client"

#: Lowest first. A layer's members may import each other.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "exceptions clock display _util",  # foundations: errors, time, text shown to a person, small helpers
        "types state _codec",  # wire types, their converter, JSON-RPC framing; the values apps see
        "transports store config retry telemetry handlers",  # carriers, stores, option values, the app's answers
        "_rpc",  # JSON-RPC over one transport
        "_sessions transcript",  # the session table and the conversation (pure)
        "_recovery location",  # decisions and the recoverer; where a session lives
        "_link group",  # one link's life; the seam to the links
        "_engine _telemetry",  # the machinery behind the client
        "client",  # the facade
        "sync __init__",  # the blocking facade and the package's front door
        "pool",  # several instances, on top of the one-link core
        "testing check",  # the test kit and the conformance checker
    )
)


def _layer_of(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    for index, layer in enumerate(LAYERS):
        if name in layer:
            return index
    raise AssertionError(f"{module} is in no layer: place {name!r} in LAYERS")


def _module(path: pathlib.Path) -> str:
    parts = ["acp_client", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_in(source: str, package: str) -> set[str]:
    """Every ``acp_client`` module a source imports, anywhere in it, resolved against ``package``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if not node.level:
                found.add(node.module or "")
                continue
            base = package
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            if node.module:
                found.add(f"{base}.{node.module}")
            else:  # ``from . import name``: the names are the modules imported
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "acp_client" or name.startswith("acp_client.")}


def _upward_imports() -> list[str]:
    wrong: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        own = _layer_of(module)
        for imported in sorted(imports_in(path.read_text(encoding="utf-8"), package)):
            if _layer_of(imported) > own:
                wrong.append(f"{module} (layer {own}) imports {imported} (layer {_layer_of(imported)})")
    return wrong


def test_every_import_goes_down_the_layers() -> None:
    assert _upward_imports() == []


def test_every_top_level_name_has_a_layer() -> None:
    names = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    names.discard("__pycache__")
    placed = set().union(*LAYERS)
    assert names - placed == set()
    assert placed - names == set()


def test_private_modules_live_in_packages_of_one_concept() -> None:
    """``ls acp_client`` shows the layers: no private module sits loose at the top."""
    loose = sorted(p.name for p in PACKAGE.glob("_*.py") if p.name != "__init__.py")
    assert loose == []


def test_the_contract_sees_lazy_relative_and_type_checking_imports() -> None:
    """The contract can fail: an upward import hidden in a function or under ``TYPE_CHECKING`` is seen
    and placed in its layer."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .._link._supervisor import Supervisor\n"
        "def f():\n    from ..pool import Pool\n    import acp_client.client\n"
        "from . import _table\n"
    )
    found = imports_in(source, "acp_client._sessions")
    assert {"acp_client._link._supervisor", "acp_client.pool", "acp_client.client"} <= found
    assert "acp_client._sessions._table" in found
    own = _layer_of("acp_client._sessions._table")
    assert [name for name in sorted(found) if _layer_of(name) > own] == [
        "acp_client._link._supervisor",
        "acp_client.client",
        "acp_client.pool",
    ]
