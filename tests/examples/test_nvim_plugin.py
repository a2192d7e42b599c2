"""The Neovim plugin (``examples/nvim``) in a real Neovim (Debian's ``neovim``, headless, driven
through pynvim) against the reference agent over WebSocket and stdio, as a user meets it:

* a prompt streams its answer into the conversation buffer; the status line shows the state;
* the agent is SIGKILLed and started again (WebSocket) or respawned by the client (stdio): the
  buffer shows a recovery banner (path, session) and the next prompt works;
* the permission request is a ``vim.ui.select`` choice; ``:AcpSessions`` lists the store;
* Neovim restarted with the same store shows the conversation again;
* ``:qa`` leaves no host, thread or agent process behind;
* nothing reaches Neovim's message area but what the plugin means to show.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_client.store import SqliteSessionStore, endpoint_key
from tests._support import DEADLINE
from tests.examples._nvim_support import AGENT, NVIM, AgentProcess, Neovim, alive

#: A ``vim.ui.select`` stand-in, as a picker plugin (telescope-ui-select, dressing...) replaces it:
#: it records what it was asked and picks the item whose label is ``vim.g.pick`` (or the first).
PICKER = """
_G.asked = {}
vim.ui.select = function(items, opts, on_choice)
  local labels = {}
  for _, item in ipairs(items) do table.insert(labels, opts.format_item and opts.format_item(item) or item) end
  table.insert(_G.asked, { prompt = opts.prompt, kind = opts.kind, labels = labels })
  for index, label in ipairs(labels) do
    if vim.g.pick == nil or label:find(vim.g.pick, 1, true) then return on_choice(items[index], index) end
  end
  on_choice(nil, nil)
