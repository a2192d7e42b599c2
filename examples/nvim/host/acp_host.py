#!/usr/bin/env python3
"""The Python half of the Neovim plugin in ``examples/nvim`` (see ``docs/editor-plugin.md``).

Neovim starts this file as an RPC job (``jobstart(..., {rpc = true})``) from ``lua/acp/init.lua``; it
speaks msgpack-RPC on stdin/stdout through pynvim and runs one :class:`~acp_client.sync.SyncAcpClient`.

Three kinds of thread meet here, and each rule below keeps one of them safe:

* **pynvim's loop** (the main thread) receives Neovim's requests and notifications. It never blocks
  on the agent: connecting and opening a session run on the ``acp-nvim-worker`` thread, prompts go
  out with ``prompt_async``. Only this thread touches the Neovim API.
* **the client's loop thread** (``acp-client-loop``) and its callback executor belong to
  ``SyncAcpClient``; nothing here runs on them.
* **the event thread** (``acp-nvim-events``) drains the client's event queue (typed
  :data:`~acp_client.sync.SyncEvent` values) and hands each one to pynvim's loop with
  ``nvim.async_call``, which is thread-safe; the Lua side then renders it.

Nothing is printed: stdout is the RPC channel (pynvim points ``print`` at stderr, and the Lua side
keeps stderr out of the message area). The host logs to the file Neovim names (``g:acp_log``).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import queue
import sys
import threading
from pathlib import Path
from typing import Any

import attrs
import pynvim

from acp_client import AcpError, ConnectionLost, PromptResult, RecoveryOutcome, RetryPolicy, State
from acp_client.display import printable
from acp_client.state import Continuity
from acp_client.store import SqliteSessionStore, endpoint_key
from acp_client.sync import (
    NewSessionEvent,
    PermissionEvent,
    PermissionRequest,
    RecoveryFailedEvent,
    ReplayEvent,
    ResumeEvent,
    SessionUpdateEvent,
    StateEvent,
    SyncAcpClient,
    SyncEvent,
    SyncSessionHandle,
    TurnInterruptedEvent,
)

logger = logging.getLogger("acp_nvim")

#: How often the event thread looks up from an empty queue to see whether it should stop.
_POLL_SECONDS = 0.1
#: How long closing may take at ``:qa`` before Neovim is let go anyway.
_CLOSE_TIMEOUT = 10.0


@attrs.frozen
class TurnEnded:
    """A prompt's future has settled (queued behind the turn's updates)."""

    session_id: str
    future: concurrent.futures.Future[PromptResult]


def _continuity(outcome: RecoveryOutcome) -> str:
    """What a recovery banner says about the agent's memory: only what the evidence shows."""
    if outcome.continuity is Continuity.KEPT:
        return "the conversation is intact"
    if outcome.continuity is Continuity.LOST:
        return "continuity lost: the agent does not have the whole conversation; the buffer keeps it"
    if any("agent process was restarted" in note for note in outcome.notes):
        return "continuity unverified: the agent was restarted and could not show it kept the conversation"
    return "continuity unverified: the agent could not show it kept the conversation"


def _short(session_id: str | None) -> str:
    return session_id or "?"


def _printable(value: Any, *, one_line: bool) -> Any:
    """``value`` with every string in it printable: one line at the top level (``one_line``),
    lines kept inside lists (a message's text; a list item that must be one line is flattened
    where it is made)."""
    if isinstance(value, str):
        return printable(value, one_line=one_line)
    if isinstance(value, list | tuple):
        return [_printable(item, one_line=False) for item in value]
    if isinstance(value, dict):
        return {key: _printable(item, one_line=True) for key, item in value.items()}
    return value


def plain_reason(reason: str | None) -> str:
    """Why the connection ended, in plain words (the log keeps the exact reason): never an
    exception's name or a close code."""
    text = (reason or "").lower()
    if "refused" in text:
        return "the agent refused the connection"
    if "killed by" in text or "exited" in text:
        return "the agent process ended"
    if "closed by agent" in text or "connection closed (" in text:
        return "the agent closed the connection"
    if "timed out" in text or "timeout" in text or "keepalive" in text or "ping" in text:
        return "the agent stopped answering"
    return "the connection dropped"


#: Events that belong to a recovery: while a connect is opening the session they wait, so the
#: buffer says "connected to" first, then what recovery did.
_RECOVERY_EVENTS = (ResumeEvent, ReplayEvent, NewSessionEvent, RecoveryFailedEvent, TurnInterruptedEvent)


