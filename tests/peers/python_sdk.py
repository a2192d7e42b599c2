"""Fixtures: an agent on the official ACP Python SDK (0.12.1) as an independent peer.

The agent is ``tests/peers/python_sdk_agent.py`` (our echo agent on the SDK's ``Agent`` interface; its
docstring lists the behaviours). The fixtures run it in a SUBPROCESS, independent of every test's event
loop: hypercorn serves the SDK's ASGI app (``acp.http.asgi.create_asgi_app``) on two random loopback ports,

- plain: WebSocket (``ws_url``) and Streamable HTTP (``http_url``; HTTP/1.1, and HTTP/2 with prior
  knowledge, i.e. h2c),
- TLS: ``https_url`` (and ``wss_url``), a trustme certificate for ``localhost`` and ``127.0.0.1``,
  ALPN ``h2`` and ``http/1.1``; clients verify it with ``ca_file``.

The fixture binds the two ports itself and hands the sockets to the subprocess (no free-port race), waits
until both answer HTTP (polling with a deadline; it fails with the subprocess's log if it dies) and stops
it at the end. The subprocess also exits by itself when its stdin closes, so a killed test run leaves no
server behind. ``stdio_command`` runs the same agent over stdio (the caller spawns it).

Restart: :meth:`PythonSdkPeer.restart` SIGKILLs the server and starts a new one on the SAME ports. Every
connection drops; sessions live in the agent's memory only, so the new server does not know any of them
(``session/load`` / ``session/resume`` answer -32002) -- unless the peer was made with a ``store`` (see
``python_sdk_peer_factory``), in which case the restarted agent still knows them (the "agent restart,
store kept" case). :meth:`~PythonSdkPeer.stop` and :meth:`~PythonSdkPeer.start` split the restart, so a
test can observe the down time (connections are refused while stopped). Prefer
``python_sdk_peer_factory`` for tests that stop a peer; ``restart()`` on the shared session peer is fine
(it is running again when the call returns).

Fixtures:

- ``python_sdk_peer`` (session scope) -> :class:`PythonSdkPeer`: the shared peer.
- ``python_sdk_peer_factory`` (function scope) -> ``make(*, store=None, agent_args=()) ->
  PythonSdkPeer``: private peers, stopped at the end of the test. ``store``: a JSON file the agent
  mirrors its sessions to; ``agent_args``: extra command-line flags of the agent (``--strict-results``,
  ``--no-resume``, ``--no-load-session``, ``--slow-interval S``, ``--stock-http-server``...).
- ``python_sdk_certs`` (session scope) -> :class:`PeerCertificates`.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs
import pytest

__all__ = [
    "AGENT_SCRIPT",
    "PeerCertificates",
    "PeerStartError",
    "PythonSdkPeer",
    "python_sdk_certs",
    "python_sdk_peer",
    "python_sdk_peer_factory",
]

AGENT_SCRIPT = Path(__file__).with_name("python_sdk_agent.py")
ENDPOINT = "/acp"
TLS_HOST = "localhost"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
_POLL_INTERVAL = 0.05


@attrs.frozen
class PeerCertificates:
    """PEM files: the trustme CA (for clients) and the server's certificate chain and key."""

    ca_file: str
    cert_file: str
    key_file: str

    @classmethod
    def create(cls, directory: Path) -> PeerCertificates:
        import trustme

        ca = trustme.CA()
        leaf = ca.issue_cert("localhost", "127.0.0.1")
        ca_file, cert_file, key_file = directory / "ca.pem", directory / "server.pem", directory / "server.key"
        ca.cert_pem.write_to_path(str(ca_file))
        cert_file.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(key_file))
        return cls(str(ca_file), str(cert_file), str(key_file))

    def client_context(self) -> ssl.SSLContext:
        """A fresh client-side context that trusts the CA (verification on)."""
        return ssl.create_default_context(cafile=self.ca_file)


class PeerStartError(RuntimeError):
    """The peer's server process did not come up (the message carries its log)."""


