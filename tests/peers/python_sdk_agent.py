"""An ACP echo agent built on the official ACP Python SDK (``agent-client-protocol==0.12.1``).

It is the independent peer our client is tested against: every byte on the wire is produced by the
official SDK (its router, its pydantic models, its stdio and Streamable HTTP / WebSocket servers); only
the agent's behaviour below is ours. It speaks ACP v1 and advertises ``loadSession`` plus the session
capabilities ``list``, ``resume`` and ``close`` -- and deliberately NOT ``session/status``: it is the
"agent without the status capability" peer (a ``session/status`` call answers -32601).

Behaviour (per prompt text, after stripping whitespace):

- anything else: three ``agent_message_chunk`` updates whose concatenation is ``"echo: <text>"``, then
  ``stopReason: end_turn``.
- ``/permission``: a ``session/request_permission`` request (a pending tool call, options ``allow``
  (allow_once) and ``reject`` (reject_once)); then echoes the outcome as ``"echo: permission selected
  <optionId>"`` or ``"echo: permission cancelled"`` (three chunks), ``end_turn``. A ``session/cancel``
  while the request is pending ends the turn with ``cancelled``.
- ``/slow`` (or ``/slow <anything>``, to make each prompt unique): one ``agent_message_chunk``
  ``"tick N "`` every ``--slow-interval`` seconds until a ``session/cancel`` arrives, then
  ``stopReason: cancelled`` (it gives up with ``end_turn`` after ``--slow-max-ticks``).

Sessions live in process memory (optionally mirrored to a JSON ``--store`` file, so a restarted agent
still knows them). A session must be attached to the connection (by ``session/new``, ``session/load`` or
``session/resume`` on it) before it can be prompted there; otherwise ``session/prompt`` answers -32002.
``session/load`` replays the history (a ``user_message_chunk`` and an ``agent_message_chunk`` per turn)
before answering; ``session/resume`` attaches without replay; ``session/close`` drops the session from
memory (a stored copy stays loadable); ``session/list`` lists memory plus store, filtered by ``cwd``.
Unknown sessions answer ``-32002`` with ``data: {"sessionId": ...}``. With ``--received FILE``, every
``session/prompt`` that reaches the agent is appended to FILE (a JSON line: ``sessionId``, ``text``), so a
test can tell which prompts the agent got and how often.

Results of ``session/load`` / ``session/resume`` carry ``sessionId`` by default (an extra field, as the
recorded Python agent in ``transcripts/`` does): the SDK's HTTP server only learns a session on a
connection from a response whose ``result`` has a ``sessionId``; without it, a session loaded or resumed
over Streamable HTTP can never be prompted on that connection. ``--strict-results`` omits it (schema-exact
responses) to reproduce that limitation.

Usage::

    python python_sdk_agent.py --stdio [--store FILE] [options]
    python python_sdk_agent.py --serve --http-fd N [--https-fd M --certfile C --keyfile K] [options]

In ``--serve`` mode hypercorn serves the SDK's ASGI app (``acp.http.asgi.create_asgi_app``) on listening
sockets inherited from the parent (file descriptors; any path works, ``/acp`` by convention): plain
HTTP/1.1 + h2c prior knowledge + WebSocket on ``--http-fd``, TLS (ALPN h2, http/1.1) on ``--https-fd``.
The server shuts down on SIGTERM/SIGINT or when its stdin reaches EOF (the parent died).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

from acp import RequestError, run_agent
from acp.helpers import update_agent_message_text, update_user_message_text
from acp.interfaces import Agent, Client
from acp.schema import (
    AcpMcpServer,
    AgentCapabilities,
    AllowedOutcome,
    AudioContentBlock,
    AuthenticateResponse,
    ClientCapabilities,
    CloseSessionResponse,
    EmbeddedResourceContentBlock,
    ForkSessionResponse,
    HttpMcpServer,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpServerStdio,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    SseMcpServer,
    TextContentBlock,
    ToolCallUpdate,
)
from pydantic import Field

logger = logging.getLogger(__name__)

AGENT_NAME = "acp-python-sdk-peer"
AGENT_VERSION = "0.12.1"

McpServer = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio
PromptBlock = (
    TextContentBlock | ImageContentBlock | AudioContentBlock | ResourceContentBlock | EmbeddedResourceContentBlock
)


class _LoadSessionResponseWithId(LoadSessionResponse):
    """``LoadSessionResponse`` plus the session id, so the SDK's HTTP server registers the session."""

    session_id: Annotated[str, Field(alias="sessionId")]


class _ResumeSessionResponseWithId(ResumeSessionResponse):
    """``ResumeSessionResponse`` plus the session id (see :class:`_LoadSessionResponseWithId`)."""

    session_id: Annotated[str, Field(alias="sessionId")]


