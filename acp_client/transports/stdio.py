"""The stdio transport: the client spawns the agent and speaks newline-delimited JSON with it.

One JSON-RPC message per line on the agent's stdin and stdout; whatever the agent writes to stderr
is treated as its log: forwarded to the ``acp_client.agent.stderr`` logger one record per line, and
the last few kilobytes are kept for diagnostics (:attr:`StdioTransport.stderr_tail`, and the reason
of :class:`~acp_client.exceptions.AgentExited`).

The agent is started without a shell, in a new session (so it has its own process group on POSIX),
with only an allowlist of the parent's environment variables (:data:`DEFAULT_INHERITED_ENV`) plus
the variables the app passes explicitly. API keys and tokens in the parent's environment are
therefore *not* inherited unless the app asks for them::

    connector = StdioConnector(
        ["my-agent", "--acp"],
        env={"MY_AGENT_API_KEY": key},
        inherit_env=(*DEFAULT_INHERITED_ENV, "HTTPS_PROXY"),
    )
    transport = await connector.connect()

Closing a transport ends the whole process tree the agent started in its process group: stdin is
closed first (a well-behaved agent exits on end of input), then the group gets ``SIGTERM``, then
``SIGKILL``. A child that moved itself into another session or group (``setsid``) escapes this.
On Windows there are no process groups here: the agent process itself is terminated.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import shlex
import signal
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final, Literal, TypeAlias

import attrs

from .._codec._jsonrpc import Message, decode_frame, encode
from .._util._checks import check_seconds
from .._util._logging import get_logger
from ..display import printable
from ..exceptions import AgentExited, ConfigurationError, ConnectError, MessageTooLarge, TransportClosed
from .base import Limits, TransportInfo, describe

__all__ = ["DEFAULT_INHERITED_ENV", "StdioConnector", "StdioTransport"]

logger = get_logger(__name__)
#: Receives the agent's stderr, one record per line (level INFO), truncated to a bounded length.
stderr_logger = get_logger("acp_client.agent.stderr")

#: Numbers every agent process this client process starts: with the pid, an identity no later
#: process shares (a pid alone can be reused once the agent exited).
_spawned = itertools.count(1)

#: The parent environment variables an agent inherits by default. Everything else in the
#: parent's environment (API keys, cloud credentials, tokens, proxy URLs with passwords, the
#: SSH agent socket) is withheld unless the app lists it in ``inherit_env`` or passes it in ``env``.
#: Each entry is here because common agents and their tools misbehave without it:
DEFAULT_INHERITED_ENV: tuple[str, ...] = (
    # POSIX
    "PATH",  # finding the agent executable and the tools the agent runs
    "HOME",  # per-user configuration and caches (~/.config, ~/.cache, git config)
    "USER",  # the user's name, read by git, ssh and many CLIs
    "LOGNAME",  # the same, the POSIX spelling
    "SHELL",  # the shell an agent uses when it runs terminal commands for the user
    "LANG",  # locale: without it, Python/Node/git fall back to ASCII and mangle non-ASCII text
    "LC_ALL",  # locale override (same reason)
    "LC_CTYPE",  # character encoding of the locale (same reason)
    "TERM",  # terminal type for commands the agent runs (colors, pagers)
    "TMPDIR",  # the per-user temporary directory (macOS sets a private one)
    "TZ",  # the user's time zone, for timestamps in the agent's output
    "XDG_CONFIG_HOME",  # where per-user configuration lives when not under ~/.config
    "XDG_CACHE_HOME",  # where per-user caches live when not under ~/.cache
    "XDG_DATA_HOME",  # where per-user data lives when not under ~/.local/share
    # Windows (names are case-insensitive there)
    "SYSTEMROOT",  # required by the C runtime, sockets and crypto in most Windows programs
    "SYSTEMDRIVE",  # the system drive letter, used to locate system folders
    "WINDIR",  # the Windows directory (older spelling of SYSTEMROOT, still read)
    "COMSPEC",  # the command interpreter, used when an agent runs shell commands
    "PATHEXT",  # executable extensions (.EXE, .CMD): needed to find programs on PATH
    "TEMP",  # the temporary directory
    "TMP",  # the temporary directory (other spelling)
    "USERPROFILE",  # the user's home directory
    "APPDATA",  # roaming per-user configuration
    "LOCALAPPDATA",  # local per-user configuration and caches
    "USERNAME",  # the user's name
)

_IS_WINDOWS: Final = sys.platform == "win32"
#: Once this many bytes of decoded-but-unread lines are queued, stop reading the agent's stdout
#: (the pipe then fills and the agent blocks: back-pressure instead of unbounded memory).
_HIGH_WATER: Final = 1024 * 1024
#: Resume reading stdout when the queue has drained below this.
_LOW_WATER: Final = 256 * 1024
#: After the agent exits, how long to wait for its stdout/stderr to reach end-of-file before
#: reporting the exit anyway (a grandchild that inherited the pipes can hold them open).
_PIPE_GRACE: Final = 0.25
#: One stderr log record carries at most this many bytes of a line (and a stdout line over the
#: cap keeps this much of its start for one).
_STDERR_LINE_BYTES: Final = 4096
#: How much of the stderr tail goes into an AgentExited reason.
_REASON_STDERR_CHARS: Final = 800
#: Group-exit polling interval bounds (seconds), used while waiting for leftover grandchildren.
_POLL_MIN: Final = 0.005
_POLL_MAX: Final = 0.1


def _check_command(command: Sequence[str]) -> tuple[str, ...]:
    if isinstance(command, str | bytes):
        raise ConfigurationError("command must be a sequence of arguments (e.g. ['agent', '--acp']), not a string")
    args = tuple(command)
    if not args:
        raise ConfigurationError("command is empty")
    for arg in args:
        if not isinstance(arg, str):
            raise ConfigurationError(f"command arguments must be strings, got {type(arg).__name__}")
        if "\x00" in arg:
            raise ConfigurationError("command arguments must not contain NUL")
    if not args[0]:
        raise ConfigurationError("command[0] (the executable) is empty")
    return args


def _check_name(name: object, where: str = "") -> None:
    if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
        raise ConfigurationError(f"invalid environment variable name{where} {name!r}")


def _check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    for name, value in (env or {}).items():
        _check_name(name)
        if not isinstance(value, str) or "\x00" in value:
            # Never echo the value: it may be a credential.
            raise ConfigurationError(f"environment variable {name!r} must be a string without NUL")
    return dict(env or {})


def _check_inherit(names: Collection[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        raise ConfigurationError("inherit_env must be a collection of variable names, not a string")
    for name in names:
        _check_name(name, " in inherit_env:")
    return tuple(names)


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"agent was killed by {name} (exit code {returncode})"
    return f"agent exited with code {returncode}"


@attrs.frozen
class _End:
    """Why the link ended (``exit_code``: the agent exited); every later ``receive()``/``send()``
    raises an error built from it."""

    reason: str
    exit_code: int | None = None

    def error(self, *, maybe_delivered: bool) -> TransportClosed:
        if self.exit_code is None:
            return TransportClosed(self.reason, maybe_delivered=maybe_delivered)
        exc = AgentExited(self.reason, exit_code=self.exit_code)
        exc.maybe_delivered = maybe_delivered
        return exc


@attrs.frozen
class _TooLong:
    """Marks a line that exceeded the cap (its bytes were dropped but for the ``head``)."""

    seen: int  # bytes seen before giving up on the line (a lower bound of its length)
    head: bytes = attrs.field(default=b"", eq=False)


_Line: TypeAlias = bytes | _TooLong


class _LineSplitter:
    """Splits the agent's stdout or stderr into lines, never holding more than ``limit`` bytes of one.

    ``feed()`` returns the complete lines (without ``\\n``; a trailing ``\\r`` is kept, it is JSON
    whitespace) and a :class:`_TooLong` marker for each line over the cap: the rest of an overlong
    line is dropped as it arrives, so the transport can report it and go on. Blank lines are dropped.
    """

    __slots__ = ("_discarding", "_limit", "_partial")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()
        self._discarding = False

    def _too_long(self, line: bytes | bytearray) -> bool:
        size = len(line)
        if size and line[-1] == 0x0D:  # a CRLF line's CR does not count
            size -= 1
        return size > self._limit

    def feed(self, data: bytes) -> list[_Line]:
        """Consume ``data``; return the lines it completed."""
        out: list[_Line] = []
        parts = data.split(b"\n")
        tail = parts.pop()
        for part in parts:
            if self._discarding:  # this newline ends an overlong line
                self._discarding = False
                self._partial.clear()
                continue
            if self._partial:
                self._partial += part
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = part
            if not line or line.isspace():
                continue
            out.append(_TooLong(len(line), line[:_STDERR_LINE_BYTES]) if self._too_long(line) else line)
        if tail and not self._discarding:
            # +1: the line may still end in a CR that does not count against the cap.
            if len(self._partial) + len(tail) > self._limit + 1:
                head = self._partial[:_STDERR_LINE_BYTES] + tail[:_STDERR_LINE_BYTES]
                out.append(_TooLong(len(self._partial) + len(tail), bytes(head[:_STDERR_LINE_BYTES])))
                self._partial.clear()
                self._discarding = True
            else:
                self._partial += tail
        return out

    def finish(self) -> list[_Line]:
        """End of stream: return the last line if it had no newline."""
        out: list[_Line] = []
        if not self._discarding and self._partial and not self._partial.isspace():
            line = bytes(self._partial)
            out.append(_TooLong(len(line), line[:_STDERR_LINE_BYTES]) if self._too_long(line) else line)
        self._partial.clear()
        self._discarding = False
        return out


class StdioConnector:
    """Spawns a stdio agent; each :meth:`connect` starts a fresh process.

    Args:
        command: The program and its arguments, e.g. ``["my-agent", "--acp"]``. Run directly,
            never through a shell; a bare name is looked up on the ``PATH`` the agent gets.
        env: Variables to set for the agent, on top of the inherited ones (they win on a clash).
        inherit_env: Names of the parent's variables the agent inherits (when set in the parent).
            Defaults to :data:`DEFAULT_INHERITED_ENV`; pass ``()`` to inherit nothing.
        cwd: The agent's working directory (default: the parent's).
        limits: Inbound caps: ``max_message_bytes`` per stdout line, ``max_stderr_bytes`` of
            stderr kept for diagnostics.
        terminate_timeout: Seconds :meth:`StdioTransport.aclose` waits after closing stdin before
            sending ``SIGTERM``, and again before ``SIGKILL``.

    Raises:
        ConfigurationError: The command is empty, a string, or has a NUL; an ``env`` name or
            value is invalid; ``terminate_timeout`` is negative.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        inherit_env: Collection[str] = DEFAULT_INHERITED_ENV,
        cwd: str | os.PathLike[str] | None = None,
        limits: Limits = Limits(),  # noqa: B008 - frozen value, safe as a default
        terminate_timeout: float = 2.0,
    ) -> None:
        self._command = _check_command(command)
        self._env = _check_env(env)
        self._inherit = _check_inherit(inherit_env)
        self._cwd = os.fspath(cwd) if cwd is not None else None
        if self._cwd is not None and "\x00" in self._cwd:
            raise ConfigurationError("cwd must not contain NUL")
        check_seconds("terminate_timeout", terminate_timeout, zero=True)
        self._limits = limits
        self._terminate_timeout = float(terminate_timeout)

    @property
    def target(self) -> str:
        """The command line, shell-quoted, for logs (environment values never appear)."""
        return shlex.join(self._command)

    def environment(self) -> dict[str, str]:
        """The environment the next agent will get: the allowlisted parent variables + ``env``."""
        result = {name: os.environ[name] for name in self._inherit if name in os.environ}
        result.update(self._env)
        return result

    async def connect(self) -> StdioTransport:
        """Spawn the agent and return the transport talking to it.

        Raises:
            ConnectError: The executable was not found or is not executable, ``cwd`` does not
                exist, or the process could not be started for another OS reason.
        """
        loop = asyncio.get_running_loop()
        transport = StdioTransport(target=self.target, limits=self._limits, terminate_timeout=self._terminate_timeout)
        program = self._command[0]
        try:
            # loop.subprocess_exec is what asyncio.create_subprocess_exec uses underneath; the
            # protocol form reports the exit as soon as the process is reaped, even while a
            # grandchild keeps the pipes open (Process.wait() waits for the pipes too).
            await loop.subprocess_exec(
                lambda: transport,
                *self._command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.environment(),
                cwd=self._cwd,
                start_new_session=not _IS_WINDOWS,  # own process group: aclose() can end the whole tree
            )
        except FileNotFoundError as exc:
            if self._cwd is not None and exc.filename == self._cwd:
                raise ConnectError(
                    f"cannot start agent {self.target}: working directory {self._cwd!r} does not exist"
                ) from exc
            where = " on the agent's PATH" if os.sep not in program and (os.altsep or os.sep) not in program else ""
            raise ConnectError(f"cannot start agent: executable {program!r} not found{where}") from exc
        except PermissionError as exc:
            raise ConnectError(f"cannot start agent: {program!r} is not executable (permission denied)") from exc
        except OSError as exc:
            raise ConnectError(f"cannot start agent {self.target}: {exc.strerror or exc}") from exc
        logger.debug("started agent %s (pid %s)", self.target, transport.info.pid)
        return transport


