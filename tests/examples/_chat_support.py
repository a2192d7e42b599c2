"""Helpers of the example chat client's tests: running the examples as subprocesses, a chat process
driven over stdin/stdout, and :class:`Tmux` (a real terminal).

Importing this module puts ``examples/`` on ``sys.path``; ``tests/examples/conftest.py`` does, before
any test module imports ``chat`` or ``chat_ui``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from acp_client.testing import FaultProxy, ReferenceAgent
from tests._support import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CHAT = EXAMPLES / "chat.py"
FLOWS = EXAMPLES / "reconnect_flows.py"
DEADLINE = 30.0
PROCESS_TIMEOUT = 60.0
#: Real seconds between two looks at the screen (each one runs tmux).
_SCREEN_POLL = 0.05

sys.path.insert(0, str(EXAMPLES))
import chat_ui  # noqa: E402

# -- helpers ----------------------------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("TMUX", "TMUX_PANE", chat_ui.PLAIN_ENV)}
    env.update(LC_ALL="C.UTF-8", PYTHONUNBUFFERED="1", **extra)
    return env


async def run_process(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env or _env(),
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), PROCESS_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def parse_events(stdout: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    for event in events:
        assert isinstance(event["event"], str)
        assert isinstance(event["t"], int | float) and event["t"] >= 0
    return events


def named(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [event for event in events if event["event"] == name]


class ChatProcess:
    """``chat.py`` in script mode, with its JSON events read as they arrive."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.events: list[dict[str, Any]] = []

    async def next_event(self, name: str, *, deadline: float = DEADLINE) -> dict[str, Any]:
        """Read events until one called ``name`` arrives."""
        assert self.process.stdout is not None
        end = time.monotonic() + deadline
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), max(0.0, end - time.monotonic()))
            assert line, f"chat.py ended before a {name!r} event; got {[e['event'] for e in self.events]}"
            event = json.loads(line)
            self.events.append(event)
            if event["event"] == name:
                return event

    async def finish(self) -> tuple[int, list[dict[str, Any]], str]:
        out, err = await asyncio.wait_for(self.process.communicate(), PROCESS_TIMEOUT)
        self.events.extend(parse_events(out.decode()))
        assert self.process.returncode is not None
        return self.process.returncode, self.events, err.decode()