class Host:
    """One Neovim, one agent connection: what the Lua front end asks for, and what it is told."""

    def __init__(self, nvim: pynvim.Nvim) -> None:
        self.nvim = nvim
        self.client: SyncAcpClient | None = None
        self.session: SyncSessionHandle | None = None
        self.url: str | None = None
        self.store: SqliteSessionStore | None = None
        # The client's events, and behind them the host's own turn endings: a turn's end is queued
        # from the prompt future's callback (on the client's loop thread, where the turn's updates
        # were queued just before), so it never overtakes the turn's last chunk.
        self.events: queue.Queue[Any] = queue.Queue()
        self.permissions: dict[int, PermissionRequest] = {}
        self._permission_ids = itertools.count(1)
        # One lock for what is told to Lua about recovery: the event thread and the worker
        # (connecting) both tell, and "connected to" must come before the banners it held back.
        self._telling = threading.RLock()
        self._opening = False
        self._held: list[SyncEvent] = []
        #: Sessions whose cut-off turn was said already (by the interruption or the turn's end:
        #: whichever comes first; the other says nothing).
        self._cut_said: set[str] = set()
        #: Whether the current outage was said (one banner per drop), and the cut-off turns
        #: waiting for it to be said.
        self._outage_said = False
        self._cuts_held: list[str] = []
        self._stop = threading.Event()
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="acp-nvim-worker")
        self._pump = threading.Thread(target=self._pump_events, name="acp-nvim-events", daemon=True)
        self._pump.start()

    # -- talking to Lua (only ever from pynvim's loop) ------------------------------------------

    def tell(self, what: str, *args: Any) -> None:
        """Hand ``require('acp')._on(what, ...)`` to Neovim without waiting (any thread).

        Every string goes out printable (:func:`~acp_client.display.printable`): agent text is
        data in a buffer, a banner or a list, never terminal control, and a one-line place
        (every top-level string: a banner, an id, an error) never holds a newline (Lua's
        ``nvim_buf_set_lines`` refuses one). Streamed text and the messages of a history keep
        their newlines (the buffer splits them into lines).
        """
        args = tuple(_printable(arg, one_line=what != "chunk") for arg in args)

        def call() -> None:
            self.nvim.exec_lua("require('acp')._on(...)", what, *args, async_=True)

        if not self._stop.is_set():
            self.nvim.async_call(call)

    # -- Neovim → host ----------------------------------------------------------------------------

    def on_request(self, name: str, args: list[Any]) -> Any:
        if name == "info":
            return self.info()
        if name == "sessions":
            return self.stored_sessions()
        if name == "shutdown":
            self.shutdown()
            return True
        raise ValueError(f"unknown request {name!r}")

    def on_notification(self, name: str, args: list[Any]) -> None:
        if name == "connect":
            url, options = args[0], args[1] if len(args) > 1 else {}
            self._worker.submit(self._guarded, self._connect, url, options)
        elif name == "prompt":
            self.prompt(args[0])
        elif name == "switch":
            self._worker.submit(self._guarded, self._switch, args[0])
        elif name == "permission":
            self.answer_permission(int(args[0]), args[1] if len(args) > 1 else None)
        elif name == "disconnect":
            self._worker.submit(self._guarded, self._disconnect)
        elif name == "reconnect":
            self.reconnect_now()
        else:
            logger.warning("unknown notification %r", name)

    def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except AcpError as exc:
            logger.info("%s failed: %s", fn.__name__, printable(str(exc), one_line=True))
            self.tell("error", str(exc))
        except Exception as exc:
            logger.exception("%s failed", fn.__name__)
            self.tell("error", f"{type(exc).__name__}: {exc}")

    # -- connecting (worker thread) ------------------------------------------------------------------

    def _connect(self, url: str, options: dict[str, Any]) -> None:
        self._disconnect()
        store_path = options.get("store")
        self.store = SqliteSessionStore(store_path) if store_path else None
        retry = RetryPolicy(**options["retry"]) if options.get("retry") else RetryPolicy()
        self.url = url
        self.tell("connecting", url)
        with self._telling:
            self._opening, self._held, self._outage_said = True, [], False
        try:
            client = SyncAcpClient(url, event_queue=self.events, session_store=self.store, retry=retry)
            self.client = client
            try:
                client.connect()
            except BaseException:
                self.client = None
                raise
            stored = client.stored_sessions()
            if stored:
                self.session = client.session(stored[0].session_id)
                restored = True
            else:
                self.session = client.new_session(options.get("cwd") or os.getcwd())
                restored = False
            info = client.transport_info
            with self._telling:
                self.tell(
                    "connected",
                    url,
                    self.session.session_id,
                    self._history(self.session),
                    restored,
                    info.kind if info else "",
                    self._earlier_ids(self.session),
                )
                self._release()
        finally:
            with self._telling:
                self._opening, self._held = False, []

    def _release(self) -> None:
        """Tell what recovery did while the connect was opening the session (after "connected")."""
        self._opening = False
        held, self._held = self._held, []
        for event in held:
            self._forward(event)

    def reconnect_now(self) -> None:
        """``:AcpReconnect``: while the client waits between attempts, try again now."""
        client = self.client
        if client is None:
            self.tell("error", "not connected (:AcpConnect URL)")
            return
        client.notify_network_available()

    def _switch(self, session_id: str) -> None:
        if self.client is None:
            raise AcpError("not connected (:AcpConnect URL)")
        self.session = self.client.session(session_id)
        self.tell("switched", self.session.session_id, self._history(self.session), self._earlier_ids(self.session))

    def _disconnect(self) -> None:
        client, self.client, self.session = self.client, None, None
        if client is not None:
            client.close(timeout=_CLOSE_TIMEOUT)
        for request in self.permissions.values():
            request.cancel()
        self.permissions.clear()
        if self.store is not None:
            self.store.close()
            self.store = None

    @staticmethod
    def _history(session: SyncSessionHandle) -> list[list[Any]]:
        """The conversation the handle holds (restored from the store after a restart), every
        segment: ``[role, text]`` per message (text the agent put among its replayed prompts has
        the role ``inserted``, shown as the agent's; a turn that did not complete says how it
        ended), and ``["lost", turns]`` after a segment the agent lost."""
        entries: list[list[Any]] = []
        for segment in session.transcript.segments:
            for message in segment.messages:
                if not message.text:
                    continue
                text = message.text
                if message.status is not None and message.status.value != "complete":
                    text += f" [{message.status.value}]"
                if message.incomplete:
                    text += " [incomplete]"
                entries.append(["inserted" if message.inserted else message.role, text])
            if segment.lost:
                entries.append(["lost", segment.turns])
        return entries

    @staticmethod
    def _earlier_ids(session: SyncSessionHandle) -> list[str]:
        """The ids the session had before new-session recoveries (its conversation may be on
        the screen under one of them)."""
        ids = [segment.session_id for segment in session.transcript.segments]
        return [session_id for session_id in ids if session_id and session_id != session.session_id]

    # -- turns (pynvim's loop; never blocks) -------------------------------------------------------------

    def prompt(self, text: str) -> None:
        client, session = self.client, self.session
        if client is None or session is None:
            self.tell("error", "not connected (:AcpConnect URL)")
            return
        try:
            turn = session.prompt_async(text)
        except AcpError as exc:
            self.tell("error", str(exc))
            return
        session_id = session.session_id
        with self._telling:
            self._cut_said.discard(session_id)
        turn.add_done_callback(lambda future: self.events.put(TurnEnded(session_id, future)))

    def answer_permission(self, request_id: int, choice: str | None) -> None:
        """The user's choice: an option's number (from 1), or nothing (cancelled)."""
        request = self.permissions.pop(request_id, None)
        if request is None:
            return
        options = list(request.options)
        if choice and str(choice).isdigit() and 1 <= int(choice) <= len(options):
            request.select(options[int(choice) - 1].option_id)
        else:
            request.cancel()

    # -- the client's events (event thread) --------------------------------------------------------

    def _pump_events(self) -> None:
        while not self._stop.is_set():
            try:
                event = self.events.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue
            try:
                if isinstance(event, TurnEnded):
                    self._turn_ended(event)
                else:
                    self._forward(event)
            except Exception:
                logger.exception("could not forward %r", event)

    def _turn_ended(self, ended: TurnEnded) -> None:
        future = ended.future
        if future.cancelled():
            return
        error = future.exception()
        if isinstance(error, ConnectionLost):
            self._turn_cut(ended.session_id)  # one banner, whether this or the interruption comes first
        elif error is not None:
            self.tell("turn_failed", ended.session_id, str(error))
        else:
            self.tell("turn_end", ended.session_id, str(future.result().stop_reason))

    def _turn_cut(self, session_id: str) -> None:
        with self._telling:
            if session_id in self._cut_said:
                self._cut_said.discard(session_id)
                self.tell("turn_end", session_id, "cut")  # said already: the turn just ends
                return
            self._cut_said.add(session_id)
            if not self._outage_said:  # "connection lost" first, then what it cut off
                self._cuts_held.append(session_id)
                return
        self.tell("banner", session_id, "the turn was cut off by a drop (the agent may have run it)")

    def _release_cuts(self) -> None:
        held, self._cuts_held = self._cuts_held, []
        for session_id in held:
            self.tell("banner", session_id, "the turn was cut off by a drop (the agent may have run it)")

    def _forward(self, event: SyncEvent) -> None:
        with self._telling:
            if self._opening and isinstance(event, _RECOVERY_EVENTS):
                self._held.append(event)
                return
            self._say(event)

    def _say(self, event: SyncEvent) -> None:
        current = self.session.session_id if self.session is not None else None
        if isinstance(event, StateEvent):
            state = event.payload
            if state.state in (State.RECONNECTING, State.SUSPENDED):
                if not self._outage_said and not self._opening:
                    self._outage_said = True
                    self.tell("banner", current, f"connection lost: {plain_reason(state.cause)}; reconnecting")
            else:
                self._outage_said = False
            self._release_cuts()
            self.tell("state", state.state.value, state.attempt, state.retry_in)
        elif isinstance(event, SessionUpdateEvent):
            update = event.payload
            # A replay rebuilds history the buffer already shows; only live text is streamed.
            if update.replay or update.session_id != current:
                return
            chunk = update.text
            if chunk and update.update.kind in ("agent_message_chunk", "agent_message"):
                self.tell("chunk", update.session_id, chunk)
        elif isinstance(event, ResumeEvent | ReplayEvent | NewSessionEvent | RecoveryFailedEvent):
            outcome = event.payload
            if isinstance(event, NewSessionEvent):
                line = (
                    f"the agent lost session {_short(outcome.previous_session_id)}: "
                    f"continuing in new session {_short(outcome.session_id)}"
                )
                self.tell("lost", outcome.previous_session_id, outcome.session_id, outcome.lost_turns, line)
                return
            if isinstance(event, RecoveryFailedEvent):
                line = f"could not recover session {_short(outcome.previous_session_id or outcome.session_id)}"
            else:
                line = f"recovered by {outcome.path.value}: session {_short(outcome.session_id)}"
                line += f" ({_continuity(outcome)})"
            self.tell("banner", outcome.session_id, line)
        elif isinstance(event, TurnInterruptedEvent):
            self._turn_cut(event.payload.session_id)
        elif isinstance(event, PermissionEvent):
            request = event.payload
            request_id = next(self._permission_ids)
            self.permissions[request_id] = request
            # The choice comes back as the option's number: an agent's option id is never shown,
            # and a printable copy of it would not match.
            options = [
                [str(number), printable(option.name, one_line=True), option.kind]
                for number, option in enumerate(request.options, start=1)
            ]
            self.tell("permission", request_id, request.title or "The agent asks for permission", options)

    # -- the store and status (pynvim's loop) ----------------------------------------------------------

    def info(self) -> dict[str, Any]:
        client = self.client
        transport = client.transport_info if client is not None else None
        return {
            "url": self.url,
            "state": str(client.state) if client is not None else "disconnected",
            "session": self.session.session_id if self.session is not None else None,
            "pid": transport.pid if transport is not None else None,
            "host_pid": os.getpid(),
        }

    def stored_sessions(self) -> list[dict[str, Any]]:
        if self.client is not None:
            records = self.client.stored_sessions()
        elif self.store is not None and self.url is not None:
            records = self.store.load(endpoint_key(self.url))
        else:
            return []
        # ``id`` comes back to switch to the session (exact); everything shown is printable.
        return [
            {
                "id": record.session_id,
                "shown_id": printable(record.session_id, one_line=True),
                "title": printable(record.title or "", one_line=True),
                "cwd": printable(record.cwd, one_line=True),
                "last_used": record.last_used_at.isoformat(timespec="seconds"),
            }
            for record in records
        ]

    # -- the end ------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Close everything this host started (idempotent): the client and its loop thread, the
        agent it spawned (stdio), the worker and event threads."""
        if self._stop.is_set():
            return
        self._stop.set()
        client = self.client
        if client is not None:
            client.close(timeout=_CLOSE_TIMEOUT)  # also ends a connect() the worker may be waiting in
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._disconnect()
        self._pump.join(_CLOSE_TIMEOUT)
        left = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
        logger.info("host stopped; threads left: %s", ", ".join(left) or "none")


def main() -> int:
    log_path = os.environ.get("ACP_NVIM_LOG")
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        logging.basicConfig(
            filename=log_path, level=logging.INFO, format="%(asctime)s %(threadName)s %(name)s %(message)s"
        )
    nvim = pynvim.attach("stdio")
    host = Host(nvim)

    def errors(message: str) -> None:  # pynvim's own errors: the log, never Neovim's message area
        logger.error("%s", message.rstrip())

    try:
        nvim.run_loop(host.on_request, host.on_notification, err_cb=errors)
    finally:
        host.shutdown()
    logger.info("host exits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
