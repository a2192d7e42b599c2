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

from acp_client import AcpError, PromptResult, RecoveryOutcome, RetryPolicy
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
        self._stop = threading.Event()
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="acp-nvim-worker")
        self._pump = threading.Thread(target=self._pump_events, name="acp-nvim-events", daemon=True)
        self._pump.start()

    # -- talking to Lua (only ever from pynvim's loop) ------------------------------------------

    def tell(self, what: str, *args: Any) -> None:
        """Hand ``require('acp')._on(what, ...)`` to Neovim without waiting (any thread)."""

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
        else:
            logger.warning("unknown notification %r", name)

    def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except AcpError as exc:
            logger.info("%s failed: %s", fn.__name__, exc)
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
        self.tell(
            "connected", url, self.session.session_id, self._history(self.session), restored, info.kind if info else ""
        )

    def _switch(self, session_id: str) -> None:
        if self.client is None:
            raise AcpError("not connected (:AcpConnect URL)")
        self.session = self.client.session(session_id)
        self.tell("switched", self.session.session_id, self._history(self.session))

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
    def _history(session: SyncSessionHandle) -> list[list[str]]:
        """The conversation the handle holds (restored from the store after a restart); text the
        agent put among its replayed prompts has the role ``inserted`` (shown as the agent's)."""
        return [
            ["inserted" if message.inserted else message.role, message.text]
            for message in session.transcript.messages
            if message.text
        ]

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
        turn.add_done_callback(lambda future: self.events.put(TurnEnded(session_id, future)))

    def answer_permission(self, request_id: int, option_id: str | None) -> None:
        request = self.permissions.pop(request_id, None)
        if request is None:
            return
        if option_id:
            request.select(option_id)
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
        if error is not None:
            self.tell("turn_failed", ended.session_id, str(error))
        else:
            self.tell("turn_end", ended.session_id, str(future.result().stop_reason))

    def _forward(self, event: SyncEvent) -> None:
        current = self.session.session_id if self.session is not None else None
        if isinstance(event, StateEvent):
            state = event.payload
            text = state.state.value
            if state.attempt is not None:
                text += f" (attempt {state.attempt}, retry in {state.retry_in or 0:.1f}s)"
            self.tell("state", text, state.state.value)
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
            elif isinstance(event, RecoveryFailedEvent):
                line = f"could not recover session {_short(outcome.previous_session_id or outcome.session_id)}"
            else:
                line = f"recovered by {outcome.path.value}: session {_short(outcome.session_id)}"
                line += f" ({_continuity(outcome)})"
            self.tell("banner", outcome.session_id, line)
        elif isinstance(event, TurnInterruptedEvent):
            cut = event.payload
            self.tell("banner", cut.session_id, "the turn was cut off by a drop (the agent may have run it)")
        elif isinstance(event, PermissionEvent):
            request = event.payload
            request_id = next(self._permission_ids)
            self.permissions[request_id] = request
            options = [[option.option_id, option.name, option.kind] for option in request.options]
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
        return [
            {
                "id": record.session_id,
                "title": record.title or "",
                "cwd": record.cwd,
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