def session_not_found(session_id: str) -> RequestError:
    """The ACP "resource not found" error for an unknown session (data carries the session id)."""
    return RequestError(-32002, "Resource not found", {"sessionId": session_id})


def split_in_three(text: str) -> list[str]:
    """Split ``text`` into three consecutive, non-empty (when possible) parts."""
    size = len(text)
    first, second = size // 3, (2 * size) // 3
    return [text[:first], text[first:second], text[second:]]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class _Session:
    """One session's state: where it runs, what was said, and the current turn's cancel signal."""

    def __init__(
        self,
        session_id: str,
        cwd: str,
        history: list[tuple[str, str]] | None = None,
        title: str | None = None,
        updated_at: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.history: list[tuple[str, str]] = list(history or [])
        self.title = title
        self.updated_at = updated_at or _now()
        self.cancel_turn: asyncio.Event | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "title": self.title,
            "updatedAt": self.updated_at,
            "history": [{"user": user, "agent": agent} for user, agent in self.history],
        }

    @classmethod
    def from_json(cls, session_id: str, data: dict[str, Any]) -> _Session:
        history = [(str(turn["user"]), str(turn["agent"])) for turn in data.get("history", [])]
        return cls(session_id, str(data["cwd"]), history, data.get("title"), data.get("updatedAt"))

    def info(self) -> SessionInfo:
        return SessionInfo(session_id=self.session_id, cwd=self.cwd, title=self.title, updated_at=self.updated_at)


class SessionStore:
    """Process-wide sessions: in memory, optionally mirrored to a JSON file that survives restarts."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self._live: dict[str, _Session] = {}

    def create(self, cwd: str) -> _Session:
        session = _Session(f"sess_{uuid.uuid4().hex[:12]}", cwd)
        self._live[session.session_id] = session
        self.save(session)
        return session

    def live(self, session_id: str) -> _Session | None:
        """The session if it is in memory."""
        return self._live.get(session_id)

    def find(self, session_id: str) -> _Session | None:
        """The session from memory, else from the store file (it is then brought into memory)."""
        session = self._live.get(session_id)
        if session is None:
            stored = self._read().get(session_id)
            if stored is not None:
                session = _Session.from_json(session_id, stored)
                self._live[session_id] = session
        return session

    def forget(self, session_id: str) -> None:
        """Drop a session from memory (a stored copy, if any, stays)."""
        self._live.pop(session_id, None)

    def all(self) -> list[_Session]:
        merged = {sid: _Session.from_json(sid, data) for sid, data in self._read().items()}
        merged.update(self._live)
        return sorted(merged.values(), key=lambda s: s.updated_at, reverse=True)

    def save(self, session: _Session) -> None:
        session.updated_at = _now()
        if self._path is None:
            return
        data = self._read()
        data[session.session_id] = session.to_json()
        tmp = self._path.with_name(self._path.name + ".tmp")
        tmp.write_text(json.dumps({"sessions": data}, indent=1), encoding="utf-8")
        os.replace(tmp, self._path)

    def _read(self) -> dict[str, Any]:
        if self._path is None or not self._path.exists():
            return {}
        sessions = json.loads(self._path.read_text(encoding="utf-8")).get("sessions", {})
        return dict(sessions) if isinstance(sessions, dict) else {}


@dataclasses.dataclass(frozen=True)
class AgentOptions:
    """Knobs shared by every connection's agent (set from the command line)."""

    slow_interval: float = 0.05
    slow_max_ticks: int = 2000
    strict_results: bool = False
    load_session: bool = True
    resume: bool = True
    #: A file each received prompt is appended to (one JSON line: session id and text), or ``None``.
    received: Path | None = None


def _append_line(path: Path, line: str) -> None:
    """Append ``line`` to ``path`` at once (a later kill loses nothing written before it)."""
    with path.open("a", encoding="utf-8") as file:
        file.write(line + "\n")


