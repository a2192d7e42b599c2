"""Fixtures: real third-party ACP agents, installed from PyPI into a cache.

None of these agents is ours or an official SDK's minimal example: they are what users run, and
they deviate from the protocol in ways our recovery must survive (``docs/agents-conformance.md``).
All run fully offline over stdio:

- **pydantic-acp** (:data:`PYDANTIC_ACP_REQUIREMENTS`): ``tests/peers/pydantic_acp_agent.py``, a
  pydantic-ai agent with an offline ``FunctionModel`` and a ``FileSessionStore``; it needs
  Python >= 3.11.
- **fast-agent** (:data:`FAST_AGENT_REQUIREMENTS`): ``fast-agent acp --model passthrough`` with the
  MCP tools of ``tests/peers/fast_agent_tools.py``; it needs Python >= 3.13.
- **isaac-acp** (:data:`ISAAC_ACP_REQUIREMENTS`): ``tests/peers/isaac_acp_agent.py`` runs isaac's own
  entry point with its directories under a test's ``--home`` and its ``openai`` provider pointed at
  the fake OpenAI-compatible server of ``tests/peers/fake_openai.py``; Python >= 3.11.
- **deepagents-acp** (:data:`DEEPAGENTS_ACP_REQUIREMENTS`): ``tests/peers/deepagents_acp_agent.py``, a
  LangChain Deep Agent with a fake chat model and LangGraph checkpoints in a SQLite file; Python >= 3.11.
- **agentao** (:data:`AGENTAO_REQUIREMENTS`): ``tests/peers/agentao_agent.py`` runs ``agentao.acp``
  with its OpenAI settings pointed at the fake OpenAI-compatible server; Python >= 3.10.
- **gptme** (:data:`GPTME_REQUIREMENTS`): ``tests/peers/gptme_acp_agent.py`` runs ``gptme.acp`` (what
  ``gptme-acp`` runs) with its directories under a test's ``--home`` and its ``local`` provider pointed at
  the fake OpenAI-compatible server, telemetry off; Python >= 3.10.
- **chuk-acp-agent** (:data:`CHUK_ACP_AGENT_REQUIREMENTS`): ``tests/peers/chuk_kit_agent.py``, an agent
  built on the kit's ``Agent`` class whose model is the fake OpenAI-compatible server; Python >= 3.11.

``fake_openai`` (function scope) starts that server (:class:`tests.peers.fake_openai.FakeOpenAI`) on a
free loopback port for one test and stops it afterwards.

Each is installed once, with pinned versions, into its own virtual environment under the tests'
cache root (``$ACP_TEST_CACHE``, default ``~/.cache/acp-reconnect-tests``, the same as the
TypeScript SDK peer's), e.g. ``pydantic-acp-1.10.0/``; never into the repository or the project's
environment. A file lock next to each environment serializes parallel test sessions, and a marker
file (the requirements and the interpreter) makes the next run skip the install.

The interpreter comes from :func:`tests.peers._interpreters.find_python`. When none is new enough
the fixture SKIPS with a loud reason (the only skip these tests allow: a missing system
interpreter); a failed ``pip install`` FAILS the test (PyPI is reachable wherever the suite runs).

Fixtures (session scope): ``pydantic_acp_agent`` -> :class:`PydanticAcpAgent`,
``fast_agent`` -> :class:`FastAgent`, ``isaac_acp_agent`` -> :class:`IsaacAcpAgent`,
``deepagents_acp_agent`` -> :class:`DeepagentsAcpAgent`, ``agentao_agent`` -> :class:`AgentaoAgent`,
``gptme_acp_agent`` -> :class:`GptmeAcpAgent`, ``chuk_acp_agent`` -> :class:`ChukAcpAgent`.
Each gives the argv of a fresh agent process for a given store directory; the stdio transport
spawns it (and respawns it after a kill). Each also says where that store is, so a test can evict
the agent's sessions (``store_of``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import attrs
import pytest

from tests.peers._interpreters import find_python, interpreter_version
from tests.peers.fake_openai import FakeOpenAI
from tests.peers.typescript_sdk import _file_lock, cache_root

__all__ = [
    "AGENTAO_REQUIREMENTS",
    "AGENTAO_VERSION",
    "CHUK_ACP_AGENT_REQUIREMENTS",
    "CHUK_ACP_AGENT_VERSION",
    "DEEPAGENTS_ACP_REQUIREMENTS",
    "DEEPAGENTS_ACP_VERSION",
    "FAST_AGENT_REQUIREMENTS",
    "FAST_AGENT_VERSION",
    "GPTME_REQUIREMENTS",
    "GPTME_VERSION",
    "ISAAC_ACP_REQUIREMENTS",
    "ISAAC_ACP_VERSION",
    "PYDANTIC_ACP_REQUIREMENTS",
    "PYDANTIC_ACP_VERSION",
    "AgentaoAgent",
    "ChukAcpAgent",
    "DeepagentsAcpAgent",
    "FastAgent",
    "GptmeAcpAgent",
    "IsaacAcpAgent",
    "PydanticAcpAgent",
    "agentao_agent",
    "chuk_acp_agent",
    "deepagents_acp_agent",
    "ensure_venv",
    "fake_openai",
    "fast_agent",
    "gptme_acp_agent",
    "isaac_acp_agent",
    "pydantic_acp_agent",
]

PYDANTIC_ACP_VERSION = "1.10.0"
#: Exact versions: the adapter and the pydantic-ai it was measured with (pydantic-acp pins the ACP SDK itself).
PYDANTIC_ACP_REQUIREMENTS = (f"pydantic-acp=={PYDANTIC_ACP_VERSION}", "pydantic-ai-slim==2.52.0")
FAST_AGENT_VERSION = "0.10.48"
FAST_AGENT_REQUIREMENTS = (f"fast-agent-mcp=={FAST_AGENT_VERSION}",)
ISAAC_ACP_VERSION = "0.4.0"
#: isaac-acp imports httpx without declaring it (pydantic-ai 2.62 moved to httpx2), so it is listed here.
ISAAC_ACP_REQUIREMENTS = (f"isaac-acp=={ISAAC_ACP_VERSION}", "pydantic-ai==2.62.0", "httpx==0.28.1")
DEEPAGENTS_ACP_VERSION = "0.0.13"
#: The adapter, the Deep Agents and LangChain/LangGraph versions it was measured with, and the SQLite checkpointer.
DEEPAGENTS_ACP_REQUIREMENTS = (
    f"deepagents-acp=={DEEPAGENTS_ACP_VERSION}",
    "deepagents==0.7.32",
    "langchain-core==1.8.3",
    "langgraph==1.2.24",
    "langgraph-checkpoint-sqlite==3.1.2",
)
AGENTAO_VERSION = "0.5.17"
AGENTAO_REQUIREMENTS = (f"agentao=={AGENTAO_VERSION}", "openai==3.57.0")
GPTME_VERSION = "0.35.1"
#: gptme with its ACP extra, and the ACP SDK and OpenAI client versions it was measured with.
GPTME_REQUIREMENTS = (f"gptme[acp]=={GPTME_VERSION}", "agent-client-protocol==0.12.1", "openai==2.54.0")
CHUK_ACP_AGENT_VERSION = "0.2.1"
#: The kit and the chuk-acp protocol library under it.
CHUK_ACP_AGENT_REQUIREMENTS = (f"chuk-acp-agent=={CHUK_ACP_AGENT_VERSION}", "chuk-acp==0.3.2")

PYDANTIC_ACP_SCRIPT = Path(__file__).with_name("pydantic_acp_agent.py")
FAST_AGENT_TOOLS = Path(__file__).with_name("fast_agent_tools.py")
ISAAC_ACP_SCRIPT = Path(__file__).with_name("isaac_acp_agent.py")
DEEPAGENTS_ACP_SCRIPT = Path(__file__).with_name("deepagents_acp_agent.py")
AGENTAO_SCRIPT = Path(__file__).with_name("agentao_agent.py")
GPTME_SCRIPT = Path(__file__).with_name("gptme_acp_agent.py")
CHUK_ACP_AGENT_SCRIPT = Path(__file__).with_name("chuk_kit_agent.py")

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


def ensure_venv(
    name: str,
    requirements: tuple[str, ...],
    minimum: tuple[int, int],
    check_import: str,
    *,
    throwaway_home: bool = False,
) -> Path:
    """A cached virtual environment ``<cache>/<name>/`` holding ``requirements`` (installed once).

    Args:
        name: The directory name (carries the pinned version).
        requirements: Exact pip requirements.
        minimum: The lowest Python the packages support.
        check_import: A module that must import afterwards (proves the install works).
        throwaway_home: Import it with ``HOME`` and the XDG directories in a temporary directory (for a
            package that creates its directories when imported).

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
        with tempfile.TemporaryDirectory(prefix="acp-venv-home-") as home:
            env = _home_env(Path(home)) if throwaway_home else None
            for cmd in steps:
                _run_step(cmd, env if cmd is steps[-1] else None)
        marker.write_text("\n".join([*requirements, base]) + "\n", encoding="utf-8")
    return venv


