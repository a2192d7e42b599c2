"""The example chat client (``examples/chat.py`` + ``chat_ui.py``): the interactive UI in a real
terminal, and the UI's pure helpers.

* The interactive UI runs in a real terminal: a detached ``tmux`` session of fixed size on a
  private socket (``tmux -L``), driven with ``send-keys`` and read with ``capture-pane``, against a
  :class:`ReferenceServer` behind a :class:`FaultProxy` served by this test's event loop.
* The UI's pure helpers (answers to permission questions, status-line texts, compact update lines,
  the plain-text view) are tested in-process.

Every wait polls with a deadline; nothing sleeps for synchronization.
"""

from __future__ import annotations

import asyncio
import io
import re
import sys

import chat_ui
import pytest
from chat import Chat

from acp_client import ConnectionState, State
from acp_client.testing import ReferenceAgent, ReferenceServer
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
from tests.examples._chat_support import CHAT, ChatProcess, Tmux, _env, held, named, only_session

from ..peers.reference import FaultProxyFactory

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
    await proxy.refuse(1.0)
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
    await proxy.refuse(0.5)
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
    # What the agent lost stays on the screen, above a divider: the new session starts below it.
    await tmux.wait_for(
        r"--- the agent lost the conversation above \(\d turn\(s\)\); it starts afresh below ---", after=mark
    )
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
    view.event("recovered", path="resume", sessionId="s1", previousSessionId="s1", replayed=0, continuity="kept")
    view.set_state(ConnectionState(State.CONNECTED))  # ...and the prompt comes back once settled
    text = stream.getvalue()
    assert text.isascii()
    assert "old history" not in text
    assert text.endswith(
        "you> echo: hi\n  (end_turn)\nyou> \n! connection lost: the connection dropped\n"
        "-- ~ reconnecting now (attempt 1)\n"
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


@pytest.mark.parametrize(
    ("path", "continuity", "note", "banner"),
    [
        ("replay", "kept", None, "=== + replayed 0 messages (3 updates) - the conversation is intact ==="),
        (
            "replay",
            "lost",
            "continuity lost: ...",
            "=== ! replayed 0 messages (3 updates) - continuity lost: the agent does not have the whole conversation"
            " (yours is kept) ===",
        ),
        ("resume", "kept", None, "=== + resumed the session ==="),
        (
            "resume",
            "unverified",
            "continuity unverified: the agent process was restarted: ...",
            "=== ! resumed the session - continuity unverified: the agent was restarted and could not show it kept"
            " the conversation ===",
        ),
        (
            "resume",
            "unverified",
            "continuity unverified: the agent offers no session/status, ...",
            "=== ! resumed the session - continuity unverified: the agent could not show it kept the conversation ===",
        ),
    ],
)
def test_recovery_banners_claim_only_what_the_evidence_shows(
    monkeypatch: pytest.MonkeyPatch, path: str, continuity: str, note: str | None, banner: str
) -> None:
    monkeypatch.setenv(chat_ui.PLAIN_ENV, "1")
    stream = io.StringIO()
    view = chat_ui.make_view(json_mode=False, stream=stream)
    extra = {"continuityNote": note} if note is not None else {}
    view.event(
        "recovered", path=path, sessionId="s1", previousSessionId="s1", replayed=3, continuity=continuity, **extra
    )
    assert banner in stream.getvalue().splitlines(), stream.getvalue()
