"""Find a Python interpreter of at least a given version on this machine (no pytest; also a CLI).

The real third-party agents need newer Pythons than the project does (pydantic-acp >= 3.11,
fast-agent-mcp >= 3.13), so their test fixtures build virtual environments from whichever
interpreter is found here, looking in this order:

1. ``$ACP_TEST_PYTHON<MAJOR><MINOR>`` (e.g. ``ACP_TEST_PYTHON313``): an explicit choice wins;
2. the interpreter running the tests, if it is new enough;
3. ``python3.N`` on ``PATH`` (pyenv shims that do not resolve are skipped: each candidate is run);
4. pyenv's installed versions (``$PYENV_ROOT`` or ``~/.pyenv``, then ``versions/*/bin/python3``);
5. ``uv python find`` when uv is on ``PATH`` (it knows the interpreters uv installed);
6. ``/usr/bin/python3.N`` and ``/usr/local/bin/python3.N`` (Debian's ``python3.13`` package).

A candidate counts only if it runs and can build a virtual environment with pip (``venv`` and
``ensurepip`` import). The interpreter's own ``sys.executable`` is returned, never a shim.

CLI (used by ``.ci/run``): ``python -m tests.peers._interpreters 3.13`` prints the path and exits 0,
or exits 1 when there is none.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["find_python", "interpreter_version"]

_PROBE = "import sys, venv, ensurepip; print(sys.version_info[0], sys.version_info[1], sys.executable)"
_NEWEST_MINOR = 20


def interpreter_version(executable: str) -> tuple[tuple[int, int], str] | None:
    """``((major, minor), real executable)`` of a working interpreter with venv + ensurepip, else ``None``."""
    try:
        done = subprocess.run(
            [executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        major, minor, real = done.stdout.strip().split(" ", 2)
        return (int(major), int(minor)), real
    except ValueError:
        return None


def _candidates(minimum: tuple[int, int]) -> Iterator[str]:
    major, minor = minimum
    override = os.environ.get(f"ACP_TEST_PYTHON{major}{minor}")
    if override:
        yield override
    yield sys.executable
    names = [f"python{major}.{n}" for n in range(minor, _NEWEST_MINOR + 1)]
    for name in names:
        found = shutil.which(name)
        if found:
            yield found
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    for root in dict.fromkeys(r for r in roots if r):
        pattern = os.path.join(root, "versions", f"{major}.*", "bin", f"python{major}")
        yield from sorted(glob.glob(pattern), reverse=True)
    uv = shutil.which("uv")
    if uv:
        try:
            done = subprocess.run(
                [uv, "python", "find", f">={major}.{minor}"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            yield done.stdout.strip().splitlines()[0]
    for directory in ("/usr/local/bin", "/usr/bin"):
        for name in names:
            yield os.path.join(directory, name)


def find_python(minimum: tuple[int, int]) -> str | None:
    """The path of an interpreter of at least ``minimum`` that can make a venv, or ``None``."""
    seen: set[str] = set()
    for candidate in _candidates(minimum):
        if candidate in seen or not (os.path.isfile(candidate) or shutil.which(candidate)):
            continue
        seen.add(candidate)
        probed = interpreter_version(candidate)
        if probed is not None and probed[0] >= minimum:
            return probed[1]
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.peers._interpreters MAJOR.MINOR", file=sys.stderr)
        return 2
    major, minor = (int(part) for part in argv[0].split("."))
    found = find_python((major, minor))
    if found is None:
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
