#!/usr/bin/env python3
"""A chat client for ACP agents that survives network drops and agent restarts.

Usage::

    python examples/chat.py URL                       # interactive terminal chat
    python examples/chat.py URL --script FILE [--json]
    python examples/chat.py URL URL ... [--script FILE] [--json]   # several instances, one pool
    python examples/chat.py --demo [--json]           # bundled agent + injected faults
    python examples/chat.py URL [URL ...] --store PATH   # keep sessions in PATH across runs

URL: ``ws://``/``wss://`` (WebSocket), ``http://``/``https://`` (Streamable HTTP) or
``stdio:COMMAND ARGS...`` (spawn the agent). ``--protocol-version 2`` proposes the ACP v2 draft.
Several URLs are instances of one agent, used as one pool (new sessions round robin; a session
whose instance dies moves to another); the ``session``, ``recovered`` and ``status`` events then
carry ``endpoint``, the URL the session lives on now.

Script mode: each line of FILE is a prompt, sent after the previous turn ends; ``/sleep SECONDS``
pauses while the client keeps watching the connection (it ends early if the client gives up);
``/wait-recovery [SECONDS]`` pauses until a session's recovery is reported after the previous line
(or the client gives up; at most SECONDS, default 60);
``/status`` probes the current session; ``/new`` starts another session; ``/sessions`` lists the
stored (or tracked) sessions and ``/switch ID`` continues another one (see ``chat_store.py``,
``--store PATH``). The exit status is 0
after the last line, 2 if the client gave up (``--max-elapsed SECONDS`` bounds how long it keeps
reconnecting; default 120). A mistake on the command line (a malformed URL, a missing script file,
a bad option value, a store that cannot be opened) is one line on stderr and exit status 2, before
anything connects.

Interactive mode (the default with a URL) is in ``chat_ui.py``: streamed text, a status line,
permission prompts, a banner per recovery; Ctrl-C cancels the running turn, a second Ctrl-C exits
(status 130); ``/retry`` sends again the prompt a drop cut off; ``/reconnect`` tries again at once
while the status line counts down to the next attempt; ``/quit`` or Ctrl-D exits with 0.
``ACP_CHAT_PLAIN=1`` forces plain text (no rich). ``--insecure`` skips TLS certificate
verification (testing only).

``--json`` prints one JSON object per line (``event`` + ``t`` seconds since start): connected,
session, history (a restored conversation, every segment), update, turn_end (with the turn's
status), disconnected, reconnect_attempt, recovered, turn_interrupted, stream_resumed (a
broken HTTP stream reattached, nothing lost), status, error, notice (``message``: with
``--store``, why a run starts a new session though the store holds this URL's sessions: another
process holds them). ``recovered`` carries ``continuity``: ``"kept"`` (shown: the agent has the
whole conversation), ``"lost"`` (a completed turn is missing from its replay, or a new session),
or ``"unverified"`` (nothing showed either way: a resume without a status probe, or by an agent
process that was restarted), and ``continuityNote``, why, when it is not kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import math
import os
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import chat_store  # examples/ is on the path (the script's own directory)

from acp_client import (
    AcpClient,
    AcpError,
    Callbacks,
    ClientHandlers,
    ConfigurationError,
    ConnectionLost,
    ConnectionState,
    PromptResult,
    RecoveryOutcome,
    RetryPolicy,
    SessionHandle,
    State,
    StreamResumed,
    Timeouts,
    TurnInterrupted,
    TurnStatus,
    UpdateEvent,
)
from acp_client.display import UNSAFE_CHARACTERS, printable
from acp_client.pool import Pool
from acp_client.state import Continuity, Probe
from acp_client.store import SqliteSessionStore
from acp_client.transports.endpoint import connector_for
from acp_client.types import (
    CancelledPermissionOutcome,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
    TextContent,
)

EXIT_OK = 0
EXIT_GAVE_UP = 2
#: A mistake on the command line: one line on stderr (the argparse convention).
EXIT_USAGE = 2
PROG = "chat.py"


class UsageError(Exception):
    """A mistake on the command line: shown as one line, exit status :data:`EXIT_USAGE`."""


def usage_error(message: str) -> int:
    """Say ``message`` as the one line of a command-line mistake; the exit status."""
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    sys.stderr.flush()
    return EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line (no usage block): ``chat.py: error: ...``."""

    def error(self, message: str) -> NoReturn:
        usage_error(f"{message} (see --help)")
        raise SystemExit(EXIT_USAGE)


