"""The Neovim plugin shows the conversation exactly once, whatever sequence of connects,
disconnects, agent losses and editor restarts comes, and keeps every window's status line current.

* ``:AcpDisconnect`` then ``:AcpConnect`` in one editor: the buffer already shows the conversation,
  so it is not shown again; "connected to" comes before the recovery banner.
* The agent lost the session while the editor was disconnected: one banner and one divider, the
  conversation above it once, the new session's turns below.
* A restarted Neovim on the same store: the whole conversation once (the lost part above its
  divider), then the banner of its recovery.
* A turn cut off by a drop: one banner for the drop and one for the turn, in plain words.
* In a real terminal (Neovim in tmux): every window's status line says the state, counts down to
  the next attempt, ``:AcpReconnect`` tries at once; the status line item is added to the user's
  status line (the file name stays).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_client.display import UNSAFE_CHARACTERS
from tests._support import DEADLINE
from tests.examples._nvim_support import AGENT, NVIM, PLUGIN, AgentProcess, Neovim, TerminalNeovim, alive


@pytest.fixture(autouse=True)
def _neovim_is_installed() -> None:
    assert shutil.which(NVIM), "Neovim is needed (Debian's neovim package)"
    assert shutil.which("tmux"), "tmux is needed for the terminal tests"


@pytest.fixture
def neovim(tmp_path: Path) -> Iterator[Callable[..., Neovim]]:
    started: list[Neovim] = []

    def start(settings: dict[str, Any] | None = None, *, terminal: bool = False, width: int = 120) -> Neovim:
        folder = tmp_path / f"nvim-{len(started)}"
        editor = TerminalNeovim(folder, settings or {}, width=width) if terminal else Neovim(folder, settings or {})
        started.append(editor)
        return editor

    yield start
    for editor in started:
        editor.kill()


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path / "agent-store", "--chunk-delay", "0.02")
    process.start()
    yield process
    process.stop()


def _once(lines: list[str], line: str) -> int:
    found = [i for i, shown in enumerate(lines) if shown == line]
    assert len(found) == 1, f"{line!r} {len(found)} times:\n" + "\n".join(lines)
    return found[0]


def _count(lines: list[str], piece: str) -> int:
    return sum(piece in line for line in lines)


def _quit(editor: Neovim) -> None:
    host = editor.host_pid
    assert editor.quit() == 0
    editor.wait(lambda: not alive(host) or None, "the plugin host to exit")


def _disconnected(editor: Neovim) -> None:
    editor.nvim.command("AcpDisconnect")
    editor.wait(lambda: editor.info().get("state") == "disconnected" or None, "the host to close the client")


def test_disconnect_reconnect_loss_and_restart_show_the_conversation_once(
    agent: AgentProcess, neovim: Any, tmp_path: Path
) -> None:
    settings = {"acp_store": str(tmp_path / "sessions.db")}
    editor = neovim(settings)
    editor.nvim.command(f"AcpConnect {agent.url}")
    editor.wait_for("connected to")
    session = editor.info()["session"]
    editor.nvim.command("AcpPrompt remember this")
    editor.wait_for("Agent: echo: remember this")

    # :AcpDisconnect, :AcpConnect: the stored session comes back; the buffer shows it already.
    _disconnected(editor)
    after = len(editor.buffer_lines())
    editor.nvim.command(f"AcpConnect {agent.url}")
    lines = editor.wait_for(f"recovered by resume: session {session}", after=after)
    assert lines[after:] == [
        f"── connected to {agent.url} (websocket): session {session} ──",
        f"── recovered by resume: session {session} (the conversation is intact) ──",
    ], lines
    _once(lines, "You: remember this")
    _once(lines, "Agent: echo: remember this")
    assert _count(lines, "restored from the store") == 0
    editor.nvim.command("AcpPrompt and this")
    editor.wait_for("Agent: echo: and this")

    # Disconnected, the agent loses every session (restarted without its store): on connect the
    # stored session is recovered as a new one; one banner, one divider, the conversation once.
    _disconnected(editor)
    agent.kill()
    shutil.rmtree(agent.store)
    agent.start()
    after = len(editor.buffer_lines())
    editor.nvim.command(f"AcpConnect {agent.url}")
    lines = editor.wait_for(f"the agent lost session {session}", after=after)
    new = editor.info()["session"]
    assert new != session
    assert lines[after:] == [
        f"── connected to {agent.url} (websocket): session {new} ──",
        f"── the agent lost session {session}: continuing in new session {new} ──",
        "── the agent lost the conversation above (2 turns); the new session starts below ──",
    ], lines
    editor.nvim.command("AcpPrompt after the loss")
    lines = editor.wait_for("Agent: echo: after the loss")
    conversation = ["You: remember this", "Agent: echo: remember this", "You: and this", "Agent: echo: and this"]
    where = [_once(lines, line) for line in [*conversation, "You: after the loss", "Agent: echo: after the loss"]]
    divider = _once(lines, "── the agent lost the conversation above (2 turns); the new session starts below ──")
    assert where == sorted(where) and where[3] < divider < where[4], lines
    assert editor.messages() == ""
    _quit(editor)

    # A new Neovim on the same store: the whole conversation once, the lost part above its divider.
    again = neovim({**settings, "acp_url": agent.url})
    lines = again.wait_for(f"recovered by resume: session {new}")
    assert lines[:2] == [
        f"── connected to {agent.url} (websocket): session {new} ──",
        f"── restored from the store: session {new} (6 messages) ──",
    ], lines
    where = [_once(lines, line) for line in [*conversation, "You: after the loss", "Agent: echo: after the loss"]]
    divider = _once(lines, "── the agent lost the conversation above (2 turns); the new session starts below ──")
    assert where == sorted(where) and where[3] < divider < where[4], lines
    assert lines[-1] == f"── recovered by resume: session {new} (the conversation is intact) ──", lines
    assert again.messages() == ""
    _quit(again)


def test_a_turn_cut_off_by_a_drop_is_one_banner_in_plain_words(agent: AgentProcess, neovim: Any) -> None:
    editor = neovim()
    editor.nvim.command(f"AcpConnect {agent.url}")
    editor.wait_for("connected to")
    session = editor.info()["session"]
    editor.nvim.command("AcpPrompt /slow")
    lines = editor.wait_for("tick 2")
    after = len(lines) - 1
    agent.kill()
    agent.start()
    lines = editor.wait_for(f"recovered by replay: session {session}", after=after)
    editor.wait(lambda: editor.lua("return require('acp').stats.turns") == 1 or None, "the cut-off turn to end")
    banners = [line for line in editor.buffer_lines()[after:] if line.startswith("──")]
    assert banners[:2] == [
        "── connection lost: the connection dropped; reconnecting ──",
        "── the turn was cut off by a drop (the agent may have run it) ──",
    ], banners
    assert len(banners) == 3 and banners[2].startswith(f"── recovered by replay: session {session} ("), banners
    text = editor.buffer_text()
    assert not re.search(r"Error|1006|EOF|unexpected end|the turn failed", text), text
    assert editor.messages() == ""
    _quit(editor)


def _status_lines(editor: TerminalNeovim, pattern: str, count: int, timeout: float = DEADLINE) -> list[str]:
    """Wait until ``pattern`` is drawn ``count`` times on the screen (each window's status line)."""
    rows: list[str] = []

    def drawn() -> list[str] | None:
        nonlocal rows
        rows = editor.rows()
        return rows if sum(len(re.findall(pattern, row)) for row in rows) == count else None

    return editor.wait(drawn, lambda: f"{pattern!r} drawn {count} times on the screen:\n" + "\n".join(rows), timeout)


def test_every_window_counts_down_and_acp_reconnect_tries_at_once(
    agent: AgentProcess, neovim: Any, tmp_path: Path
) -> None:
    retry = {"initial_delay": 8.0, "max_delay": 8.0, "jitter": False}
    editor = neovim({"acp_retry": retry}, terminal=True, width=200)
    (tmp_path / "notes.txt").write_text("my notes\n", encoding="utf-8")
    editor.nvim.command(f"cd {tmp_path}")
    editor.nvim.command("edit notes.txt")
    editor.nvim.command("set laststatus=2")
    editor.lua("require('acp').add_to_statusline()")
    editor.nvim.command(f"AcpConnect {agent.url}")
    editor.wait_for("connected to")
    rows = _status_lines(editor, r"ACP connected", 2)  # the file's window and the conversation's
    assert any("notes.txt" in row and "ACP connected" in row for row in rows), rows  # the file name stays
    editor.nvim.command("AcpPrompt hello")
    editor.wait_for("Agent: echo: hello")

    # The agent dies: both windows' status lines say so and count down to the next attempt.
    agent.kill()
    rows = _status_lines(editor, r"ACP reconnecting \(attempt (\d+), retry in 7s, :AcpReconnect\)", 2)
    (attempt,) = set(re.findall(r"attempt (\d+), retry", "\n".join(rows)))
    rows = _status_lines(editor, rf"ACP reconnecting \(attempt {attempt}, retry in 5s, :AcpReconnect\)", 2)
    assert any("notes.txt" in row for row in rows), rows

    # It is back: :AcpReconnect tries now, long before the countdown (5 s or less now) ends.
    agent.start()
    editor.nvim.command("AcpReconnect")
    _status_lines(editor, r"ACP connected", 2, timeout=3.0)
    assert editor.lua("return require('acp').attempt") is None
    lines = editor.wait_for("recovered by")
    assert _count(lines, "connection lost") == 1
    assert editor.messages() == ""
    _quit(editor)


def test_reconnect_when_not_connected_is_one_message(neovim: Any) -> None:
    editor = neovim()
    editor.nvim.input(":AcpReconnect<CR>")
    editor.wait(lambda: editor.messages() or None, "the message", timeout=DEADLINE)
    assert editor.messages().splitlines() == ["ACP: not connected (:AcpConnect URL)"]


def test_the_readme_set_up_runs_as_written(agent: AgentProcess, tmp_path: Path) -> None:
    """``examples/nvim/README.md``'s set-up block, with this machine's paths, in a real Neovim: it
    connects at startup, every command it lists exists, and the status line keeps the file name."""
    readme = (PLUGIN / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```lua\n(.*?)```", readme, re.S)
    for name in re.findall(r"^\| `:(Acp\w+)", readme, re.M):
        assert f"command('{name}'" in (PLUGIN / "plugin" / "acp.lua").read_text(encoding="utf-8"), name
    (tmp_path / "project").mkdir()
    lua = (
        block.replace("/path/to/this/checkout/examples/nvim", str(PLUGIN))
        .replace("/path/to/venv/bin/python", sys.executable)
        .replace("~/.local/state/acp/sessions.db", str(tmp_path / "state" / "sessions.db"))
        .replace("ws://127.0.0.1:8000/acp", agent.url)
        .replace("~/project", str(tmp_path / "project"))
        .replace("/tmp/acp-host.log", str(tmp_path / "host.log"))
    )
    editor = Neovim(tmp_path / "nvim", {}, lua)
    try:
        editor.wait_for("connected to")
        editor.nvim.command(f"cd {tmp_path}")
        editor.nvim.command("edit notes.txt")
        line = editor.nvim.api.eval_statusline(editor.nvim.options["statusline"], {"maxwidth": 200})["str"]
        assert "notes.txt" in line and line.endswith("ACP connected"), line
        editor.nvim.command("AcpPrompt hello from the README")
        editor.wait_for("Agent: echo: hello from the README")
        assert editor.messages() == ""
        _quit(editor)
    finally:
        editor.kill()


#: A ``vim.ui.select`` stand-in that records what it was asked and picks the first item.
PICK_FIRST = """
_G.asked = {}
vim.ui.select = function(items, opts, on_choice)
  local labels = {}
  for _, item in ipairs(items) do table.insert(labels, opts.format_item and opts.format_item(item) or item) end
  table.insert(_G.asked, { prompt = opts.prompt, labels = labels })
  on_choice(items[1], 1)
end
"""


def _hostile_session(editor: Neovim, url: str, *, sessions: bool) -> list[str]:
    """A connect, a turn, a permission question, a refused turn (and ``:AcpSessions``): the buffer."""
    editor.nvim.command(f"AcpConnect {url}")
    editor.wait_for("connected to")
    editor.nvim.command("AcpPrompt hello")
    editor.wait(lambda: editor.lua("return require('acp').stats.turns") == 1 or None, "the first turn to end")
    editor.nvim.command("AcpPrompt /permission")
    editor.wait_for("Agent: permission: selected")
    editor.nvim.command("AcpPrompt /fail")
    lines = editor.wait_for("── the turn failed: ")
    if sessions:
        editor.nvim.command("AcpSessions")
        lines = editor.wait_for("── switched to session sess_")
    return lines


def _shown_as_text(editor: Neovim, lines: list[str], selects: int) -> None:
    unsafe = re.compile(UNSAFE_CHARACTERS)
    for line in lines:
        assert not unsafe.search(line), line
    assert any("␛]52;c;cHduZWQ=" in line for line in lines) and any("\\u202etxt.exe" in line for line in lines)
    banners = [line for line in lines if line.startswith("──")]
    assert all(line.endswith(" ──") for line in banners), banners  # each banner is whole, on one line
    asked = editor.lua("return _G.asked")
    assert len(asked) == selects and len(asked[0]["labels"]) == 2, asked
    for entry in asked:
        for text in [entry["prompt"], *entry["labels"]]:
            assert not unsafe.search(text) and "\n" not in text, text
    assert "␛]52" in asked[0]["prompt"] and "␛]52" in asked[0]["labels"][0]
    assert editor.messages() == "" and editor.stderr_of_host() == []
    assert not unsafe.search(editor.statusline())


def test_a_hostile_agent_is_shown_as_text(tmp_path: Path) -> None:
    """An agent that puts every control sequence (and a newline) into every text it controls:
    buffer lines, banners, select items and prompts are printable, one-line places hold one line,
    and no handler fails (Lua's "String cannot contain newlines"). Over WebSocket with a store
    (``:AcpSessions`` lists its hostile titles); over stdio its session ids are hostile too."""
    hostile = AgentProcess(tmp_path / "agent-store", "--fault", "escapes")
    hostile.start()
    editor = Neovim(tmp_path / "nvim", {"acp_store": str(tmp_path / "sessions.db")}, PICK_FIRST)
    try:
        lines = _hostile_session(editor, hostile.url, sessions=True)
        _shown_as_text(editor, lines, selects=2)
        _quit(editor)
    finally:
        editor.kill()
        hostile.stop()

    command = " ".join([*AGENT, "--stdio", "--fault", "escapes", "--fault", "escape-ids"])
    editor = Neovim(tmp_path / "nvim-stdio", {}, PICK_FIRST)
    try:
        lines = _hostile_session(editor, f"stdio:{command}", sessions=False)
        _shown_as_text(editor, lines, selects=1)
        assert re.search(r"session sess_\w+␛]52", lines[0]), lines[0]  # the hostile id, as text
        _quit(editor)
    finally:
        editor.kill()


def test_add_to_statusline_keeps_the_users_own_status_line(tmp_path: Path) -> None:
    editor = Neovim(tmp_path / "nvim", {}, "vim.o.statusline = 'MINE %f'")
    try:
        editor.lua("require('acp').add_to_statusline(); require('acp').add_to_statusline()")
        assert editor.nvim.options["statusline"] == "MINE %f %{v:lua.require'acp'.statusline()}"
        _quit(editor)
    finally:
        editor.kill()
