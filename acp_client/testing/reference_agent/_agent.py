"""The transport-independent core of the reference agent: sessions, history, behaviour, controls.

A :class:`ReferenceAgent` answers ACP v1 and v2 with plain JSON dicts. Each client link is an
:class:`AgentConnection` obtained from :meth:`ReferenceAgent.connect`; a transport feeds it inbound
messages (:meth:`AgentConnection.handle` / :meth:`AgentConnection.handle_frame`) and gives it a
``send`` callable for outbound ones. :meth:`ReferenceAgent.serve` does that for any
:class:`~acp_client.transports.base.Transport` (for example one end of
:func:`~acp_client.transports.memory.memory_pair`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import shlex
import uuid
from collections.abc import Awaitable, Callable, Iterable
from importlib import metadata
from typing import Any, Final, Literal

import attrs

from ..._codec._jsonrpc import (
    ErrorResponse,
    IdAllocator,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    classify,
    decode_frame,
    error_message,
    notification_message,
    request_message,
    result_message,
)
from ...clock import Clock, SystemClock
from ...exceptions import (
    ConfigurationError,
    InvalidParams,
    InvalidRequest,
    MalformedFrame,
    MessageTooLarge,
    RpcError,
    TransportClosed,
    TransportError,
)
from ...transports.base import Transport
from ._faults import ESCAPES, check_faults, naive_time
from ._meta_log import MetaLog
from ._store import HistoryEntry, SessionStore, StoredSession, utc_now

logger = logging.getLogger(__name__)

#: ``send(message, cause)``: deliver one outbound message. ``cause`` is the id of the client
#: request that produced it (its answer, or an update / agent request of that request's work),
#: or ``None``. The HTTP server uses it to keep a request's messages on one SSE stream.
SendCallable = Callable[[dict[str, Any], RequestId | None], Awaitable[None]]

LATEST_PROTOCOL_VERSION: Final = 2
SUPPORTED_PROTOCOL_VERSIONS: Final = (1, 2)
#: How long a ``/slow`` turn streams before ending on its own.
SLOW_TURN_LIMIT: Final = 600.0
#: The shortest pause between two ``/slow`` chunks.
SLOW_TICK_MIN: Final = 0.05

_VOCABULARIES: Final = {"proposal": ("active", "inactive"), "sdk": ("open", "saved")}
#: The ``Session`` schema's members that are always present, ``null`` when empty.
_REQUIRED_NULLABLE: Final = ("activeTurnId", "forkedFrom", "modelId", "providerId", "workspaceRoot")


def _package_version() -> str:
    try:
        return metadata.version("acp-reconnect")
    except metadata.PackageNotFoundError:
        return "0"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def split_text(text: str, pieces: int) -> list[str]:
    """Split ``text`` into exactly ``pieces`` parts that concatenate back to it.

    Whole words (with their trailing spaces) are kept together when there are enough of them,
    so ``"echo: hello there"`` in 3 pieces is ``["echo: ", "hello ", "there"]``.
    """
    if pieces <= 1:
        return [text]
    tokens = re.findall(r"\S+\s*|\s+", text)
    if len(tokens) < pieces:
        tokens = list(text)
    if len(tokens) < pieces:
        return tokens + [""] * (pieces - len(tokens))
    base, extra = divmod(len(tokens), pieces)  # the first ``extra`` pieces take one token more
    starts = [index * base + min(index, extra) for index in range(pieces + 1)]
    return ["".join(tokens[starts[index] : starts[index + 1]]) for index in range(pieces)]


@attrs.frozen
class SessionSnapshot:
    """What a test can see of one session (from :attr:`ReferenceAgent.sessions`).

    Attributes:
        in_memory: Whether the agent has it in memory (``session/status`` says active / open).
        stored: Whether the store has it.
        history_length: How many messages its history holds.
        state: ``"idle"``, ``"running"`` or ``"requires_action"`` when in memory, else ``None``.
        attached_connections: How many client connections it is attached to.
        title: Its title (the start of the first prompt), or ``None``.
    """

    session_id: str
    cwd: str
    in_memory: bool
    stored: bool
    history_length: int
    state: str | None
    attached_connections: int
    title: str | None


class _LiveSession:
    """A session in the agent's memory."""

    def __init__(self, record: StoredSession) -> None:
        self.session_id = record.session_id
        self.cwd = record.cwd
        self.mcp_servers = record.mcp_servers
        self.created_at = record.created_at
        self.title = record.title
        self.history: list[HistoryEntry] = list(record.history)
        self.state = "idle"
        self.attached: set[AgentConnection] = set()
        self.turn: _Turn | None = None

    def record(self) -> StoredSession:
        return StoredSession(
            session_id=self.session_id,
            cwd=self.cwd,
            mcp_servers=self.mcp_servers,
            created_at=self.created_at,
            updated_at=utc_now(),
            title=self.title,
            history=tuple(self.history),
        )


_CancelReason = Literal["cancel", "request", "gone", "closed"]


class _Turn:
    """One running ``session/prompt``."""

    def __init__(self, session: _LiveSession, request_id: RequestId) -> None:
        self.session = session
        self.request_id = request_id
        self.agent_message_id = _new_id("msg")
        self.sent: list[str] = []
        self.answered = False
        self.started = False
        self.cancel_reason: _CancelReason | None = None
        self.task: asyncio.Task[None] | None = None

    def cancel(self, reason: _CancelReason) -> None:
        if self.task is None or self.task.done():
            return
        if self.cancel_reason is None or reason in ("gone", "closed"):
            self.cancel_reason = reason
        if self.started:  # a task cancelled before its first step would skip the turn's cleanup
            self.task.cancel()


