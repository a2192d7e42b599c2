"""The package version, read from one place: the installed distribution's metadata (its
source is ``pyproject.toml``)."""

from __future__ import annotations

from importlib import metadata

__all__ = ["__version__"]

try:
    __version__: str = metadata.version("acp-reconnect")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