class Tmux:
    """A private tmux server with one fixed-size session running a command."""

    def __init__(self, tmp_path: Path) -> None:
        self.socket = f"acp-chat-test-{uuid.uuid4().hex[:12]}"
        self.config = tmp_path / "tmux.conf"
        self.config.write_text(
            "set -g status off\nset -g remain-on-exit on\nset -g history-limit 10000\n", encoding="utf-8"
        )
        self.started = False
        self.status_row = False

    async def tmux(self, *args: str, check: bool = True) -> str:
        process = await asyncio.create_subprocess_exec(
            "tmux",
            "-u",
            "-L",
            self.socket,
            "-f",
            str(self.config),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(),
        )
        out, err = await asyncio.wait_for(process.communicate(), 30.0)
        if check:
            assert process.returncode == 0, f"tmux {args}: {err.decode()}"
        return out.decode()

    async def start(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        status_row: bool = True,
        width: int = 100,
        height: int = 40,
    ) -> None:
        self.status_row = status_row
        env_args = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
        command = shlex.join(argv)
        await self.tmux("new-session", "-d", "-s", "chat", "-x", str(width), "-y", str(height), *env_args, command)
        self.started = True

    async def screen(self) -> str:
        """Everything printed so far (history + visible rows; wrapped lines joined)."""
        return await self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "chat")

    async def lines(self) -> list[str]:
        """The printed lines: the screen without the status row and the empty rows under the text."""
        rows = (await self.screen()).split("\n")
        if self.status_row:
            while rows and not rows[-1].strip():
                rows.pop()
            rows = rows[:-1]
        while rows and not rows[-1].strip():
            rows.pop()
        return rows

    async def mark(self) -> int:
        """A position in :meth:`lines` for ``wait_for(after=...)`` (the current last line included:
        it may be the prompt the next input is typed on)."""
        return max(0, len(await self.lines()) - 1)

    async def last_row(self) -> str:
        rows = (await self.tmux("capture-pane", "-p", "-t", "chat")).split("\n")
        while rows and rows[-1] == "":
            rows.pop()  # capture-pane ends with a newline
        return rows[-1].rstrip() if rows else ""

    async def type(self, text: str) -> None:
        await self.tmux("send-keys", "-t", "chat", "-l", text)
        await self.tmux("send-keys", "-t", "chat", "Enter")

    async def key(self, key: str) -> None:
        await self.tmux("send-keys", "-t", "chat", key)

    async def wait_for(self, pattern: str, *, after: int = 0, deadline: float = DEADLINE) -> str:
        """Poll the screen until ``pattern`` (a regex) appears in the lines from ``after`` on;
        returns those lines, joined."""
        text = ""

        async def shown() -> str | None:
            nonlocal text
            text = "\n".join((await self.lines())[after:])
            return text if re.search(pattern, text) else None

        return str(
            await eventually(
                shown, deadline, every=_SCREEN_POLL, what=lambda: f"{pattern!r} on the screen; it shows:\n{text}"
            )
        )

    async def wait_last_row(self, pattern: str, *, deadline: float = DEADLINE) -> str:
        row = ""

        async def shown() -> str | None:
            nonlocal row
            row = await self.last_row()
            return row if re.search(pattern, row) else None

        return str(
            await eventually(
                shown, deadline, every=_SCREEN_POLL, what=lambda: f"{pattern!r} on the status row; last: {row!r}"
            )
        )

    async def exit_status(self, *, deadline: float = DEADLINE) -> int:
        """Wait for the command to exit; its exit status.

        tmux sometimes leaves an exited pane process unreaped for a long while (a zombie, the pane
        not yet marked dead), so the status is also read from ``/proc/PID/stat`` (its last field is
        the wait status of an exited process)."""
        pid = int((await self.tmux("display-message", "-p", "-t", "chat", "#{pane_pid}")).strip())
        killed: list[str] = []

        async def exited() -> tuple[int] | None:
            fields = "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}"
            dead, status, killed_by = (
                (await self.tmux("display-message", "-p", "-t", "chat", fields)).strip().split(":")
            )
            if dead == "1" and (status or killed_by):  # the status shows up a moment after the pty closes
                killed.append(killed_by)
                return (int(status or 0),)
            wait_status = _zombie_wait_status(pid)
            if wait_status is not None:
                killed.append(str(wait_status & 0x7F or ""))
                return (wait_status >> 8,)
            return None

        (status,) = await eventually(exited, deadline, every=_SCREEN_POLL, what="chat.py to exit")
        assert not killed[-1], f"chat.py was killed by signal {killed[-1]}:\n{await self.screen()}"
        return int(status)

    async def kill(self) -> None:
        socket_path = (await self.tmux("display-message", "-p", "#{socket_path}", check=False)).strip()
        await self.tmux("kill-server", check=False)
        if os.path.basename(socket_path) == self.socket:
            with contextlib.suppress(OSError):
                os.unlink(socket_path)


def _zombie_wait_status(pid: int) -> int | None:
    """The wait status of process ``pid`` if it has exited but is not reaped yet (Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] != "Z" or len(fields) < 50:
        return None
    return int(fields[-1])


async def held(proxy: FaultProxy, fault: Callable[[], Awaitable[None]]) -> None:
    """Run ``fault`` while the proxy holds new connections (the client cannot reconnect before it ends)."""
    await proxy.blackhole()
    try:
        await fault()
    finally:
        await proxy.blackhole(False)


def only_session(agent: ReferenceAgent) -> str:
    (session_id,) = agent.sessions
    return session_id
