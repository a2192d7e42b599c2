"""The interactive terminal UI of ``examples/chat.py`` (``python examples/chat.py URL``).

What you see:

* the agent's text streamed as it arrives; tool calls, plans and notices as compact lines;
* a status line at the bottom of the terminal with the connection state (``connected``,
  ``reconnecting in 1.2s (attempt 3)``, ``recovering``), counting down between attempts;
* one banner per recovery, naming the path: ``resumed the session``, ``replayed 12 messages``,
  ``agent lost the session — started a new one``;
* permission requests as a question: answer ``y`` (the first *allow* option), ``n`` (the first
  *reject* option) or an option number.

Keys and commands:

==============  ===========================================================================
Enter           send the line as a prompt (or answer the pending permission question)
Ctrl-C          cancel the running turn (``session/cancel``); a second Ctrl-C while that
                cancellation is pending, or within 2 s of the first, exits with status 130
Ctrl-D          exit with status 0
``/status``     the connection state, and ``session/status`` of the current session
``/sessions``   the agent's sessions (``session/list``; the ones this client tracks otherwise);
                with ``--store``, the stored sessions of this URL, most recently used first
``/switch ID``  continue another session (its id or a unique prefix; see ``chat_store.py``)
``/new``        start a new session (without ``--store`` the old one is no longer recovered)
``/retry``      send again the prompt a drop cut off (the client never re-sends it by itself)
``/reconnect``  while reconnecting: try again now instead of waiting out the countdown
``/help``       this list
``/quit``       exit with status 0
==============  ===========================================================================

Any other line, including ``/something`` the UI does not know, is sent to the agent as a prompt
(the reference agent understands ``/permission``, ``/slow``, ``/read PATH`` ...).

Rendering: with ``rich`` installed (the ``examples`` extra) and a terminal on stdout, output is
styled and the status line is pinned to the last row with a scroll region. Without rich, or with
``ACP_CHAT_PLAIN=1`` in the environment, everything is plain text and each state change is
printed as a line. With ``--json`` the UI prints only the JSON events (the README's table) and answers
permission requests with the non-interactive policy (first *allow* option).

Stdin is read with ``loop.add_reader`` (or a daemon thread when stdin cannot be polled, e.g. a
regular file), so reading never blocks the event loop; the terminal stays in its normal line mode.
When stdin is not a terminal (a pipe, a file) the lines run one after the other, like a script.

Exit status: 0 after ``/quit`` or end of input, 130 after a double Ctrl-C, 2 when the client gave
up reconnecting (or could not connect at all).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import chat_store
from chat import (
    EXIT_GAVE_UP,
    EXIT_OK,
    Chat,
    Output,
    continuity_banner,
    lost_divider,
    plain_reason,
    recovery_banner,
    shown,
)

from acp_client import AcpError, CapabilityNotSupported, ConnectionState, State, UpdateEvent
from acp_client.display import printable
from acp_client.types import (
    CancelledPermissionOutcome,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
    TextContent,
)

__all__ = [
    "EXIT_INTERRUPTED",
    "PLAIN_ENV",
    "InteractiveChat",
    "JsonView",
    "TerminalView",
    "describe_state",
    "describe_update",
    "display_width",
    "fit_width",
    "UiLogHandler",
    "load_rich_console",
    "make_view",
    "permission_choice",
    "run_interactive",
]

#: Set (to anything but ``""`` / ``0``) to force the plain-text fallback even when rich is installed.
PLAIN_ENV = "ACP_CHAT_PLAIN"
#: Exit status after a double Ctrl-C (the shell convention for SIGINT).
EXIT_INTERRUPTED = 130
#: A second Ctrl-C within this many seconds of the first exits.
DOUBLE_INTERRUPT_WINDOW = 2.0
_TICK = 0.2

HELP = """commands: /status  /sessions  /switch ID  /new  /retry  /reconnect  /help  /quit
Ctrl-C cancels the running turn; Ctrl-C twice (or /quit, Ctrl-D) exits"""


# -- pure helpers (unit-tested) ---------------------------------------------------------------------


def permission_choice(request: RequestPermissionRequest, answer: str) -> Any:
    """The outcome an answer picks: ``y``/``yes`` → first allow option, ``n``/``no`` → first
    reject option (cancelled if there is none), ``N`` → option N (1-based). ``None``: not an answer."""
    text = answer.strip().lower()
    options = list(request.options)
    if text in ("y", "yes"):
        wanted = "allow"
    elif text in ("n", "no"):
        wanted = "reject"
    elif text.isdigit() and 1 <= int(text) <= len(options):
        return SelectedPermissionOutcome(option_id=options[int(text) - 1].option_id)
    else:
        return None
    for option in options:
        if option.kind.startswith(wanted):
            return SelectedPermissionOutcome(option_id=option.option_id)
    return CancelledPermissionOutcome() if wanted == "reject" else None


def describe_state(state: ConnectionState, *, elapsed: float = 0.0, detail: str = "") -> str:
    """The status-line text for a connection state, ``elapsed`` seconds after it began."""
    kind = state.state
    if kind is State.CONNECTED:
        return f"● connected{' · ' + detail if detail else ''}"
    if kind is State.CONNECTING:
        return "◌ connecting…"
    if kind in (State.RECONNECTING, State.SUSPENDED):
        remaining = max(0.0, (state.retry_in or 0.0) - elapsed)
        when = f"in {remaining:.1f}s" if remaining >= 0.05 else "now"
        prefix = "◌ reconnecting"
        if kind is State.SUSPENDED:
            prefix = "◌ suspended (agent unreachable too long), reconnecting"
        return f"{prefix} {when} (attempt {state.attempt})"
    if kind is State.RECOVERING:
        return "◌ recovering the session…"
    if kind is State.FAILED:
        return f"✗ gave up: {state.cause or 'the client failed'}"
    return "○ closed"


def display_width(text: str) -> int:
    """How many terminal columns ``text`` takes (wide and full-width characters take two,
    combining marks none)."""
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text
    )


def fit_width(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` terminal columns (ending in ``…`` when cut)."""
    if display_width(text) <= width:
        return text
    if width <= 0:
        return ""
    kept, used = [], 0
    for char in text:
        cost = display_width(char)
        if used + cost > width - 1:
            break
        kept.append(char)
        used += cost
    return "".join(kept) + "…"