class ReferenceAgent:
    """An echo agent speaking ACP v1 and v2, with the controls recovery tests need.

    The core is transport-independent; serve it with :class:`ReferenceServer` (WebSocket and
    Streamable HTTP), over stdio (``python -m acp_client.testing.reference_agent --stdio``), or over
    any :class:`~acp_client.transports.base.Transport` with :meth:`serve`.

    The plain attributes below may be changed at runtime (``agent.advertise_status = False``); the
    next ``initialize`` advertises the new capabilities, and a method whose capability is hidden
    answers ``-32601``.

    Args:
        name: ``agentInfo.name`` / ``info.name``.
        advertise_status: Advertise and serve ``session/status``.
        advertise_resume: Advertise and serve ``session/resume``.
        advertise_load: Advertise and serve ``session/load`` (v1 only; v2 has no load).
        status_vocabulary: ``"proposal"`` answers ``active`` / ``inactive``; ``"sdk"`` answers
            ``open`` / ``saved`` (the TypeScript SDK 2.4.0 spelling).
        chunks_per_prompt: How many ``agent_message_chunk`` updates each answer is split into.
        chunk_delay: Seconds between two chunks (through ``clock``).
        store: Where sessions persist across a restart (:meth:`lose_memory`); a fresh in-memory
            :class:`SessionStore` by default.
        clock: The clock used for ``chunk_delay`` and ``/slow`` pauses (a
            :class:`~acp_client.testing.FakeClock` makes them instant).
        faults: Deliberate defects, by name (see :data:`~._faults.FAULTS`); none by default.

    Raises:
        ConfigurationError: ``status_vocabulary`` is unknown, ``chunks_per_prompt`` is below 1,
            ``chunk_delay`` is negative, or a fault is unknown.
    """

    def __init__(
        self,
        *,
        name: str = "acp-reference-agent",
        advertise_status: bool = True,
        advertise_resume: bool = True,
        advertise_load: bool = True,
        status_vocabulary: Literal["proposal", "sdk"] = "proposal",
        chunks_per_prompt: int = 3,
        chunk_delay: float = 0.0,
        store: SessionStore | None = None,
        clock: Clock | None = None,
        faults: Iterable[str] = (),
    ) -> None:
        if status_vocabulary not in _VOCABULARIES:
            raise ConfigurationError(f"status_vocabulary must be 'proposal' or 'sdk', not {status_vocabulary!r}")
        if chunks_per_prompt < 1:
            raise ConfigurationError("chunks_per_prompt must be at least 1")
        if chunk_delay < 0:
            raise ConfigurationError("chunk_delay cannot be negative")
        self.name = name
        self.version = _package_version()
        self.advertise_status = advertise_status
        self.advertise_resume = advertise_resume
        self.advertise_load = advertise_load
        self.status_vocabulary: Literal["proposal", "sdk"] = status_vocabulary
        self.chunks_per_prompt = chunks_per_prompt
        self.chunk_delay = chunk_delay
        #: How many sessions one ``session/list`` page holds.
        self.list_page_size = 50
        #: How "session not found" is spelled (``None``: -32002 with ``data.sessionId``), to imitate
        #: the agents in the wild (``acp_client._recovery._not_found`` has the spellings seen).
        self.not_found_error: Callable[[str], RpcError] | None = None
        self.store = store if store is not None else SessionStore()
        self.clock: Clock = clock if clock is not None else SystemClock()
        #: The deliberate defects in force (may be changed at runtime).
        self.faults: frozenset[str] = check_faults(faults)
        #: ``cancel-owes-next-turn``: per session, the answer owed to the turn after (``None``: the next turn's).
        self._owed: dict[str, str | None] = {}
        self._last_new: str | None = None
        #: The tool calls of the ``escapes`` fault, by session (a replay repeats them; kept by this
        #: object across lose_memory(), not in the store).
        self._tool_calls: dict[str, list[dict[str, Any]]] = {}
        self._live: dict[str, _LiveSession] = {}
        self._connections: set[AgentConnection] = set()
        self._stalled = False
        #: How many requests arrived while stalled (and were never answered).
        self.stalled_requests = 0
        #: The ``_meta`` of every request received, and the trace context of the requests the
        #: agent sends on their behalf (see :mod:`._meta_log`).
        self.meta_log = MetaLog()

    def __repr__(self) -> str:
        return f"ReferenceAgent(name={self.name!r}, sessions_in_memory={len(self._live)})"

    def lose_memory(self) -> None:
        """Forget every in-memory session: what a restarted agent process has lost, and only that.

        The store is kept, so those sessions now answer ``session/status`` with ``inactive``
        (``saved``). Running turns stop; a v1 prompt still pending is answered with ``-32603``.

        Open connections stay open, attached to nothing: a client on one sees no drop, so it never
        recovers (its requests are refused). A restart also ends every connection: use
        :meth:`ReferenceServer.restart() <acp_client.testing.ReferenceServer.restart>`, or cut the
        links right after this (``FaultProxy.cut()``, ``MemoryConnector.drop()``).
        """
        for live in list(self._live.values()):
            self._forget(live)
        logger.info("reference agent restarted: memory cleared, %d stored sessions kept", len(self.store.list()))

    def unload(self, session_id: str) -> None:
        """Forget ``session_id`` in memory only, as a restart does to every session: it is kept
        in the store and answers ``inactive`` (``saved``)."""
        live = self._live.get(session_id)
        if live is not None:
            self._forget(live)

    def not_found(self, session_id: str) -> RpcError:
        """The error this agent answers for a session it does not know (see ``not_found_error``)."""
        if self.not_found_error is not None:
            return self.not_found_error(session_id)
        if "not-found-internal" in self.faults:
            return RpcError("Internal error", code=-32603, data={"details": "Session not found"})
        return RpcError.session_not_found(session_id)

    def evict(self, session_id: str) -> None:
        """Forget ``session_id`` in memory and in the store (it then answers ``-32002``)."""
        self.unload(session_id)
        self.store.delete(session_id)
        logger.info("reference agent evicted session %s", session_id)

    def stall(self, on: bool = True) -> None:
        """While stalled, requests are read but never answered (notifications still act)."""
        self._stalled = on

    @property
    def stalled(self) -> bool:
        """Whether the agent is stalled (see :meth:`stall`)."""
        return self._stalled

    @property
    def sessions(self) -> dict[str, SessionSnapshot]:
        """Every session the agent knows (in memory or stored), by id, oldest first."""
        stored = {record.session_id: record for record in self.store.list()}
        ids = [*stored, *(session_id for session_id in self._live if session_id not in stored)]
        return {session_id: self._snapshot(self._live.get(session_id), stored.get(session_id)) for session_id in ids}

    @property
    def connection_count(self) -> int:
        """How many client connections are open on this agent (all transports)."""
        return len(self._connections)

    def connect(self, send: SendCallable) -> AgentConnection:
        """Open a connection for one client link.

        Args:
            send: Called with each outbound message and the id of the request that caused it.
                It may raise :class:`~acp_client.exceptions.TransportError` when the link is gone.

        Returns:
            The connection; feed it inbound messages and :meth:`AgentConnection.close` it when
            the link ends.
        """
        connection = AgentConnection(self, send)
        self._connections.add(connection)
        return connection

    async def serve(self, transport: Transport) -> None:
        """Serve one client over ``transport`` until the link ends, then close it.

        Undecodable frames are answered with a ``-32700`` error, as on every transport.
        """

        async def send(message: dict[str, Any], cause: RequestId | None) -> None:
            await transport.send(message)

        connection = self.connect(send)
        try:
            while True:
                try:
                    message = await transport.receive()
                except (MalformedFrame, MessageTooLarge) as exc:
                    await connection.report_bad_frame(exc)
                    continue
                except TransportClosed:
                    break
                await connection.handle(message)
        finally:
            await connection.close()
            await transport.aclose()

    @staticmethod
    def _snapshot(live: _LiveSession | None, record: StoredSession | None) -> SessionSnapshot:
        source = live if live is not None else record
        assert source is not None
        return SessionSnapshot(
            session_id=source.session_id,
            cwd=source.cwd,
            in_memory=live is not None,
            stored=record is not None,
            history_length=len(source.history),
            state=live.state if live is not None else None,
            attached_connections=len(live.attached) if live is not None else 0,
            title=source.title,
        )

    def _forget(self, live: _LiveSession) -> None:
        self._live.pop(live.session_id, None)
        if live.turn is not None:
            live.turn.cancel("gone")
        live.attached.clear()

    def _persist(self, live: _LiveSession) -> None:
        if self._live.get(live.session_id) is live:
            self.store.save(live.record())

    def _behind_store(self, live: _LiveSession) -> bool:
        """Whether the store holds a history that this copy lacks: the session went on on another
        instance sharing the store, and saving this copy would throw those turns away."""
        stored = self.store.load(live.session_id)
        if stored is None:
            return False
        mine = live.record().history
        return len(stored.history) > len(mine) or mine[: len(stored.history)] != stored.history

    def knows_session(self, session_id: str) -> bool:
        """Whether ``session_id`` is in memory or in the store (no side effects)."""
        return session_id in self._live or session_id in self.store

    def _bring_into_memory(self, session_id: str) -> _LiveSession | None:
        if session_id not in self._live:
            record = self.store.load(session_id)
            if record is None:
                return None
            self._live[session_id] = _LiveSession(record)
        return self._live[session_id]

    def _new_session_id(self) -> str:
        session_id = _new_id("sess")
        return f"{session_id}{ESCAPES}" if "escape-ids" in self.faults else session_id

    def _create_session(
        self,
        cwd: str,
        mcp_servers: tuple[dict[str, Any], ...],
        history: tuple[HistoryEntry, ...] = (),
        title: str | None = None,
    ) -> _LiveSession:
        session_id = self._new_session_id()
        while self.knows_session(session_id):
            session_id = self._new_session_id()
        live = _LiveSession(
            StoredSession(session_id=session_id, cwd=cwd, mcp_servers=mcp_servers, title=title, history=history)
        )
        self._live[session_id] = live
        self._persist(live)
        return live

    def _status_word(self, in_memory: bool) -> str:
        active, inactive = _VOCABULARIES[self.status_vocabulary]
        return active if in_memory else inactive

    @property
    def hostile(self) -> bool:
        """Whether the ``escapes`` fault is on: agent-controlled text carries :data:`~._faults.ESCAPES`."""
        return "escapes" in self.faults

    def _text(self, text: str) -> str:
        return f"{text} {ESCAPES}" if self.hostile else text

    def _info(self) -> dict[str, Any]:
        return {"name": self.name, "title": "ACP reference agent (acp_client.testing)", "version": self.version}

    def _session_capabilities(self) -> dict[str, Any]:
        hidden = {"resume": not self.advertise_resume, "status": not self.advertise_status}
        return {name: {} for name in ("resume", "close", "list", "fork", "status") if not hidden.get(name)}


