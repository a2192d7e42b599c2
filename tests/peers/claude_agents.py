"""Fixtures: Zed's Claude adapters, the ACP agents that run the Claude Code CLI, installed from npm.

- **claude-agent-acp** (:data:`CLAUDE_AGENT_ACP_PACKAGE`): ``@zed-industries/claude-agent-acp`` 0.23.1
  with the Claude Agent SDK (and the CLI inside it) it pins.
- **claude-code-acp** (:data:`CLAUDE_CODE_ACP_PACKAGE`): the older ``@zed-industries/claude-code-acp``
  0.16.2, the same design on an older SDK.

Each is installed once, at its exact version, into ``$ACP_TEST_CACHE/npm-<name>-<version>/`` (the tests'
cache root, default ``~/.cache/acp-reconnect-tests``), under a file lock beside it; a marker file makes
the next run skip the install. A missing ``node``/``npm`` or a failed install FAILS the fixture.

**Nothing leaves 127.0.0.1.** :meth:`ClaudeAdapter.command` prepares a fresh configuration directory under
a test's ``home`` and returns the argv of one agent process (``env NAME=VALUE ... node index.js``) that:

- sends the model's traffic to the fake Messages API server (``ANTHROPIC_BASE_URL``,
  ``tests/peers/fake_anthropic.py``) with a dummy ``ANTHROPIC_API_KEY``;
- keeps its configuration and sessions under ``home`` (``HOME``, ``CLAUDE_CONFIG_DIR=home/.claude``;
  sessions are ``home/.claude/projects/<cwd>/<sessionId>.jsonl``, see :meth:`ClaudeAdapter.store_of`);
- finds a fresh plugin blocklist already there (``home/.claude/plugins/blocklist.json`` with
  ``fetchedAt`` now: the CLI fetches it from the internet at start when it is missing or older than an
  hour);
- turns off the CLI's other calls out: ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (telemetry, error
  reports, update checks, the metrics call claude-code-acp makes at every start), ``DISABLE_TELEMETRY=1``,
  ``DISABLE_AUTOUPDATER=1``, ``DISABLE_ERROR_REPORTING=1``;
- and, for anything that still tries, points ``HTTP_PROXY``/``HTTPS_PROXY`` (both spellings) at a closed
  loopback port, with ``NO_PROXY`` naming only the loopback addresses: a request to any other host
  fails at once, on the machine, without even a DNS lookup.

This was checked under ``strace -f -e trace=connect``, for both adapters' test modules whole: every
``AF_INET`` connect went to 127.0.0.1 (the fake model, and the dead proxy for claude-code-acp's metrics
call), none to a DNS server. Without these settings the CLI resolves ``raw.githubusercontent.com`` at
start (the blocklist); with the blocklist removed but the proxies set, that fetch goes to the dead
proxy, still without a DNS lookup.

The client's environment allowlist (``acp_client.transports.stdio.DEFAULT_INHERITED_ENV``) keeps the
parent's ``IS_SANDBOX`` out: with it, the adapters pass ``--allow-dangerously-skip-permissions`` to the
CLI, which refuses it when run as root, and no session can start.

Fixtures (session scope): ``claude_agent_acp`` and ``claude_code_acp`` -> :class:`ClaudeAdapter`;
``fake_anthropic`` (function scope) -> :class:`tests.peers.fake_anthropic.FakeAnthropic`.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.peers.fake_anthropic import FakeAnthropic
from tests.peers.typescript_sdk import _check_node_version, _file_lock, _require_tool, cache_root

__all__ = [
    "CLAUDE_AGENT_ACP_PACKAGE",
    "CLAUDE_AGENT_ACP_VERSION",
    "CLAUDE_CODE_ACP_PACKAGE",
    "CLAUDE_CODE_ACP_VERSION",
    "DEAD_PROXY",
    "NO_ROUTE_OUT",
    "ClaudeAdapter",
    "claude_agent_acp",
    "claude_code_acp",
    "ensure_npm_package",
    "fake_anthropic",
    "offline_environment",
]

CLAUDE_AGENT_ACP_VERSION = "0.23.1"
CLAUDE_AGENT_ACP_PACKAGE = "@zed-industries/claude-agent-acp"
CLAUDE_CODE_ACP_VERSION = "0.16.2"
CLAUDE_CODE_ACP_PACKAGE = "@zed-industries/claude-code-acp"

#: Where every proxy variable points: a loopback port nothing listens on (the discard port).
DEAD_PROXY = "http://127.0.0.1:9"
_LOOPBACK = "127.0.0.1,localhost,::1"
#: The proxy variables of an agent process that must not leave loopback: every proxy is the dead one, loopback is
#: reached directly.
NO_ROUTE_OUT = {
    **dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), DEAD_PROXY),
    **dict.fromkeys(("NO_PROXY", "no_proxy"), _LOOPBACK),
}

_INSTALL_TIMEOUT = 600.0


def _installed_version(prefix: Path, package: str) -> str | None:
    manifest = prefix / "node_modules" / package / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def ensure_npm_package(package: str, version: str) -> Path:
    """Install ``package@version`` (and what it pins) into the cache, once.

    Returns:
        The install prefix (its ``node_modules`` holds the package).

    Raises:
        pytest.fail.Exception: ``node``/``npm`` missing or too old, or ``npm install`` failed.
    """
    npm = _require_tool("npm")
    _check_node_version(_require_tool("node"))
    name = package.rsplit("/", 1)[-1]
    prefix = cache_root() / f"npm-{name}-{version}"
    marker = prefix / ".installed"
    wanted = f"{package}@{version}"
    with _file_lock(cache_root() / f".npm-{name}-{version}.lock"):
        prefix.mkdir(parents=True, exist_ok=True)
        current = marker.read_text(encoding="utf-8") if marker.exists() else None
        if current != wanted or _installed_version(prefix, package) != version:
            marker.unlink(missing_ok=True)
            cmd = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--save-exact", wanted]
            try:
                done = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT, check=False, stdin=subprocess.DEVNULL
                )
            except (OSError, subprocess.SubprocessError) as exc:
                pytest.fail(f"`{' '.join(cmd)}` could not run: {exc}", pytrace=False)
            if done.returncode != 0 or _installed_version(prefix, package) != version:
                pytest.fail(
                    f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}",
                    pytrace=False,
                )
            marker.write_text(wanted, encoding="utf-8")
    return prefix


def offline_environment(home: Path, base_url: str) -> dict[str, str]:
    """The variables that keep one adapter process on loopback, its state under ``home`` (see the module doc)."""
    config = home / ".claude"
    return {
        "HOME": os.fspath(home),
        "CLAUDE_CONFIG_DIR": os.fspath(config),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-offline-test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        **NO_ROUTE_OUT,
    }


def _seed(home: Path) -> None:
    """A configuration directory with a fresh, empty plugin blocklist (so the CLI does not fetch one)."""
    plugins = home / ".claude" / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    (plugins / "blocklist.json").write_text(json.dumps({"fetchedAt": now, "plugins": []}), encoding="utf-8")


@attrs.frozen
class ClaudeAdapter:
    """One of Zed's Claude adapters in the cache.

    Attributes:
        package: The npm package.
        version: Its exact version.
        prefix: The install prefix.
    """

    package: str
    version: str
    prefix: Path

    @property
    def entry(self) -> Path:
        """The adapter's program (``dist/index.js``)."""
        return self.prefix / "node_modules" / self.package / "dist" / "index.js"

    def command(self, home: Path, base_url: str) -> list[str]:
        """argv of one adapter process keeping its state under ``home``, its model at ``base_url``.

        Prepares ``home`` (the pre-seeded blocklist) first; the same ``home`` again is the same agent
        after a restart (it finds its sessions there).
        """
        _seed(home)
        env = shutil.which("env") or "/usr/bin/env"
        node = shutil.which("node") or "node"
        variables = [f"{name}={value}" for name, value in offline_environment(home, base_url).items()]
        return [env, *variables, node, os.fspath(self.entry)]

    @staticmethod
    def store_of(home: Path) -> Path:
        """The directory of the CLI's sessions (one ``<sessionId>.jsonl`` per session, by cwd): remove it to evict."""
        return home / ".claude" / "projects"


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """The fake Anthropic Messages API server on a free loopback port, for one test."""
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="session")
def claude_agent_acp() -> ClaudeAdapter:
    """@zed-industries/claude-agent-acp 0.23.1 installed in the cache."""
    prefix = ensure_npm_package(CLAUDE_AGENT_ACP_PACKAGE, CLAUDE_AGENT_ACP_VERSION)
    return ClaudeAdapter(CLAUDE_AGENT_ACP_PACKAGE, CLAUDE_AGENT_ACP_VERSION, prefix)


@pytest.fixture(scope="session")
def claude_code_acp() -> ClaudeAdapter:
    """@zed-industries/claude-code-acp 0.16.2 installed in the cache."""
    prefix = ensure_npm_package(CLAUDE_CODE_ACP_PACKAGE, CLAUDE_CODE_ACP_VERSION)
    return ClaudeAdapter(CLAUDE_CODE_ACP_PACKAGE, CLAUDE_CODE_ACP_VERSION, prefix)