def _home_env(home: Path) -> dict[str, str]:
    """The environment with ``HOME`` and the XDG directories under ``home``."""
    env = dict(os.environ, HOME=str(home))
    for variable in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[variable] = str(home / variable.removeprefix("XDG_").removesuffix("_HOME").lower())
    return env


def _run_step(cmd: list[str], env: dict[str, str] | None) -> None:
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"`{' '.join(cmd)}` could not run: {exc}", pytrace=False)
    if done.returncode != 0:
        pytest.fail(
            f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}",
            pytrace=False,
        )


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

    @staticmethod
    def store_of(store: Path) -> Path:
        """The ``FileSessionStore`` directory (one ``<sessionId>.json`` per session): remove it to evict them."""
        return store


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

    @staticmethod
    def store_of(home: Path) -> Path:
        """fast-agent's sessions under ``home`` (one sub-directory per session): remove it to evict them."""
        return home / "sessions"


@attrs.frozen
class _ModelledAgent:
    """A Python agent in its cached environment, run by one of our runner scripts (:attr:`SCRIPT`): it keeps what
    it writes under ``home`` and asks its model at ``base_url``.

    Attributes:
        venv: The environment's directory.
    """

    SCRIPT: ClassVar[Path]
    venv: Path

    def command(self, home: Path, base_url: str) -> list[str]:
        """argv of one agent process keeping its files under ``home``, its model at ``base_url``."""
        return [str(_bin(self.venv, "python")), str(self.SCRIPT), "--home", os.fspath(home), "--base-url", base_url]


