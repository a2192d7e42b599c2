"""What the checker talks to: the target string, and the agent processes it starts, restarts and ends.

``stdio:COMMAND ...`` spawns the agent (one process per link, like an editor does), and a restart
is a hard kill of every process of the check followed by fresh spawns. ``ws://…`` / ``http(s)://…``
reach a running agent; a restart runs ``--restart-cmd`` (through the shell, bounded in time) and
waits until the endpoint answers again. Without a restart command, checks that need one are skipped.

Whatever a check started is ended when the check ends (:meth:`AgentHost.aclose`), whether it
passed, failed or timed out: the checker never leaves an agent process behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, Literal

import attrs

from ..display import printable
from ..exceptions import AcpError, ConfigurationError
from ..transports.base import Connector, Transport
from ._link import CheckFailed, Link, WireLog
from ._protocol import initialize

TargetKind = Literal["stdio", "websocket", "http"]

#: Pause between two attempts to reach a restarted network agent.
_RECONNECT_PAUSE: Final = 0.2


class TargetError(Exception):
    """The target is malformed, cannot be reached, or does not initialize (exit status 2)."""


@attrs.frozen
class Target:
    """The agent under check.

    Attributes:
        spec: The target as given (``stdio:...``, ``ws://...``, ``http(s)://...``).
        restart_cmd: For network targets: a shell command that restarts the agent.
        env: Extra environment for a stdio agent (the checker's own environment is passed on
            whole: an agent author's agent needs its keys).
        restart: From Python, instead of ``restart_cmd``: a coroutine function that restarts a
            network agent (e.g. an in-process server's own restart).
    """

    spec: str
    restart_cmd: str | None = None
    env: Mapping[str, str] | None = None
    restart: Callable[[], Awaitable[None]] | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def kind(self) -> TargetKind:
        if self.spec.startswith("stdio:"):
            return "stdio"
        if self.spec.startswith(("ws://", "wss://")):
            return "websocket"
        return "http"

    @property
    def can_restart(self) -> bool:
        return self.kind == "stdio" or bool(self.restart_cmd) or self.restart is not None

    def validate(self) -> None:
        """Raises: TargetError: Not a target this checker can reach."""
        if self.spec.startswith("stdio:"):
            try:
                argv = shlex.split(self.spec[len("stdio:") :])
            except ValueError as exc:
                raise TargetError(f"cannot split the stdio command: {exc}") from None
            if not argv:
                raise TargetError("stdio: needs a command, e.g. stdio:my-agent --acp")
            return
        if not self.spec.startswith(("ws://", "wss://", "http://", "https://")):
            raise TargetError(
                f"unsupported target {self.spec!r}: use stdio:COMMAND, ws(s)://HOST/PATH or http(s)://HOST/PATH"
            )
        from ..transports.endpoint import check_url

        try:
            check_url(self.spec)
        except ConfigurationError as exc:
            raise TargetError(str(exc)) from None

    def connector(self, *, timeout: float) -> Connector:
        from ..transports.endpoint import connector_for

        environ = dict(os.environ)
        if self.env:
            environ.update(self.env)
        try:
            if self.kind == "stdio":
                return connector_for(self.spec, env=environ, inherit_env=(), terminate_timeout=1.0)
            if self.kind == "websocket":
                return connector_for(self.spec, open_timeout=timeout)
            return connector_for(self.spec, connect_timeout=timeout)
        except ConfigurationError as exc:
            raise TargetError(str(exc)) from None


class AgentHost:
    """The links and processes of one check (or of the preflight), ended together.

    Args:
        timeout: The per-step timeout (``--timeout``).
        proposed: The protocol version proposed in ``initialize``.
        first_name: The name of the first link in the evidence (``B`` beside a run's shared link ``A``).
    """

    def __init__(
        self, target: Target, log: WireLog, *, timeout: float, proposed: int = 1, first_name: str = "A"
    ) -> None:
        self.target = target
        self.proposed = proposed
        self.log = log
        self.timeout = timeout
        self._connector = target.connector(timeout=timeout)
        self._links: list[Link] = []
        letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        self._names = iter(letters[letters.index(first_name) :])

    async def open(self) -> Link:
        """A fresh link (for stdio: a fresh agent process), reading already.

        Raises:
            CheckFailed: The agent could not be reached or spawned.
        """
        name = next(self._names, "Z")
        try:
            transport = await asyncio.wait_for(self._connector.connect(), self.timeout)
        except asyncio.TimeoutError:
            raise CheckFailed(f"could not reach the agent within {self.timeout:g} s") from None
        except (AcpError, OSError) as exc:
            raise CheckFailed(f"could not reach the agent: {exc}") from None
        self.log.add(name, "!", f"link opened ({_describe_transport(transport)})")
        link = Link(transport, name, self.log, timeout=self.timeout, describe_exit=lambda: _exit_details(transport))
        self._links.append(link)
        link.start()
        return link

    async def restart(self) -> None:
        """Restart the agent: kill every process (stdio) or run the restart command (network).

        Raises:
            CheckFailed: The restart command failed or timed out, or the agent did not come back.
        """
        if self.target.kind == "stdio":
            self.kill()
            for link in self._links:
                await link.aclose()
            self.log.add("*", "!", "agent processes killed (SIGKILL): restart")
            return
        command = self.target.restart_cmd
        hook = self.target.restart
        if not command and hook is None:
            raise CheckFailed("no --restart-cmd: the agent cannot be restarted")
        for link in self._links:
            await link.aclose()
        if hook is not None:
            self.log.add("*", "!", "restarting the agent")
            try:
                await asyncio.wait_for(hook(), self.timeout * 3)
            except asyncio.TimeoutError:
                raise CheckFailed(f"the restart did not finish within {self.timeout * 3:g} s") from None
        else:
            assert command is not None
            self.log.add("*", "!", f"running the restart command: {command}")
            await _run_restart(command, self.timeout * 3)
        deadline = time.monotonic() + self.timeout * 3
        last = "not tried"
        while time.monotonic() < deadline:
            try:
                transport = await asyncio.wait_for(self._connector.connect(), self.timeout)
            except (AcpError, OSError, asyncio.TimeoutError) as exc:
                last = str(exc) or type(exc).__name__
                await asyncio.sleep(_RECONNECT_PAUSE)
                continue
            link = Link(transport, "probe", WireLog(), timeout=self.timeout)
            link.start()
            try:
                await initialize(link, self.proposed)
            except CheckFailed as exc:
                last = exc.finding
                await asyncio.sleep(_RECONNECT_PAUSE)
                continue
            finally:
                await link.aclose()
            self.log.add("*", "!", "the agent answers again after the restart")
            return
        raise CheckFailed(f"the agent did not come back after the restart command: {last}")

    async def aclose(self) -> None:
        """End every link and process of this check: stdin closed, then TERM, then KILL (the stdio transport's
        own escalation). A graceful end, not a kill: agents that save on exit or hold a lock on their store
        (fast-agent) would leave the next check's agent waiting on a stale lock."""
        await asyncio.gather(*(link.aclose() for link in self._links), return_exceptions=True)

    def kill(self) -> None:
        """SIGKILL every stdio agent of this check at once (when a gentle end takes too long)."""
        for link in self._links:
            _kill_group(link.transport)


def _describe_transport(transport: Transport) -> str:
    info = transport.info
    parts = [info.kind]
    if info.pid is not None:
        parts.append(f"pid {info.pid}")
    if info.connection_id:
        parts.append(f"connection {info.connection_id}")
    return ", ".join(parts)


def _exit_details(transport: Transport) -> str:
    returncode = getattr(transport, "returncode", None)
    tail = getattr(transport, "stderr_tail", "") or ""
    parts: list[str] = []
    if returncode is not None:
        parts.append(f"exit status {returncode}")
    if tail:
        parts.append("stderr ends: " + printable(tail.strip()[-300:]))
    return "; ".join(parts)


def _kill_group(transport: Transport) -> None:
    """SIGKILL a stdio agent's process group (its pid is the group id: it was started in a new session)."""
    if getattr(transport, "returncode", None) is not None and transport.info.kind == "stdio":
        return  # already reaped: its pid may belong to someone else by now
    pid = transport.info.pid
    if pid is None or sys.platform == "win32":
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _run_restart(command: str, limit: float) -> None:
    # stderr goes to a file, not a pipe: a restarted server keeps the inherited descriptors open,
    # and waiting for a pipe's end would wait for that server to exit.
    with tempfile.TemporaryFile() as errors:
        process = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=errors,
            start_new_session=sys.platform != "win32",
        )
        try:
            await asyncio.wait_for(process.wait(), limit)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if sys.platform != "win32":
                    os.killpg(process.pid, signal.SIGKILL)
                else:  # pragma: no cover
                    process.kill()
            await process.wait()
            raise CheckFailed(f"the restart command did not finish within {limit:g} s") from None
        errors.seek(0)
        stderr = errors.read()
    if process.returncode != 0:
        text = printable(stderr.decode("utf-8", "replace").strip()[-300:])
        raise CheckFailed(f"the restart command failed (exit {process.returncode}): {text}")