class StdioTransport(asyncio.SubprocessProtocol):
    """A link to one agent process over its stdin/stdout. Made by :meth:`StdioConnector.connect`.

    ``receive()`` returns messages in the order the agent wrote them. A non-JSON line raises
    :class:`~acp_client.exceptions.MalformedFrame` and a line over ``limits.max_message_bytes``
    raises :class:`~acp_client.exceptions.MessageTooLarge`; the transport stays usable after
    both. When the agent exits, the remaining messages are delivered and then every call raises
    :class:`~acp_client.exceptions.AgentExited` (its reason ends with the agent's last stderr).

    Usable as an async context manager (``aclose()`` on exit). It is also the asyncio subprocess
    protocol of the agent process: asyncio calls its pipe and process callbacks.
    """

    def __init__(self, *, target: str, limits: Limits, terminate_timeout: float) -> None:
        self._loop = loop = asyncio.get_running_loop()
        self._target = target
        self._limits = limits
        self._terminate_timeout = terminate_timeout
        self._proc: asyncio.SubprocessTransport | None = None
        self._pid: int | None = None
        self._info = TransportInfo(kind="stdio", target=target)
        # stdout -> messages
        self._splitter = _LineSplitter(limits.max_message_bytes)
        self._inbox: collections.deque[_Line] = collections.deque()
        self._inbox_bytes = 0
        self._reading_paused = False
        self._readable = asyncio.Event()
        # stdin
        self._write_paused = False
        self._write_wakeup = asyncio.Event()  # set: the pipe drained, or writing has become impossible
        self._stdin_lost = False
        # stderr
        self._stderr_tail = bytearray()
        self._stderr_lines = _LineSplitter(_STDERR_LINE_BYTES)
        # lifecycle
        self._stdout_done = False
        self._stderr_done = False
        self._returncode: int | None = None
        self._exited: asyncio.Future[int] = loop.create_future()
        self._timer: asyncio.TimerHandle | None = None
        self._end: _End | None = None
        self._closing: asyncio.Future[None] | None = None
        self._group_killed = False

    @property
    def info(self) -> TransportInfo:
        """Kind ``"stdio"``, the command as ``target``, the agent's ``pid``, and ``agent_process``
        naming this process apart from every other one this client started."""
        return self._info

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once it has exited (negative: killed by that signal), else ``None``."""
        return self._returncode

    @property
    def stderr_tail(self) -> str:
        """The last ``limits.max_stderr_bytes`` of the agent's stderr (decoded leniently)."""
        return self._stderr_tail.decode("utf-8", "replace")

    async def send(self, message: Message) -> None:
        """Write one message (or batch) as a line on the agent's stdin.

        Waits while the pipe is full (the agent is not reading).

        Raises:
            AgentExited: The agent has exited (``maybe_delivered`` is ``False`` when nothing was
                written).
            TransportClosed: The transport was closed, or the agent closed its stdin.
        """
        if self._end is not None or self._returncode is not None or self._stdin_lost or self._proc is None:
            raise self._write_error(maybe_delivered=False)
        data = encode(message).encode("utf-8") + b"\n"
        stdin = self._proc.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        stdin.write(data)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("stdio -> %s (%d bytes)", describe(message), len(data))
        while self._write_paused:
            if self._end is not None or self._stdin_lost or self._returncode is not None:
                raise self._write_error(maybe_delivered=True)
            await self._write_wakeup.wait()

    async def receive(self) -> Message:
        """The next message the agent wrote.

        Raises:
            MalformedFrame: A line was not a JSON-RPC message (call again for the next one).
            MessageTooLarge: A line exceeded ``limits.max_message_bytes``; it was discarded
                (call again for the next one).
            AgentExited: The agent has exited and every earlier line was delivered.
            TransportClosed: The transport was closed, or the agent closed its stdout.
        """
        while True:
            if self._inbox:
                item = self._inbox.popleft()
                if isinstance(item, _TooLong):
                    limit = self._limits.max_message_bytes
                    raise MessageTooLarge(
                        f"the agent wrote a line of more than {limit} bytes (at least {item.seen}); it was discarded",
                        limit=limit,
                    )
                self._inbox_bytes -= len(item)
                if self._reading_paused and self._inbox_bytes <= _LOW_WATER:
                    self._pause_reading(False)
                return decode_frame(item)
            if self._end is not None:
                raise self._end.error(maybe_delivered=False)
            self._readable.clear()
            await self._readable.wait()

    async def aclose(self) -> None:
        """Stop the agent and its process group, and release the pipes.

        Closes stdin, waits up to ``terminate_timeout`` for the agent to exit, then sends
        ``SIGTERM`` to its process group, waits again, then ``SIGKILL``. Grandchildren left in
        the group after the agent exits get the same treatment. Idempotent and safe to call
        concurrently or after the agent died; never raises for a dead agent.
        """
        if self._closing is not None:
            await asyncio.shield(self._closing)
            return
        self._closing = self._loop.create_future()
        try:
            await self._shutdown()
        finally:
            self._force_stop()
            self._closing.set_result(None)

    async def __aenter__(self) -> StdioTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "running" if self._returncode is None else f"returncode={self._returncode}"
        return f"<StdioTransport pid={self._pid} {state} {self._target!r}>"

    def _write_error(self, *, maybe_delivered: bool) -> TransportClosed:
        if self._end is not None:
            return self._end.error(maybe_delivered=maybe_delivered)
        if self._returncode is not None:
            return _End(self._exit_reason(), self._returncode).error(maybe_delivered=maybe_delivered)
        return TransportClosed("the agent closed its stdin", maybe_delivered=maybe_delivered)

    def _push(self, lines: list[_Line]) -> None:
        if not lines:
            return
        self._inbox.extend(lines)
        for line in lines:
            if isinstance(line, bytes):
                self._inbox_bytes += len(line)
        self._readable.set()
        if not self._reading_paused and self._inbox_bytes >= _HIGH_WATER:
            self._pause_reading(True)

    def _pause_reading(self, paused: bool) -> None:
        self._reading_paused = paused
        pipe = self._proc.get_pipe_transport(1) if self._proc is not None else None
        if isinstance(pipe, asyncio.ReadTransport) and not pipe.is_closing():
            if paused:
                pipe.pause_reading()
            else:
                pipe.resume_reading()

    def _on_stderr(self, data: bytes) -> None:
        self._stderr_tail += data
        del self._stderr_tail[: max(0, len(self._stderr_tail) - self._limits.max_stderr_bytes)]
        if stderr_logger.isEnabledFor(logging.INFO):
            self._log_stderr(self._stderr_lines.feed(data))
        else:
            self._stderr_lines.finish()  # forget the line under way

    def _log_stderr(self, lines: list[_Line]) -> None:
        for line in lines:
            raw = line.head if isinstance(line, _TooLong) else line
            text = raw[:_STDERR_LINE_BYTES].rstrip(b"\r").decode("utf-8", "replace")
            if not text.strip():
                continue
            if isinstance(line, _TooLong) or len(line) > _STDERR_LINE_BYTES:
                text += " [line truncated]"
            stderr_logger.info("[agent pid %s] %s", self._pid, text)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        proc = self._proc = transport
        self._pid = proc.get_pid()
        process = f"agent process {next(_spawned)} (pid {self._pid})"
        self._info = TransportInfo(kind="stdio", target=self._target, pid=self._pid, agent_process=process)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1 and self._end is None:  # (after the end: a grandchild still writing, say)
            self._push(self._splitter.feed(data))
        elif fd == 2:
            self._on_stderr(data)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._write_wakeup.clear()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._write_wakeup.set()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 0:
            self._stdin_lost = True
            self._write_wakeup.set()
        elif fd == 1:
            self._stdout_done = True
            if self._end is None:
                self._push(self._splitter.finish())
            self._maybe_finish()
        elif fd == 2:
            self._stderr_done = True
            self._log_stderr(self._stderr_lines.finish())
            self._maybe_finish()

    def process_exited(self) -> None:
        assert self._proc is not None
        returncode = self._proc.get_returncode()
        if returncode is None:  # pragma: no cover - asyncio always sets it before this callback
            return
        self._returncode = returncode
        if not self._exited.done():
            self._exited.set_result(returncode)
        self._write_wakeup.set()
        self._maybe_finish()
        if self._end is None:
            # Let the pipes drain; a grandchild holding them open must not delay the report long.
            self._set_timer(_PIPE_GRACE, self._finish_exit)

    def _maybe_finish(self) -> None:
        if self._end is not None:
            return
        if self._returncode is not None:
            if self._stdout_done and self._stderr_done:
                self._finish_exit()
        elif self._stdout_done and self._timer is None:
            # stdout ended but the process lives on: wait a little for it to exit.
            self._set_timer(self._terminate_timeout, self._stdout_closed_alive)

    def _set_timer(self, delay: float, callback: Callable[[], None]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(delay, callback)

    def _finish_exit(self) -> None:
        if self._end is not None or self._returncode is None:
            return
        reason = self._exit_reason()
        if self._closing is None:
            level = logging.INFO if self._returncode == 0 else logging.WARNING
            logger.log(level, "agent %s (pid %s): %s", self._target, self._pid, _describe_exit(self._returncode))
        self._set_end(_End(reason, self._returncode))

    def _stdout_closed_alive(self) -> None:
        if self._end is None and self._returncode is None:
            self._set_end(_End(f"the agent (pid {self._pid}) closed its stdout but is still running"))

    def _exit_reason(self) -> str:
        assert self._returncode is not None
        reason = _describe_exit(self._returncode)
        tail = self.stderr_tail.strip()
        if tail:
            if len(tail) > _REASON_STDERR_CHARS:
                tail = "..." + tail[-_REASON_STDERR_CHARS:]
            reason += f"; stderr: {printable(tail)}"
        return reason

    def _set_end(self, end: _End) -> None:
        if self._end is not None:
            return
        self._end = end
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._readable.set()
        self._write_wakeup.set()

    async def _shutdown(self) -> None:
        self._set_end(_End("the transport was closed by the client"))
        self._inbox.clear()
        self._inbox_bytes = 0
        proc = self._proc
        if proc is None:  # pragma: no cover - connect() never returns before the attach
            return
        stdin = proc.get_pipe_transport(0)
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        timeout = self._terminate_timeout
        signalled = False
        if not await self._wait_exit(timeout):
            logger.info("agent pid %s did not exit %gs after stdin closed; sending SIGTERM", self._pid, timeout)
            self._signal("term")
            signalled = True
            if not await self._wait_exit(timeout):
                logger.warning("agent pid %s ignored SIGTERM for %gs; sending SIGKILL", self._pid, timeout)
                self._signal("kill")
                if not await self._wait_exit(max(timeout, 1.0)):  # pragma: no cover - uninterruptible
                    logger.error("agent pid %s survived SIGKILL", self._pid)
        if _IS_WINDOWS:  # pragma: no cover - no process groups here
            return
        # The agent is gone; end whatever it left behind in its process group.
        if not signalled and self._group_alive():
            self._signal("term")
            await self._wait_group(timeout)
        self._signal("kill")
        self._group_killed = True

    async def _wait_exit(self, timeout: float) -> bool:
        if not self._exited.done():
            await asyncio.wait({self._exited}, timeout=timeout)
        return self._exited.done()

    async def _wait_group(self, timeout: float) -> None:
        deadline = self._loop.time() + timeout
        delay = _POLL_MIN
        while self._group_alive():
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, _POLL_MAX)

    def _group_alive(self) -> bool:
        """Whether any process is left in the agent's group (zombies count: we cannot tell)."""
        if _IS_WINDOWS or self._pid is None:
            return False
        try:
            os.killpg(self._pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _signal(self, kind: Literal["term", "kill"]) -> None:
        proc, pid = self._proc, self._pid
        if proc is None or pid is None:
            return
        try:
            if sys.platform == "win32":  # pragma: no cover - not tested here
                if proc.get_returncode() is None:
                    if kind == "kill":
                        proc.kill()
                    else:
                        proc.terminate()
            else:
                # start_new_session=True made the agent a group leader: its pid is the group id.
                os.killpg(pid, signal.SIGKILL if kind == "kill" else signal.SIGTERM)
        except ProcessLookupError:
            pass
        except OSError as exc:
            logger.warning("could not signal agent process group %s: %s", pid, exc)

    def _force_stop(self) -> None:
        """Last resort (also on cancellation): kill what is left and close the pipes."""
        self._set_end(_End("the transport was closed by the client"))
        if self._returncode is None or not self._group_killed:
            self._signal("kill")
            self._group_killed = True
        if self._proc is not None and not self._proc.is_closing():
            self._proc.close()
        self._write_wakeup.set()