class UiLogHandler(logging.Handler):
    """Shows log records (warnings and worse, from the library or anything else) as lines of the
    UI, instead of letting Python print them on stderr over the prompt line. Records from other
    threads (the session store's worker, say) are handed to the loop's thread first."""

    def __init__(self, view: Any, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.WARNING)
        self.view = view
        self.loop = loop
        self.loop_thread = threading.get_ident()  # made on the loop's thread

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"⚠ {record.name}: {record.getMessage()}"
        except Exception:  # a bad format string: never let a log record break the UI
            text = f"⚠ {record.name}: {record.msg!r}"
        text = printable(text, one_line=True)  # a record may carry agent text (its stderr, an id)
        try:
            if threading.get_ident() == self.loop_thread:
                self._show(text)
            else:
                self.loop.call_soon_threadsafe(self._show, text)
        except RuntimeError:  # the loop is closed: the UI is gone
            pass

    def _show(self, text: str) -> None:
        self.view.warn(text)
        self.view.settle()


def _text_of(content: Any) -> str:
    blocks = content if isinstance(content, list | tuple) else [content]
    return "".join(block.text for block in blocks if isinstance(block, TextContent))


#: Plain text stays ASCII (the fallback is for terminals we know little about).
_ASCII = str.maketrans(
    {
        "●": "*",
        "◌": "~",
        "○": "o",
        "✓": "+",
        "✗": "x",
        "⚠": "!",
        "⚙": "#",
        "☰": "=",
        "⏹": "#",
        "▸": ">",
        "→": "->",
        "—": "-",
        "…": "...",
        "·": "|",
    }
)

_PLAN_MARKS = {"completed": "✓", "in_progress": "▸", "pending": "○"}


def _plan_line(entries: Sequence[Any]) -> str:
    items = [f"{_PLAN_MARKS.get(getattr(e, 'status', ''), '·')} {getattr(e, 'content', '')}" for e in entries]
    return "☰ plan: " + "  ".join(items) if items else "☰ plan: (empty)"


def describe_update(update: Any, tool_titles: dict[str, str] | None = None) -> tuple[str, str] | None:
    """A compact one-line rendering of a non-text update: ``(style, text)``, or ``None`` to show
    nothing. ``tool_titles`` remembers tool-call titles by id, so updates that only change the
    status can still be named."""
    titles = tool_titles if tool_titles is not None else {}
    kind = update.kind
    if kind in ("tool_call", "tool_call_update"):
        call_id = update.tool_call_id
        if update.title:
            titles[call_id] = update.title
        title = titles.get(call_id, call_id)
        status = update.status
        if kind == "tool_call_update" and update.title is None and status not in ("completed", "failed"):
            return None  # progress without news: keep the screen quiet
        tool_kind = f" ({update.tool_kind})" if update.tool_kind else ""
        style = "red" if status == "failed" else "cyan"
        return style, f"⚙ {title}{tool_kind}{f' [{status}]' if status else ''}"
    if kind == "plan":
        return "magenta", _plan_line(update.entries)
    if kind == "plan_update":
        plan = update.plan
        entries = getattr(plan, "entries", None)
        if entries is not None:
            return "magenta", _plan_line(entries)
        content = getattr(plan, "content", None) or getattr(plan, "uri", None) or ""
        return "magenta", "☰ plan: " + (str(content).strip().splitlines() or [""])[0]
    if kind == "plan_removed":
        return "magenta", "☰ plan removed"
    if kind == "notice":
        detail = f": {update.description}" if update.description else ""
        return ("red" if update.severity == "error" else "yellow"), f"! {update.title}{detail}"
    if kind == "current_mode_update":
        return "dim", f"● mode: {update.current_mode_id}"
    if kind == "session_info_update" and update.title:
        return "dim", f"● title: {update.title}"
    return None


def load_rich_console(stream: TextIO) -> Any:
    """A ``rich`` console on ``stream``, or ``None`` when rich is missing or ``ACP_CHAT_PLAIN`` is set."""
    if os.environ.get(PLAIN_ENV, "") not in ("", "0"):
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=stream, highlight=False, emoji=False, markup=False)


def where_now(chat: Chat) -> str:
    """The instance the current session lives on now (several URLs), else the one endpoint."""
    handle = chat.handle
    if handle is not None and handle.endpoint is not None:
        return str(handle.endpoint)
    return chat.client.connector.target


# -- views --------------------------------------------------------------------------------------------


