"""Fixture: Qwen Code's daemon (``qwen serve``), a real remote ACP server, installed from npm into a cache.

``@qwen-code/qwen-code`` 0.24.4 (:data:`QWEN_CODE_VERSION`) ships the ``qwen`` CLI; ``qwen serve`` runs it
as a local HTTP daemon that speaks ACP on ``/acp``: Streamable HTTP (``POST`` / ``GET`` SSE / ``DELETE``,
``Acp-Connection-Id``, ``Acp-Session-Id``) and WebSocket on the same path. What it does that the other
agents of the suite do not:

- it numbers its session streams' SSE events (``id:``) and resumes one from ``Last-Event-ID`` (with an
  ``X-Qwen-Event-Epoch`` header that names the event bus the ids belong to);
- it keeps a dropped connection's streams for a grace period (10 s) so that a client can reattach, and a
  ``DELETE`` of the connection ends them (and the turns bound to them) at once;
- it echoes each prompt back as a ``user_message_chunk`` (``_meta.source = "bridge-echo"``), over HTTP
  and WebSocket;
- a session stream the connection does not own answers ``403``; an unknown connection ``404``.

The package is installed once, at its exact version, into ``$ACP_TEST_CACHE/npm-qwen-code-0.24.4/`` (the
tests' cache root, default ``~/.cache/acp-reconnect-tests``) under a file lock, with a marker that makes
the next run skip it (:func:`tests.peers.claude_agents.ensure_npm_package`; a missing or too old
``node``/``npm`` fails the fixture). The package asks for Node >= 22 in its manifest but runs on the Node
>= 20 the suite requires (checked: sessions, turns, load, both transports); ~150 MB.

**Nothing leaves 127.0.0.1.** :meth:`QwenDaemon.start` runs the daemon in a throwaway ``HOME`` (the
test module's directory) whose ``~/.qwen/settings.json`` selects the OpenAI-compatible provider, turns
off telemetry, usage statistics and update checks; the environment gives the provider the fake model
server on loopback (``OPENAI_BASE_URL``, ``tests/peers/fake_openai.py``) with a dummy key, turns off the
API preconnect (``QWEN_CODE_DISABLE_PRECONNECT=1``), and points every proxy variable at a closed
loopback port with ``NO_PROXY`` naming only loopback (anything that still tried would fail on the
machine, without a DNS lookup). Checked under ``strace -f -e trace=connect`` over the interop module's
``test_facts`` and ``test_the_daemon_restarted_mid_turn`` (both transports, the daemon started twice, its
ACP child, sessions, turns and replays): every ``AF_INET`` connect went to 127.0.0.1 (the fake model, the
daemon, the test's proxies), none to a DNS server, no ``AF_INET6`` connect at all.

The daemon binds 127.0.0.1 (loopback: no bearer token) and refuses (``403``) a ``Host`` that is not its own
address; :class:`HostFront` is the rewriting front a proxy before it needs. It listens a moment before
its ACP routes are mounted (a WebSocket upgrade is then answered ``406``, which the client retries as it
does a ``404``): :meth:`QwenDaemon.start` returns once they are. Its diagnostics are kept: stderr in
``home/serve.log`` and its own log in ``home/.qwen/debug/daemon/daemon.log`` (:meth:`QwenDaemon.log`):
the tests read them to prove that nothing the client sent aborted a running turn.

Fixture (session scope): ``qwen_code`` -> :class:`QwenCode` (the install). Test modules start one
:class:`QwenDaemon` each (``with QwenDaemon(...)``: one process per module, restarted on the same port
when a test restarts it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from types import TracebackType

import attrs
import pytest

from tests._support import eventually_blocking
from tests.peers.claude_agents import NO_ROUTE_OUT, ensure_npm_package

__all__ = ["QWEN_CODE_PACKAGE", "QWEN_CODE_VERSION", "HostFront", "QwenCode", "QwenDaemon", "qwen_code"]

QWEN_CODE_PACKAGE = "@qwen-code/qwen-code"
QWEN_CODE_VERSION = "0.24.4"
#: The model name the daemon is told to use (the fake server answers any).
MODEL = "fake-echo"
#: How long the daemon may take to listen (it starts in ~1-2 s; a loaded machine is slower).
_START_TIMEOUT = 60.0
_LISTENING = re.compile(r"qwen serve listening on http://127\.0\.0\.1:(\d+)")
#: The daemon listens before its ACP routes are mounted (a WebSocket upgrade then gets ``406``): this line
#: on its stderr says they are.
_READY = "/acp WebSocket transport enabled"

#: What keeps the daemon off the network and quiet: the provider, no telemetry, no statistics, no updates.
_SETTINGS = {
    "security": {"auth": {"selectedType": "openai"}},
    "model": {"name": MODEL},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False},
}


@attrs.frozen
class QwenCode:
    """``@qwen-code/qwen-code`` installed in the cache.

    Attributes:
        prefix: The npm prefix holding it.
    """

    prefix: Path

    @property
    def entry(self) -> Path:
        """The CLI's program (``cli-entry.js``, what the ``qwen`` bin runs)."""
        return self.prefix / "node_modules" / "@qwen-code" / "qwen-code" / "cli-entry.js"


