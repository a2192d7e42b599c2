"""The example chat client (``examples/chat.py`` + ``chat_ui.py`` + ``chat_demo.py``) and
``examples/reconnect_flows.py``, end to end.

* The interactive UI runs in a real terminal: a detached ``tmux`` session of fixed size on a
  private socket (``tmux -L``), driven with ``send-keys`` and read with ``capture-pane``, against a
  :class:`ReferenceServer` behind a :class:`FaultProxy` served by this test's event loop.
* ``--demo --json``, ``--script FILE --json`` and ``reconnect_flows.py`` run as subprocesses.
* The UI's pure helpers (answers to permission questions, status-line texts, compact update lines,
  the plain-text view) are tested in-process.

Every wait polls with a deadline; nothing sleeps for synchronization.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from acp_client import ConnectionState, State
from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer
from acp_client.types import (
    CancelledPermissionOutcome,
    PermissionOption,
    Plan,
    PlanEntry,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
    TextContent,
    ToolCall,
    ToolCallUpdate,
)
from tests._support import FAST_RETRY

from ..peers.reference import FaultProxyFactory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CHAT = EXAMPLES / "chat.py"
FLOWS = EXAMPLES / "reconnect_flows.py"
DEADLINE = 30.0
PROCESS_TIMEOUT = 60.0

sys.path.insert(0, str(EXAMPLES))
import chat_ui  # noqa: E402
from chat import Chat  # noqa: E402

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


@pytest_asyncio.fixture
async def chat_script(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[ChatProcess]]]:
    processes: list[asyncio.subprocess.Process] = []

    async def start(url: str, lines: list[str], *extra: str) -> ChatProcess:
        script = tmp_path / f"script-{len(processes)}.txt"
        script.write_text("\n".join(lines) + "\n", encoding="utf-8")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHAT),
            url,
            "--script",
            str(script),
            "--json",
            *extra,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(),
        )
        processes.append(process)
        return ChatProcess(process)

    yield start
    for process in processes:
        if process.returncode is None:
            process.kill()
            await process.wait()


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
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            text = "\n".join((await self.lines())[after:])
            if re.search(pattern, text):
                return text
            await asyncio.sleep(0.05)
        raise AssertionError(f"{pattern!r} did not appear on the screen within {deadline}s:\n{await self.screen()}")

    async def wait_last_row(self, pattern: str, *, deadline: float = DEADLINE) -> str:
        end = time.monotonic() + deadline
        row = ""
        while time.monotonic() < end:
            row = await self.last_row()
            if re.search(pattern, row):
                return row
            await asyncio.sleep(0.05)
        raise AssertionError(
            f"{pattern!r} not on the status row within {deadline}s; last: {row!r}\n{await self.screen()}"
        )

    async def exit_status(self, *, deadline: float = DEADLINE) -> int:
        """Wait for the command to exit; its exit status.

        tmux sometimes leaves an exited pane process unreaped for a long while (a zombie, the pane
        not yet marked dead), so the status is also read from ``/proc/PID/stat`` (its last field is
        the wait status of an exited process)."""
        pid = int((await self.tmux("display-message", "-p", "-t", "chat", "#{pane_pid}")).strip())
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            fields = "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}"
            dead, status, killed_by = (
                (await self.tmux("display-message", "-p", "-t", "chat", fields)).strip().split(":")
            )
            if dead == "1" and (status or killed_by):  # the status shows up a moment after the pty closes
                assert not killed_by, f"chat.py was killed by signal {killed_by}:\n{await self.screen()}"
                return int(status)
            wait_status = _zombie_wait_status(pid)
            if wait_status is not None:
                assert wait_status & 0x7F == 0, f"chat.py was killed by signal {wait_status & 0x7F}"
                return wait_status >> 8
            await asyncio.sleep(0.05)
        raise AssertionError(f"chat.py did not exit within {deadline}s:\n{await self.screen()}")

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


@pytest_asyncio.fixture
async def tmux(tmp_path: Path) -> AsyncIterator[Tmux]:
    assert shutil.which("tmux"), "tmux is needed for the interactive UI tests"
    terminal = Tmux(tmp_path)
    try:
        yield terminal
    finally:
        await terminal.kill()


async def held(proxy: FaultProxy, fault: Callable[[], Awaitable[None]]) -> None:
    """Run ``fault`` while the proxy holds new connections (the client cannot reconnect before it ends)."""
    proxy.blackhole()
    try:
        await fault()
    finally:
        proxy.blackhole(False)


def only_session(agent: ReferenceAgent) -> str:
    (session_id,) = agent.sessions
    return session_id


# -- the interactive UI in a real terminal --------------------------------------------------------------


async def test_interactive_rich_prompt_permission_drop_cancel_quit(
    reference_server: ReferenceServer, fault_proxy: FaultProxyFactory, tmux: Tmux
) -> None:
    proxy = await fault_proxy(reference_server)
    await tmux.start([sys.executable, str(CHAT), proxy.url(reference_server.ws_url)])
    await tmux.wait_for(r"● connected to ws://")
    await tmux.wait_last_row(r"● connected · ws://.* · ACP v1 · session sess_")

    # A prompt is answered, streamed into the terminal.
    await tmux.type("hello from tmux")
    await tmux.wait_for(r"echo: hello from tmux\n\s+\(end_turn\)")

    # A permission request is a question; option 2 (reject) is picked by number.
    await tmux.type("/permission")
    screen = await tmux.wait_for(r"answer y/n or 1-2> ")
    assert "? permission: Reference agent wants to edit a file (edit)" in screen
    assert re.search(r"1\) Allow\s+\[allow_once\]", screen) and re.search(r"2\) Reject\s+\[reject_once\]", screen)
    await tmux.type("2")
    await tmux.wait_for(r"permission: selected reject")

    # A drop: the status row shows the reconnect countdown, then a banner names the path.
    mark = await tmux.mark()
    proxy.refuse(1.0)
    await proxy.cut()
    await tmux.wait_last_row(r"◌ reconnecting (in \d+\.\ds|now) \(attempt \d+\)")
    await tmux.wait_for(r"⚠ connection lost", after=mark)
    await tmux.wait_for(r"─+ ✓ resumed the session ─+", after=mark)
    await tmux.wait_last_row(r"● connected · ws://")

    # Ctrl-C cancels a running turn: session/cancel, then the turn ends with stop reason cancelled.
    mark = await tmux.mark()
    await tmux.type("/slow")
    await tmux.wait_for(r"tick 2 ", after=mark)
    await tmux.key("C-c")
    await tmux.wait_for(r"cancelling the turn", after=mark)
    await tmux.wait_for(r"⏹ turn cancelled \(stop reason: cancelled\)", after=mark)

    # The session is still usable, /status probes it, and /quit exits with 0.
    await tmux.type("/status")
    await tmux.wait_for(r"● session sess_\w+: active \(raw='active'\)", after=mark)
    await tmux.type("/quit")
    assert await tmux.exit_status() == 0
    assert "Traceback" not in await tmux.screen()


async def test_interactive_plain_fallback_v2_all_recovery_paths_and_double_ctrl_c(
    reference_agent: ReferenceAgent,
    reference_server: ReferenceServer,
    fault_proxy: FaultProxyFactory,
    tmux: Tmux,
) -> None:
    proxy = await fault_proxy(reference_server)
    argv = [sys.executable, str(CHAT), proxy.url(reference_server.http_url), "--protocol-version", "2"]
    await tmux.start(argv, env={chat_ui.PLAIN_ENV: "1"}, status_row=False)
    await tmux.wait_for(r"\* connected to http://.* \(http, ACP v2\)")
    await tmux.wait_for(r"you> $")

    await tmux.type("hello plain")
    await tmux.wait_for(r"echo: hello plain\n\s+\(end_turn\)")
    await tmux.type("/permission")
    await tmux.wait_for(r"answer y/n or 1-2> ")
    await tmux.type("y")
    await tmux.wait_for(r"permission: selected allow")

    # A drop: state changes are printed as lines (no status row in plain mode), then a banner.
    mark = await tmux.mark()
    proxy.refuse(0.5)
    await proxy.cut()
    await tmux.wait_for(r"-- ~ reconnecting (in \d+\.\ds|now) \(attempt \d+\)", after=mark)
    await tmux.wait_for(r"=== \+ resumed the session ===", after=mark)
    await tmux.wait_for(r"-- \* connected \| http://", after=mark)

    # An agent restart: the history is replayed (v2 session/resume + replayFrom), not printed twice.
    mark = await tmux.mark()
    await held(proxy, reference_server.restart)
    screen = await tmux.wait_for(
        r"=== \+ replayed 4 messages \(\d+ updates\) - the conversation is intact ===", after=mark
    )
    assert "echo: hello plain" not in screen

    # An eviction: the agent lost the session, a new one is started.
    mark = await tmux.mark()
    reference_agent.evict(only_session(reference_agent))
    await proxy.cut()
    await tmux.wait_for(r"=== ! agent lost the session - started a new one \(sess_\w+\) ===", after=mark)
    await tmux.wait_for(r"-- \* connected \| .* \| session sess_", after=mark)
    await tmux.type("after the eviction")
    await tmux.wait_for(r"echo: after the eviction", after=mark)

    # Plain text means no rich styling and plain ASCII.
    screen = await tmux.screen()
    assert screen.isascii(), [line for line in screen.splitlines() if not line.isascii()]

    # Ctrl-C at the prompt only warns; a second one exits with 130.
    await tmux.wait_for(r"you> $")
    await tmux.key("C-c")
    await tmux.wait_for(r"press Ctrl-C again, or type /quit, to exit")
    await tmux.key("C-c")
    assert await tmux.exit_status() == chat_ui.EXIT_INTERRUPTED


# -- --demo -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_demo_json_shows_all_three_recovery_paths(version: int) -> None:
    code, out, err = await run_process(
        sys.executable, str(CHAT), "--demo", "--json", "--protocol-version", str(version)
    )
    assert code == 0, err
    events = parse_events(out)
    (connected, *_) = named(events, "connected")
    assert connected["protocolVersion"] == version and connected["transport"] == "websocket"
    first = named(events, "session")[0]["sessionId"]
    recovered = named(events, "recovered")
    assert [event["path"] for event in recovered] == ["resume", "replay", "new_session"]
    resume, replay, new = recovered
    assert resume["sessionId"] == resume["previousSessionId"] == first
    assert replay["sessionId"] == replay["previousSessionId"] == first
    assert new["previousSessionId"] == first and new["sessionId"] != first
    assert any(event["replay"] for event in named(events, "update")), "the replay delivers history updates"
    (status,) = named(events, "status")
    assert status["status"] == "unknown" and status["sessionId"] == first  # probed after the eviction
    assert len(named(events, "disconnected")) == 3
    assert len(named(events, "turn_end")) == 5
    assert not named(events, "error")


async def test_demo_narrated_text() -> None:
    code, out, err = await run_process(sys.executable, str(CHAT), "--demo", env=_env(**{chat_ui.PLAIN_ENV: "1"}))
    assert code == 0, err
    assert "=== + resumed the session ===" in out
    assert re.search(r"=== \+ replayed 6 messages \(\d+ updates\)", out)
    assert re.search(r"=== ! agent lost the session - started a new one \(sess_\w+\) ===", out)
    assert "done: recovered by resume, replay, new_session" in out


# -- --script -------------------------------------------------------------------------------------------------


async def test_script_json_survives_a_drop(
    reference_server: ReferenceServer,
    fault_proxy: FaultProxyFactory,
    chat_script: Callable[..., Awaitable[ChatProcess]],
) -> None:
    proxy = await fault_proxy(reference_server)
    chat = await chat_script(proxy.url(reference_server.ws_url), ["first", "/sleep 1.5", "/status", "second"])
    session = (await chat.next_event("session"))["sessionId"]
    assert (await chat.next_event("turn_end"))["stopReason"] == "end_turn"
    await proxy.cut()  # while the script sleeps
    code, events, err = await chat.finish()
    assert code == 0, err
    names = [event["event"] for event in events]
    assert names[:2] == ["connected", "session"]
    assert names.index("disconnected") < names.index("reconnect_attempt") < names.index("recovered")
    (recovered,) = named(events, "recovered")
    assert recovered["path"] == "resume" and recovered["sessionId"] == recovered["previousSessionId"] == session
    assert len(named(events, "connected")) == 2
    (status,) = named(events, "status")
    assert status == {**status, "sessionId": session, "status": "active", "raw": "active", "state": None}
    texts = "".join(event["text"] for event in named(events, "update"))
    assert texts == "echo: firstecho: second"
    assert [event["stopReason"] for event in named(events, "turn_end")] == ["end_turn", "end_turn"]
    assert not named(events, "error") and not named(events, "turn_interrupted")


async def test_script_exits_non_zero_when_the_client_gives_up(
    reference_server: ReferenceServer,
    fault_proxy: FaultProxyFactory,
    chat_script: Callable[..., Awaitable[ChatProcess]],
) -> None:
    proxy = await fault_proxy(reference_server)
    url = proxy.url(reference_server.ws_url)
    chat = await chat_script(url, ["first", "/sleep 30", "never sent"], "--max-elapsed", "0.5")
    await chat.next_event("turn_end")
    started = time.monotonic()
    await proxy.aclose()  # the agent is gone for good: every reconnect is refused
    code, events, err = await chat.finish()
    assert code == 2, err
    assert time.monotonic() - started < 20, "/sleep must end as soon as the client gives up"
    assert named(events, "disconnected") and named(events, "reconnect_attempt")
    assert any("gave up" in event["message"] for event in named(events, "error"))
    assert not named(events, "recovered")
    assert len(named(events, "turn_end")) == 1


async def test_script_exits_non_zero_when_the_agent_is_unreachable(
    chat_script: Callable[..., Awaitable[ChatProcess]],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    chat = await chat_script(f"ws://127.0.0.1:{port}/acp", ["hello"])
    code, events, err = await chat.finish()
    assert code == 2, err
    assert any("could not connect" in event["message"] for event in named(events, "error"))
    assert not named(events, "session")


# -- reconnect_flows.py -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "transport"), [(1, "ws"), (2, "http")])
async def test_reconnect_flows_run_and_pass(version: int, transport: str) -> None:
    code, out, err = await run_process(
        sys.executable, str(FLOWS), "--protocol-version", str(version), "--transport", transport
    )
    assert code == 0, out + err
    assert "10/10 checks passed" in out
    for callback in (
        "[decide]",
        "[on_resume]",
        "[on_replay]",
        "[on_new_session]",
        "[on_recovery_failed]",
        "[ask_user]",
    ):
        assert callback in out
    assert "FAIL" not in out


async def test_reconnect_flows_help_documents_the_flows() -> None:
    code, out, _ = await run_process(sys.executable, str(FLOWS), "--help")
    assert code == 0
    for words in ("decide_recovery", "--protocol-version", "--transport", "abandon", "re-sends"):
        assert words in out


# -- pure helpers of the UI ------------------------------------------------------------------------------


def _permission_request(*kinds: str) -> RequestPermissionRequest:
    options = tuple(PermissionOption(option_id=f"opt-{i}", name=kind, kind=kind) for i, kind in enumerate(kinds, 1))
    return RequestPermissionRequest(session_id="s", options=options)


def test_permission_answers() -> None:
    request = _permission_request("reject_once", "allow_once", "allow_always")
    assert chat_ui.permission_choice(request, "y") == SelectedPermissionOutcome(option_id="opt-2")
    assert chat_ui.permission_choice(request, " YES ") == SelectedPermissionOutcome(option_id="opt-2")
    assert chat_ui.permission_choice(request, "n") == SelectedPermissionOutcome(option_id="opt-1")
    assert chat_ui.permission_choice(request, "3") == SelectedPermissionOutcome(option_id="opt-3")
    for unusable in ("", "0", "4", "maybe", "-1"):
        assert chat_ui.permission_choice(request, unusable) is None
    allow_only = _permission_request("allow_once")
    assert chat_ui.permission_choice(allow_only, "n") == CancelledPermissionOutcome()
    assert chat_ui.permission_choice(_permission_request("reject_once"), "y") is None


def test_status_line_texts() -> None:
    describe = chat_ui.describe_state
    assert describe(ConnectionState(State.CONNECTED), detail="ws://x · ACP v1") == "● connected · ws://x · ACP v1"
    waiting = ConnectionState(State.RECONNECTING, attempt=3, retry_in=2.0)
    assert describe(waiting) == "◌ reconnecting in 2.0s (attempt 3)"
    assert describe(waiting, elapsed=1.25) == "◌ reconnecting in 0.8s (attempt 3)"
    assert describe(waiting, elapsed=5.0) == "◌ reconnecting now (attempt 3)"
    assert describe(ConnectionState(State.RECOVERING)) == "◌ recovering the session…"
    assert "suspended" in describe(ConnectionState(State.SUSPENDED, attempt=9, retry_in=30.0))
    assert describe(ConnectionState(State.FAILED, cause="retry budget spent")) == "✗ gave up: retry budget spent"


def test_compact_update_lines() -> None:
    titles: dict[str, str] = {}
    describe = chat_ui.describe_update
    call = ToolCall(tool_call_id="c1", title="Read README.md", tool_kind="read", status="pending")
    assert describe(call, titles) == ("cyan", "⚙ Read README.md (read) [pending]")
    assert describe(ToolCallUpdate(tool_call_id="c1", status="in_progress"), titles) is None
    assert describe(ToolCallUpdate(tool_call_id="c1", status="completed"), titles) == (
        "cyan",
        "⚙ Read README.md [completed]",
    )
    assert describe(ToolCallUpdate(tool_call_id="c1", status="failed"), titles) == ("red", "⚙ Read README.md [failed]")
    plan = Plan(
        entries=(
            PlanEntry(content="look", priority="high", status="completed"),
            PlanEntry(content="fix", priority="high", status="in_progress"),
            PlanEntry(content="test", priority="low", status="pending"),
        )
    )
    assert describe(plan, titles) == ("magenta", "☰ plan: ✓ look  ▸ fix  ○ test")


def test_plain_view_renders_a_conversation_in_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(chat_ui.PLAIN_ENV, "1")
    assert chat_ui.load_rich_console(io.StringIO()) is None
    stream = io.StringIO()
    view = chat_ui.make_view(json_mode=False, stream=stream)
    assert isinstance(view, chat_ui.TerminalView) and not view.styled
    from acp_client import UpdateEvent
    from acp_client.types import AgentMessageChunk

    view.show_prompt()
    view.input_received()
    for piece in ("echo", ": hi"):
        view.on_update(UpdateEvent("s1", AgentMessageChunk(content=TextContent(text=piece))))
    view.on_update(UpdateEvent("s1", AgentMessageChunk(content=TextContent(text="old history")), replay=True))
    view.event("turn_end", sessionId="s1", stopReason="end_turn")
    view.show_prompt()
    view.event("disconnected", reason="reset")  # async output breaks the prompt line...
    view.set_state(ConnectionState(State.RECONNECTING, attempt=1, retry_in=0.0))
    view.event("recovered", path="resume", sessionId="s1", previousSessionId="s1", replayed=0)
    view.set_state(ConnectionState(State.CONNECTED))  # ...and the prompt comes back once settled
    text = stream.getvalue()
    assert text.isascii()
    assert "old history" not in text
    assert text.endswith(
        "you> echo: hi\n  (end_turn)\nyou> \n! connection lost: reset\n-- ~ reconnecting now (attempt 1)\n"
        "=== + resumed the session ===\n-- * connected\nyou> "
    )


def test_rich_view_is_used_when_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(chat_ui.PLAIN_ENV, raising=False)
    view = chat_ui.make_view(json_mode=False, stream=io.StringIO())
    assert isinstance(view, chat_ui.TerminalView) and view.styled
    assert not view.status_bar  # not a terminal: state changes become lines
    assert isinstance(chat_ui.make_view(json_mode=True, stream=io.StringIO()), chat_ui.JsonView)


async def test_interactive_json_mode_reads_prompts_from_stdin(
    reference_server: ReferenceServer, fault_proxy: FaultProxyFactory
) -> None:
    proxy = await fault_proxy(reference_server)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHAT),
        proxy.url(reference_server.ws_url),
        "--json",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )
    try:
        chat = ChatProcess(process)
        assert process.stdin is not None
        process.stdin.write(b"hello json\n/status\n/permission\n")
        await process.stdin.drain()
        await chat.next_event("turn_end")
        await chat.next_event("turn_end")
        process.stdin.close()  # end of input: exit 0
        code, events, err = await chat.finish()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 0, err
    text = "".join(event["text"] for event in named(events, "update"))
    assert text == "echo: hello jsonpermission: selected allow"
    # Piped lines run one after the other: the probe between the two turns.
    order = [event["event"] for event in events if event["event"] in ("turn_end", "status")]
    assert order == ["turn_end", "status", "turn_end"]


def test_chat_keeps_its_constructor_contract() -> None:
    # The interactive UI and the demo rely on these hooks being public and replaceable.
    chat = Chat("ws://127.0.0.1:9/acp", output=chat_ui.JsonView(io.StringIO()))
    assert chat.state_listeners == []
    assert chat.permission_handler == Chat.auto_permission
    assert not chat.failed.is_set()


# -- a client bug the chat's /status and /sessions can hit --------------------------------------------

_REQUEST_AT_A_DROP = """
import asyncio, io, sys
sys.path.insert(0, sys.argv[1])
from chat import Chat, Output
from acp_client import RetryPolicy
from acp_client.testing import MemoryConnector, ReferenceAgent