class TerminalView(Output):
    """Renders chat events for a person: rich when a console is given, plain text otherwise.

    It is an :class:`Output` (what :class:`Chat` writes events to), plus what the interactive
    loop needs: a prompt that output never tramples, questions, and a status line.

    Args:
        stream: Where to write.
        console: A rich console on ``stream`` (``None``: plain text).
        status_bar: Pin the status line to the last terminal row (rich on a terminal only);
            otherwise state changes are printed as lines.
        detail: Shown after ``connected`` in the status line (the endpoint, say).
    """

    def __init__(self, stream: TextIO = sys.stdout, *, console: Any = None, status_bar: bool = False) -> None:
        super().__init__(json_mode=False, stream=stream)
        self.console = console
        self.status_bar = bool(status_bar and console is not None and _isatty(stream))
        self.detail = ""
        self.prompt_text = "you> "
        self.chat: Chat | None = None
        self._prompt_visible = False
        self._mid_line = False
        self._stream_kind: str | None = None
        self._streamed_ids: set[str] = set()
        self._tool_titles: dict[str, str] = {}
        self._state = ConnectionState(State.CONNECTING)
        self._state_since = time.monotonic()
        self._connected_once = False
        #: Where each session lives (with several URLs), to say when one moves.
        self._endpoints: dict[str, str] = {}
        self._rows = 0
        self._status_text = ""
        self._prompt_shown: str | None = None
        self._prompt_owed: str | None = None
        #: Called with ``(name, fields)`` after each event is rendered.
        self.observers: list[Callable[[str, dict[str, Any]], None]] = []

    @property
    def styled(self) -> bool:
        return self.console is not None

    # -- low-level writing --------------------------------------------------------------------------

    def _write(self, text: str, style: str | None = None) -> None:
        text = printable(text)  # agent text never acts on the terminal (already done: a no-op)
        if self.console is not None and text:
            from rich.text import Text

            self.console.print(Text(text, style=style or ""), end="", soft_wrap=True)
        else:
            self.stream.write(text.translate(_ASCII))
        self.stream.flush()

    @property
    def _redraws(self) -> bool:
        """Whether the prompt can be erased and redrawn under async output (rich on a terminal);
        plain text only breaks the line, and :meth:`settle` shows the prompt again."""
        return self.styled and _isatty(self.stream)

    def _begin_line(self) -> str | None:
        redraw = self._prompt_shown if self._prompt_visible else None
        self._clear_prompt()
        if redraw is not None and not self._redraws:
            self._prompt_owed = redraw
            redraw = None
        if self._mid_line:
            self._write("\n")
            self._mid_line = False
            self._stream_kind = None
        return redraw

    def settle(self) -> None:
        """Show again the prompt that plain-text output broke off (after a banner, a hint...)."""
        owed, self._prompt_owed = self._prompt_owed, None
        if owed is not None:
            self.show_prompt(owed)

    def _clear_prompt(self) -> None:
        if not self._prompt_visible:
            return
        self._prompt_visible = False
        if self._redraws:
            self.stream.write("\r\x1b[2K")  # erase the prompt line, then write over it
        else:
            self.stream.write("\n")
        self.stream.flush()

    def line(self, text: str, style: str | None = None, *, one_line: bool = True) -> None:
        """Print a whole line above the prompt (the prompt is redrawn after it); ``one_line``:
        newlines in it become spaces (a message's own text keeps them: ``False``)."""
        redraw = self._begin_line()
        self._write(printable(text, one_line=one_line), style)
        self._write("\n")
        if redraw is not None:
            self.show_prompt(redraw)

    def banner(self, text: str, style: str) -> None:
        """A one-line banner (a full-width rule with rich)."""
        text = printable(text, one_line=True)
        if self.console is None:
            self.line(f"=== {text} ===")
            return
        redraw = self._begin_line()
        from rich.text import Text

        self.console.rule(Text(text, style=f"bold {style}"), style=style)
        self.stream.flush()
        if redraw is not None:
            self.show_prompt(redraw)

    def stream_text(self, text: str, kind: str = "agent") -> None:
        """Streamed agent text (``kind`` ``thought`` is dimmed, on its own line)."""
        text = printable(text)
        if not text:
            return
        self._clear_prompt()
        if self._stream_kind is not None and self._stream_kind != kind and self._mid_line:
            self._write("\n")
            self._mid_line = False
        if self._stream_kind != kind and kind == "thought":
            self._write("(thinking) ", "dim italic")
        self._stream_kind = kind
        self._write(text, "dim italic" if kind == "thought" else None)
        self._mid_line = not text.endswith("\n")

    def show_prompt(self, text: str | None = None) -> None:
        """Show the input prompt (``text`` replaces the default one for this time)."""
        if self._prompt_visible:
            return
        if self._mid_line:
            self._write("\n")
            self._mid_line = False
            self._stream_kind = None
        self._prompt_owed = None
        self._prompt_shown = text or self.prompt_text
        self._write(self._prompt_shown, "bold cyan")
        self._prompt_visible = True

    def input_received(self) -> None:
        """The user pressed Enter: the cursor is on a fresh line."""
        self._prompt_visible = False
        self._prompt_owed = None
        self._mid_line = False
        self._stream_kind = None

    def info(self, text: str) -> None:
        self.line(text, "dim")

    def warn(self, text: str) -> None:
        self.line(text, "yellow")

    def error(self, text: str) -> None:
        self.line(text, "bold red")

    # -- the status line ----------------------------------------------------------------------------

    def start(self) -> None:
        """Set up the terminal (the status line's scroll region)."""
        if self.status_bar:
            self._setup_scroll_region()

    def close(self) -> None:
        """Give the terminal back as it was."""
        self._clear_prompt()
        if self._mid_line:
            self._write("\n")
            self._mid_line = False
        if self.status_bar and self._rows:
            rows = self._rows
            # save cursor, full-screen scroll region, clear the status row, restore cursor
            self.stream.write(f"\x1b7\x1b[r\x1b[{rows};1H\x1b[2K\x1b8")
            self.stream.flush()
            self._rows = 0

    def resized(self) -> None:
        """The terminal changed size (SIGWINCH): the old status row is somewhere below the cursor
        now (the terminal reflowed it) and the scroll region is the old one. Erase everything
        after the cursor (the prompt and what the user typed stay), then reserve the new last row."""
        if not self.status_bar:
            return
        if self._rows:
            self.stream.write("\x1b7\x1b[r\x1b8\x1b[J")  # full-screen region (it homes the cursor: saved)
        self._setup_scroll_region()

    def _setup_scroll_region(self) -> None:
        size = shutil.get_terminal_size()
        if size.lines < 4:
            self._rows = 0
            self.stream.flush()
            return
        self._rows = size.lines
        # Make room so the cursor is not on the last row (index down, then up: the column stays,
        # where a newline would move it to the start of a line the user may be typing on), then
        # reserve the last row.
        self.stream.write(f"\x1bD\x1b[1A\x1b7\x1b[1;{self._rows - 1}r\x1b8")
        self.stream.flush()
        self.refresh_status(force=True)

    def set_state(self, state: ConnectionState) -> None:
        """A new connection state: update the status line (or print it as a line)."""
        previous, self._state = self._state, state
        self._state_since = time.monotonic()
        if state.state is State.CONNECTED and self.chat is not None:
            self.detail = self._connected_detail(self.chat)
        if self.status_bar and self._rows:
            self.refresh_status(force=True)
        elif state.state not in (State.CONNECTING, State.CLOSED, State.FAILED):  # FAILED: an error event says it
            if state.state is State.CONNECTED and previous.state is State.CONNECTING:
                return  # the first connection: the "connected" event says it already
            text = describe_state(state, detail=self.detail)
            self.line(f"-- {text}", _state_style(state))
            if state.state is State.CONNECTED:
                self.settle()

    def refresh_status(self, *, force: bool = False) -> None:
        """Redraw the status line (between attempts it counts down)."""
        if not (self.status_bar and self._rows):
            return
        elapsed = time.monotonic() - self._state_since
        text = printable(describe_state(self._state, elapsed=elapsed, detail=self.detail), one_line=True)
        if self.counting_down:
            text += " · /reconnect to try now"
        if text == self._status_text and not force:
            return
        self._status_text = text
        width = max(1, shutil.get_terminal_size().columns - 1)  # never wider than the terminal
        shown = fit_width(text, width)
        shown += " " * (width - display_width(shown))
        color = {"green": "32", "yellow": "33", "red": "31", "dim": "2"}.get(_state_style(self._state), "0")
        self.stream.write(f"\x1b7\x1b[{self._rows};1H\x1b[2K\x1b[7;{color}m{shown}\x1b[0m\x1b8")
        self.stream.flush()

    @property
    def counting_down(self) -> bool:
        return self._state.state in (State.RECONNECTING, State.SUSPENDED)

    @staticmethod
    def _connected_detail(chat: Chat) -> str:
        parts = [where_now(chat), f"ACP v{chat.client.protocol_version}"]
        if chat.handle is not None:
            parts.append(f"session {chat.handle.session_id}")
        return " · ".join(parts)

    # -- events from Chat -----------------------------------------------------------------------------

    def event(self, name: str, **f: Any) -> None:
        self._render_event(name, shown(f))
        for observer in self.observers:
            observer(name, f)

    def _render_event(self, name: str, f: dict[str, Any]) -> None:
        if name == "connected":
            if not self._connected_once:
                self._connected_once = True
                self.line(f"● connected to {self._target()} ({f['transport']}, ACP v{f['protocolVersion']})", "green")
        elif name == "session":
            how = " (restored from the store)" if f.get("restored") else " (switched)" if f.get("switched") else ""
            self.line(f"● session {f['sessionId']}{how}", "dim")
            if f.get("endpoint") is not None:
                self._endpoints[f["sessionId"]] = f["endpoint"]
            if self.chat is not None and self._state.state is State.CONNECTED:
                self.detail = self._connected_detail(self.chat)
                self.refresh_status(force=True)
        elif name == "turn_end":
            reason = f["stopReason"]
            if f.get("status") == "failed":
                self.line("  (refused by the agent: not part of the conversation)", "dim")
            elif reason == "cancelled":
                self.line("  ⏹ turn cancelled (stop reason: cancelled)", "yellow")
            else:
                self.line(f"  ({reason})", "dim")
        elif name == "disconnected":
            self.line(f"⚠ connection lost: {plain_reason(f['reason'])}", "yellow")
        elif name == "history":
            self._history(f)
        elif name == "recovered":
            self._recovered(f)
        elif name == "turn_interrupted":
            self.line(
                f"⚠ the drop cut off your turn ({f['prompt']!r}); it was not re-sent — /retry sends it again",
                "yellow",
            )
        elif name == "status":
            extra = [f"raw={f['raw']!r}"] if f.get("raw") is not None else []
            extra += [f"state={f['state']}"] if f.get("state") else []
            detail = f" ({', '.join(extra)})" if extra else ""
            where = f" on {f['endpoint']}" if f.get("endpoint") else ""
            self.line(f"● session {f['sessionId']}{where}: {f['status']}{detail}", "cyan")
        elif name == "sessions":
            self.info("stored sessions (most recently used first):")
            for row in chat_store.describe_listing(f["sessions"]):
                self.line(row, "bold" if row.startswith(" *") else None)
        elif name == "error":
            self.error(f"✗ {f['message']}")
        elif name == "notice":
            self.line(f"● {f['message']}", "yellow")
        # "update" is rendered from the full UpdateEvent (on_update); "reconnect_attempt" by the status line

    def _target(self) -> str:
        return where_now(self.chat) if self.chat is not None else "the agent"

    def _history(self, f: dict[str, Any]) -> None:
        """A restored conversation, once, as it was: every segment, a lost one above its divider."""
        count = sum(len(segment["messages"]) for segment in f["segments"])
        self.banner(f"the conversation so far ({count} messages, restored from the store)", "cyan")
        if f.get("dropped"):
            self.info(f"({f['dropped']} earlier messages were dropped from the store)")
        for segment in f["segments"]:
            for message in segment["messages"]:
                self._history_line(message)
            if segment["lost"]:
                self.line(lost_divider(segment["turns"]), "yellow")
                self.divided.add(f["sessionId"])

    def _history_line(self, message: dict[str, Any]) -> None:
        role = message["role"]
        label = {"user": "you", "agent": "agent", "thought": "(thinking)"}.get(role, role)
        if message.get("inserted"):
            label = "agent (put in its replay)"  # user-role text the agent added: never shown as "you"
        marks = f" [{message['status']}]" if message.get("status") not in (None, "complete") else ""
        marks += " [incomplete]" if message.get("incomplete") else ""
        style = "bold" if role == "user" and not message.get("inserted") else "dim" if role == "thought" else None
        self.line(f"{label}> {message['text']}{marks}", style, one_line=False)

    def _recovered(self, f: dict[str, Any]) -> None:
        path = f["path"]
        session_id = f.get("sessionId") or f.get("previousSessionId")
        current = self.chat.handle.session_id if self.chat is not None and self.chat.handle is not None else None
        # A background session's banner names it, and counts its own messages (not the current one's).
        whose = f" of session {session_id}" if current is not None and session_id != current else ""
        said = continuity_banner(f)
        kept = f.get("continuity") == "kept"
        if path == "replay":
            handle = self._tracked(session_id)
            messages = len(handle.transcript) if handle is not None else 0
            text = f"replayed {messages} messages{whose} ({f.get('replayed', 0)} updates) — {said}"
            self.banner(("✓ " if kept else "⚠ ") + text, "green" if kept else "yellow")
        elif path == "resume":
            text = recovery_banner(path) + (f" {session_id}" if whose else "")
            if not kept:  # a resume the evidence does not prove: say so, never "intact"
                text += f" — {said}"
            self.banner(("✓ " if kept else "⚠ ") + text, "green" if kept else "yellow")
        elif path == "new_session":
            lost = f" {f['previousSessionId']}" if whose else ""
            self.banner(
                f"⚠ {recovery_banner(path).replace('the session', 'the session' + lost)} ({session_id})", "yellow"
            )
            if not whose and f.get("lostTurns") and session_id is not None and session_id not in self.divided:
                # The conversation on screen above is what the agent lost: say where it ends.
                self.line(lost_divider(f["lostTurns"]), "yellow")
                self.divided.add(session_id)
        else:
            self.banner(f"✗ {recovery_banner(path)} ({f['previousSessionId']})", "red")
        self._moved(f.get("previousSessionId"), session_id, f.get("endpoint"))
        if self.chat is not None and self._state.state is State.CONNECTED:
            self.detail = self._connected_detail(self.chat)  # the session may live elsewhere now
            self.refresh_status(force=True)

    def _tracked(self, session_id: str | None) -> Any:
        if self.chat is None or session_id is None:
            return None
        try:
            return self.chat.client.session(session_id)
        except AcpError:
            return None

    def _moved(self, before: str | None, session_id: str | None, endpoint: str | None) -> None:
        """With several URLs: a banner when a session now lives on another instance."""
        if session_id is None or endpoint is None:
            return
        previous = self._endpoints.pop(before, None) if before is not None else None
        previous = self._endpoints.get(session_id, previous)
        self._endpoints[session_id] = endpoint
        if previous is not None and previous != endpoint:
            self.banner(f"↪ session {session_id} moved: {previous} → {endpoint}", "cyan")

    def show_conversation(self, handle: Any) -> None:
        """Redraw a session's conversation (``/switch``): what the transcript holds, in order."""
        messages = list(handle.transcript.messages)
        self.banner(f"session {handle.session_id}: {len(messages)} messages", "cyan")
        for message in messages:
            label = {"user": "you", "agent": "agent", "thought": "(thinking)"}.get(message.role, message.role)
            self.line(f"{label}> {message.text}", "bold" if message.role == "user" else None, one_line=False)

    def on_update(self, event: UpdateEvent) -> None:
        """Render one ``session/update`` (replayed history is not printed again)."""
        if event.replay:
            return
        update = event.update
        kind = update.kind
        content = getattr(update, "content", None)
        message_id = getattr(update, "message_id", None)
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            if message_id:
                self._streamed_ids.add(message_id)
            self.stream_text(_text_of(content), "thought" if kind == "agent_thought_chunk" else "agent")
            return
        if kind in ("agent_message", "agent_thought"):
            if message_id in self._streamed_ids:
                return  # already streamed chunk by chunk
            if message_id:
                self._streamed_ids.add(message_id)
            self.stream_text(_text_of(content), "thought" if kind == "agent_thought" else "agent")
            return
        rendered = describe_update(update, self._tool_titles)
        if rendered is not None:
            style, text = rendered
            self.line(text, style)

    # -- questions ------------------------------------------------------------------------------------

    def show_question(self, request: RequestPermissionRequest) -> None:
        """Show a permission request and its numbered options."""
        # Every piece is the agent's text: line() shows each as one printable line.
        title = request.title or (request.tool_call.title if request.tool_call else None) or "the agent asks"
        tool_kind = request.tool_call.tool_kind if request.tool_call is not None else None
        self.line(f"? permission: {title}{f' ({tool_kind})' if tool_kind else ''}", "bold magenta")
        if request.description:
            self.line(f"  {request.description}", "magenta")
        for index, option in enumerate(request.options, start=1):
            self.line(f"  {index}) {option.name}  [{option.kind}]", "magenta")
        self.show_prompt(f"answer y/n or 1-{len(request.options)}> ")