class _ServerProcess:
    """Owns one server subprocess and its two loopback ports (kept across restarts)."""

    def __init__(self, *, certs: PeerCertificates, workdir: Path, agent_args: Sequence[str]) -> None:
        self.certs = certs
        self.agent_args = tuple(agent_args)
        self.http_port = 0
        self.https_port = 0
        self.log_path = workdir / "server.log"
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self, timeout: float = START_TIMEOUT) -> None:
        if self.pid is not None:
            return
        deadline = time.monotonic() + timeout
        http_sock = _bind_loopback(self.http_port, deadline)
        try:
            https_sock = _bind_loopback(self.https_port, deadline)
        except BaseException:
            http_sock.close()
            raise
        self.http_port, self.https_port = http_sock.getsockname()[1], https_sock.getsockname()[1]
        self.starts += 1
        command = [
            sys.executable,
            str(AGENT_SCRIPT),
            "--serve",
            "--exit-on-stdin-eof",
            "--http-fd",
            str(http_sock.fileno()),
            "--https-fd",
            str(https_sock.fileno()),
            "--certfile",
            self.certs.cert_file,
            "--keyfile",
            self.certs.key_file,
            *self.agent_args,
        ]
        try:
            with self.log_path.open("ab") as log:
                log.write(f"--- start #{self.starts}: {' '.join(command)}\n".encode())
                log.flush()
                self._proc = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=log,
                    pass_fds=(http_sock.fileno(), https_sock.fileno()),
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
        finally:
            # The child owns the sockets now; without our copies, a dead child means refused connections.
            http_sock.close()
            https_sock.close()
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.stop(graceful=False)
            raise

    def stop(self, *, graceful: bool = True, timeout: float = STOP_TIMEOUT) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                if graceful:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                else:
                    proc.kill()
            proc.wait(timeout)
        finally:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def _wait_ready(self, deadline: float) -> None:
        tls = self.certs.client_context()
        pending = {"http", "https"}
        last_error: Exception | None = None
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                raise PeerStartError(f"python SDK peer server exited (code {code}); log:\n{self.log_text()[-4000:]}")
            for which in sorted(pending):
                try:
                    if which == "http":
                        _probe(http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=2))
                    else:
                        _probe(http.client.HTTPSConnection(TLS_HOST, self.https_port, timeout=2, context=tls))
                except (OSError, http.client.HTTPException) as exc:
                    last_error = exc
                else:
                    pending.discard(which)
            if not pending:
                return
            if time.monotonic() > deadline:
                self.stop(graceful=False)
                raise PeerStartError(
                    f"python SDK peer server not ready ({sorted(pending)} not answering: {last_error!r}); "
                    f"log:\n{self.log_text()[-4000:]}"
                )
            time.sleep(_POLL_INTERVAL)


def _bind_loopback(port: int, deadline: float) -> socket.socket:
    """A bound (not yet listening) loopback socket; ``port`` 0 picks a free one. Retries EADDRINUSE."""
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(_POLL_INTERVAL)
            continue
        sock.set_inheritable(True)
        return sock


def _probe(conn: http.client.HTTPConnection) -> None:
    """One GET of the endpoint without a connection id: the SDK app answers 400 once it is serving."""
    try:
        conn.request("GET", ENDPOINT, headers={"Accept": "text/event-stream"})
        response = conn.getresponse()
        response.read()
        if response.status != 400:
            raise http.client.HTTPException(f"unexpected status {response.status}")
    finally:
        conn.close()


