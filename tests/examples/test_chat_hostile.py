"""The chat client against an agent that puts every terminal control sequence into every text it
controls (the reference agent's ``escapes`` and ``escape-ids`` faults: message and thought chunks,
tool call titles, plan entries, session titles and ids, mode names, permission titles and options,
error messages). In every human-readable mode (rich and plain in a real terminal, ``--script``)
the text is shown as data: the pane keeps its title, no clipboard is written, the screen is not
cleared, and the sequences are visible. ``--json`` escapes C1 and bidi controls too and reads back
as the agent's exact text."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from acp_client.display import UNSAFE_CHARACTERS
from acp_client.testing import ReferenceAgent, ReferenceServer
from acp_client.testing.reference_agent import ESCAPES
from tests.examples._chat_support import CHAT, Tmux, _env, named, parse_events, run_process

#: What the escapes look like once made visible (ESC as ␛; C1 and bidi controls as escapes).
VISIBLE = ("␛]52;c;cHduZWQ=", "␛]0;pwned-title", "␛[2J", "\\x9b2J", "\\u202etxt.exe")
UNSAFE = re.compile(UNSAFE_CHARACTERS)


@pytest_asyncio.fixture
async def hostile() -> AsyncIterator[ReferenceServer]:
    async with ReferenceServer(ReferenceAgent(faults=["escapes", "escape-ids"])) as server:
        yield server


async def _terminal_checks(tmux: Tmux) -> None:
    """Nothing the agent sent acted on the terminal; all of it is on the screen as text."""
    assert "pwned" not in await tmux.tmux("display-message", "-p", "-t", "chat", "#{pane_title}")
    assert (await tmux.tmux("list-buffers", check=False)).strip() == ""  # OSC 52 set no clipboard
    # CSI 2J and cursor moves did not wipe or redraw the screen: every row above the last one
    # written is filled, in the order written.
    rows = (await tmux.tmux("capture-pane", "-p", "-t", "chat")).split("\n")
    last = max(i for i, row in enumerate(rows) if row.startswith("you> /quit"))
    assert all(row.strip() for row in rows[:last]), rows
    screen = await tmux.screen()
    for shown in VISIBLE:
        assert shown in screen, (shown, screen)
    assert "Traceback" not in screen


async def _session_with_everything(tmux: Tmux, *, plain: bool) -> None:
    """A turn (thought, tool call, plan, title, mode: all hostile), a permission question with
    hostile options, a refused turn with a hostile error, /status and /sessions."""
    ended = r"\(end_turn\)"
    await tmux.type("hello")
    await tmux.wait_for(rf"echo: hello[\s\S]*{ended}")
    mark = await tmux.mark()
    await tmux.type("/permission")
    await tmux.wait_for(r"answer y/n or 1-2> ", after=mark)
    await tmux.type("1")
    await tmux.wait_for(rf"permission: selected[\s\S]*{ended}", after=mark)
    mark = await tmux.mark()
    await tmux.type("/fail")
    await tmux.wait_for(r"(✗|x) .*the turn failed[\s\S]*\(refused by the agent", after=mark)
    await tmux.type("/status")  # its id is not one the client sends (control characters): an error line
    await tmux.wait_for(r"(✗|x) status: invalid session id 'sess_", after=mark)
    await tmux.type("/sessions")
    await tmux.wait_for(r"sessions", after=mark)
    lines = await tmux.lines()
    question = [line for line in lines if line.startswith("? permission:")]
    assert len(question) == 1 and "␛]52" in question[0], lines  # one line: its newline is a space
    await tmux.type("/quit")
    assert await tmux.exit_status() == 0


async def test_rich_terminal_shows_the_escapes_as_text(hostile: ReferenceServer, tmux: Tmux) -> None:
    tmux.config.write_text(tmux.config.read_text() + "set -g set-clipboard on\nset -g allow-rename on\n")
    await tmux.start([sys.executable, str(CHAT), hostile.ws_url])
    await tmux.wait_for(r"● connected to ws://")
    await _session_with_everything(tmux, plain=False)
    await _terminal_checks(tmux)


async def test_plain_terminal_shows_the_escapes_as_text(hostile: ReferenceServer, tmux: Tmux) -> None:
    tmux.config.write_text(tmux.config.read_text() + "set -g set-clipboard on\nset -g allow-rename on\n")
    await tmux.start([sys.executable, str(CHAT), hostile.ws_url], env={"ACP_CHAT_PLAIN": "1"}, status_row=False)
    await tmux.wait_for(r"\* connected to ws://")
    await _session_with_everything(tmux, plain=True)
    await _terminal_checks(tmux)


async def test_script_and_json_modes(hostile: ReferenceServer, tmp_path: Path) -> None:
    script = tmp_path / "script.txt"
    script.write_text("hello\n/permission\n/fail\n/status\n/sessions\n", encoding="utf-8")
    argv = [sys.executable, str(CHAT), hostile.ws_url, "--script", str(script)]

    code, out, err = await run_process(*argv, env=_env())
    assert code == 0, err
    assert not UNSAFE.search(out), [line for line in out.splitlines() if UNSAFE.search(line)]
    for shown in VISIBLE:
        assert shown in out, (shown, out)
    assert "Traceback" not in err

    code, out, err = await run_process(*argv, "--json", env=_env())
    assert code == 0, err
    assert not UNSAFE.search(out), [line for line in out.splitlines() if UNSAFE.search(line)]
    events = parse_events(out)  # every line is JSON, and reads back as the agent's exact text
    text = "".join(event["text"] for event in named(events, "update") if event["kind"] == "agent_message_chunk")
    assert ESCAPES in text
    (session,) = named(events, "session")
    assert session["sessionId"].endswith(ESCAPES)
    assert any(ESCAPES in event["message"] for event in named(events, "error"))
    assert json.loads(json.dumps(events)) == events


def test_json_lines_escape_what_a_terminal_would_act_on_and_read_back_exactly() -> None:
    from chat import json_line

    text = "ok \x1b[2J \x9b2J \x7f \u202etxt.exe \u2028 \U000e0041 \ud800 é 漢 🙂\n"
    line = json_line({"event": "update", "text": text})
    assert not UNSAFE.search(line) and "\n" not in line, line
    assert "\\u009b" in line and "\\u202e" in line and "\\udb40\\udc41" in line and "\\ud800" in line
    assert "é 漢 🙂" in line  # other text stays as it is
    assert json.loads(line) == {"event": "update", "text": text}