def _seconds(text: str) -> float:
    """An option's number of seconds: finite, zero or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds, zero or more")
    return value


def read_script(path: Path) -> list[str]:
    """The lines of a ``--script`` file.

    Raises:
        UsageError: It cannot be read as UTF-8 text (missing, a directory, unreadable, binary).
    """
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"--script {str(path)!r}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--script {str(path)!r} is a directory, not a file of prompts") from None
    except PermissionError:
        raise UsageError(f"--script {str(path)!r}: permission denied") from None
    except UnicodeDecodeError:
        raise UsageError(f"--script {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"--script {str(path)!r}: {exc.strerror or exc}") from None


def update_text(update: Any) -> str:
    """The human-readable text an update carries, if any."""
    content = getattr(update, "content", None)
    blocks = content if isinstance(content, list | tuple) else [content]
    parts = [block.text for block in blocks if isinstance(block, TextContent)]
    if parts:
        return "".join(parts)
    title = getattr(update, "title", None)
    return title if isinstance(title, str) else ""


#: Characters json.dumps(..., ensure_ascii=False) leaves raw that a terminal showing the JSON would
#: act on (C1 controls, DEL, bidirectional and other format characters, separators, surrogates).
_JSON_UNSAFE = re.compile(UNSAFE_CHARACTERS)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON spells a character beyond the BMP as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_line(record: dict[str, Any]) -> str:
    """``record`` as one JSON line, every control and format character escaped (``\\u009b``,
    ``\\u202e``): the line is safe on a terminal, and reads back as the exact text."""
    return _JSON_UNSAFE.sub(_json_escape, json.dumps(record, ensure_ascii=False))


#: Event fields that hold a message's text, shown on lines of their own (newlines kept); every
#: other string an event carries is shown within one line.
_MULTI_LINE = frozenset({"text", "prompt"})


def shown(value: Any, key: str = "") -> Any:
    """An event's fields as a person may see them: agent text made printable (escape sequences,
    controls and bidirectional overrides visible, never acted on); one-line fields flattened."""
    if isinstance(value, str):
        return printable(value, one_line=key not in _MULTI_LINE)
    if isinstance(value, dict):
        return {name: shown(item, name) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [shown(item, key) for item in value]
    return value


class Output:
    """Where chat events go: JSON lines (for scripts) or readable text (for people)."""

    def __init__(self, *, json_mode: bool, stream: TextIO = sys.stdout) -> None:
        self.json_mode = json_mode
        self.stream = stream
        self.started = time.monotonic()
        self._mid_line = False
        #: Sessions whose lost conversation is on screen under its divider already (a restored
        #: history): their ``recovered`` banner does not draw the divider again.
        self.divided: set[str] = set()

    def event(self, name: str, **fields: Any) -> None:
        if self.json_mode:
            record = {"event": name, "t": round(time.monotonic() - self.started, 3), **fields}
            self.stream.write(json_line(record) + "\n")
            self.stream.flush()
            return
        fields = shown(fields)
        if name == "history" and any(segment["lost"] for segment in fields["segments"]):
            self.divided.add(fields["sessionId"])
        if name == "recovered" and fields.get("sessionId") in self.divided:
            fields = {**fields, "lostTurns": 0}
        text = self.describe(name, fields)
        if text is None:
            return
        if name == "update":
            self.stream.write(text)
            self._mid_line = not text.endswith("\n")
        else:
            if self._mid_line:
                self.stream.write("\n")
                self._mid_line = False
            self.stream.write(text + "\n")
        self.stream.flush()

    def show_conversation(self, handle: Any) -> None:
        """Redraw a session's conversation (``/switch``); JSON mode has the transcript for that."""
        if self.json_mode:
            return
        messages = list(handle.transcript.messages)
        self.stream.write(f"● session {printable(handle.session_id, one_line=True)}: {len(messages)} messages\n")
        for message in messages:
            who = "agent (put in its replay)" if message.inserted else message.role
            self.stream.write(f"  {who}: {printable(message.text)}\n")
        self.stream.flush()

    @staticmethod
    def describe(name: str, f: dict[str, Any]) -> str | None:
        if name == "connected":
            return f"● connected ({f['transport']}, ACP v{f['protocolVersion']})"
        if name == "session":
            how = " (restored from the store)" if f.get("restored") else " (switched)" if f.get("switched") else ""
            return f"● session {f['sessionId']}{how}"
        if name == "sessions":
            return "\n".join(["● sessions:", *chat_store.describe_listing(f["sessions"])])
        if name == "update":
            if f.get("replay"):
                return None  # history the agent replays after a reconnect: already on screen
            if f["kind"] in ("agent_message_chunk", "agent_message"):
                return str(f["text"])
            if f["kind"] in ("tool_call", "tool_call_update") and f["text"]:
                return f"  ⚙ {printable(f['text'], one_line=True)}\n"  # a title: one line
            return None
        if name == "history":
            return "\n".join(history_lines(f))
        if name == "turn_end":
            status = f.get("status")
            if status == "failed":
                return "  (refused by the agent: not part of the conversation)"
            return f"  ({f['stopReason']})"
        if name == "disconnected":
            return f"⚠ disconnected: {plain_reason(f['reason'])}"
        if name == "reconnect_attempt":
            return f"… reconnecting in {f['delay']:.1f}s (attempt {f['attempt']})"
        if name == "recovered":
            line = "✓ " + recovery_banner(f["path"], f.get("replayed", 0))
            said = continuity_banner(f)
            if said is not None:
                line += f" — {said}"
            if f.get("lostTurns"):
                line += f"\n{lost_divider(f['lostTurns'])}"
            return line
        if name == "turn_interrupted":
            return f"⚠ turn interrupted by the drop (not re-sent): {f['prompt']!r}"
        if name == "stream_resumed":
            stream = f"session {f['sessionId']}'s stream" if f.get("sessionId") else "the connection stream"
            return f"↻ {stream} resumed from event {f['fromEventId']}: nothing lost"
        if name == "status":
            where = f" on {f['endpoint']}" if f.get("endpoint") else ""
            return f"● status {f['sessionId']}{where}: {f['status']} (raw={f['raw']!r}, state={f['state']!r})"
        if name == "error":
            return f"✗ {f['message']}"
        if name == "notice":
            return f"● {f['message']}"
        return None


