"""The chat client's share of issue 10's first hour:

* library warnings never print over the prompt line: they become lines of the UI;
* "connection lost" comes before "the drop cut off your turn";
* a prompt typed while disconnected says it is queued;
* attempt numbers restart at 1 for each outage;
* the status line never overflows the terminal width.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from acp_client import ConnectionState, RetryPolicy, State
from acp_client.testing import MemoryConnector, ReferenceAgent
from tests._support import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import chat_ui  # noqa: E402
from chat import Chat, Output  # noqa: E402

RETRY = RetryPolicy(initial_delay=0.02, max_delay=0.05, jitter=False, suspend_after=None)


class Events(Output):
    """A JSON output that keeps the events."""

    def __init__(self) -> None:
        super().__init__(json_mode=True, stream=io.StringIO())
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def event(self, name: str, **fields: Any) -> None:
        self.seen.append((name, fields))

    def names(self) -> list[str]:
        return [name for name, _ in self.seen]


async def test_connection_lost_comes_before_the_interrupted_turn() -> None:
    connector = MemoryConnector(ReferenceAgent())
    events = Events()
    chat = Chat(connector, output=events, retry=RETRY)
    await chat.start()
    turn = asyncio.ensure_future(chat.prompt("/slow"))  # streams until the drop cuts it off
    await eventually(lambda: "update" in events.names(), what="the turn to stream")
    connector.drop("reset by peer")
    assert await turn is None
    await eventually(lambda: events.names().count("connected") == 2, what="the reconnect")
    await chat.close()
    await connector.aclose()
    names = events.names()
    assert names.index("disconnected") < names.index("turn_interrupted") < names.index("recovered")
    assert names.count("disconnected") == 1 and names.count("turn_interrupted") == 1


async def test_attempt_numbers_restart_at_one_for_each_outage() -> None:
    connector = MemoryConnector(ReferenceAgent())
    events = Events()
    chat = Chat(connector, output=events, retry=RETRY)
    await chat.start()
    raw: list[int] = []  # the client's own numbers: the same (it numbers attempts within their outage)

    async def collect() -> None:
        async for state in chat.client.state_changes():
            if state.attempt is not None:
                raw.append(state.attempt)

    async def outage(refused: int) -> None:
        connected = events.names().count("connected")
        connector.refuse(refused)
        connector.drop()
        await eventually(lambda: events.names().count("connected") == connected + 1, what="the reconnect")

    collector = asyncio.ensure_future(collect())
    await outage(2)  # attempts 1 and 2 refused, 3 connects
    await outage(1)  # soon after (uptime < reset_after): attempt 1 again, with the backoff carried over
    collector.cancel()
    await chat.close()
    await connector.aclose()
    shown = [fields["attempt"] for name, fields in events.seen if name == "reconnect_attempt"]
    assert shown == [1, 2, 3, 1, 2], shown
    assert raw == [1, 2, 3, 1, 2], raw


async def test_a_prompt_typed_while_disconnected_says_it_is_queued() -> None:
    connector = MemoryConnector(ReferenceAgent())
    stream = io.StringIO()
    view = chat_ui.TerminalView(stream)
    chat = Chat(connector, output=view, retry=RETRY)
    read, write = os.pipe()
    interactive = chat_ui.InteractiveChat(chat, view, stdin_fd=read)
    undo = interactive._install()
    try:
        await chat.start()
        connector.refuse()  # down until accepted again
        connector.drop()
        await eventually(lambda: chat.client.state.state is State.RECONNECTING, what="reconnecting")
        interactive.start_turn("are you there?")
        assert "your prompt is queued" in stream.getvalue()
        connector.accept()
        await eventually(lambda: "echo: are you there?" in stream.getvalue(), what="the queued prompt's answer")
        await eventually(lambda: interactive.turn_task is None, what="the queued prompt's turn to end")
        before = stream.getvalue().count("queued")
        interactive.start_turn("and now?")  # connected: nothing to say
        await eventually(lambda: "echo: and now?" in stream.getvalue(), what="the answer")
        assert stream.getvalue().count("queued") == before
    finally:
        for step in reversed(undo):
            step()
        await chat.close()
        await connector.aclose()
        os.close(read)
        os.close(write)


async def test_library_warnings_become_ui_lines_not_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    connector = MemoryConnector(ReferenceAgent())
    stream = io.StringIO()
    view = chat_ui.TerminalView(stream)
    chat = Chat(connector, output=view, retry=RETRY)
    read, write = os.pipe()
    interactive = chat_ui.InteractiveChat(chat, view, stdin_fd=read)
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = []  # as in the chat process: nothing configured, Python would print to stderr
    undo = interactive._install()
    try:
        logging.getLogger("acp_client.client").warning("undecodable session/update: %s", "bad frame")
        worker = threading.Thread(target=lambda: logging.getLogger("acp_client.store").warning("disk full"))
        worker.start()
        worker.join()
        await eventually(lambda: "disk full" in stream.getvalue(), what="the warning from another thread")
    finally:
        for step in reversed(undo):
            step()
        root.handlers = saved
        await chat.close()
        await connector.aclose()
        os.close(read)
        os.close(write)
    text = stream.getvalue()
    assert "acp_client.client: undecodable session/update: bad frame" in text
    assert "acp_client.store: disk full" in text
    assert "bad frame" not in capsys.readouterr().err
    assert not any(isinstance(handler, chat_ui.UiLogHandler) for handler in root.handlers)


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [
        ("◌ reconnecting in 1.0s (attempt 3)", 100, "◌ reconnecting in 1.0s (attempt 3)"),
        ("◌ reconnecting in 1.0s (attempt 3)", 12, "◌ reconnect…"),
        ("● connected · 会话 abc", 14, "● connected ·…"),
        ("● connected · 会话 abc", 16, "● connected · …"),
        ("abc", 0, ""),
        ("abc", 1, "…"),
    ],
)
def test_fit_width(text: str, width: int, expected: str) -> None:
    fitted = chat_ui.fit_width(text, width)
    assert fitted == expected
    assert chat_ui.display_width(fitted) <= max(width, 0)


@pytest.mark.parametrize("columns", [3, 8, 20, 41, 80])
def test_the_status_line_never_overflows_the_terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setattr(chat_ui.shutil, "get_terminal_size", lambda *a: os.terminal_size((columns, 24)))
    stream = io.StringIO()
    view = chat_ui.TerminalView(stream)
    view.status_bar, view._rows = True, 24  # as pinned on a real terminal
    view.detail = "wss://a-very-long-host-name.example.com:8443/acp · ACP v1 · session sess_0123456789abcdef · 会话"
    for state in (
        ConnectionState(State.CONNECTED),
        ConnectionState(State.RECONNECTING, attempt=12, retry_in=4.5, cause="x" * 200),
        ConnectionState(State.FAILED, cause="gave up after a very long time " * 5),
    ):
        stream.seek(0)
        stream.truncate()
        view.set_state(state)
        written = stream.getvalue()
        shown = written.split("\x1b[7;")[1].split("m", 1)[1].split("\x1b[0m")[0]
        assert chat_ui.display_width(shown) <= columns - 1 or columns <= 2