@attrs.frozen(kw_only=True)
class PythonSdkPeer:
    """Where the official-Python-SDK agent listens, and how to run it over stdio.

    Attributes:
        ws_url: ``ws://127.0.0.1:PORT/acp``.
        http_url: ``http://127.0.0.1:PORT/acp`` (same port; HTTP/1.1 or HTTP/2 prior knowledge).
        https_url: ``https://localhost:PORT2/acp`` (TLS; ALPN h2 and http/1.1).
        ca_file: PEM of the CA that signed the TLS certificate.
        stdio_command: argv running the same agent over stdio (memory only, no store).
    """

    ws_url: str
    http_url: str
    https_url: str
    ca_file: str
    stdio_command: tuple[str, ...]
    _server: _ServerProcess = attrs.field(alias="server", repr=False, eq=False)

    @classmethod
    def from_server(cls, server: _ServerProcess) -> PythonSdkPeer:
        return cls(
            ws_url=f"ws://127.0.0.1:{server.http_port}{ENDPOINT}",
            http_url=f"http://127.0.0.1:{server.http_port}{ENDPOINT}",
            https_url=f"https://{TLS_HOST}:{server.https_port}{ENDPOINT}",
            ca_file=server.certs.ca_file,
            stdio_command=stdio_command(*_stdio_args(server.agent_args)),
            server=server,
        )

    @property
    def wss_url(self) -> str:
        """``wss://localhost:PORT2/acp``: WebSocket over the TLS port."""
        return f"wss://{TLS_HOST}:{self._server.https_port}{ENDPOINT}"

    @property
    def http_port(self) -> int:
        """The plain port (WebSocket, HTTP/1.1, h2c); the same across restarts."""
        return self._server.http_port

    @property
    def https_port(self) -> int:
        """The TLS port; the same across restarts."""
        return self._server.https_port

    @property
    def pid(self) -> int | None:
        """The server process id, or ``None`` while stopped."""
        return self._server.pid

    def ssl_context(self) -> ssl.SSLContext:
        """A fresh client ``SSLContext`` trusting ``ca_file`` (verification on)."""
        return self._server.certs.client_context()

    def stdio_command_with_store(self, store: str | os.PathLike[str], *agent_args: str) -> tuple[str, ...]:
        """``stdio_command`` whose agent mirrors its sessions to ``store`` (a JSON file, created on demand).

        Spawning the command again with the same file is an "agent restart, store kept": the new process
        answers ``session/load`` (replay) and ``session/resume`` for the old sessions.
        """
        return (*self.stdio_command, "--store", os.fspath(store), *agent_args)

    def restart(self, timeout: float = START_TIMEOUT) -> None:
        """Kill the server (SIGKILL: every connection drops) and start a new one on the same ports.

        Sessions are in the agent's memory only (unless the peer has a store), so afterwards they are
        unknown: ``session/load`` / ``session/resume`` answer -32002, old connection ids answer 404.
        Returns once the new server answers on both ports.
        """
        self.stop()
        self.start(timeout)

    def stop(self) -> None:
        """Kill the server now (SIGKILL); connections to its ports are refused until :meth:`start`."""
        self._server.stop(graceful=False)

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the server again on the same ports (no-op if running); waits until it answers."""
        self._server.start(timeout)

    def server_log(self) -> str:
        """Everything the server subprocess wrote to stdout/stderr so far (for failure messages)."""
        return self._server.log_text()


def stdio_command(*agent_args: str) -> tuple[str, ...]:
    """argv that runs the agent over stdio with extra agent flags."""
    return (sys.executable, str(AGENT_SCRIPT), "--stdio", *agent_args)


_SERVE_ONLY_FLAGS = {"--stock-http-server"}


def _stdio_args(agent_args: Sequence[str]) -> list[str]:
    """The agent flags that also make sense over stdio (no store: stdio agents get their own)."""
    args: list[str] = []
    skip_value = False
    for arg in agent_args:
        if skip_value:
            skip_value = False
        elif arg == "--store":
            skip_value = True
        elif arg not in _SERVE_ONLY_FLAGS:
            args.append(arg)
    return args


def _start_peer(certs: PeerCertificates, workdir: Path, agent_args: Sequence[str]) -> PythonSdkPeer:
    server = _ServerProcess(certs=certs, workdir=workdir, agent_args=agent_args)
    server.start()
    return PythonSdkPeer.from_server(server)


@pytest.fixture(scope="session")
def python_sdk_certs(tmp_path_factory: pytest.TempPathFactory) -> PeerCertificates:
    """A trustme CA and a server certificate for ``localhost`` / ``127.0.0.1``."""
    return PeerCertificates.create(tmp_path_factory.mktemp("python-sdk-peer-tls"))


@pytest.fixture(scope="session")
def python_sdk_peer(
    python_sdk_certs: PeerCertificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PythonSdkPeer]:
    """The shared official-Python-SDK agent (WebSocket, HTTP, HTTPS; stdio via ``stdio_command``)."""
    peer = _start_peer(python_sdk_certs, tmp_path_factory.mktemp("python-sdk-peer"), ())
    try:
        yield peer
    finally:
        peer._server.stop(graceful=True)


@pytest.fixture
def python_sdk_peer_factory(
    python_sdk_certs: PeerCertificates, tmp_path: Path
) -> Iterator[Callable[..., PythonSdkPeer]]:
    """Make private peers: ``make(*, store=None, agent_args=())``; all are stopped after the test."""
    servers: list[_ServerProcess] = []

    def make(*, store: str | os.PathLike[str] | None = None, agent_args: Sequence[str] = ()) -> PythonSdkPeer:
        args = [*agent_args]
        if store is not None:
            args += ["--store", os.fspath(store)]
        workdir = tmp_path / f"python-sdk-peer-{len(servers)}"
        workdir.mkdir()
        server = _ServerProcess(certs=python_sdk_certs, workdir=workdir, agent_args=args)
        servers.append(server)
        server.start()
        return PythonSdkPeer.from_server(server)

    try:
        yield make
    finally:
        for server in servers:
            server.stop(graceful=False)