def plain_reason(reason: str | None) -> str:
    """Why the connection ended, in plain words for a person (the ``disconnected`` event keeps the
    exact reason for scripts): never an exception's name or a close code."""
    text = (reason or "").lower()
    if "refused" in text:
        return "the agent refused the connection"
    if "killed by" in text or "exited" in text:
        return "the agent process ended"
    if "closed by agent" in text or "connection closed (" in text:
        return "the agent closed the connection"
    if "timed out" in text or "timeout" in text or "keepalive" in text or "ping" in text:
        return "the agent stopped answering"
    if "down too long" in text:
        return "the agent has been unreachable for too long"
    if "closed by the app" in text or "closed by client" in text:
        return "closed"
    return "the connection dropped"


def lost_divider(turns: int) -> str:
    """The line between a conversation the agent lost and the new session's."""
    return f"--- the agent lost the conversation above ({turns} turn(s)); it starts afresh below ---"


def history_messages(handle: SessionHandle) -> dict[str, Any]:
    """The ``history`` event's fields: every segment of the handle's conversation."""
    transcript = handle.transcript
    segments = []
    for segment in transcript.segments:
        messages = []
        for message in segment.messages:
            entry: dict[str, Any] = {"role": message.role, "text": message.text}
            if message.status is not None:
                entry["status"] = message.status.value
            if message.incomplete:
                entry["incomplete"] = True
            if message.inserted:
                entry["inserted"] = True  # the agent's text among the replayed prompts, not the user's
            messages.append(entry)
        segments.append(
            {"sessionId": segment.session_id, "lost": segment.lost, "turns": segment.turns, "messages": messages}
        )
    return {"sessionId": handle.session_id, "segments": segments, "dropped": transcript.dropped}