async def main():
    connector = MemoryConnector(ReferenceAgent())
    chat = Chat(connector, output=Output(json_mode=True, stream=io.StringIO()), retry=RetryPolicy(initial_delay=0.01))
    await chat.start()
    connector.drop()  # the network fails; the app asks something before the client noticed
    page = await chat.client.list_sessions()  # /sessions (session/status, /status, behaves the same)
    print("listed", len(page.sessions), chat.client.state.state.value)
    await chat.close()

asyncio.run(main())
"""


async def test_a_read_only_request_made_right_at_a_drop_is_retried_after_recovery() -> None:
    # session/list and session/status are retried transparently across a drop. When the request
    # is sent after the transport failed but before the connection noticed (the send raises at
    # once, the reader has not run yet), Supervisor.call retries on the same dead connection in a
    # loop that never yields: the event loop starves, the drop is never noticed, the app hangs at
    # 100 % CPU. Expected: the request waits for recovery and succeeds.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _REQUEST_AT_A_DROP,
        str(EXAMPLES),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 15.0)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError("list_sessions() issued right at a drop never returned (busy retry loop)") from None
    assert process.returncode == 0, err.decode()
    assert out.decode().strip() == "listed 1 connected"


# -- the --json contract: a session the client gave up on is not "recovered" -------------------------------


async def test_json_reports_an_abandoned_session_as_an_error_not_a_recovery() -> None:
    # DESIGN.md §4: `recovered {path, ...}` has path resume | replay | new_session. When every
    # recovery step fails the session is abandoned; that must not read as a recovery.
    from acp_client.testing import MemoryConnector, SessionStore

    class FailingStore(SessionStore):
        broken = False

        def save(self, record: Any) -> None:
            if self.broken:
                raise OSError("disk full")
            super().save(record)

    store = FailingStore()
    agent = ReferenceAgent(store=store)
    connector = MemoryConnector(agent)
    stream = io.StringIO()
    chat = Chat(connector, output=chat_ui.JsonView(stream), retry=FAST_RETRY)
    changed = asyncio.Event()
    chat.state_listeners.append(lambda _state: changed.set())
    try:
        await chat.start()
        assert chat.handle is not None
        session_id = chat.handle.session_id
        agent.evict(session_id)  # -32002 -> new session ...
        store.broken = True  # ... which the agent cannot create: every step fails
        connector.drop()

        async def recovered() -> None:
            while not (chat.client.recovery_outcomes and chat.client.state.state is State.CONNECTED):
                changed.clear()
                await changed.wait()

        await asyncio.wait_for(recovered(), DEADLINE)
    finally:
        await chat.close()
    assert [outcome.path.value for outcome in chat.client.recovery_outcomes] == ["abandon"]
    events = parse_events(stream.getvalue())
    assert all(event["path"] in ("resume", "replay", "new_session") for event in named(events, "recovered"))
    errors = [event["message"] for event in named(events, "error")]
    assert any(session_id in message for message in errors), errors