def offline_environment(home: Path, base_url: str) -> dict[str, str]:
    """The environment of one daemon: its home, its model on loopback, nothing that goes elsewhere."""
    return {
        "HOME": os.fspath(home),
        "PATH": os.environ.get("PATH", os.defpath),
        "OPENAI_API_KEY": "sk-offline-test",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_MODEL": MODEL,
        "QWEN_CODE_DISABLE_PRECONNECT": "1",
        "DO_NOT_TRACK": "1",
        **NO_ROUTE_OUT,
    }


class QwenDaemon:
    """One ``qwen serve`` process on loopback, its state in ``home``, its workspace ``workspace``.

    ``with QwenDaemon(...) as daemon:`` starts it (on a free port the first time); :meth:`restart` stops it
    and starts it again on the same port (its sessions stay on disk under ``home``).

    Args:
        qwen: The install.
        home: Its ``HOME`` (settings, sessions, logs).
        workspace: The directory it is bound to (sessions must use it as their cwd).
        base_url: The fake OpenAI-compatible model's base URL.
    """

    def __init__(self, qwen: QwenCode, home: Path, workspace: Path, base_url: str) -> None:
        self.qwen = qwen
        self.home = home
        self.workspace = workspace
        self.base_url = base_url
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._stdout: Path = home / "serve.out"
        self._stderr: Path = home / "serve.log"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/acp"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/acp"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _prepare(self) -> None:
        config = self.home / ".qwen"
        config.mkdir(parents=True, exist_ok=True)
        (config / "settings.json").write_text(json.dumps(_SETTINGS, indent=1), encoding="utf-8")
        self.workspace.mkdir(parents=True, exist_ok=True)

    def start(self) -> QwenDaemon:
        """Start the daemon and wait until it listens (on :attr:`port`, or a free one if it is 0)."""
        assert self._process is None, "already running"
        self._prepare()
        node = shutil.which("node") or "node"
        argv = [
            node,
            os.fspath(self.qwen.entry),
            "serve",
            "--hostname",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--no-web",
            "--workspace",
            os.fspath(self.workspace),
        ]
        marker = self._stdout.stat().st_size if self._stdout.exists() else 0
        err_marker = self._stderr.stat().st_size if self._stderr.exists() else 0
        with open(self._stdout, "ab") as out, open(self._stderr, "ab") as err:
            self._process = subprocess.Popen(
                argv,
                cwd=self.workspace,
                env=offline_environment(self.home, self.base_url),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        process = self._process

        def listening() -> str | None:
            text = self._stdout.read_bytes()[marker:].decode("utf-8", "replace")
            ready = _READY in self._stderr.read_bytes()[err_marker:].decode("utf-8", "replace")
            return text if (ready and _LISTENING.search(text) is not None) or process.poll() is not None else None

        try:
            text = eventually_blocking(listening, _START_TIMEOUT, what="qwen serve to listen")
        except AssertionError:
            text = ""
        found = _LISTENING.search(text)
        if found is None:
            code = process.poll()
            self.stop()
            pytest.fail(f"qwen serve did not start (exit {code}):\n{text[-2000:]}\n{self.log()[-4000:]}", pytrace=False)
        self.port = int(found.group(1))
        return self

    def stop(self) -> None:
        """Stop the daemon (SIGTERM to its process group, then SIGKILL after 10 s)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        # Children it spawned (its ACP child) share its process group: make sure none outlives it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    def restart(self) -> None:
        """Stop the daemon and start it again on the same port."""
        self.stop()
        self.start()

    def log(self) -> str:
        """Everything the daemon said so far: its stderr, then its own daemon log."""
        parts = []
        for path in (self._stderr, self.home / ".qwen" / "debug" / "daemon" / "daemon.log"):
            try:
                parts.append(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
        return "\n".join(parts)

    def __enter__(self) -> QwenDaemon:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


#: The ``Host`` line of a request head to a loopback address (what :class:`HostFront` rewrites).
_HOST_LINE = re.compile(rb"\r\nhost: *(?:127\.0\.0\.1|localhost)(?::\d+)?\r\n", re.IGNORECASE)
#: The longest ``Host`` line that can be cut across two reads.
_HOST_TAIL = 48


class HostFront:
    """A loopback TCP forwarder to the daemon that rewrites the ``Host`` of each request head to the
    daemon's own address: the daemon refuses (``403``) any other ``Host``, and a proxy in front of it
    (the tests' :class:`~acp_client.testing.FaultProxy`, which forwards bytes as they are) must rewrite
    it. Each accepted connection gets its own upstream connection; when either side ends or breaks,
    the other is closed the same way (a reset stays a reset).

    Only the client's bytes are looked at, and only for a loopback ``Host`` line; a ``Host`` line cut
    across two reads is held until its end arrives.
    """

    def __init__(self, daemon: QwenDaemon) -> None:
        self.daemon = daemon
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._serving: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/acp"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/acp"

    async def start(self) -> HostFront:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._serving:  # each ends once its sockets are aborted
            await asyncio.wait(self._serving)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.daemon.port)
        except OSError:
            writer.transport.abort()
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        host = f"\r\nHost: 127.0.0.1:{self.daemon.port}\r\n".encode()
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, host), self._pipe(up_reader, writer, None), return_exceptions=True
            )
        finally:
            self._writers.discard(writer)
            self._writers.discard(up_writer)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: bytes | None) -> None:
        held = b""
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    if held:
                        writer.write(held)
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    await writer.drain()
                    return
                if host is not None:
                    data = _HOST_LINE.sub(host, held + data)
                    cut = data.rfind(b"\r\n", max(0, len(data) - _HOST_TAIL))
                    tail = data[cut:] if cut >= 0 else b""
                    # An unfinished loopback Host line at the end waits for its end.
                    partial = tail[2:].lower()
                    if (
                        cut >= 0
                        and partial
                        and b"\r\n" not in partial
                        and (b"host:".startswith(partial) or partial.startswith(b"host:"))
                    ):
                        data, held = data[:cut], tail
                    else:
                        held = b""
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            writer.transport.abort()  # the other side broke: break this one too
            raise
        except asyncio.CancelledError:
            writer.transport.abort()
            raise


@pytest.fixture(scope="session")
def qwen_code() -> QwenCode:
    """@qwen-code/qwen-code 0.24.4 installed in the cache."""
    qwen = QwenCode(ensure_npm_package(QWEN_CODE_PACKAGE, QWEN_CODE_VERSION))
    if not qwen.entry.exists():
        pytest.fail(f"the qwen-code install lacks {qwen.entry}", pytrace=False)
    return qwen
