"""Helpers of the Neovim plugin tests: a real headless Neovim driven through pynvim, and the
reference agent as a real process that can be SIGKILLed and started again on the same port."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pynvim

from tests._support import DEADLINE, eventually_blocking

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "nvim"
NVIM = shutil.which("nvim") or "/usr/bin/nvim"
AGENT = [sys.executable, "-m", "acp_client.testing.reference_agent"]

T = TypeVar("T")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _zombie_status(pid: int) -> tuple[int] | None:
    """The exit status of process ``pid`` if it has exited and is waiting to be reaped (the
    ``exit_code`` field of ``/proc/PID/stat``; a death by a signal counts as 128 + the signal)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] != "Z":
        return None
    raw = int(fields[49])  # field 52 of the whole line; the list starts at field 3
    return (128 + (raw & 0x7F),) if raw & 0x7F else (raw >> 8,)


def alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs (a zombie waiting to be reaped does not)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class AgentProcess:
    """``python -m acp_client.testing.reference_agent --serve`` on a fixed port, with a store
    directory, so a restarted agent knows the sessions of the killed one (as inactive)."""

    def __init__(self, store: Path, *extra: str) -> None:
        self.store = store
        self.extra = extra
        self.port = 0
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> str:
        argv = [*AGENT, "--serve", "--port", str(self.port), "--store", str(self.store), *self.extra]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env())
        assert self.process.stdout is not None
        first = self.process.stdout.readline()  # "ws:   ws://127.0.0.1:PORT/acp"
        assert first.startswith("ws:"), f"the reference agent did not start: {first!r}"
        self.url = first.split()[1]
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        return self.url

    def kill(self) -> None:
        """SIGKILL, by pid: no goodbye on any connection."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(DEADLINE)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(DEADLINE)


class Neovim:
    """A real ``nvim --headless`` with the plugin on its runtimepath, attached over a socket.

    Args:
        folder: Where its init file, socket and the host's log go.
        settings: ``g:`` variables set before the plugin loads (``acp_store``, ``acp_url``...).
        init: More Lua run at the end of the init file (a ``vim.ui.select`` stand-in, say).
    """

    def __init__(self, folder: Path, settings: dict[str, Any], init: str = "") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.log = folder / "host.log"
        lines = [f"vim.opt.runtimepath:prepend({str(PLUGIN)!r})", f"vim.g.acp_python = {sys.executable!r}"]
        lines.append(f"vim.g.acp_log = {str(self.log)!r}")
        lines.append("vim.g.acp_retry = { initial_delay = 0.05, max_delay = 0.3, jitter = false }")
        for name, value in settings.items():
            lines.append(f"vim.g.{name} = {_lua(value)}")
        lines.append(init)
        (folder / "init.lua").write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.socket = folder / "nvim.sock"
        self.host_pid: int | None = None
        argv = [NVIM, "-n", "-i", "NONE", "-u", str(folder / "init.lua"), "--listen", str(self.socket)]
        self.process = self._start(argv)
        try:
            eventually_blocking(lambda: self.socket.exists() or not self._running(), what="nvim's socket")
            assert self._running(), self.process.stderr.read() if self.process and self.process.stderr else ""
            self.nvim = eventually_blocking(self._attach, what="nvim to accept on its socket")
        except BaseException:  # never leave a Neovim (and the host it autostarted) behind
            self.kill()
            raise

    def _start(self, argv: list[str]) -> subprocess.Popen[bytes] | None:
        """Start Neovim (headless here); its process."""
        return subprocess.Popen(
            [argv[0], "--headless", *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )

    def _running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _attach(self) -> pynvim.Nvim | None:
        """The socket file exists a moment before nvim listens on it: refused means not yet."""
        try:
            return pynvim.attach("socket", path=str(self.socket))
        except ConnectionRefusedError:
            assert self._running(), "nvim exited at startup"
            return None

    # -- reading what the user sees ------------------------------------------------------------------

    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def buffer_lines(self) -> list[str]:
        buffer = self.lua("return require('acp').buffer()")
        return list(self.nvim.api.buf_get_lines(buffer, 0, -1, False))

    def buffer_text(self) -> str:
        return "\n".join(self.buffer_lines())

    def statusline(self) -> str:
        return str(self.nvim.eval("v:lua.require'acp'.statusline()"))

    def messages(self) -> str:
        """Neovim's message area history (``:messages``)."""
        return str(self.nvim.api.exec("messages", True))

    def info(self) -> dict[str, Any]:
        info = self.lua("return require('acp').info()")
        if info:
            self.host_pid = info["host_pid"]
        return info or {}

    def stderr_of_host(self) -> list[str]:
        return list(self.lua("return require('acp').stderr"))

    def wait_for(self, text: str, *, after: int = 0, timeout: float = DEADLINE) -> list[str]:
        """Wait until the buffer shows ``text`` on a line at or after line ``after``."""
        return eventually_blocking(
            lambda: self.buffer_lines() if any(text in line for line in self.buffer_lines()[after:]) else None,
            timeout,
            what=lambda: f"{text!r} in the conversation buffer:\n{self.buffer_text()}",
        )

    def wait(self, check: Callable[[], T | None], what: str | Callable[[], str], timeout: float = DEADLINE) -> T:
        return eventually_blocking(check, timeout, what=what)

    # -- the end ------------------------------------------------------------------------------------------

    def quit(self) -> int:
        """``:qa`` as a user types it; Neovim's exit status."""
        self.info()
        self.nvim.command("qa", async_=True)
        assert self.process is not None
        code = self.process.wait(DEADLINE)
        self.nvim.close()
        return code

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(DEADLINE)
        if alive(self.host_pid):
            assert self.host_pid is not None
            os.kill(self.host_pid, signal.SIGKILL)


