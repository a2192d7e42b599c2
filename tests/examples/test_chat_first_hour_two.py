"""The chat client's share of issue 20's first hour (round two):

* a URL of no known form is one line saying which forms work (no traceback); a refused connect
  is one error line, not two;
* ``/switch`` redraws the conversation of the session switched to;
* with several URLs, the status line and ``/status`` name the instance the current session lives
  on now, and a banner says when a session moved;
* the recovery banner of a background session names it and counts its own messages.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from acp_client import RetryPolicy
from acp_client.testing import MemoryConnector, ReferenceAgent, ReferenceServer, SessionStore
from tests._support import eventually
from tests.examples._chat_support import CHAT, _env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import chat_store  # noqa: E402
import chat_ui  # noqa: E402
from chat import EXIT_USAGE, Chat  # noqa: E402

RETRY = RetryPolicy(initial_delay=0.02, max_delay=0.05, jitter=False, suspend_after=None)


def _chat(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.txt"
    script.write_text("hello\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(CHAT), *argv, "--script", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )


def test_a_url_without_a_scheme_is_one_line_naming_the_forms(tmp_path: Path) -> None:
    run = _chat("127.0.0.1:8000", tmp_path=tmp_path)
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    assert run.returncode == EXIT_USAGE
    assert len(lines) == 1, lines
    assert "did you mean 'ws://127.0.0.1:8000/acp'" in lines[0]
    assert "http://HOST:PORT/PATH" in lines[0] and "stdio:COMMAND" in lines[0]
    assert "Traceback" not in run.stderr


def test_a_refused_connect_is_one_error_line(tmp_path: Path) -> None:
    run = _chat("ws://127.0.0.1:1/acp", "--json", "--max-elapsed", "0.5", tmp_path=tmp_path)
    events = [json.loads(line) for line in run.stdout.splitlines()]
    errors = [event for event in events if event["event"] == "error"]
    assert run.returncode == 2
    assert len(errors) == 1 and "could not connect" in errors[0]["message"], events
    plain = _chat("ws://127.0.0.1:1/acp", "--max-elapsed", "0.5", tmp_path=tmp_path)
    assert len([line for line in plain.stdout.splitlines() if line.startswith("✗")]) == 1, plain.stdout


async def test_switch_redraws_the_conversation() -> None:
    connector = MemoryConnector(ReferenceAgent())
    stream = io.StringIO()
    view = chat_ui.TerminalView(stream)
    chat = Chat(connector, output=view, retry=RETRY)
    view.chat = chat
    try:
        await chat.start()
        assert chat.handle is not None
        first = chat.handle.session_id
        await chat.prompt("the first conversation")
        await chat.new_session()
        await chat.prompt("the second conversation")
        before = len(stream.getvalue())
        assert chat_store.switch(chat, first)
        redrawn = stream.getvalue()[before:]
    finally:
        await chat.close()
        await connector.aclose()
    assert f"session {first}: 2 messages" in redrawn
    assert "you> the first conversation" in redrawn and "agent> echo: the first conversation" in redrawn
    assert "second conversation" not in redrawn


async def test_a_background_recovery_banner_names_its_session_and_counts_its_messages(tmp_path: Path) -> None:
    agent = ReferenceAgent(store=SessionStore(tmp_path / "agent"))
    connector = MemoryConnector(agent)
    stream = io.StringIO()
    view = chat_ui.TerminalView(stream)
    chat = Chat(connector, output=view, retry=RETRY)
    view.chat = chat
    try:
        await chat.start()
        assert chat.handle is not None
        background = chat.handle.session_id
        await chat.prompt("only one turn here")  # 2 messages
        current = (await chat.new_session()).session_id
        await chat.prompt("one")
        await chat.prompt("two")  # 4 messages
        agent.lose_memory()  # both sessions are now known, not in memory: replayed
        connector.drop("reset")
        await eventually(lambda: stream.getvalue().count("replayed") >= 2, what="two replay banners")
    finally:
        await chat.close()
        await connector.aclose()
    text = stream.getvalue()
    assert f"replayed 2 messages of session {background} (" in text, text
    banners = [line for line in text.splitlines() if "replayed" in line]
    assert any("replayed 4 messages (" in line and current not in line for line in banners), banners


async def test_with_several_urls_the_status_names_where_the_session_lives_now(tmp_path: Path) -> None:
    shared = SessionStore(tmp_path / "shared")
    a = ReferenceServer(ReferenceAgent(name="agent-a", store=shared))
    b = ReferenceServer(ReferenceAgent(name="agent-b", store=shared))
    await a.start()
    await b.start()
    stream = io.StringIO()
    view = chat_ui.TerminalView(stream)
    seen: list[tuple[str, dict[str, Any]]] = []
    view.observers.append(lambda name, fields: seen.append((name, fields)))
    url_a, url_b = a.ws_url, b.ws_url
    chat = Chat([url_a, url_b], output=view, retry=RETRY, failover_delay=0.3, on_state=view.set_state)
    view.chat = chat  # as the interactive mode wires them
    try:
        await chat.start()
        await chat.prompt("hello")
        assert chat_ui.where_now(chat) == url_a  # round robin: the first instance first
        await eventually(lambda: url_a in view.detail, what="the status line to name instance a")
        await a.aclose()  # the instance holding the session dies
        await eventually(lambda: any(name == "recovered" for name, _ in seen), timeout=20, what="the move")
        await eventually(lambda: url_b in view.detail, what="the status line to name instance b")
        assert url_a not in view.detail
        assert chat_ui.where_now(chat) == url_b
        await chat.status()
        status = next(fields for name, fields in seen if name == "status")
        assert status["endpoint"] == url_b
    finally:
        await chat.close()
        await b.aclose()
    assert chat.handle is not None
    text = stream.getvalue()  # plain text: the view writes ASCII ("->" for the arrow)
    assert f"session {chat.handle.session_id} moved: {url_a} -> {url_b}" in text, text
    assert f"session {chat.handle.session_id} on {url_b}: active" in text, text
