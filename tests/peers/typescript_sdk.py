"""Fixtures: an agent on the official ACP TypeScript SDK 2.4.0, run under Node, as an independent peer.

The agent program is ``tests/peers/ts_agent/agent.mjs`` (our own echo agent). It is served by the
SDK's ``AcpServer`` over WebSocket and Streamable HTTP on one loopback endpoint, ``/acp``; the
SDK's protocol router answers ACP v1 or v2, whichever version the client proposes, so the v1 and
v2 URLs are the same. A second loopback port takes test controls (drop, restart, evict, ...).

The npm packages are installed once into a cache directory outside the repository:
``$ACP_TEST_CACHE/npm-sdk-2.4.0`` (``ACP_TEST_CACHE`` defaults to ``~/.cache/acp-reconnect-tests``),
guarded by a file lock so parallel test sessions don't collide. The agent file is copied next to
that ``node_modules`` so Node's ESM resolution finds the packages; nothing is written into the
repository. A missing ``node`` or ``npm`` fails the fixture (it never skips).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

__all__ = [
    "NPM_PACKAGES",
    "SDK_VERSION",
    "TypeScriptSdkPeer",
    "cache_root",
    "ensure_npm_packages",
    "start_peer",
    "typescript_sdk_peer",
]

SDK_VERSION = "2.4.0"
#: Exact versions: the SDK, the WebSocket server it plugs into, and its zod peer dependency.
NPM_PACKAGES = (f"@agentclientprotocol/sdk@{SDK_VERSION}", "ws@8.23.0", "zod@4.6.7")
MIN_NODE_MAJOR = 20
AGENT_SOURCE = Path(__file__).parent / "ts_agent" / "agent.mjs"
ENDPOINT = "/acp"

_INSTALL_TIMEOUT = 600.0
_READY_TIMEOUT = 30.0
_CONTROL_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


def cache_root() -> Path:
    """The tests' cache root: ``$ACP_TEST_CACHE`` or ``~/.cache/acp-reconnect-tests``."""
    configured = os.environ.get("ACP_TEST_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "acp-reconnect-tests"


def _require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"`{name}` was not found on PATH. The TypeScript SDK peer tests need Node.js >= {MIN_NODE_MAJOR} "
            f"with npm (they install {', '.join(NPM_PACKAGES)} into {cache_root()}).",
            pytrace=False,
        )
    return path