def history_lines(f: dict[str, Any]) -> list[str]:
    """The restored conversation as the terminal shows it."""
    lines = ["● the conversation so far:"]
    if f.get("dropped"):
        lines.append(f"  ({f['dropped']} earlier messages were dropped from the store)")
    for segment in f["segments"]:
        for message in segment["messages"]:
            marks = ""
            if message.get("status") not in (None, "complete"):
                marks += f" [{message['status']}]"
            if message.get("incomplete"):
                marks += " [incomplete]"
            who = "you" if message["role"] == "user" else message["role"]
            if message.get("inserted"):
                who = "agent (put in its replay)"  # user-role text the agent added: never shown as "you"
            lines.append(f"  {who}: {message['text']}{marks}")
        if segment["lost"]:
            lines.append(lost_divider(segment["turns"]))
    return lines


def continuity_banner(f: dict[str, Any]) -> str | None:
    """What a ``recovered`` event's banner says about the agent's memory: only what the evidence
    shows (``continuity``); ``None`` for a new session that lost the conversation (its divider
    says so)."""
    continuity = f.get("continuity")
    if continuity == "kept":
        return "the conversation is intact"
    if continuity == "lost":
        if f["path"] == "new_session":
            return None
        return "continuity lost: the agent does not have the whole conversation (yours is kept)"
    if "agent process was restarted" in (f.get("continuityNote") or ""):
        return "continuity unverified: the agent was restarted and could not show it kept the conversation"
    return "continuity unverified: the agent could not show it kept the conversation"


def recovery_banner(path: str, replayed: int = 0) -> str:
    """One line per recovery, naming the path."""
    if path == "resume":
        return "resumed the session"
    if path == "replay":
        return f"replayed {replayed} messages"
    if path == "new_session":
        return "agent lost the session — started a new one"
    return "could not recover the session"


def continuity_note(outcome: RecoveryOutcome) -> dict[str, str]:
    """``continuityNote``: the outcome's note on why continuity is not kept (none when kept)."""
    if outcome.continuity is Continuity.KEPT:
        return {}
    notes = [note for note in outcome.notes if note.startswith("continuity ")]
    return {"continuityNote": notes[-1]} if notes else {}


