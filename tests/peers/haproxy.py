"""Fixtures: HAProxy in front of agent instances, from a generated config on free loopback ports.

``haproxy`` is a factory: ``await haproxy(backends)`` with ``{name: port}`` starts HAProxy (Debian's
``haproxy`` package; ``.ci/run`` installs it) balancing ``/acp`` over those ports — round robin,
cookie affinity (``cookie SERVERID insert indirect nocache``, the cookie value is the backend's
name), HTTP health checks on the reference server's ``GET /health``, and ``option redispatch`` —
and returns a :class:`Haproxy`. Every HAProxy is stopped at teardown.

When the ``haproxy`` binary is missing the tests that use it are skipped with a warning that
says how to install it; nothing else skips.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import warnings
from asyncio.subprocess import PIPE, STDOUT
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

import pytest
import pytest_asyncio

from tests._support import eventually

__all__ = ["Haproxy", "HaproxyFactory", "haproxy", "haproxy_config"]

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


def haproxy_config(port: int, backends: Mapping[str, int], *, host: str = "127.0.0.1") -> str:
    """An HAProxy configuration: ``host:port`` in front of ``backends`` (``{name: port}``).

    The short timers suit loopback tests: a dead instance (its port refuses) is marked down after
    two failed checks, within ~0.4 s, and a connection refused by it is retried on another instance
    after ``timeout connect``. A live instance that answers its check slowly (a loaded machine) is
    not: the check may take ``timeout check`` (2 s) to answer, and one failure is not enough.
    """
    servers = "\n".join(
        f"    server {name} {host}:{backend_port} check cookie {name}" for name, backend_port in backends.items()
    )
    return f"""\
global
    maxconn 1024

defaults
    mode http
    timeout connect 300ms
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
    timeout check 2s
    retries 2
    option redispatch
    option http-no-delay

frontend acp
    bind {host}:{port}
    default_backend agents

backend agents
    balance roundrobin
    cookie SERVERID insert indirect nocache
    option httpchk GET /health
    default-server inter 200ms fall 2 rise 1
{servers}
"""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Haproxy:
    """One HAProxy process in front of the backends (start with :meth:`start`)."""

    def __init__(self, binary: str, backends: Mapping[str, int], directory: Path) -> None:
        self.binary = binary
        self.backends = dict(backends)
        self.port = _free_port()
        self.config = haproxy_config(self.port, self.backends)
        self.config_file = directory / f"haproxy-{self.port}.cfg"
        self.config_file.write_text(self.config, encoding="utf-8")
        self.log_file = directory / f"haproxy-{self.port}.log"
        self._process: asyncio.subprocess.Process | None = None

    def url(self, scheme: str = "ws") -> str:
        """The ACP endpoint through HAProxy (``ws`` or ``http``)."""
        return f"{scheme}://127.0.0.1:{self.port}/acp"

    async def start(self) -> None:
        """Start HAProxy and wait until it accepts connections.

        Raises:
            AssertionError: The configuration is refused or HAProxy does not come up.
        """
        check = await asyncio.create_subprocess_exec(
            self.binary, "-c", "-q", "-f", str(self.config_file), stdout=PIPE, stderr=STDOUT
        )
        output, _ = await check.communicate()
        assert check.returncode == 0, f"haproxy refused its config:\n{output.decode()}\n{self.config}"
        with self.log_file.open("ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                self.binary, "-db", "-f", str(self.config_file), stdout=log, stderr=STDOUT
            )
        process = self._process

        async def listening() -> bool:
            assert process.returncode is None, f"haproxy exited at start:\n{self.log()}"
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                return False
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return True

        await eventually(listening, _START_TIMEOUT, every=0.02, what=lambda: f"haproxy to listen:\n{self.log()}")

    async def stop(self) -> None:
        """Stop HAProxy (every client connection through it ends)."""
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), _STOP_TIMEOUT)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()

    async def restart(self) -> None:
        """Stop and start again on the same port with the same config."""
        await self.stop()
        await self.start()

    def log(self) -> str:
        """What HAProxy printed (health-check transitions, warnings)."""
        try:
            return self.log_file.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""


HaproxyFactory = Callable[[Mapping[str, int]], Awaitable[Haproxy]]


@pytest_asyncio.fixture
async def haproxy(tmp_path: Path) -> AsyncIterator[HaproxyFactory]:
    binary = shutil.which("haproxy") or next(
        (path for path in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if Path(path).exists()), None
    )
    if binary is None:
        message = (
            "SKIPPED LOUDLY: the `haproxy` binary is not installed, so the load-balancer tests did not run. "
            "Install Debian's package (`apt-get install haproxy`; .ci/run does it)."
        )
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    started: list[Haproxy] = []

    async def make(backends: Mapping[str, int]) -> Haproxy:
        proxy = Haproxy(binary, backends, tmp_path)
        await proxy.start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        await proxy.stop()