end
"""


@pytest.fixture(autouse=True)
def _neovim_is_installed() -> None:
    assert shutil.which(NVIM), "Neovim is needed (Debian's neovim package; .ci/run installs it)"


@pytest.fixture
def neovim(tmp_path: Path) -> Iterator[Callable[..., Neovim]]:
    started: list[Neovim] = []

    def start(settings: dict[str, Any] | None = None, init: str = PICKER) -> Neovim:
        editor = Neovim(tmp_path / f"nvim-{len(started)}", settings or {}, init)
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


def _connect(editor: Neovim, url: str) -> str:
    editor.nvim.command(f"AcpConnect {url}")
    editor.wait_for("connected to")
    return str(editor.info()["session"])


def _no_trace_left(editor: Neovim, agent_pid: int | None = None) -> None:
    host = editor.host_pid
    assert editor.quit() == 0
    editor.wait(lambda: not alive(host) or None, "the plugin host to exit")
    assert not alive(agent_pid), "the stdio agent outlived Neovim"
    log = editor.log.read_text(encoding="utf-8")
    assert "host stopped; threads left: none" in log, log


def test_a_prompt_streams_into_the_buffer_and_nothing_else_is_said(agent: AgentProcess, neovim: Any) -> None:
    editor = neovim()
    assert editor.statusline() == ""
    session = _connect(editor, agent.url)
    assert editor.statusline() == "ACP connected"
    editor.nvim.command("AcpPrompt hello there")
    lines = editor.wait_for("Agent: echo: hello there")
    assert lines[-2:] == ["You: hello there", "Agent: echo: hello there"]
    assert f"connected to {agent.url} (websocket): session {session}" in lines[0]
    # The turn's end comes after its last chunk is on screen.
    editor.wait(lambda: editor.lua("return require('acp').stats.turns") == 1 or None, "the turn to end")
    stats = editor.lua("return require('acp').stats")
    assert stats["chunks"] >= 3 and stats["turns"] == 1  # streamed, chunk by chunk
    assert editor.messages() == ""
    assert editor.stderr_of_host() == []
    _no_trace_left(editor)


def test_agent_killed_and_restarted_over_websocket(agent: AgentProcess, neovim: Any) -> None:
    editor = neovim()
    session = _connect(editor, agent.url)
    editor.nvim.command("AcpPrompt first")
    editor.wait_for("Agent: echo: first")
    agent.kill()
    editor.wait(lambda: "reconnecting" in editor.statusline() or None, "the status line to say reconnecting")
    agent.start()  # the same port, the same store: the session is known, not in memory
    lines = editor.wait_for(f"recovered by replay: session {session}")
    assert editor.statusline() == "ACP connected"
    after = len(lines)
    editor.nvim.command("AcpPrompt after the restart")
    lines = editor.wait_for("Agent: echo: after the restart", after=after)
    assert lines.count("Agent: echo: first") == 1  # the replay did not repeat the history
    assert editor.messages() == ""
    _no_trace_left(editor)


def test_stdio_agent_killed_is_respawned_and_qa_leaves_nothing(tmp_path: Path, neovim: Any) -> None:
    command = " ".join([*AGENT, "--stdio", "--store", str(tmp_path / "stdio-store")])
    editor = neovim()
    session = _connect(editor, f"stdio:{command}")
    editor.nvim.command("AcpPrompt over stdio")
    editor.wait_for("Agent: echo: over stdio")
    first_pid = editor.info()["pid"]
    assert alive(first_pid)
    os.kill(first_pid, signal.SIGKILL)
    lines = editor.wait_for(f"recovered by replay: session {session}")
    second_pid = editor.info()["pid"]
    assert second_pid != first_pid and alive(second_pid)
    editor.nvim.command("AcpPrompt once more")
    editor.wait_for("Agent: echo: once more", after=len(lines))
    assert editor.messages() == ""
    _no_trace_left(editor, agent_pid=second_pid)


def test_a_respawned_agent_that_claims_the_session_is_shown_as_unverified(tmp_path: Path, neovim: Any) -> None:
    """The respawned stdio agent says the session is active (``status-active-after-restart``), so
    the client resumes it; but the process is new: the banner says continuity is unverified,
    never that the conversation is intact."""
    store = str(tmp_path / "stdio-store")
    command = " ".join([*AGENT, "--stdio", "--store", store, "--fault", "status-active-after-restart"])
    editor = neovim()
    session = _connect(editor, f"stdio:{command}")
    editor.nvim.command("AcpPrompt over stdio")
    editor.wait_for("Agent: echo: over stdio")
    os.kill(editor.info()["pid"], signal.SIGKILL)
    lines = editor.wait_for(f"recovered by resume: session {session}")
    [banner] = [line for line in lines if "recovered by resume" in line]
    assert banner == (
        f"── recovered by resume: session {session} (continuity unverified: the agent was restarted and could not "
        "show it kept the conversation) ──"
    ), banner
    assert not any("intact" in line for line in lines)
    editor.nvim.command("AcpPrompt once more")
    editor.wait_for("Agent: echo: once more", after=len(lines))
    _no_trace_left(editor, agent_pid=editor.info()["pid"])


def test_a_restarted_neovim_shows_the_conversation_again(agent: AgentProcess, neovim: Any, tmp_path: Path) -> None:
    settings = {"acp_store": str(tmp_path / "sessions.db"), "acp_url": agent.url}
    first = neovim(settings)
    first.wait_for("connected to")  # g:acp_url: connected at startup
    session = first.info()["session"]
    first.nvim.command("AcpPrompt remember this")
    first.wait_for("Agent: echo: remember this")
    _no_trace_left(first)

    second = neovim(settings)
    lines = second.wait_for("recovered by resume")
    assert lines == [  # "connected to", the conversation, then what recovery did (the agent kept it)
        f"── connected to {agent.url} (websocket): session {session} ──",
        f"── restored from the store: session {session} (2 messages) ──",
        "You: remember this",
        "Agent: echo: remember this",
        f"── recovered by resume: session {session} (the conversation is intact) ──",
    ], lines
    assert second.info()["session"] == session
    second.nvim.command("AcpPrompt and this")
    lines = second.wait_for("Agent: echo: and this")
    assert lines.count("You: remember this") == 1
    assert second.messages() == ""
    _no_trace_left(second)


def test_text_the_agent_put_in_its_replay_is_shown_as_the_agents(
    agent: AgentProcess, neovim: Any, tmp_path: Path
) -> None:
    """A stored conversation holding an agent-inserted message (claude-agent-acp replays
    ``[Request interrupted by user]`` among the prompts): the restored buffer labels it as the
    agent's, never as the user's."""
    settings = {"acp_store": str(tmp_path / "sessions.db"), "acp_url": agent.url}
    first = neovim(settings)
    first.wait_for("connected to")
    session = first.info()["session"]
    first.nvim.command("AcpPrompt remember this")
    first.wait_for("Agent: echo: remember this")
    _no_trace_left(first)
    with SqliteSessionStore(tmp_path / "sessions.db") as store:
        entries = list(store.load_transcript(endpoint_key(agent.url), session))
        marker = {"role": "user", "text": "[Request interrupted by user]", "inserted": True}
        entries.insert(next(i for i, e in enumerate(entries) if e.get("role") == "user"), marker)
        assert store.save_transcript(endpoint_key(agent.url), session, entries)

    second = neovim(settings)
    lines = second.wait_for("Agent: echo: remember this")
    assert lines[1:5] == [
        f"── restored from the store: session {session} (3 messages) ──",
        "Agent (in its replay): [Request interrupted by user]",
        "You: remember this",
        "Agent: echo: remember this",
    ], lines
    _no_trace_left(second)


def test_a_restarted_neovim_shows_the_conversation_again_over_stdio(tmp_path: Path, neovim: Any) -> None:
    # Over stdio the agent is Neovim's child: it ends with the first Neovim, and the second one
    # spawns a new agent on the same agent store, so the stored session comes back by replay.
    command = " ".join([*AGENT, "--stdio", "--store", str(tmp_path / "stdio-store")])
    settings = {"acp_store": str(tmp_path / "sessions.db"), "acp_url": f"stdio:{command}"}
    first = neovim(settings)
    first.wait_for("connected to")
    session = first.info()["session"]
    first.nvim.command("AcpPrompt remember this")
    first.wait_for("Agent: echo: remember this")
    _no_trace_left(first, agent_pid=first.info()["pid"])

    second = neovim(settings)
    lines = second.wait_for("recovered by replay")
    assert lines[1:4] == [
        f"── restored from the store: session {session} (2 messages) ──",
        "You: remember this",
        "Agent: echo: remember this",
    ], lines
    assert lines[0].startswith("── connected to stdio:"), lines
    assert f"── recovered by replay: session {session} (the conversation is intact) ──" in lines[4:], lines
    assert second.info()["session"] == session
    assert lines.count("You: remember this") == 1  # the replay was reconciled, not appended
    second.nvim.command("AcpPrompt and this")
    lines = second.wait_for("Agent: echo: and this")
    assert lines.count("You: remember this") == 1
    assert lines.count("Agent: echo: remember this") == 1
    assert second.messages() == ""
    _no_trace_left(second, agent_pid=second.info()["pid"])


def test_permission_is_a_vim_ui_select_choice(agent: AgentProcess, neovim: Any) -> None:
    editor = neovim({"pick": "Allow"})
    _connect(editor, agent.url)
    editor.nvim.command("AcpPrompt /permission")
    editor.wait_for("Agent: permission: selected allow")
    asked = editor.lua("return _G.asked")
    assert asked == [
        {"prompt": "Reference agent wants to edit a file", "kind": "acp.permission", "labels": ["Allow", "Reject"]}
    ]
    assert editor.messages() == ""
    _no_trace_left(editor)


def test_sessions_come_from_the_store(agent: AgentProcess, neovim: Any, tmp_path: Path) -> None:
    editor = neovim({"acp_store": str(tmp_path / "sessions.db")})
    session = _connect(editor, agent.url)
    editor.nvim.command("AcpSessions")
    editor.wait_for(f"switched to session {session}")
    asked = editor.lua("return _G.asked")
    assert [entry["kind"] for entry in asked] == ["acp.sessions"]
    assert len(asked[0]["labels"]) == 1 and asked[0]["labels"][0].startswith(session)
    assert editor.messages() == ""
    _no_trace_left(editor)


def test_the_prompt_buffer_sends_each_line(agent: AgentProcess, neovim: Any) -> None:
    editor = neovim()
    _connect(editor, agent.url)
    editor.nvim.command("AcpPromptBuffer")
    editor.nvim.input("typed in the prompt buffer<CR>")
    editor.wait_for("Agent: echo: typed in the prompt buffer")
    assert editor.nvim.current.buffer.options["buftype"] == "prompt"
    assert editor.messages() == ""
    _no_trace_left(editor)


def test_a_failure_is_one_message_from_the_plugin(neovim: Any) -> None:
    editor = neovim()
    editor.nvim.input(":AcpPrompt too early<CR>")  # typed, as a user does: errors go to the message area
    editor.nvim.input(":AcpConnect ws://127.0.0.1:1/acp<CR>")
    editor.wait(lambda: editor.messages().count("\n") >= 1 or None, "the connect error", timeout=DEADLINE)
    messages = editor.messages().splitlines()
    assert messages[0] == "ACP: not connected (:AcpConnect URL)"
    assert len(messages) == 2 and messages[1].startswith("ACP: ") and "127.0.0.1:1" in messages[1], messages
    assert editor.stderr_of_host() == []
    _no_trace_left(editor)