class JsonView(Output):
    """The ``--json`` view of the interactive mode: JSON events only, no prompt or status line."""

    counting_down = False

    def __init__(self, stream: TextIO = sys.stdout) -> None:
        super().__init__(json_mode=True, stream=stream)
        self.chat: Chat | None = None
        self.observers: list[Callable[[str, dict[str, Any]], None]] = []

    def event(self, name: str, **fields: Any) -> None:
        super().event(name, **fields)
        for observer in self.observers:
            observer(name, fields)

    # The UI chrome does nothing in JSON mode.
    def line(self, text: str, style: str | None = None) -> None: ...
    def info(self, text: str) -> None: ...
    def warn(self, text: str) -> None: ...
    def error(self, text: str) -> None: ...
    def show_prompt(self, text: str | None = None) -> None: ...
    def settle(self) -> None: ...
    def input_received(self) -> None: ...
    def start(self) -> None: ...
    def close(self) -> None: ...
    def resized(self) -> None: ...
    def set_state(self, state: ConnectionState) -> None: ...
    def refresh_status(self, *, force: bool = False) -> None: ...
    def on_update(self, event: UpdateEvent) -> None: ...
    def show_question(self, request: RequestPermissionRequest) -> None: ...


def make_view(*, json_mode: bool, stream: TextIO = sys.stdout, interactive: bool = True) -> TerminalView | JsonView:
    """The view for a mode: JSON, rich (status line on a terminal when ``interactive``), or plain."""
    if json_mode:
        return JsonView(stream)
    console = load_rich_console(stream)
    return TerminalView(stream, console=console, status_bar=interactive)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _fd_isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _state_style(state: ConnectionState) -> str:
    if state.state is State.CONNECTED:
        return "green"
    if state.state is State.FAILED:
        return "red"
    if state.state is State.CLOSED:
        return "dim"
    return "yellow"


