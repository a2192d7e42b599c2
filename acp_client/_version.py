"""The package version, read from one place: the installed distribution's metadata (its
source is ``pyproject.toml``), and the install hint error messages give for an optional extra."""

from __future__ import annotations

from importlib import metadata

__all__ = ["DISTRIBUTION", "EXTRAS", "__version__", "install_hint"]

#: The distribution name (``[project].name`` in ``pyproject.toml``); the import name is ``acp_client``.
DISTRIBUTION = "acp-reconnect"

#: What each optional extra adds (``[project.optional-dependencies]``; tests/test_version.py keeps the
#: two in step): error messages name these, since the package index has them.
EXTRAS: dict[str, tuple[str, ...]] = {"testing": ("hypercorn>=0.16",), "otel": ("opentelemetry-api>=1.22",)}


def install_hint(extra: str) -> str:
    """How to install an optional extra, in names that exist: the extra's own requirements (which
    the package index has), and the extra itself from a checkout of this distribution (the
    distribution is not on the package index under ``acp-reconnect``)."""
    requirements = " ".join(f"'{req}'" for req in EXTRAS[extra])
    from_checkout = f"pip install -e '.[{extra}]' in a checkout of {DISTRIBUTION}"
    return f"pip install {requirements} (the {extra!r} extra; or {from_checkout})"

try:
    __version__: str = metadata.version("acp-reconnect")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