@attrs.frozen
class IsaacAcpAgent(_ModelledAgent):
    """isaac-acp (its config and sessions under ``home``)."""

    SCRIPT = ISAAC_ACP_SCRIPT

    @staticmethod
    def store_of(home: Path) -> Path:
        """The directory of isaac's sessions (one sub-directory per session): remove it to evict them."""
        return home / "state" / "isaac" / "sessions"


@attrs.frozen
class DeepagentsAcpAgent:
    """deepagents-acp in its cached environment.

    Attributes:
        venv: The environment's directory.
    """

    venv: Path

    def command(self, store: Path, *, chunk_delay: float = 0.5) -> list[str]:
        """argv of one agent process whose LangGraph checkpoints are the SQLite file ``store``.

        The fake model echoes each prompt in two chunks; ``slow: WORDS`` streams word by word,
        ``chunk_delay`` seconds apart.
        """
        return [
            str(_bin(self.venv, "python")),
            str(DEEPAGENTS_ACP_SCRIPT),
            "--store",
            os.fspath(store),
            "--chunk-delay",
            f"{chunk_delay:g}",
        ]


@attrs.frozen
class AgentaoAgent(_ModelledAgent):
    """agentao (``HOME=home``); it keeps each session under ``<session cwd>/.agentao/sessions`` (:meth:`store_of`)."""

    SCRIPT = AGENTAO_SCRIPT

    @staticmethod
    def store_of(cwd: Path) -> Path:
        """The directory of the sessions agentao saved for sessions created with ``cwd``."""
        return cwd / ".agentao" / "sessions"