class TerminalNeovim(Neovim):
    """A real Neovim with a user interface: in a fixed-size tmux terminal (a private server), still
    driven through its socket, and read as a user sees it (:meth:`rows`: status lines included).

    Args:
        folder, settings, init: As for :class:`Neovim`.
        width, height: The terminal's size.
    """

    def __init__(
        self, folder: Path, settings: dict[str, Any], init: str = "", *, width: int = 120, height: int = 30
    ) -> None:
        self.tmux_socket = f"acp-nvim-test-{uuid.uuid4().hex[:12]}"
        self._width, self._height = width, height
        super().__init__(folder, settings, init)

    def _tmux(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["tmux", "-u", "-L", self.tmux_socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            env={**_env(), "LC_ALL": "C.UTF-8"},
            check=False,
        )
        if check:
            assert done.returncode == 0, f"tmux {args}: {done.stderr}"
        return done.stdout

    def _start(self, argv: list[str]) -> subprocess.Popen[bytes] | None:
        command = shlex.join(argv)
        size = ["-x", str(self._width), "-y", str(self._height)]
        env = [arg for key in ("PYTHONPATH", "PATH", "HOME") for arg in ("-e", f"{key}={_env().get(key, '')}")]
        self._tmux("new-session", "-d", "-s", "nvim", *size, *env, command)
        self._tmux("set-option", "-t", "nvim", "remain-on-exit", "on")
        self._tmux("set-option", "-t", "nvim", "status", "off")
        return None

    def _running(self) -> bool:
        return self._tmux("display-message", "-p", "-t", "nvim", "#{pane_dead}", check=False).strip() == "0"

    def rows(self) -> list[str]:
        """The terminal's rows as they are drawn now."""
        return self._tmux("capture-pane", "-p", "-t", "nvim").rstrip("\n").split("\n")

    def quit(self) -> int:
        self.info()
        self.nvim.command("qa", async_=True)

        def status() -> tuple[int] | None:
            fields = self._tmux("display-message", "-p", "-t", "nvim", "#{pane_dead}:#{pane_dead_status}:#{pane_pid}")
            dead, code, pid = fields.strip().split(":")
            if dead != "1":
                return None
            if code != "":
                return (int(code),)
            # tmux saw the terminal close before it reaped Neovim: the zombie's own exit status says it.
            return _zombie_status(int(pid)) if pid else None

        (code,) = eventually_blocking(status, what="Neovim to exit")
        self.nvim.close()
        return code

    def kill(self) -> None:
        self._tmux("kill-server", check=False)
        if alive(self.host_pid):
            assert self.host_pid is not None
            os.kill(self.host_pid, signal.SIGKILL)


def _lua(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_lua(item)}" for key, item in value.items()) + "}"
    raise TypeError(value)
