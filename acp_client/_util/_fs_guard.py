"""File-system safety for ``fs/*`` requests: protected paths and opening only regular files.

Two dangers an agent's ``fs/*`` requests pose even inside an allowed root:

* **Config and hook files run code later.** A write to ``.git/hooks/pre-commit``, ``.bashrc`` or
  ``.vscode/settings.json`` is code execution at the user's next commit, shell or editor start. A
  write to one of :data:`DEFAULT_PROTECTED_PATHS` always asks the app's permission handler (and is
  refused without one).
* **Not every path is a file.** Opening a FIFO blocks until someone opens the other end, a device
  may never end, and a symlink swapped in after the check points elsewhere. The file functions
  open non-blocking without following a final symlink, ``fstat`` the descriptor and accept only a
  regular file.

A protected pattern is ``/``-separated components, each matched with :func:`fnmatch.fnmatchcase`
after case folding (``.GIT/config`` on a case-insensitive disk is caught too); ``**`` matches any
number of components. It matches a path's trailing components wherever they sit: ``.git/hooks/**``
protects the hooks of every repository (submodules included) under the root.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Final

from ..exceptions import InvalidParams, RpcError

#: Paths whose writes always need the user's permission, one reason per group.
DEFAULT_PROTECTED_PATHS: Final[tuple[str, ...]] = (
    # Version control: hooks run on commit/checkout; config can name programs to run
    # (core.hooksPath, core.fsmonitor, filters, aliases); a ``.git`` file redirects the repository.
    ".git",
    ".git/**",
    ".hg/**",
    ".svn/**",
    ".gitconfig",
    ".config/git/**",
    ".gitmodules",
    ".githooks/**",
    ".husky/**",
    ".pre-commit-config.yaml",
    # Shell start-up files: run by every new shell.
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
    ".config/fish/**",
    # Remote login: keys and client config (ProxyCommand runs programs).
    ".ssh/**",
    # Editor and workspace settings: tasks, terminal profiles and extensions run programs.
    ".vscode/**",
    ".idea/**",
    "*.code-workspace",
    ".devcontainer/**",
    ".exrc",
    ".nvimrc",
    ".nvim.lua",
    # direnv: ``.envrc`` is a shell script run on ``cd``.
    ".envrc",
    # CI configuration: runs with the repository's secrets once pushed.
    ".github/workflows/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    ".travis.yml",
    ".buildkite/**",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    "Jenkinsfile",
    # Package managers: registries, credentials and install-time scripts.
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    ".pypirc",
    "pip.conf",
    "pip.ini",
    ".cargo/config",
    ".cargo/config.toml",
    ".gemrc",
    ".condarc",
)

#: Never follow a final symlink, never block on a FIFO, never leak into a child process.
_OPEN_FLAGS: Final = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_EXEC_BITS: Final = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def _matches(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**":
        return any(_matches(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _matches(pattern[1:], parts[1:])


def is_protected(path: Path, patterns: Iterable[str]) -> bool:
    """Whether ``path`` (a resolved absolute path) matches one of ``patterns`` (see the module doc)."""
    parts = tuple(part.casefold() for part in path.parts[1:])
    for pattern in patterns:
        split = tuple(part.casefold() for part in pattern.split("/") if part)
        if split and any(_matches(split, parts[i:]) for i in range(len(parts))):
            return True
    return False


def _open_regular(path: Path, flags: int) -> tuple[int, os.stat_result]:
    """Open ``path`` without blocking or following a final symlink; refuse anything but a file."""
    try:
        fd = os.open(path, flags | _OPEN_FLAGS, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # ENXIO: a FIFO nobody reads, what must not block
            raise InvalidParams("not a regular file") from exc
        if exc.errno == errno.ELOOP:  # the last component became a symlink after it was checked
            raise InvalidParams("the path is a symbolic link") from exc
        raise RpcError(f"cannot open file: {exc.strerror}", code=-32603) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO with a reader, a device, a socket...
            raise InvalidParams("not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def write_regular_file(path: Path, content: str) -> None:
    """Replace the content of the regular file ``path`` (created if absent) with ``content``. It
    is never executable afterwards (an agent rewriting a hook or script must not get it run as-is):
    a new file is ``0o666`` minus the umask, an existing one loses its execute bits.

    Raises:
        InvalidParams: ``path`` is a FIFO, device, socket or directory, or became a symlink.
        RpcError: Another OS error (``-32603``).
    """
    fd, info = _open_regular(path, os.O_WRONLY | os.O_CREAT)
    try:
        if info.st_mode & _EXEC_BITS:
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~_EXEC_BITS)
        os.ftruncate(fd, 0)  # only now: truncating before the checks could clobber a non-file
        view = memoryview(content.encode("utf-8"))
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise RpcError(f"cannot write file: {exc.strerror}", code=-32603) from exc
    finally:
        os.close(fd)


def read_regular_file(path: Path, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of the regular file ``path`` (more than ``cap`` means too big).

    Raises:
        InvalidParams: Not a regular file, or larger than ``cap`` bytes by its size.
        RpcError: Another OS error (``-32603``).
    """
    fd, info = _open_regular(path, os.O_RDONLY)
    try:
        if info.st_size > cap:
            raise InvalidParams(f"file is larger than {cap} bytes")
        chunks: list[bytes] = []
        remaining = cap + 1  # st_size may lie (procfs) or the file may be growing
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise RpcError(f"cannot read file: {exc.strerror}", code=-32603) from exc
    finally:
        os.close(fd)
