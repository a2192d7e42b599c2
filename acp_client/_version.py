"""The package version, read from one place: the installed distribution's metadata (its
source is ``pyproject.toml``).

The metadata file is read directly: ``importlib.metadata`` would bring ``email``, ``zipfile`` and
``csv`` with it, a fifth of this package's import time. Where the fast path finds no ``.dist-info``
directory on ``sys.path`` (an egg, a zip), ``importlib.metadata`` answers.
"""

from __future__ import annotations

import os
import sys

__all__ = ["__version__"]

_DISTRIBUTION = "acp_reconnect"


def _from_dist_info() -> str | None:
    """The ``Version`` of the first ``acp_reconnect-*.dist-info`` on ``sys.path`` (the one
    ``importlib.metadata`` would find first), or ``None``."""
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