class EchoAgent:
    """The per-connection agent (implements the SDK's :class:`acp.interfaces.Agent` protocol)."""

    def __init__(self, store: SessionStore, options: AgentOptions) -> None:
        self._store = store
        self._options = options
        self._client: Client | None = None
        self._attached: set[str] = set()
        self._tool_calls = 0

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    @property
    def client(self) -> Client:
        if self._client is None:
            raise RequestError.internal_error({"details": "agent is not connected"})
        return self._client

    # -- lifecycle ---------------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        logger.info("initialize: client proposes protocol version %s", protocol_version)
        return InitializeResponse(
            protocol_version=1,
            agent_capabilities=AgentCapabilities(
                load_session=self._options.load_session,
                prompt_capabilities=PromptCapabilities(),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities() if self._options.resume else None,
                    close=SessionCloseCapabilities(),
                ),
            ),
            agent_info=Implementation(name=AGENT_NAME, title="ACP Python SDK echo agent", version=AGENT_VERSION),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse | None:
        raise RequestError.method_not_found("authenticate")

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        session = self._store.create(cwd)
        self._attached.add(session.session_id)
        logger.info("session/new %s (cwd=%s)", session.session_id, cwd)
        return NewSessionResponse(session_id=session.session_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse | None:
        if not self._options.load_session:
            raise RequestError.method_not_found("session/load")
        session = self._store.find(session_id)
        if session is None:
            raise session_not_found(session_id)
        logger.info("session/load %s: replaying %d turns", session_id, len(session.history))
        for user_text, agent_text in list(session.history):
            await self.client.session_update(session_id, update_user_message_text(user_text))
            if agent_text:
                await self.client.session_update(session_id, update_agent_message_text(agent_text))
        self._attached.add(session_id)
        if self._options.strict_results:
            return LoadSessionResponse()
        return _LoadSessionResponseWithId(session_id=session_id)

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        if not self._options.resume:
            raise RequestError.method_not_found("session/resume")
        session = self._store.find(session_id)
        if session is None:
            raise session_not_found(session_id)
        logger.info("session/resume %s", session_id)
        self._attached.add(session_id)
        if self._options.strict_results:
            return ResumeSessionResponse()
        return _ResumeSessionResponseWithId(session_id=session_id)

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        raise RequestError.method_not_found("session/fork")

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse | None:
        session = self._store.live(session_id)
        if session is None:
            raise session_not_found(session_id)
        if session.cancel_turn is not None:
            session.cancel_turn.set()
        self._store.forget(session_id)
        self._attached.discard(session_id)
        logger.info("session/close %s", session_id)
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        sessions = [s.info() for s in self._store.all() if cwd is None or s.cwd == cwd]
        return ListSessionsResponse(sessions=sessions)

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse | None:
        raise RequestError.method_not_found("session/set_mode")

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse | None:
        raise RequestError.method_not_found("session/set_config_option")

    # -- turns -------------------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[PromptBlock], **kwargs: Any) -> PromptResponse:
        text = "".join(block.text for block in prompt if isinstance(block, TextContentBlock))
        if self._options.received is not None:  # every prompt that reached the agent, refused or not
            _append_line(self._options.received, json.dumps({"sessionId": session_id, "text": text}))
        session = self._store.live(session_id)
        if session is None or session_id not in self._attached:
            raise session_not_found(session_id)
        if session.title is None:
            session.title = text[:40]
        cancel = asyncio.Event()
        session.cancel_turn = cancel
        try:
            command = text.strip()
            if command == "/slow" or command.startswith("/slow "):
                return await self._slow_turn(session, text, cancel)
            if command == "/permission":
                return await self._permission_turn(session, text, cancel)
            await self._say(session, text, f"echo: {text}")
            return PromptResponse(stop_reason="end_turn")
        finally:
            if session.cancel_turn is cancel:
                session.cancel_turn = None

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._store.live(session_id)
        if session is not None and session.cancel_turn is not None:
            logger.info("session/cancel %s", session_id)
            session.cancel_turn.set()

    async def _say(self, session: _Session, user_text: str, reply: str) -> None:
        for part in split_in_three(reply):
            await self.client.session_update(session.session_id, update_agent_message_text(part))
        session.history.append((user_text, reply))
        self._store.save(session)

    async def _slow_turn(self, session: _Session, user_text: str, cancel: asyncio.Event) -> PromptResponse:
        streamed: list[str] = []
        stop_reason: str = "end_turn"
        for tick in range(1, self._options.slow_max_ticks + 1):
            chunk = f"tick {tick} "
            await self.client.session_update(session.session_id, update_agent_message_text(chunk))
            streamed.append(chunk)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(cancel.wait(), timeout=self._options.slow_interval)
            if cancel.is_set():
                stop_reason = "cancelled"
                break
        session.history.append((user_text, "".join(streamed)))
        self._store.save(session)
        return PromptResponse(stop_reason="cancelled" if stop_reason == "cancelled" else "end_turn")

    async def _permission_turn(self, session: _Session, user_text: str, cancel: asyncio.Event) -> PromptResponse:
        self._tool_calls += 1
        tool_call = ToolCallUpdate(
            tool_call_id=f"call_{self._tool_calls}", title="Write to notes.txt", kind="edit", status="pending"
        )
        options = [
            PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
            PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ]
        ask = asyncio.ensure_future(self.client.request_permission(session.session_id, tool_call, options))
        cancelled = asyncio.ensure_future(cancel.wait())
        try:
            await asyncio.wait({ask, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
        if not ask.done():
            ask.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ask
            session.history.append((user_text, ""))
            self._store.save(session)
            return PromptResponse(stop_reason="cancelled")
        outcome = ask.result().outcome
        verdict = f"selected {outcome.option_id}" if isinstance(outcome, AllowedOutcome) else "cancelled"
        await self._say(session, user_text, f"echo: permission {verdict}")
        return PromptResponse(stop_reason="end_turn")

    # -- extensions ---------------------------------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _typed(agent: EchoAgent) -> Agent:
    """Check statically that :class:`EchoAgent` satisfies the SDK's ``Agent`` protocol."""
    return agent


# -- entry points ----------------------------------------------------------------------------------


async def _run_stdio(store: SessionStore, options: AgentOptions) -> None:
    await run_agent(_typed(EchoAgent(store, options)), use_unstable_protocol=True)


def _enable_unstable_methods_in_http_server() -> None:
    """Let the SDK's HTTP/WS server route ``session/resume`` and ``session/close``.

    In 0.12.1 those methods are "unstable": the router answers -32601 unless the ``AgentSideConnection`` is
    built with ``use_unstable_protocol=True``, and ``acp.http.server.ConnectionState`` builds it without
    that flag (there is no knob). ``run_agent`` (stdio) takes the flag directly.
    """
    import acp.http.server as http_server
    from acp.agent.connection import AgentSideConnection

    http_server.AgentSideConnection = functools.partial(  # type: ignore[attr-defined,assignment]  # no public knob
        AgentSideConnection, use_unstable_protocol=True
    )


async def _watch_stdin_eof(stop: asyncio.Event) -> None:
    """Set ``stop`` when stdin reaches EOF (the parent that holds its other end is gone)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(4096):
        pass
    stop.set()


async def _serve(args: argparse.Namespace, store: SessionStore, options: AgentOptions) -> None:
    from acp.http.asgi import create_asgi_app
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    if not args.stock_http_server:
        _enable_unstable_methods_in_http_server()
    app = create_asgi_app(lambda _conn: _typed(EchoAgent(store, options)))

    config = Config()
    config.accesslog = None
    config.graceful_timeout = 1.0
    if args.https_fd is not None:
        config.certfile = args.certfile
        config.keyfile = args.keyfile
        config.bind = [f"fd://{args.https_fd}"]
        config.insecure_bind = [f"fd://{args.http_fd}"]
    else:
        config.bind = [f"fd://{args.http_fd}"]

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    watcher = asyncio.ensure_future(_watch_stdin_eof(stop)) if args.exit_on_stdin_eof else None
    try:
        await serve(app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]  # ASGI app typing
    finally:
        if watcher is not None:
            watcher.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="serve one client over stdin/stdout")
    mode.add_argument("--serve", action="store_true", help="serve Streamable HTTP + WebSocket on inherited fds")
    parser.add_argument("--http-fd", type=int, help="listening socket for plain HTTP/1.1, h2c and WebSocket")
    parser.add_argument("--https-fd", type=int, help="listening socket for TLS (needs --certfile/--keyfile)")
    parser.add_argument("--certfile")
    parser.add_argument("--keyfile")
    parser.add_argument("--exit-on-stdin-eof", action="store_true", help="(--serve) stop when stdin closes")
    parser.add_argument("--store", type=Path, help="JSON file mirroring the sessions (survives restarts)")
    parser.add_argument("--slow-interval", type=float, default=0.05, help="seconds between /slow ticks")
    parser.add_argument("--slow-max-ticks", type=int, default=2000, help="/slow gives up after this many ticks")
    parser.add_argument(
        "--strict-results",
        action="store_true",
        help="schema-exact session/load and session/resume results (no sessionId)",
    )
    parser.add_argument("--no-load-session", action="store_true", help="do not advertise or serve session/load")
    parser.add_argument("--no-resume", action="store_true", help="do not advertise or serve session/resume")
    parser.add_argument(
        "--stock-http-server",
        action="store_true",
        help="(--serve) leave the SDK server as shipped: session/resume and close answer -32601",
    )
    parser.add_argument("--received", type=Path, help="append every prompt received to this file (JSON lines)")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)

    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    store = SessionStore(args.store)
    options = AgentOptions(
        slow_interval=args.slow_interval,
        slow_max_ticks=args.slow_max_ticks,
        strict_results=args.strict_results,
        load_session=not args.no_load_session,
        resume=not args.no_resume,
        received=args.received,
    )
    if args.stdio:
        asyncio.run(_run_stdio(store, options))
        return
    if args.http_fd is None:
        parser.error("--serve needs --http-fd")
    if args.https_fd is not None and not (args.certfile and args.keyfile):
        parser.error("--https-fd needs --certfile and --keyfile")
    asyncio.run(_serve(args, store, options))


if __name__ == "__main__":
    main()
