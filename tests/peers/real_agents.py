"""Fixtures: real third-party ACP agents (pydantic-acp, fast-agent), installed from PyPI into a cache.

Neither agent is ours or an official SDK's minimal example: they are what users run, and they
deviate from the protocol in ways our recovery must survive (``docs/agents-conformance.md``).
Both run fully offline over stdio:

- **pydantic-acp** (:data:`PYDANTIC_ACP_REQUIREMENTS`): ``tests/peers/pydantic_acp_agent.py``, a
  pydantic-ai agent with an offline ``FunctionModel`` and a ``FileSessionStore``; it needs
  Python >= 3.11.
- **fast-agent** (:data:`FAST_AGENT_REQUIREMENTS`): ``fast-agent acp --model passthrough`` with the
  MCP tools of ``tests/peers/fast_agent_tools.py``; it needs Python >= 3.13.

Each is installed once, with pinned versions, into its own virtual environment under the tests'
cache root (``$ACP_TEST_CACHE``, default ``~/.cache/acp-reconnect-tests``, the same as the
TypeScript SDK peer's), e.g. ``pydantic-acp-1.10.0/``; never into the repository or the project's
environment. A file lock next to each environment serializes parallel test sessions, and a marker
file (the requirements and the interpreter) makes the next run skip the install.

The interpreter comes from :func:`tests.peers._interpreters.find_python`. When none is new enough
the fixture SKIPS with a loud reason (the only skip these tests allow: a missing system
interpreter); a failed ``pip install`` FAILS the test (PyPI is reachable wherever the suite runs).

Fixtures (session scope): ``pydantic_acp_agent`` -> :class:`PydanticAcpAgent`,
``fast_agent`` -> :class:`FastAgent`. Each gives the argv of a fresh agent process for a given
store directory; the stdio transport spawns it (and respawns it after a kill).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import attrs
import pytest

from tests.peers._interpreters import find_python, interpreter_version
from tests.peers.typescript_sdk import _file_lock, cache_root

__all__ = [
    "FAST_AGENT_REQUIREMENTS",
    "FAST_AGENT_VERSION",
    "PYDANTIC_ACP_REQUIREMENTS",
    "PYDANTIC_ACP_VERSION",
    "FastAgent",
    "PydanticAcpAgent",
    "ensure_venv",
    "fast_agent",
    "pydantic_acp_agent",
]

PYDANTIC_ACP_VERSION = "1.10.0"
#: Exact versions: the adapter and the pydantic-ai it was measured with (pydantic-acp pins the ACP SDK itself).
PYDANTIC_ACP_REQUIREMENTS = (f"pydantic-acp=={PYDANTIC_ACP_VERSION}", "pydantic-ai-slim==2.52.0")
FAST_AGENT_VERSION = "0.10.48"
FAST_AGENT_REQUIREMENTS = (f"fast-agent-mcp=={FAST_AGENT_VERSION}",)

PYDANTIC_ACP_SCRIPT = Path(__file__).with_name("pydantic_acp_agent.py")
FAST_AGENT_TOOLS = Path(__file__).with_name("fast_agent_tools.py")

_INSTALL_TIMEOUT = 900.0


class _Skip(Exception):
    """No interpreter new enough: the caller skips loudly."""


def _loud_skip(reason: str) -> None:
    message = f"SKIPPED REAL-AGENT TESTS: {reason}"
    warnings.warn(message, UserWarning, stacklevel=2)
    sys.stderr.write(f"\n*** {message} ***\n")
    pytest.skip(message)


def _bin(venv: Path, name: str) -> Path:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        return venv / "Scripts" / f"{name}.exe"
    return venv / "bin" / name


def ensure_venv(name: str, requirements: tuple[str, ...], minimum: tuple[int, int], check_import: str) -> Path:
    """A cached virtual environment ``<cache>/<name>/`` holding ``requirements`` (installed once).

    Args:
        name: The directory name (carries the pinned version).
        requirements: Exact pip requirements.
        minimum: The lowest Python the packages support.
        check_import: A module that must import afterwards (proves the install works).

    Returns:
        The environment's directory.

    Raises:
        _Skip: No interpreter of ``minimum`` or newer on this machine.
        pytest.fail.Exception: The install failed.
    """
    venv = cache_root() / name
    marker = venv / ".acp-tests-installed"
    with _file_lock(cache_root() / f".{name}.lock"):
        python = _bin(venv, "python")
        if marker.exists() and python.exists():
            recorded = marker.read_text(encoding="utf-8").splitlines()
            probed = interpreter_version(str(python))
            if recorded[: len(requirements)] == list(requirements) and probed is not None and probed[0] >= minimum:
                return venv
        base = find_python(minimum)
        if base is None:
            raise _Skip(
                f"no Python >= {minimum[0]}.{minimum[1]} with venv on this machine for {' '.join(requirements)} "
                f"(looked at $ACP_TEST_PYTHON{minimum[0]}{minimum[1]}, PATH, pyenv versions, `uv python find`, "
                "/usr/bin; `.ci/run` installs one)"
            )
        shutil.rmtree(venv, ignore_errors=True)
        steps = [
            [base, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q", *requirements],
            [str(python), "-c", f"import {check_import}"],
        ]
        for cmd in steps:
            try:
                done = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT, check=False, stdin=subprocess.DEVNULL
                )
            except (OSError, subprocess.SubprocessError) as exc:
                pytest.fail(f"`{' '.join(cmd)}` could not run: {exc}", pytrace=False)
            if done.returncode != 0:
                pytest.fail(
                    f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}",
                    pytrace=False,
                )
        marker.write_text("\n".join([*requirements, base]) + "\n", encoding="utf-8")
    return venv


@attrs.frozen
class PydanticAcpAgent:
    """pydantic-acp in its cached environment.

    Attributes:
        venv: The environment's directory.
    """

    venv: Path

    @property
    def python(self) -> Path:
        return _bin(self.venv, "python")

    def command(self, store: Path, *, unstable: bool = False, chunk_delay: float = 0.3) -> list[str]:
        """argv of one agent process whose ``FileSessionStore`` is ``store`` (a directory).

        ``unstable`` serves ``session/resume`` (advertised either way); ``chunk_delay`` paces the
        chunks of a ``slow: ...`` prompt.
        """
        argv = [str(self.python), str(PYDANTIC_ACP_SCRIPT), "--store", os.fspath(store)]
        argv += ["--chunk-delay", f"{chunk_delay:g}"]
        return [*argv, "--unstable"] if unstable else argv


@attrs.frozen
class FastAgent:
    """fast-agent in its cached environment.

    Attributes:
        venv: The environment's directory.
    """

    venv: Path

    def command(self, home: Path) -> list[str]:
        """argv of one ``fast-agent acp --model passthrough`` process keeping its sessions under ``home``.

        The passthrough model echoes each prompt; a prompt ``***CALL_TOOL write_note {"text": ...}``
        (or ``wait {"seconds": ...}``) calls a tool of ``tests/peers/fast_agent_tools.py``
        after asking the client's permission.
        """
        tools = f"{shlex.quote(str(_bin(self.venv, 'python')))} {shlex.quote(str(FAST_AGENT_TOOLS))}"
        return [
            str(_bin(self.venv, "fast-agent")),
            "--no-update-check",
            "acp",
            "--model",
            "passthrough",
            "--home",
            os.fspath(home),
            "--stdio",
            tools,
        ]


@pytest.fixture(scope="session")
def pydantic_acp_agent() -> PydanticAcpAgent:
    """pydantic-acp 1.10.0 installed in the cache (Python >= 3.11)."""
    try:
        venv = ensure_venv(
            f"pydantic-acp-{PYDANTIC_ACP_VERSION}", PYDANTIC_ACP_REQUIREMENTS, (3, 11), "pydantic_acp, pydantic_ai"
        )
    except _Skip as exc:
        _loud_skip(str(exc))
    return PydanticAcpAgent(venv)


@pytest.fixture(scope="session")
def fast_agent() -> FastAgent:
    """fast-agent-mcp 0.10.48 installed in the cache (Python >= 3.13, a separate interpreter here)."""
    try:
        venv = ensure_venv(f"fast-agent-mcp-{FAST_AGENT_VERSION}", FAST_AGENT_REQUIREMENTS, (3, 13), "fast_agent, mcp")
    except _Skip as exc:
        _loud_skip(str(exc))
    return FastAgent(venv)