def _check_node_version(node: str) -> None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
        major = int(out.strip().lstrip("v").split(".")[0])
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        pytest.fail(f"could not run `{node} --version`: {exc}", pytrace=False)
    if major < MIN_NODE_MAJOR:
        pytest.fail(
            f"Node.js {out.strip()} is too old: the TypeScript SDK peer needs >= {MIN_NODE_MAJOR}.", pytrace=False
        )


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), held for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
            import msvcrt

            handle.seek(0)
            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _installed_version(prefix: Path) -> str | None:
    manifest = prefix / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def ensure_npm_packages() -> Path:
    """Install :data:`NPM_PACKAGES` into the cache (once) and copy the agent next to them.

    Returns:
        The absolute path of the agent program inside the cache directory.

    Raises:
        pytest.fail.Exception: ``node``/``npm`` missing or too old, or ``npm install`` failed.
    """
    node = _require_tool("node")
    npm = _require_tool("npm")
    _check_node_version(node)
    prefix = cache_root() / f"npm-sdk-{SDK_VERSION}"
    marker = prefix / ".installed"
    wanted = "\n".join(NPM_PACKAGES)
    source = AGENT_SOURCE.read_bytes()
    agent = prefix / f"agent-{hashlib.sha256(source).hexdigest()[:16]}.mjs"
    with _file_lock(prefix.parent / f".npm-sdk-{SDK_VERSION}.lock"):
        prefix.mkdir(parents=True, exist_ok=True)
        current = marker.read_text(encoding="utf-8") if marker.exists() else None
        if current != wanted or _installed_version(prefix) != SDK_VERSION:
            marker.unlink(missing_ok=True)
            cmd = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--save-exact", *NPM_PACKAGES]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT, check=False)
            except (OSError, subprocess.SubprocessError) as exc:
                pytest.fail(f"`{' '.join(cmd)}` could not run: {exc}", pytrace=False)
            if done.returncode != 0 or _installed_version(prefix) != SDK_VERSION:
                pytest.fail(
                    f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}",
                    pytrace=False,
                )
            marker.write_text(wanted, encoding="utf-8")
        if not agent.exists():
            fd, tmp = tempfile.mkstemp(dir=prefix, prefix=".agent-", suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(source)
            os.replace(tmp, agent)
    return agent


class TypeScriptSdkPeer:
    """A running Node agent on the TypeScript SDK, with the controls the recovery tests need.

    One server handles both ACP versions (the SDK's protocol router answers the version the
    client proposes), so ``ws_url == ws_url_v2`` and ``http_url == http_url_v2``.

    Attributes:
        ws_url: ``ws://127.0.0.1:PORT/acp`` (v1; also v2).
        http_url: ``http://127.0.0.1:PORT/acp`` (Streamable HTTP, HTTP/1.1; v1, also v2).
        ws_url_v2: Same as ``ws_url``.
        http_url_v2: Same as ``http_url``.
        control_url: ``http://127.0.0.1:CPORT`` (the control endpoint).
    """

    def __init__(self, process: subprocess.Popen[bytes], port: int, control_port: int, stderr_path: Path) -> None:
        self.process = process
        self.port = port
        self.control_port = control_port
        self.stderr_path = stderr_path
        self.ws_url = f"ws://127.0.0.1:{port}{ENDPOINT}"
        self.http_url = f"http://127.0.0.1:{port}{ENDPOINT}"
        self.ws_url_v2 = self.ws_url
        self.http_url_v2 = self.http_url
        self.control_url = f"http://127.0.0.1:{control_port}"

    # -- controls ---------------------------------------------------------------------------

    def drop(self) -> None:
        """Abruptly destroy every live client connection (WebSocket and HTTP sockets, no close frame).

        Sessions stay in memory (``session/status`` still says ``open``); ACP connection state
        on the server is kept too, as after a network failure.
        """
        self._control("POST", "/drop")

    def restart(self) -> None:
        """Simulate an agent restart: drop, forget every ACP connection and in-memory session.

        The session store survives, so known sessions then read ``saved``; old
        ``Acp-Connection-Id`` values answer 404.
        """
        self._control("POST", "/restart")

    def evict(self, session_id: str) -> None:
        """Forget ``session_id`` entirely (memory and store): it then answers -32002."""
        self._control("POST", "/evict", {"sessionId": session_id})

    def sessions(self) -> dict[str, Any]:
        """Every session the agent knows, by id: ``{"status": "open"|"saved", "cwd", "turns",
        "running", "protocolVersion"}`` (``protocolVersion`` is ``None`` when not in memory)."""
        sessions: dict[str, Any] = self.stats()["sessions"]
        return sessions

    def stats(self) -> dict[str, Any]:
        """The full snapshot: ``sessions`` (as above), ``restarts``, ``liveSockets``, ``chunkDelayMs``,
        ``holdTurns``, ``heldTurns`` (how many turns wait right now)."""
        result: dict[str, Any] = self._control("GET", "/sessions")
        return result

    def set_chunk_delay(self, seconds: float) -> None:
        """Pause ``seconds`` before each of a prompt's three chunks (0 = no pause), e.g. to drop mid-turn."""
        self._control("POST", "/config", {"chunkDelayMs": round(seconds * 1000)})

    def hold_turns(self) -> None:
        """Make running prompt turns wait before their next chunk until :meth:`release_turns`.

        A v1 turn holds before its first chunk; a v2 turn after its ``user_message`` and
        ``state_update`` running (the ``session/prompt`` answer has gone out). Always release
        in a ``finally``: the agent is shared by the whole test session.
        """
        self._control("POST", "/config", {"holdTurns": True})

    def release_turns(self) -> None:
        """Let held turns (and new ones) run on."""
        self._control("POST", "/config", {"holdTurns": False})

    # -- process ----------------------------------------------------------------------------

    def stderr_text(self) -> str:
        """What the Node process wrote on stderr so far."""
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def check_alive(self) -> None:
        """Fail the test with Node's stderr if the agent process has exited."""
        code = self.process.poll()
        if code is not None:
            pytest.fail(
                f"the TypeScript SDK agent exited with code {code}; stderr:\n{self.stderr_text()}", pytrace=False
            )

    def _control(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        self.check_alive()
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.control_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=_CONTROL_TIMEOUT) as response:
                return json.loads(response.read() or b"null")
        except (urllib.error.URLError, OSError) as exc:
            self.check_alive()
            pytest.fail(f"control {method} {path} failed: {exc}\nagent stderr:\n{self.stderr_text()}", pytrace=False)

    def stop(self) -> None:
        """Stop the Node process: close its stdin (it exits on EOF), then terminate, then kill."""
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                if self.process.stdin is not None:
                    self.process.stdin.close()
            try:
                self.process.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.terminate()
                try:
                    self.process.wait(_STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(_STOP_TIMEOUT)
        _close_pipes(self.process)


def _close_pipes(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _read_lines(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    for line in iter(stream.readline, b""):
        lines.put(line)
    lines.put(None)


def start_peer(agent: Path, stderr_path: Path) -> TypeScriptSdkPeer:
    """Start the Node agent on free loopback ports and wait for its ready line.

    Raises:
        pytest.fail.Exception: The process died or did not get ready in time (with its stderr).
    """
    node = _require_tool("node")
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [node, str(agent)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=agent.parent
        )
    assert process.stdout is not None
    lines: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True, name="ts-agent-stdout").start()
    try:
        line = lines.get(timeout=_READY_TIMEOUT)
    except queue.Empty:
        line = None
    ready: dict[str, Any] | None = None
    if line:
        with contextlib.suppress(ValueError):
            ready = json.loads(line)
    if not isinstance(ready, dict) or ready.get("event") != "ready":
        process.kill()
        process.wait()
        _close_pipes(process)
        pytest.fail(
            f"the TypeScript SDK agent did not start (exit code {process.returncode}, first line {line!r}); "
            f"stderr:\n{stderr_path.read_text(encoding='utf-8', errors='replace')}",
            pytrace=False,
        )
    return TypeScriptSdkPeer(process, int(ready["port"]), int(ready["controlPort"]), stderr_path)


@pytest.fixture(scope="session")
def typescript_sdk_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TypeScriptSdkPeer]:
    """The TypeScript SDK 2.4.0 agent (Node subprocess), shared by the whole test session."""
    agent = ensure_npm_packages()
    peer = start_peer(agent, tmp_path_factory.mktemp("ts-agent") / "stderr.log")
    try:
        yield peer
    finally:
        peer.stop()
