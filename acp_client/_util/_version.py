"""The package version, read from the installed distribution's metadata (its source is
``pyproject.toml``), and the install hint error messages give for an optional extra.

The metadata file is read directly: ``importlib.metadata`` would bring ``email``, ``zipfile`` and
``csv`` with it, a fifth of this package's import time; it answers only without a ``.dist-info``.
"""

from __future__ import annotations

import os
import sys

#: The distribution name (``[project].name`` in ``pyproject.toml``); the import name is ``acp_client``.
DISTRIBUTION = "acp-reconnect"
_DISTRIBUTION = "acp_reconnect"  # as it is spelled in a ``.dist-info`` directory name

#: What each optional extra adds (``[project.optional-dependencies]``; tests/test_version.py keeps the
#: two in step): error messages name these, since the package index has them.
EXTRAS: dict[str, tuple[str, ...]] = {
    "testing": ("hypercorn>=0.16",),
    "otel": ("opentelemetry-api>=1.22",),
    "postgres": ("psycopg[binary]>=3.1", "psycopg-pool>=3.2"),
}


def install_hint(extra: str) -> str:
    """How to install an optional extra, in names that exist: its requirements (on the package
    index), or the extra from a checkout (this distribution is not on the index)."""
    requirements = " ".join(f"'{req}'" for req in EXTRAS[extra])
    from_checkout = f"pip install -e '.[{extra}]' in a checkout of {DISTRIBUTION}"
    return f"pip install {requirements} (the {extra!r} extra; or {from_checkout})"


def _from_dist_info() -> str | None:
    """The ``Version`` of the first ``acp_reconnect-*.dist-info`` on ``sys.path`` (importlib's first), or ``None``."""
    prefix = _DISTRIBUTION + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not (name.endswith(".dist-info") and name.lower().startswith(prefix)):
                continue
            try:
                with open(os.path.join(entry or ".", name, "METADATA"), encoding="utf-8") as metadata:
                    for line in metadata:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():  # the headers end at the first blank line
                            break
            except OSError:
                continue
    return None


def _read() -> str:
    version = _from_dist_info()
    if version is not None:
        return version
    from importlib import metadata

    try:
        return metadata.version("acp-reconnect")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


__version__: str = _read()