@attrs.frozen
class GptmeAcpAgent(_ModelledAgent):
    """gptme's ACP agent (its config and conversations under ``home``)."""

    SCRIPT = GPTME_SCRIPT

    @staticmethod
    def store_of(home: Path) -> Path:
        """The directory of gptme's conversations (one sub-directory per session): remove it to evict them."""
        return home / "data" / "gptme" / "logs"


@attrs.frozen
class ChukAcpAgent(_ModelledAgent):
    """An agent built on chuk-acp-agent (``HOME=home``; it keeps no sessions)."""

    SCRIPT = CHUK_ACP_AGENT_SCRIPT


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """The fake OpenAI-compatible chat server on a free loopback port, for one test."""
    with FakeOpenAI() as server:
        yield server


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


@pytest.fixture(scope="session")
def isaac_acp_agent() -> IsaacAcpAgent:
    """isaac-acp 0.4.0 installed in the cache (Python >= 3.11)."""
    try:
        venv = ensure_venv(f"isaac-acp-{ISAAC_ACP_VERSION}", ISAAC_ACP_REQUIREMENTS, (3, 11), "isaac.agent")
    except _Skip as exc:
        _loud_skip(str(exc))
    return IsaacAcpAgent(venv)


@pytest.fixture(scope="session")
def deepagents_acp_agent() -> DeepagentsAcpAgent:
    """deepagents-acp 0.0.13 installed in the cache (Python >= 3.11)."""
    try:
        venv = ensure_venv(
            f"deepagents-acp-{DEEPAGENTS_ACP_VERSION}",
            DEEPAGENTS_ACP_REQUIREMENTS,
            (3, 11),
            "deepagents_acp.server, langgraph.checkpoint.sqlite.aio",
        )
    except _Skip as exc:
        _loud_skip(str(exc))
    return DeepagentsAcpAgent(venv)


@pytest.fixture(scope="session")
def agentao_agent() -> AgentaoAgent:
    """agentao 0.5.17 installed in the cache (Python >= 3.10)."""
    try:
        venv = ensure_venv(f"agentao-{AGENTAO_VERSION}", AGENTAO_REQUIREMENTS, (3, 10), "agentao.acp.server")
    except _Skip as exc:
        _loud_skip(str(exc))
    return AgentaoAgent(venv)


@pytest.fixture(scope="session")
def gptme_acp_agent() -> GptmeAcpAgent:
    """gptme 0.35.1 with its ACP extra installed in the cache (Python >= 3.10)."""
    try:
        # importing gptme creates its directories under HOME: the check import gets a throwaway one
        venv = ensure_venv(
            f"gptme-{GPTME_VERSION}", GPTME_REQUIREMENTS, (3, 10), "gptme.acp.agent", throwaway_home=True
        )
    except _Skip as exc:
        _loud_skip(str(exc))
    return GptmeAcpAgent(venv)


@pytest.fixture(scope="session")
def chuk_acp_agent() -> ChukAcpAgent:
    """chuk-acp-agent 0.2.1 installed in the cache (Python >= 3.11)."""
    try:
        venv = ensure_venv(
            f"chuk-acp-agent-{CHUK_ACP_AGENT_VERSION}", CHUK_ACP_AGENT_REQUIREMENTS, (3, 11), "chuk_acp_agent.agent"
        )
    except _Skip as exc:
        _loud_skip(str(exc))
    return ChukAcpAgent(venv)