# -- reading stdin without blocking the loop --------------------------------------------------------


class LineReader:
    """Feeds stdin lines into a queue (``None`` at end of input) without blocking the loop."""

    def __init__(self, queue: asyncio.Queue[str | None], fd: int) -> None:
        self._queue = queue
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._polling = False
        self._done = False

    def start(self) -> None:
        try:
            self._loop.add_reader(self._fd, self._readable)
            self._polling = True
        except (OSError, NotImplementedError, ValueError):  # e.g. a regular file cannot be polled
            threading.Thread(target=self._thread, name="chat-stdin", daemon=True).start()

    def close(self) -> None:
        self._done = True
        if self._polling:
            self._polling = False
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._fd)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        if self._done:
            return
        if not data:
            rest = self._buffer + self._decoder.decode(b"", final=True)
            self._buffer = ""
            if rest:
                self._queue.put_nowait(rest)
            self._queue.put_nowait(None)
            self.close()
            return
        self._buffer += self._decoder.decode(data)
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            self._queue.put_nowait(line.rstrip("\r"))

    def _thread(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except OSError:
                data = b""
            try:
                self._loop.call_soon_threadsafe(self._feed, data)
            except RuntimeError:  # the loop is closed: we are exiting
                return
            if not data:
                return


# -- the interactive loop ---------------------------------------------------------------------------


def _remover(loop: asyncio.AbstractEventLoop, signum: int) -> Callable[[], None]:
    def remove() -> None:
        loop.remove_signal_handler(signum)

    return remove


class _Question:
    __slots__ = ("future", "request")

    def __init__(self, request: RequestPermissionRequest, future: asyncio.Future[Any]) -> None:
        self.request = request
        self.future = future


class InteractiveChat:
    """Runs a :class:`Chat` interactively: input lines, turns, commands, Ctrl-C, permissions."""

    def __init__(self, chat: Chat, view: TerminalView | JsonView, *, stdin_fd: int | None = None) -> None:
        self.chat = chat
        self.view = view
        self.stdin_fd = sys.stdin.fileno() if stdin_fd is None else stdin_fd
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.turn_task: asyncio.Task[None] | None = None
        self.command_task: asyncio.Task[None] | None = None
        self.interrupted_prompt: str | None = None
        self._questions: list[_Question] = []
        self._exit: asyncio.Future[int] | None = None
        self._last_interrupt: float | None = None
        self._cancel_requested = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._json = isinstance(view, JsonView)
        #: Input that is not typed by a person (``--json``, a pipe, a file) runs line after line,
        #: like a script, instead of being refused while a turn runs.
        self.sequential = self._json or not _fd_isatty(self.stdin_fd)

    # -- wiring ---------------------------------------------------------------------------------------

    def _install(self) -> list[Callable[[], None]]:
        chat, view = self.chat, self.view
        view.chat = chat
        chat.output = view
        undo: list[Callable[[], None]] = []
        chat.state_listeners.append(self._on_state)
        undo.append(lambda: chat.state_listeners.remove(self._on_state))
        view.observers.append(self._observe)
        loop = asyncio.get_running_loop()
        if not self._json:
            chat.permission_handler = self.ask_permission
            undo.append(chat.client.add_update_listener(view.on_update))
            log_lines, root = UiLogHandler(view, loop), logging.getLogger()
            root.addHandler(log_lines)  # library warnings become UI lines, never text over the prompt
            undo.append(lambda: root.removeHandler(log_lines))
        for signum, handler in ((signal.SIGINT, self.interrupt), (getattr(signal, "SIGWINCH", None), view.resized)):
            if signum is None:
                continue
            try:
                loop.add_signal_handler(signum, handler)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            undo.append(_remover(loop, signum))
        return undo

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def finish(self, code: int) -> None:
        """Leave the interactive loop with exit status ``code``."""
        if self._exit is not None and not self._exit.done():
            self._exit.set_result(code)

    # -- running --------------------------------------------------------------------------------------

    async def run(self) -> int:
        """Connect, then read and act on input until the user exits; returns the exit status."""
        loop = asyncio.get_running_loop()
        self._exit = loop.create_future()
        undo = self._install()
        reader = LineReader(self.lines, self.stdin_fd)
        self.view.start()
        try:
            self.view.info(f"connecting to {self.chat.client.connector.target} … (/help for commands)")
            starting = self._spawn(self.chat.start())
            await asyncio.wait({starting, self._exit}, return_when=asyncio.FIRST_COMPLETED)
            if starting.done():
                try:
                    starting.result()
                except AcpError as exc:
                    self.view.error(f"✗ could not connect: {exc}")
                    return EXIT_GAVE_UP
            if self._exit.done():
                return self._exit.result()
            reader.start()
            self._spawn(self._read_loop())
            self._spawn(self._ticker())
            self.view.show_prompt()
            return await self._exit
        finally:
            reader.close()
            await self._shutdown()
            for step in reversed(undo):
                with contextlib.suppress(Exception):
                    step()
            self.view.close()

    async def _shutdown(self) -> None:
        turn = self.turn_task
        handle = self.chat.handle
        connected = self.chat.client.state.state is State.CONNECTED
        if turn is not None and not turn.done() and handle is not None and connected:
            with contextlib.suppress(AcpError, asyncio.TimeoutError):
                await asyncio.wait_for(handle.cancel(), timeout=1.0)  # tell the agent before leaving
        for question in self._questions:
            if not question.future.done():
                question.future.set_result(CancelledPermissionOutcome())
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.chat.close()

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(_TICK)
            if self.view.counting_down:
                self.view.refresh_status()

    async def _read_loop(self) -> None:
        while True:
            line = await self.lines.get()
            busy = {task for task in (self.turn_task, self.command_task) if task is not None and not task.done()}
            if self.sequential and busy:
                await asyncio.wait(busy)
            if line is None:
                self.view.input_received()
                self.view.info("(end of input)")
                self.finish(EXIT_OK)
                return
            self.view.input_received()
            await self.handle_line(line)

    # -- input ------------------------------------------------------------------------------------------

    async def handle_line(self, line: str) -> None:
        """Act on one input line."""
        text = line.strip()
        if self._questions:
            self._answer(text)
            return
        if not text:
            self._prompt_if_idle()
            return
        command = text.split(maxsplit=1)[0]
        if command == "/quit":
            self.finish(EXIT_OK)
        elif command == "/help":
            for help_line in HELP.splitlines():
                self.view.info(help_line)
            self._prompt_if_idle()
        elif command == "/status":
            self.command_task = self._spawn(self._status())
        elif command == "/sessions":
            self.command_task = self._spawn(self._sessions())
        elif command == "/switch":
            if self._turn_running():
                self.view.warn("a turn is running — wait for it, or press Ctrl-C to cancel it")
            else:
                chat_store.switch(self.chat, text[len("/switch") :])
                self._prompt_if_idle()
        elif command == "/new":
            if self._turn_running():
                self.view.warn("a turn is running — wait for it, or press Ctrl-C to cancel it")
            else:
                self.command_task = self._spawn(self._new_session())
        elif command == "/reconnect":
            self.reconnect_now()
            self._prompt_if_idle()
        elif command == "/retry":
            if self.interrupted_prompt is None:
                self.view.warn("nothing to retry")
                self._prompt_if_idle()
            else:
                self.start_turn(self.interrupted_prompt)
        else:
            self.start_turn(text)

    def reconnect_now(self) -> None:
        """``/reconnect``: while the client waits between attempts, try again now."""
        state = self.chat.client.state.state
        if state in (State.RECONNECTING, State.SUSPENDED):
            self.chat.client.notify_network_available()
            self.view.info("reconnecting now…")
        elif state is State.CONNECTED:
            self.view.info("already connected")
        else:
            self.view.info(f"nothing to do: {describe_state(self.chat.client.state)}")

    def start_turn(self, text: str) -> None:
        """Send ``text`` as a prompt (unless a turn is already running)."""
        if self._turn_running():
            self.view.warn("a turn is running — wait for it, or press Ctrl-C to cancel it")
            return
        self._cancel_requested = False
        state = self.chat.client.state.state
        if state in (State.CONNECTING, State.RECONNECTING, State.RECOVERING):
            self.view.info("(not connected: your prompt is queued and goes out once the connection is back)")
        self.turn_task = self._spawn(self._turn(text))

    def _turn_running(self) -> bool:
        return self.turn_task is not None and not self.turn_task.done()

    async def _turn(self, text: str) -> None:
        try:
            result = await self.chat.prompt(text)
            if result is not None:
                self.interrupted_prompt = None
        finally:
            self.turn_task = None
            self._prompt_if_idle()

    def _observe(self, name: str, fields: dict[str, Any]) -> None:
        if name == "turn_interrupted":
            self.interrupted_prompt = fields["prompt"]

    def _prompt_if_idle(self) -> None:
        if not self._turn_running() and not self._questions:
            self.view.show_prompt()

    async def _status(self) -> None:
        state = self.chat.client.state
        self.view.info(f"connection: {describe_state(state)} — {where_now(self.chat)}")
        if self.chat.handle is not None:
            await self.chat.status()
        self._prompt_if_idle()

    async def _sessions(self) -> None:
        if self.chat.store is not None:
            self.chat.output.event("sessions", sessions=chat_store.listing(self.chat))
            self._prompt_if_idle()
            return
        current = self.chat.handle.session_id if self.chat.handle is not None else None
        try:
            page = await self.chat.client.list_sessions()
            sessions = [(s.session_id, s.title or "", s.updated_at) for s in page.sessions]
            source = "the agent's sessions"
        except CapabilityNotSupported:
            sessions = [(h.session_id, "", None) for h in self.chat.client.sessions]
            source = "sessions this client tracks (the agent has no session/list)"
        except AcpError as exc:
            self.view.error(f"✗ sessions: {exc}")
            self._prompt_if_idle()
            return
        self.view.info(f"{source}:")
        for session_id, title, updated in sessions:
            mark = "*" if session_id == current else " "
            when = f"  {updated:%H:%M:%S}" if updated is not None else ""
            self.view.line(f" {mark} {session_id}{when}  {title}", "bold" if mark == "*" else None)
        if not sessions:
            self.view.info("  (none)")
        self._prompt_if_idle()

    async def _new_session(self) -> None:
        old = self.chat.handle
        try:
            await self.chat.new_session()
        except AcpError as exc:
            self.view.error(f"✗ new session: {exc}")
        else:
            if old is not None and self.chat.store is None:  # a stored one stays: /switch
                self.chat.client.forget_session(old.session_id)
            self.interrupted_prompt = None
        self._prompt_if_idle()

    # -- Ctrl-C -------------------------------------------------------------------------------------------

    def interrupt(self) -> None:
        """Ctrl-C: cancel the running turn; a second one (soon, or while cancelling) exits."""
        now = time.monotonic()
        turn_running = self._turn_running()
        if (self._last_interrupt is not None and now - self._last_interrupt < DOUBLE_INTERRUPT_WINDOW) or (
            turn_running and self._cancel_requested
        ):
            self.view.warn("^C again — exiting")
            self.finish(EXIT_INTERRUPTED)
            return
        self._last_interrupt = now
        handle = self.chat.handle
        if turn_running and handle is not None:
            self._cancel_requested = True
            self.view.warn("^C — cancelling the turn (Ctrl-C again to quit)")
            self._spawn(self._cancel(handle))
        else:
            self.view.warn("^C — press Ctrl-C again, or type /quit, to exit")
            self.view.settle()

    async def _cancel(self, handle: Any) -> None:
        try:
            await handle.cancel()
        except AcpError as exc:
            self.view.error(f"✗ cancel: {exc}")

    # -- permissions ------------------------------------------------------------------------------------

    async def ask_permission(self, request: RequestPermissionRequest) -> Any:
        """The permission handler: ask the user, wait for the answer."""
        question = _Question(request, asyncio.get_running_loop().create_future())
        self._questions.append(question)
        if len(self._questions) == 1:
            self.view.show_question(request)
        try:
            return await question.future
        finally:
            first = bool(self._questions) and self._questions[0] is question
            self._questions.remove(question)
            if not question.future.done():  # withdrawn: the turn was cancelled or the link dropped
                question.future.cancel()
                self.view.warn("(permission request withdrawn)")
            if first and self._questions:
                self.view.show_question(self._questions[0].request)

    def _answer(self, text: str) -> None:
        question = self._questions[0]
        outcome = permission_choice(question.request, text)
        if outcome is None:
            count = len(question.request.options)
            self.view.warn(f"answer y (allow), n (reject) or an option number 1-{count}")
            self.view.show_prompt(f"answer y/n or 1-{count}> ")
            return
        picked = getattr(outcome, "option_id", "cancelled")
        self.view.info(f"→ {picked}")
        question.future.set_result(outcome)

    # -- connection state ---------------------------------------------------------------------------------

    def _on_state(self, state: ConnectionState) -> None:
        self.view.set_state(state)
        if state.state is State.FAILED:
            self.finish(EXIT_GAVE_UP)


async def run_interactive(chat: Chat) -> int:
    """Run ``chat`` interactively on this terminal; returns the exit status (see the module doc)."""
    view = make_view(json_mode=chat.output.json_mode, stream=chat.output.stream, interactive=True)
    return await InteractiveChat(chat, view).run()