class Chat:
    """The chat logic shared by the script, interactive and demo modes."""

    def __init__(
        self,
        endpoint: Any,
        *,
        output: Output,
        protocol_version: int = 1,
        retry: RetryPolicy | None = None,
        permission: Callable[[RequestPermissionRequest], Awaitable[Any] | Any] | None = None,
        on_state: Callable[[ConnectionState], None] | None = None,
        transport_options: dict[str, Any] | None = None,
        tls: Any = None,
        cwd: str | None = None,
        failover_delay: float = 5.0,
        session_store: Any = None,
    ) -> None:
        self.output = output
        self.store = session_store  # a SessionStore (``--store``), or None
        self.cwd = cwd or os.getcwd()
        self.handle: SessionHandle | None = None
        self._was_connected = False
        self._ever_connected = False  # before that, a failure is the caller's "could not connect" line
        #: Per outage: whether ``disconnected`` was said, and the turn_interrupted events held
        #: until it is (so "connection lost" comes first).
        self._outage_reported = False
        self._held: list[dict[str, Any]] = []
        #: Until :meth:`start` has shown the session (and a restored conversation), recovery events
        #: wait here: "connected", then the conversation, then what recovery did to it.
        self._opening = True
        self._held_recoveries: list[tuple[str, dict[str, Any]]] = []
        #: Extra listeners for every connection state (the interactive UI adds its status line).
        self.state_listeners: list[Callable[[ConnectionState], None]] = [on_state] if on_state else []
        #: Answers permission requests; replaceable after construction (the UI asks the user).
        self.permission_handler: Callable[[RequestPermissionRequest], Awaitable[Any] | Any] = (
            permission or self.auto_permission
        )
        self.failed = asyncio.Event()
        #: Session recoveries reported so far (recovered or not); ``_recovery`` is set at each.
        self.recoveries = 0
        self._recovery = asyncio.Event()
        first = endpoint[0] if isinstance(endpoint, list) else endpoint
        self.transport = str(first).split(":", 1)[0] if isinstance(first, str) else "custom"
        # Several URLs are several instances of one agent: one pool of them.
        several = isinstance(endpoint, list)
        self.client = AcpClient(
            Pool(endpoint, failover_delay=failover_delay) if several else endpoint,
            protocol_version=protocol_version,
            retry=retry or RetryPolicy(initial_delay=0.25, max_delay=5.0, max_elapsed=120.0, suspend_after=None),
            handlers=ClientHandlers(permission=self._ask_permission),
            callbacks=Callbacks(
                on_state_change=self._on_state,
                on_update=self._on_update,
                on_resume=self._on_recovered,
                on_replay=self._on_recovered,
                on_new_session=self._on_recovered,
                on_recovery_failed=self._on_recovery_failed,
                on_turn_interrupted=self._on_interrupted,
                on_stream_resumed=self._on_stream_resumed,
            ),
            timeouts=Timeouts(request=30.0),
            transport_options=transport_options,
            tls=tls,
            session_store=session_store,
        )

    @staticmethod
    def auto_permission(request: RequestPermissionRequest) -> Any:
        """The non-interactive policy: pick the first ``allow*`` option, else cancel."""
        for option in request.options:
            if option.kind.startswith("allow"):
                return SelectedPermissionOutcome(option_id=option.option_id)
        return CancelledPermissionOutcome()

    async def _ask_permission(self, request: RequestPermissionRequest) -> Any:
        answer = self.permission_handler(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    def _transport_name(self) -> str:
        kind = self.client.connector.target.split(":", 1)[0]
        return {"ws": "websocket", "wss": "websocket", "http": "http", "https": "http"}.get(kind, kind)

    def _on_state(self, state: ConnectionState) -> None:
        if state.state is State.CONNECTED:
            self._was_connected = self._ever_connected = True
            self._outage_reported = False
            self.output.event(
                "connected", transport=self._transport_name(), protocolVersion=self.client.protocol_version
            )
        elif state.state in (State.RECONNECTING, State.SUSPENDED):
            if not self._outage_reported:
                self.output.event("disconnected", reason=state.cause or "connection lost")
                self._outage_reported, self._was_connected = True, False
                self._release_interruptions()
            self.output.event("reconnect_attempt", attempt=state.attempt, delay=round(state.retry_in or 0.0, 3))
        elif state.state is State.FAILED:
            self._release_interruptions()
            self.failed.set()
            if self._ever_connected:  # a failed first connect is reported once, by whoever called start()
                self.output.event("error", message=f"gave up: {state.cause}")
        elif state.state is State.CLOSED:
            self._release_interruptions()
        for listener in list(self.state_listeners):
            listener(state)

    def _release_interruptions(self) -> None:
        held, self._held = self._held, []
        for fields in held:
            self.output.event("turn_interrupted", **fields)

    def _on_update(self, event: UpdateEvent) -> None:
        say = self._say_recovery if event.replay else self.output.event  # a replay is part of a recovery
        say(
            "update",
            sessionId=event.session_id,
            kind=event.update.kind,
            text=update_text(event.update),
            replay=event.replay,
        )

    def _count_recovery(self) -> None:
        self.recoveries += 1
        self._recovery.set()

    def _say_recovery(self, name: str, **fields: Any) -> None:
        if self._opening:
            self._held_recoveries.append((name, fields))
        else:
            self.output.event(name, **fields)

    def _release_recoveries(self) -> None:
        self._opening = False
        held, self._held_recoveries = self._held_recoveries, []
        for name, fields in held:
            self.output.event(name, **fields)

    def _on_recovered(self, outcome: RecoveryOutcome) -> None:
        self._count_recovery()
        self._say_recovery(
            "recovered",
            path=outcome.path.value,
            sessionId=outcome.session_id,
            previousSessionId=outcome.previous_session_id,
            replayed=outcome.replayed_updates,
            continuity=outcome.continuity.value,
            **continuity_note(outcome),
            lostTurns=outcome.lost_turns,
            **self._where(outcome.endpoint),
        )

    def _on_recovery_failed(self, outcome: RecoveryOutcome) -> None:
        # Not a `recovered` event: that one's path is resume | replay | new_session (the README's JSON event table).
        self._count_recovery()
        cause = f": {outcome.error}" if outcome.error is not None else ""
        self._say_recovery("error", message=f"could not recover session {outcome.previous_session_id}{cause}")

    def _on_stream_resumed(self, resumed: StreamResumed) -> None:
        self.output.event("stream_resumed", sessionId=resumed.session_id, fromEventId=resumed.from_event_id)

    def _on_interrupted(self, turn: TurnInterrupted) -> None:
        fields = {"sessionId": turn.session_id, "prompt": _prompt_text(turn.prompt)}
        if self._outage_reported or self.client.state.is_terminal:
            self.output.event("turn_interrupted", **fields)
        else:  # the drop is not reported yet: "connection lost" first, then this
            self._held.append(fields)

    async def start(self) -> None:
        """Connect and open the session: with a store, the most recently used one, its
        conversation shown at once; then what recovery did to each stored session."""
        await self.client.connect()  # with a store: its sessions (of this URL, or this pool) recover here
        try:
            restored = chat_store.restored_handle(self) if self.store is not None else None
            if restored is None:
                for notice in chat_store.held_elsewhere(self):  # never a silent fresh start
                    self.output.event("notice", message=notice)
                await self.new_session()
                return
            self.handle = restored
            self.output.event("session", sessionId=restored.session_id, restored=True, **self._where(restored.endpoint))
            if restored.transcript.all_messages():  # the restored conversation, at once
                self.output.event("history", **history_messages(restored))
        finally:
            self._release_recoveries()

    async def new_session(self) -> SessionHandle:
        self.handle = await self.client.new_session(self.cwd)
        self.output.event("session", sessionId=self.handle.session_id, **self._where(self.handle.endpoint))
        return self.handle

    @staticmethod
    def _where(endpoint: str | None) -> dict[str, Any]:
        """With several URLs: ``endpoint``, the URL the session lives on now (the README's JSON event table)."""
        return {"endpoint": endpoint} if endpoint is not None else {}

    async def prompt(self, text: str) -> PromptResult | None:
        assert self.handle is not None
        try:
            result = await self.handle.prompt(text)
        except ConnectionLost:
            return None  # reported through on_turn_interrupted (or it never left)
        except AcpError as exc:
            self.output.event("error", message=str(exc))
            prompts = [m for m in self.handle.transcript.all_messages() if m.role == "user"]
            if prompts and prompts[-1].status is TurnStatus.FAILED and prompts[-1].text == text:
                self.output.event("turn_end", sessionId=self.handle.session_id, stopReason=None, status="failed")
            return None
        status = next((m.status for m in reversed(self.handle.transcript.messages) if m.role == "user"), None)
        self.output.event(
            "turn_end",
            sessionId=self.handle.session_id,
            stopReason=result.stop_reason,
            status=status.value if status is not None else None,
        )
        return result

    async def status(self) -> None:
        assert self.handle is not None
        try:
            record = await self.handle.session_status()
        except AcpError as exc:
            self.output.event("error", message=f"status: {exc}")
            return
        state = record.state.state if record.state is not None else None
        status = record.status.value if isinstance(record.status, Probe) else "unknown"
        self.output.event(
            "status",
            sessionId=record.session_id,
            status=status,
            raw=record.raw_status,
            state=state,
            **self._where(self.handle.endpoint),
        )

    @property
    def gave_up(self) -> bool:
        return self.client.state.state is State.FAILED

    async def sleep(self, seconds: float) -> None:
        """Pause while the client keeps watching the connection; ends early if it gives up."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.failed.wait(), timeout=max(0.0, seconds))

    async def wait_recovery(self, after: int, seconds: float) -> None:
        """Pause until more than ``after`` recoveries were reported, the client gives up, or
        ``seconds`` pass."""
        deadline = asyncio.get_running_loop().time() + max(0.0, seconds)
        while self.recoveries <= after and not self.failed.is_set():
            self._recovery.clear()
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            waits = [asyncio.ensure_future(self._recovery.wait()), asyncio.ensure_future(self.failed.wait())]
            try:
                await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()

    async def close(self) -> None:
        await self.client.aclose()


def _prompt_text(blocks: Sequence[Any]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextContent))


async def run_script(chat: Chat, lines: Sequence[str]) -> int:
    """Run a script (see the module docstring); returns the exit status."""
    try:
        await chat.start()
    except AcpError as exc:
        chat.output.event("error", message=f"could not connect: {exc}")
        return EXIT_GAVE_UP
    try:
        recoveries = chat.recoveries  # reported when the previous line ended
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if chat.gave_up:
                return EXIT_GAVE_UP
            if line.startswith("/wait-recovery"):
                parts = line.split()
                await chat.wait_recovery(recoveries, float(parts[1]) if len(parts) > 1 else 60.0)
            elif line.startswith("/sleep"):
                parts = line.split()
                await chat.sleep(float(parts[1]) if len(parts) > 1 else 1.0)
            elif line == "/status":
                await chat.status()
            elif line == "/new":
                await chat.new_session()
            elif line == "/sessions":
                chat.output.event("sessions", sessions=chat_store.listing(chat))
            elif line.startswith("/switch"):
                chat_store.switch(chat, line[len("/switch") :])
            else:
                await chat.prompt(line)
            recoveries = chat.recoveries
        return EXIT_GAVE_UP if chat.gave_up else EXIT_OK
    finally:
        await chat.close()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "url", nargs="*", help="ws(s)://, http(s):// or stdio:COMMAND; several: instances of one agent, one pool"
    )
    parser.add_argument("--script", type=Path, help="run the prompts in FILE, one per line")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON events, one per line (recovered: path, continuity kept | lost | unverified, ...)",
    )
    parser.add_argument("--demo", action="store_true", help="run against the bundled agent with injected faults")
    parser.add_argument("--protocol-version", type=int, default=1, choices=(1, 2))
    parser.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (testing only)")
    parser.add_argument(
        "--store",
        type=Path,
        metavar="PATH",
        help="keep sessions in this session store; a later run recovers them and continues the latest",
    )
    parser.add_argument(
        "--max-elapsed",
        type=_seconds,
        default=120.0,
        metavar="SECONDS",
        help="give up reconnecting after this long down (default 120); the script then exits 2",
    )
    parser.add_argument(
        "--failover-delay",
        type=_seconds,
        default=5.0,
        metavar="SECONDS",
        help="with several URLs: how long a session's instance may stay unreachable before it moves (default 5)",
    )
    args = parser.parse_args(argv)
    args.urls = list(args.url)  # every URL; args.url stays the first (or None)
    args.url = args.urls[0] if args.urls else None
    return args


async def amain(args: argparse.Namespace) -> int:
    output = Output(json_mode=args.json)
    if args.demo:
        from chat_demo import run_demo  # type: ignore[import-not-found]

        return int(await run_demo(output, protocol_version=args.protocol_version))
    if not args.url:
        return usage_error("a URL is required (or --demo); see --help")
    try:
        lines = read_script(args.script) if args.script is not None else None
        # Every URL's form, before anything connects (a pool checks them too, but later).
        for url in args.urls:
            connector_for(url)
    except UsageError as exc:
        return usage_error(str(exc))
    except ConfigurationError as exc:  # a URL of no known form: one line saying which forms work
        return usage_error(str(exc))
    from acp_client import TlsConfig

    tls = TlsConfig(verify=False) if args.insecure else None
    retry = RetryPolicy(initial_delay=0.25, max_delay=5.0, max_elapsed=args.max_elapsed, suspend_after=None)
    endpoint = args.urls if len(args.urls) > 1 else args.url
    with contextlib.ExitStack() as stack:
        store = None
        if args.store is not None:
            try:
                store = stack.enter_context(SqliteSessionStore(args.store))
            except AcpError as exc:
                return usage_error(f"--store: {exc}")
        try:
            chat = Chat(
                endpoint,
                output=output,
                protocol_version=args.protocol_version,
                tls=tls,
                retry=retry,
                failover_delay=args.failover_delay,
                session_store=store,
            )
        except ConfigurationError as exc:
            return usage_error(str(exc))
        if lines is not None:
            return await run_script(chat, lines)
        from chat_ui import run_interactive  # type: ignore[import-not-found]

        return int(await run_interactive(chat))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # --help, or a mistake already said in one line
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    loop = asyncio.new_event_loop()
    task = loop.create_task(amain(args))
    if args.script is not None or args.json:
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return loop.run_until_complete(task)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 130
    finally:
        loop.close()


if __name__ == "__main__":
    sys.modules.setdefault("chat", sys.modules[__name__])  # chat_ui / chat_demo import this module as `chat`
    sys.exit(main())