def _session_id_param(params: Any) -> str:
    if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str) or not params["sessionId"]:
        raise RpcError.invalid_params("sessionId (a non-empty string) is required")
    return str(params["sessionId"])


def _text_of(blocks: Any) -> str:
    if not isinstance(blocks, list):
        return ""
    return "".join(
        str(block.get("text", "")) for block in blocks if isinstance(block, dict) and block.get("type") == "text"
    )


class AgentConnection:
    """The agent's side of one client link (create with :meth:`ReferenceAgent.connect`).

    Attributes:
        id: A random id (the HTTP and WebSocket servers use it as ``Acp-Connection-Id``).
        protocol_version: The version negotiated by ``initialize``, or ``None`` before it.
    """

    def __init__(self, agent: ReferenceAgent, send: SendCallable) -> None:
        self.id = uuid.uuid4().hex
        self.protocol_version: int | None = None
        self._agent = agent
        self._send = send
        self._closed = False
        self._ids = IdAllocator()
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._turns: dict[str, _Turn] = {}

    def __repr__(self) -> str:
        return f"AgentConnection({self.id}, v{self.protocol_version}, closed={self._closed})"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def attached_session_ids(self) -> frozenset[str]:
        """The sessions this connection created, loaded, resumed or forked (and still in memory)."""
        return frozenset(sid for sid, live in self._agent._live.items() if self in live.attached)

    def is_attached(self, session_id: str) -> bool:
        """Whether ``session_id`` is attached to this connection."""
        return session_id in self.attached_session_ids

    async def handle_frame(self, data: str | bytes) -> None:
        """Decode one inbound frame and handle it; an undecodable frame is answered ``-32700``."""
        try:
            message = decode_frame(data)
        except MalformedFrame as exc:
            await self.report_bad_frame(exc)
            return
        await self.handle(message)

    async def report_bad_frame(self, exc: Exception) -> None:
        """Answer a frame that could not be decoded (``-32700``, id ``null``)."""
        logger.warning("reference agent got an undecodable frame: %s", exc)
        await self._emit(error_message(None, -32700, f"Parse error: {exc}"), None)

    async def handle(self, message: Message) -> None:
        """Handle one decoded inbound message (a dict, or a batch which is refused)."""
        if self._closed:
            return
        if isinstance(message, list):
            await self._emit(error_message(None, -32600, "Invalid request: JSON-RPC batches are not supported"), None)
            return
        try:
            item = classify(message)
        except MalformedFrame as exc:
            raw_id = message.get("id") if isinstance(message, dict) else None
            request_id = raw_id if isinstance(raw_id, int | str) and not isinstance(raw_id, bool) else None
            await self._emit(error_message(request_id, -32600, f"Invalid request: {exc}"), request_id)
            return
        if isinstance(item, Response | ErrorResponse):
            self._resolve(item)
        elif isinstance(item, Notification):
            await self._notification(item)
        else:
            await self._request(item)

    async def close(self) -> None:
        """End the connection: stop the turns it started, detach it from its sessions."""
        if self._closed:
            return
        self._closed = True
        self._agent._connections.discard(self)
        turns = list(self._turns.values())
        for turn in turns:
            turn.cancel("closed")
        tasks = [turn.task for turn in turns if turn.task is not None]
        if tasks:
            await asyncio.wait(tasks)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(TransportClosed("the connection closed"))
        self._pending.clear()
        for live in self._agent._live.values():
            live.attached.discard(self)

    async def _emit(self, message: dict[str, Any], cause: RequestId | None) -> None:
        if self._closed:
            return
        await self._send(message, cause)

    async def _update(self, live: _LiveSession, update: dict[str, Any], cause: RequestId | None) -> None:
        await self._emit(
            notification_message("session/update", {"sessionId": live.session_id, "update": update}), cause
        )

    async def _call_client(self, method: str, params: dict[str, Any], cause: RequestId | None) -> Any:
        request_id = self._ids()
        key = str(request_id)
        params = self._agent.meta_log.outgoing(cause, method, params)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            await self._emit(request_message(request_id, method, params), cause)
            return await future
        except asyncio.CancelledError:
            if not self._closed:
                with contextlib.suppress(TransportError):
                    await self._emit(notification_message("$/cancel_request", {"requestId": request_id}), cause)
            raise
        finally:
            self._pending.pop(key, None)

    def _resolve(self, item: Response | ErrorResponse) -> None:
        future = self._pending.get(str(item.id)) if item.id is not None else None
        if future is None or future.done():
            logger.debug("reference agent ignored a response to unknown request %r", item.id)
            return
        if isinstance(item, Response):
            future.set_result(item.result)
        else:
            future.set_exception(RpcError.from_error(item.code, item.message, item.data))

    async def _notification(self, item: Notification) -> None:
        params = item.params if isinstance(item.params, dict) else {}
        if "answer-notifications" in self._agent.faults:
            await self._emit(error_message(None, -32601, f"Method not found: {item.method}"), None)
        if item.method == "session/cancel" and "ignore-cancel" in self._agent.faults:
            return
        if item.method == "session/cancel":
            session_id = params.get("sessionId")
            live = self._agent._live.get(session_id) if isinstance(session_id, str) else None
            if live is not None and live.turn is not None:
                live.turn.cancel("cancel")
        elif item.method == "$/cancel_request":
            raw = params.get("requestId")
            turn = self._turns.get(str(raw)) if raw is not None else None
            if turn is not None and not turn.answered:
                turn.cancel("request")
        else:
            logger.debug("reference agent ignored notification %s", item.method)

    async def _request(self, item: Request) -> None:
        self._agent.meta_log.request_received(item.id, item.method, item.params)
        if self._agent.stalled:
            self._agent.stalled_requests += 1
            logger.debug("reference agent is stalled: %s id=%r will never be answered", item.method, item.id)
            return
        if item.method == "session/status" and "hang-status" in self._agent.faults:
            return
        try:
            if item.method == "session/prompt":
                self._start_turn(item)
                return
            if item.method == "session/cancel":  # a notification; be lenient when sent as a request
                await self._notification(Notification(item.method, item.params))
                result: dict[str, Any] = {}
            else:
                result = await self._dispatch(item)
        except RpcError as exc:
            await self._emit(error_message(item.id, exc.code, self._agent._text(exc.message), exc.data), item.id)
            return
        except TransportError:
            return
        except Exception as exc:
            logger.exception("reference agent failed on %s", item.method)
            await self._emit(error_message(item.id, -32603, self._agent._text(f"Internal error: {exc}")), item.id)
            return
        await self._emit(result_message(item.id, result), item.id)
        if item.method == "session/new" and "pre-prompt-chunk" in self._agent.faults:
            await self._greet(str(result.get("sessionId")))

    async def _greet(self, session_id: str) -> None:
        """The ``pre-prompt-chunk`` fault: a greeting a moment after ``session/new`` answered, before any prompt."""
        await self._agent.clock.sleep(0.05)
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi! Ready."}}
        with contextlib.suppress(TransportError):
            await self._emit(notification_message("session/update", {"sessionId": session_id, "update": update}), None)

    def _check_method(self, method: str) -> None:
        agent = self._agent
        v2 = self.protocol_version == 2
        hidden = (
            (method == "session/status" and not agent.advertise_status)
            or (method == "session/resume" and not agent.advertise_resume)
            or (method == "session/load" and (v2 or not agent.advertise_load))
            or (method == "session/resume" and "resume-not-found" in agent.faults)
        )
        if hidden:
            raise self._method_not_found(method)

    def _method_not_found(self, method: str) -> RpcError:
        if "unknown-method-internal" in self._agent.faults:
            return RpcError(f"Unknown method: {method}", code=-32603)
        return RpcError.method_not_found(method)

    async def _dispatch(self, item: Request) -> dict[str, Any]:
        method, params = item.method, item.params
        if method == "initialize":
            return self._initialize(params)
        handlers = {
            "session/new": self._session_new,
            "session/status": self._session_status,
            "session/load": self._session_load,
            "session/resume": self._session_resume,
            "session/list": self._session_list,
            "session/close": self._session_close,
            "session/fork": self._session_fork,
        }
        handler = handlers.get(method)
        if handler is None:
            raise self._method_not_found(method)
        if self.protocol_version is None:
            raise InvalidRequest("Invalid request: send initialize first")
        self._check_method(method)
        return await handler(params if isinstance(params, dict) else {}, item.id)

    def _initialize(self, params: Any) -> dict[str, Any]:
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        valid = isinstance(requested, int) and not isinstance(requested, bool)
        version = requested if valid and requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        self.protocol_version = version
        agent = self._agent
        silent = "no-capabilities" in agent.faults
        if version == 1:
            capabilities: dict[str, Any] = {"loadSession": True} if agent.advertise_load and not silent else {}
            capabilities["promptCapabilities"] = {"image": False, "audio": False, "embeddedContext": False}
            capabilities["sessionCapabilities"] = {} if silent else agent._session_capabilities()
            return {
                "protocolVersion": 1,
                "agentCapabilities": capabilities,
                "agentInfo": agent._info(),
                "authMethods": [],
            }
        return {
            "protocolVersion": 2,
            "info": agent._info(),
            "capabilities": {} if silent else {"session": agent._session_capabilities()},
        }

    async def _session_new(self, params: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not cwd:
            raise RpcError.invalid_params("cwd (a non-empty string) is required")
        servers = params.get("mcpServers") or []
        if not isinstance(servers, list):
            raise RpcError.invalid_params("mcpServers must be an array")
        agent = self._agent
        if "reuse-session-id" in agent.faults and agent._last_new is not None:
            reused = agent._bring_into_memory(agent._last_new)
            if reused is not None:
                reused.attached.add(self)
                return {"sessionId": reused.session_id}
        live = agent._create_session(cwd, tuple(s for s in servers if isinstance(s, dict)))
        agent._last_new = live.session_id
        live.attached.add(self)
        return self._session_result(live)

    async def _session_status(self, params: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        session_id = _session_id_param(params)
        agent = self._agent
        faults = agent.faults
        if "slow-status" in faults:
            await asyncio.sleep(0.08)
        if "status-always-active" in faults:
            return {"status": agent._status_word(True)}
        if "status-attaches" in faults and agent.knows_session(session_id):
            attached = agent._bring_into_memory(session_id)
            if attached is not None and self not in attached.attached:
                await self._replay(attached, request_id)
                attached.attached.add(self)
        live = agent._live.get(session_id)
        if live is not None:
            result: dict[str, Any] = {"status": agent._status_word(True)}
            if self.protocol_version == 2:
                result["state"] = {"state": live.state}
            return result
        if session_id in agent.store:
            return {"status": agent._status_word("status-active-after-restart" in faults)}
        if "status-unknown-no-data" in faults:
            raise RpcError("Resource not found", code=-32002)
        raise agent.not_found(session_id)

    def _load_for_attach(self, params: dict[str, Any]) -> _LiveSession:
        session_id = _session_id_param(params)
        live = self._agent._bring_into_memory(session_id)
        if live is None:
            raise self._agent.not_found(session_id)
        return live

    async def _session_load(self, params: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        if "load-unknown-ok" in self._agent.faults and not self._agent.knows_session(_session_id_param(params)):
            return {}
        live = self._load_for_attach(params)
        await self._replay(live, request_id)
        live.attached.add(self)
        return self._session_result(live)

    async def _replay(self, live: _LiveSession, request_id: RequestId) -> None:
        """Send the history: v1 message chunks, v2 whole messages; each with its messageId (faults aside)."""
        faults = self._agent.faults
        entries = list(live.history)
        if "replay-twice" in faults:
            entries += entries
        if "replay-drops-last" in faults:
            entries = entries[:-1]
        v2 = self.protocol_version == 2
        for entry in entries:
            update: dict[str, Any] = {"sessionUpdate": f"{entry.role}_message" if v2 else f"{entry.role}_message_chunk"}
            if "replay-new-ids" in faults:
                update["messageId"] = _new_id("msg")
            elif "replay-without-ids" not in faults:
                update["messageId"] = entry.message_id
            if v2:
                await self._update(live, {**update, "content": list(entry.content)}, request_id)
                continue
            for block in entry.content:
                await self._update(live, {**update, "content": block}, request_id)
        for tool_call in self._agent._tool_calls.get(live.session_id, ()):
            await self._tool_call(live, tool_call, request_id)

    async def _session_resume(self, params: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        replay_from = params.get("replayFrom")
        if (
            self.protocol_version == 2
            and replay_from is not None
            and (not isinstance(replay_from, dict) or replay_from.get("type") != "start")
        ):
            raise RpcError.invalid_params("replayFrom: only {'type': 'start'} is supported")
        faults = self._agent.faults
        if not self._agent.knows_session(_session_id_param(params)):
            replaying = self.protocol_version == 2 and replay_from is not None
            if ("load-unknown-ok" in faults and replaying) or ("resume-unknown-ok" in faults and not replaying):
                return {}
        live = self._load_for_attach(params)
        if self.protocol_version == 2:
            if replay_from is not None or "replay-on-resume" in faults:
                await self._replay(live, request_id)
            await self._update(live, {"sessionUpdate": "state_update", "state": live.state}, request_id)
        elif "replay-on-resume" in faults:
            await self._replay(live, request_id)
        live.attached.add(self)
        return self._session_result(live)

    def _session_result(self, live: _LiveSession) -> dict[str, Any]:
        result: dict[str, Any] = {"sessionId": live.session_id}
        if self._agent.hostile:  # the escapes fault: mode names are hostile
            text = self._agent._text
            mode = {"id": "hostile", "name": text("Hostile mode"), "description": text("mode description")}
            result["modes"] = {"currentModeId": "hostile", "availableModes": [mode]}
        return result

    async def _session_list(self, params: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        agent = self._agent
        cwd = params.get("cwd")
        cursor = params.get("cursor")
        offset = 0
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor.isdigit():
                raise RpcError.invalid_params("cursor is not one this agent issued")
            offset = int(cursor)
        snapshots = [snap for snap in agent.sessions.values() if cwd is None or snap.cwd == cwd]
        page = snapshots[offset : offset + max(1, agent.list_page_size)]
        result: dict[str, Any] = {"sessions": [self._list_entry(snap) for snap in page]}
        if offset + len(page) < len(snapshots):
            result["nextCursor"] = str(offset + len(page))
        return result

    def _list_entry(self, snap: SessionSnapshot) -> dict[str, Any]:
        """One ``session/list`` entry: ACP's ``SessionInfo`` members plus the ``Session`` schema's (required-nullable
        ones always present, ``null`` when empty)."""
        agent = self._agent
        faults = agent.faults
        record = agent.store.load(snap.session_id)
        live = agent._live.get(snap.session_id)
        entry: dict[str, Any] = {"sessionId": snap.session_id, "cwd": snap.cwd}
        if snap.title is not None:
            entry["title"] = snap.title
        if record is not None:
            for name, value in (("createdAt", record.created_at), ("updatedAt", record.updated_at)):
                entry[name] = naive_time(value) if "naive-timestamps" in faults else value
        turn = live.turn if live is not None else None
        history = live.history if live is not None else (record.history if record is not None else ())
        nullable: dict[str, Any] = dict.fromkeys(_REQUIRED_NULLABLE)
        if turn is not None:
            nullable["activeTurnId"] = str(turn.request_id)
        for name, value in nullable.items():
            if value is not None or "sparse-session-objects" not in faults:
                entry[name] = value
        entry["turnCount"] = sum(1 for item in history if item.role == "user")
        return entry

    async def _session_close(self, params: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        session_id = _session_id_param(params)
        agent = self._agent
        live = agent._live.get(session_id)
        if live is None:
            if session_id in agent.store:
                return {}
            raise agent.not_found(session_id)
        turn = live.turn
        if turn is not None and turn.task is not None:
            turn.cancel("cancel")
            await asyncio.wait([turn.task])
        if agent._behind_store(live):  # a stale copy (another instance went on with the session)
            logger.info("closing %s without saving it: the store holds a longer history", session_id)
        else:
            agent._persist(live)
        agent._live.pop(session_id, None)
        live.attached.clear()
        return {}

    async def _session_fork(self, params: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        session_id = _session_id_param(params)
        agent = self._agent
        source = agent._live.get(session_id)
        record = source.record() if source is not None else agent.store.load(session_id)
        if record is None:
            raise agent.not_found(session_id)
        cwd = params.get("cwd") if isinstance(params.get("cwd"), str) and params.get("cwd") else record.cwd
        servers = params.get("mcpServers")
        mcp = tuple(s for s in servers if isinstance(s, dict)) if isinstance(servers, list) else record.mcp_servers
        live = agent._create_session(str(cwd), mcp, record.history, record.title)
        live.attached.add(self)
        return {"sessionId": live.session_id}

    def _start_turn(self, item: Request) -> None:
        if self.protocol_version is None:
            raise InvalidRequest("Invalid request: send initialize first")
        params = item.params if isinstance(item.params, dict) else {}
        session_id = _session_id_param(params)
        agent = self._agent
        live = agent._live.get(session_id)
        if live is None and session_id not in agent.store:
            raise agent.not_found(session_id)
        if live is None or self not in live.attached:
            raise InvalidParams("session not attached to this connection", {"sessionId": session_id})
        if live.turn is not None:
            raise InvalidParams("a turn is already running in this session", {"sessionId": session_id})
        prompt = params.get("prompt")
        if not isinstance(prompt, list) or not all(isinstance(block, dict) for block in prompt):
            raise RpcError.invalid_params("prompt must be an array of content blocks")
        if _text_of(prompt).strip() == "/fail":
            raise RpcError("Internal error: the turn failed, as /fail asks", code=-32603)
        turn = _Turn(live, item.id)
        live.turn = turn
        self._turns[str(item.id)] = turn
        turn.task = asyncio.get_running_loop().create_task(
            self._run_turn(turn, [dict(block) for block in prompt]), name=f"reference-turn-{session_id}"
        )

    async def _run_turn(self, turn: _Turn, prompt: list[dict[str, Any]]) -> None:
        turn.started = True
        live = turn.session
        agent = self._agent
        v2 = self.protocol_version == 2
        user_id = _new_id("msg")
        text = _text_of(prompt)
        live.history.append(HistoryEntry(role="user", message_id=user_id, content=tuple(prompt)))
        if live.title is None and text.strip():
            live.title = agent._text(text.strip()[:60])
        live.state = "running"
        agent._persist(live)
        stop_reason = "end_turn"
        try:
            if v2:
                turn.answered = True
                await self._emit(result_message(turn.request_id, {"messageId": user_id}), turn.request_id)
                await self._update(
                    live, {"sessionUpdate": "user_message", "messageId": user_id, "content": prompt}, turn.request_id
                )
                await self._update(live, {"sessionUpdate": "state_update", "state": "running"}, turn.request_id)
            if turn.cancel_reason is not None:  # cancelled before the turn got going
                raise asyncio.CancelledError
            if agent.hostile:
                await self._hostile_updates(turn)
            reply = await self._reply_for(turn, text)
            if "cancel-owes-next-turn" in agent.faults:
                reply = self._owed_reply(live.session_id, reply)
            if reply is not None:
                await self._stream(turn, agent._text(reply))
        except asyncio.CancelledError:
            if turn.cancel_reason is None:
                self._finish(turn)
                raise
            uncancel = getattr(asyncio.current_task(), "uncancel", None)
            if uncancel is not None:  # Python 3.11+: the task goes on after catching its cancellation
                uncancel()
            stop_reason = "cancelled"
        except TransportError:
            turn.cancel_reason = "closed"
            stop_reason = "cancelled"
        if stop_reason == "cancelled" and "cancel-owes-next-turn" in agent.faults:
            agent._owed[live.session_id] = None  # the next turn answers nothing; its answer comes a turn late
        self._finish(turn)
        await self._conclude(turn, stop_reason)

    def _owed_reply(self, session_id: str, reply: str | None) -> str | None:
        """The ``cancel-owes-next-turn`` fault: the turn after a cancel is empty, its answer a turn late."""
        owed = self._agent._owed
        if session_id not in owed:
            return reply
        late = owed.pop(session_id)
        if late is None:
            owed[session_id] = reply or ""
            return None
        return late + (reply or "")

    def _finish(self, turn: _Turn) -> None:
        live = turn.session
        self._turns.pop(str(turn.request_id), None)
        if live.turn is turn:
            live.turn = None
        if turn.cancel_reason == "gone":
            return
        text = "".join(turn.sent)
        if text:
            block = {"type": "text", "text": text}
            live.history.append(HistoryEntry(role="agent", message_id=turn.agent_message_id, content=(block,)))
        live.state = "idle"
        self._agent._persist(live)

    async def _conclude(self, turn: _Turn, stop_reason: str) -> None:
        if turn.cancel_reason == "closed" or self._closed:
            return
        try:
            if turn.cancel_reason == "gone":
                if not turn.answered:
                    message = "the agent forgot this session (restart or eviction) during the turn"
                    await self._emit(error_message(turn.request_id, -32603, message), turn.request_id)
                elif self.protocol_version == 2:
                    # The v2 prompt was already accepted: end the turn, or the client waits forever.
                    update = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
                    await self._update(turn.session, update, turn.request_id)
                return
            if self.protocol_version == 2:
                update = {"sessionUpdate": "state_update", "state": "idle", "stopReason": stop_reason}
                await self._update(turn.session, update, turn.request_id)
            elif turn.cancel_reason == "request":
                await self._emit(error_message(turn.request_id, -32800, "Request cancelled"), turn.request_id)
            else:
                await self._emit(result_message(turn.request_id, {"stopReason": stop_reason}), turn.request_id)
        except TransportError:
            logger.debug("reference agent could not conclude a turn: the link is gone")

    async def _stream(self, turn: _Turn, text: str) -> None:
        agent = self._agent
        for index, piece in enumerate(split_text(text, agent.chunks_per_prompt)):
            if index and agent.chunk_delay > 0:
                await agent.clock.sleep(agent.chunk_delay)
            await self._chunk(turn, piece)

    async def _chunk(self, turn: _Turn, piece: str) -> None:
        update: dict[str, Any] = {"sessionUpdate": "agent_message_chunk", "messageId": turn.agent_message_id}
        if "live-without-ids" in self._agent.faults:
            del update["messageId"]
        update["content"] = {"type": "text", "text": piece}
        await self._update(turn.session, update, turn.request_id)
        turn.sent.append(piece)

    async def _hostile_updates(self, turn: _Turn) -> None:
        """Under ``escapes``: a thought, a tool call, a plan, a session title and a mode change, each hostile."""
        agent, live, cause = self._agent, turn.session, turn.request_id
        logger.info("reference agent (escapes): %s", ESCAPES)
        v2 = self.protocol_version == 2
        thought = {"type": "text", "text": agent._text("thinking")}
        whole = {"sessionUpdate": "agent_thought", "messageId": _new_id("msg"), "content": [thought]}
        await self._update(live, whole if v2 else {"sessionUpdate": "agent_thought_chunk", "content": thought}, cause)
        title = agent._text("Reading a file")
        tool_call = {"toolCallId": _new_id("call"), "title": title, "kind": "read", "status": "completed"}
        agent._tool_calls.setdefault(live.session_id, []).append(tool_call)
        await self._tool_call(live, tool_call, cause)
        entry = {"content": agent._text("Step one"), "priority": "high", "status": "pending"}
        if v2:
            plan = {"type": "items", "planId": "plan-1", "entries": [entry]}
            await self._update(live, {"sessionUpdate": "plan_update", "plan": plan}, cause)
        else:
            await self._update(live, {"sessionUpdate": "plan", "entries": [entry]}, cause)
        await self._update(live, {"sessionUpdate": "session_info_update", "title": live.title}, cause)
        await self._update(live, {"sessionUpdate": "current_mode_update", "currentModeId": "hostile"}, cause)

    async def _tool_call(self, live: _LiveSession, tool_call: dict[str, Any], cause: RequestId | None) -> None:
        kind = "tool_call_update" if self.protocol_version == 2 else "tool_call"
        await self._update(live, {"sessionUpdate": kind, **tool_call}, cause)

    async def _set_state(self, turn: _Turn, state: str) -> None:
        turn.session.state = state
        if self.protocol_version == 2:
            await self._update(turn.session, {"sessionUpdate": "state_update", "state": state}, turn.request_id)

    async def _ask(self, turn: _Turn, method: str, params: dict[str, Any], *, blocking: bool = False) -> Any:
        """Call the client; an error answer is raised as :class:`RpcError`."""
        if blocking:
            await self._set_state(turn, "requires_action")
        try:
            return await self._call_client(method, params, turn.request_id)
        finally:
            if blocking and turn.cancel_reason is None:
                with contextlib.suppress(TransportError):
                    await self._set_state(turn, "running")

    async def _reply_for(self, turn: _Turn, text: str) -> str | None:
        command, _, rest = text.strip().partition(" ")
        session_id = turn.session.session_id
        try:
            if command == "/permission":
                return await self._permission(turn)
            if command == "/write":
                path, _, content = rest.strip().partition(" ")
                if not path:
                    return "usage: /write PATH TEXT"
                await self._ask(turn, "fs/write_text_file", {"sessionId": session_id, "path": path, "content": content})
                return f"wrote {path}"
            if command == "/read":
                path = rest.strip()
                if not path:
                    return "usage: /read PATH"
                result = await self._ask(turn, "fs/read_text_file", {"sessionId": session_id, "path": path})
                read = result.get("content") if isinstance(result, dict) else None
                return f"read {path}: {read if isinstance(read, str) else ''}"
            if command == "/terminal":
                return await self._terminal(turn, rest.strip())
            if command == "/elicit":
                return await self._elicit(turn, rest.strip())
            if command == "/slow":
                await self._slow(turn)
                return None
            if command == "/as":
                return await self._impersonate(turn, rest.strip())
        except RpcError as exc:
            return f"error: {command.lstrip('/')} failed: {exc.message} (code {exc.code})"
        return f"echo: {text}"

    async def _impersonate(self, turn: _Turn, rest: str) -> str:
        """``/as SESSION_ID PATH``: speak for another session (a hostile member of a group of instances): an update
        into its transcript, a permission request and a read of PATH in its name."""
        session_id, _, path = rest.partition(" ")
        if not session_id:
            return "usage: /as SESSION_ID [PATH]"
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "injected"}}
        await self._emit(notification_message("session/update", {"sessionId": session_id, "update": update}), None)
        answers: list[str] = []
        permission = {
            "sessionId": session_id,
            "toolCall": {"toolCallId": _new_id("call"), "title": "impersonated", "status": "pending"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
        }
        asks: list[tuple[str, dict[str, Any]]] = [("session/request_permission", permission)]
        if path:
            asks.append(("fs/read_text_file", {"sessionId": session_id, "path": path.strip()}))
        for method, params in asks:
            try:
                result = await self._ask(turn, method, params)
                answers.append(f"{method}: {json.dumps(result, sort_keys=True)}")
            except RpcError as exc:
                answers.append(f"{method}: refused {exc.code}")
        return "as " + session_id + ": " + "; ".join(answers)

    async def _permission(self, turn: _Turn) -> str:
        text = self._agent._text
        title = text("Reference agent wants to edit a file")
        tool_call = {"toolCallId": _new_id("call"), "title": title, "kind": "edit", "status": "pending"}
        options = [
            {"optionId": "allow", "name": text("Allow"), "kind": "allow_once"},
            {"optionId": "reject", "name": text("Reject"), "kind": "reject_once"},
        ]
        params: dict[str, Any] = {"sessionId": turn.session.session_id}
        if self.protocol_version == 2:
            params["title"] = tool_call["title"]
            params["subject"] = {"type": "tool_call", "toolCall": tool_call}
        else:
            params["toolCall"] = tool_call
        params["options"] = options
        result = await self._ask(turn, "session/request_permission", params, blocking=True)
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
            return f"permission: selected {outcome.get('optionId')}"
        if isinstance(outcome, dict) and isinstance(outcome.get("outcome"), str):
            return f"permission: {outcome['outcome']}"
        return "permission: no outcome"

    async def _terminal(self, turn: _Turn, command_line: str) -> str:
        try:
            argv = shlex.split(command_line)
        except ValueError as exc:
            return f"usage: /terminal CMD ({exc})"
        if not argv:
            return "usage: /terminal CMD"
        session_id = turn.session.session_id
        command = {"sessionId": session_id, "command": argv[0], "args": argv[1:]}
        created = await self._ask(turn, "terminal/create", command)
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str):
            return "error: terminal/create answered without a terminalId"
        ids = {"sessionId": session_id, "terminalId": terminal_id}
        try:
            exited = await self._ask(turn, "terminal/wait_for_exit", ids)
            output = await self._ask(turn, "terminal/output", ids)
        finally:
            if turn.cancel_reason is None:
                with contextlib.suppress(RpcError, TransportError):
                    await self._ask(turn, "terminal/release", ids)
        code = exited.get("exitCode") if isinstance(exited, dict) else None
        text = output.get("output") if isinstance(output, dict) else None
        return f"terminal exited {code}: {text if isinstance(text, str) else ''}"

    async def _elicit(self, turn: _Turn, question: str) -> str:
        params = {
            "sessionId": turn.session.session_id,
            "mode": "form",
            "message": question or "The reference agent needs an answer",
            "requestedSchema": {
                "type": "object",
                "properties": {"answer": {"type": "string", "title": "Answer"}},
                "required": ["answer"],
            },
        }
        result = await self._ask(turn, "elicitation/create", params, blocking=True)
        action = result.get("action") if isinstance(result, dict) else None
        content = result.get("content") if isinstance(result, dict) else None
        if content is not None:
            return f"elicitation: {action} {json.dumps(content, sort_keys=True)}"
        return f"elicitation: {action}"

    async def _slow(self, turn: _Turn) -> None:
        agent = self._agent
        deadline = agent.clock.monotonic() + SLOW_TURN_LIMIT
        tick = 0
        while agent.clock.monotonic() < deadline:
            await self._chunk(turn, f"tick {tick} ")
            tick += 1
            await agent.clock.sleep(max(agent.chunk_delay, SLOW_TICK_MIN))
