"""Where each Streamable HTTP message goes, and which session streams exist. Pure (no I/O).

**The header convention.** The TypeScript server (SDK 2.4.0) wants ``Acp-Session-Id`` on every
POST whose params carry a ``sessionId`` (``400`` without it); the Python server (SDK 0.12.1)
answers ``404`` to it for a session not yet established. Session-scoped methods always carry it;
the others start without, a ``400`` naming the session retries with it, a ``404`` "unknown
session" without, and what worked is remembered (:attr:`Router.header_everywhere`).

**Session streams** open only for the answer to a request *this client sent* that establishes a
session (:data:`ESTABLISHING_METHODS`): otherwise a hostile server could make the client open
streams without bound.

**Running turns.** A connection the client gives up on is ended with ``DELETE`` from the next link,
unless a turn may still run there: the ``DELETE`` would abort it (and throw away what the server
keeps for a reattach). :class:`RunningTurns` follows the turns this link started: a
``session/prompt`` runs until it is answered (v1), or, when its answer carries no ``stopReason``
(v2: the turn was accepted), until the session's ``state_update`` says ``idle``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal, TypeAlias

import attrs

from .._codec._jsonrpc import Message

#: Methods whose POST always carries ``Acp-Session-Id`` (both official servers require it).
SESSION_SCOPED_METHODS: Final = frozenset(
    {"session/prompt", "session/cancel", "session/set_mode", "session/set_config_option", "session/close"}
)
#: Methods whose successful answer establishes the session on the connection.
ESTABLISHING_METHODS: Final = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
#: Requests remembered for session tracking (outgoing) and reply routing (agent requests).
MAX_TRACKED: Final = 4096


@attrs.frozen(slots=True)
class Route:
    """Where a POST goes: its session (``None``: connection-scoped), whether its first attempt
    carries ``Acp-Session-Id``, and whether a refusal may revise that (:meth:`Router.retry_header`)."""

    session_id: str | None = None
    with_header: bool = False
    adaptable: bool = False


#: What to do with a session's stream: ``"open"`` (or keep) it, the session is established;
#: ``"close"`` it, the session was closed; ``"abandon"`` it unless established, the agent does not
#: know the session.
StreamAction: TypeAlias = tuple[Literal["open", "close", "abandon"], str]
#: The route of a connection-scoped POST.
_NOWHERE: Final = Route()


def is_session_404(body: bytes, session_header_sent: bool) -> bool:
    """Whether a 404 means "unknown session" (not "unknown connection")."""
    text = body.lower()
    return b"connection" not in text and (b"session" in text or session_header_sent)


def session_id_of(params: Any) -> str | None:
    """The ``sessionId`` of a message's params, when it is a string."""
    value = params.get("sessionId") if isinstance(params, dict) else None
    return value if isinstance(value, str) else None


def _hashable_id(message: dict[str, Any]) -> int | str | None:
    value = message.get("id")
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _remember(table: dict[Any, Any], key: Any, value: Any) -> None:
    table[key] = value
    if len(table) > MAX_TRACKED:
        del table[next(iter(table))]


def _members(message: Message) -> Iterable[dict[str, Any]]:
    if type(message) is dict:
        return (message,)
    return (member for member in message if isinstance(member, dict))


class Router:
    """The routing state of one Streamable HTTP connection (no I/O, no event loop)."""

    __slots__ = ("_outgoing", "_reply_routes", "header_everywhere")

    def __init__(self, *, header_everywhere: bool | None = None) -> None:
        #: Outgoing requests that matter for session tracking: id -> (method, params sessionId).
        self._outgoing: dict[int | str, tuple[str, str | None]] = {}
        #: Agent requests awaiting a reply: id -> (params sessionId, session stream it came on).
        self._reply_routes: dict[int | str, tuple[str | None, str | None]] = {}
        #: Whether the server wants ``Acp-Session-Id`` on every POST whose params carry a
        #: ``sessionId`` (TypeScript convention: ``True``; Python: ``False``; unknown: ``None``).
        #: A reconnect starts from what the previous link learnt.
        self.header_everywhere: bool | None = header_everywhere

    def route(self, message: Message) -> Route:
        """Where a POST of ``message`` (one message or a batch) goes.

        A batch naming two different sessions goes without the header. Replies to agent requests
        are routed back the way the request came (and forgotten: a reply is routed once).
        """
        if type(message) is dict:  # the usual case, without the batch's lists
            route = self._route_one(message)
            return route if route.session_id is not None else _NOWHERE
        routes = [r for r in (self._route_one(m) for m in _members(message)) if r.session_id is not None]
        if len({route.session_id for route in routes}) != 1:
            return Route()  # no session, or two
        return Route(
            routes[0].session_id,
            with_header=any(r.with_header for r in routes),
            adaptable=all(r.adaptable for r in routes),
        )

    def _route_one(self, message: dict[str, Any]) -> Route:
        method = message.get("method")
        if method is None:
            key = _hashable_id(message)
            entry = self._reply_routes.pop(key, None) if key is not None else None
            if entry is None:
                return _NOWHERE
            params_sid, source = entry
            if source is not None:
                return Route(source, with_header=True, adaptable=True)
            return Route(params_sid, with_header=self.header_everywhere is True, adaptable=True)
        sid = session_id_of(message.get("params"))
        if sid is None:
            return _NOWHERE
        if method in SESSION_SCOPED_METHODS:
            return Route(sid, with_header=True)
        return Route(sid, with_header=self.header_everywhere is True, adaptable=True)

    def sent(self, message: Message) -> list[int | str]:
        """Remember the requests in ``message`` that matter for session tracking; returns their ids,
        for :meth:`forget` when the POST fails."""
        keys: list[int | str] = []
        for member in _members(message):
            method = member.get("method")
            key = _hashable_id(member)
            if not isinstance(method, str) or key is None:
                continue
            sid = session_id_of(member.get("params"))
            if method in ESTABLISHING_METHODS or sid is not None:
                _remember(self._outgoing, key, (method, sid))
                keys.append(key)
        return keys

    def forget(self, keys: Iterable[int | str]) -> None:
        """Drop requests whose POST failed (no answer will come)."""
        for key in keys:
            self._outgoing.pop(key, None)

    def retry_header(self, route: Route, header_sent: bool, status: int, body: bytes) -> bool | None:
        """After a POST on ``route`` was refused (``body``: its start): ``True`` to retry with the
        header, ``False`` without, ``None``: the refusal stands. The convention learnt is remembered."""
        if not route.adaptable or route.session_id is None:
            return None
        if not header_sent and status == 400 and b"session" in body.lower():  # "missing session id"
            self.header_everywhere = True
            return True
        if header_sent and status == 404 and is_session_404(body, True):
            self.header_everywhere = False
            return False
        return None

    def inbound(self, message: Message, source: str | None) -> list[StreamAction]:
        """Track an inbound message (``source``: the session whose stream it came on); returns what
        to do with session streams because of it."""
        actions: list[StreamAction] = []
        for member in _members(message):
            self._inbound_one(member, source, actions)
        return actions

    def _inbound_one(self, message: dict[str, Any], source: str | None, actions: list[StreamAction]) -> None:
        if "method" in message:
            if "id" in message:  # an agent request: its reply goes back on the same session route
                key = _hashable_id(message)
                params_sid = session_id_of(message.get("params"))
                if key is not None and (source is not None or params_sid is not None):
                    _remember(self._reply_routes, key, (params_sid, source))
            return
        key = _hashable_id(message)
        entry = self._outgoing.pop(key, None) if key is not None and self._outgoing else None
        if entry is None:
            return  # not an answer to a request this client sent that matters here
        method, params_sid = entry
        result = message.get("result")
        if isinstance(result, dict):
            if method in ESTABLISHING_METHODS:
                sid = result.get("sessionId")
                if not isinstance(sid, str):
                    sid = params_sid
                if isinstance(sid, str) and sid:
                    actions.append(("open", sid))
            elif method == "session/close" and params_sid is not None and self.header_everywhere:
                # Only where reopening is safe (the TypeScript convention buffers until a stream
                # is opened). The Python SDK 0.12.1 server keeps routing the session's answers to
                # its stream after a close, and a reopened stream there shares messages with the
                # dead one, so the stream stays open until the connection ends.
                actions.append(("close", params_sid))
        elif params_sid is not None:
            error = message.get("error")
            if isinstance(error, dict) and error.get("code") == -32002:
                actions.append(("abandon", params_sid))


class RunningTurns:
    """The turns that may run on one connection (see "Running turns" above)."""

    __slots__ = ("_accepted", "_prompts")

    def __init__(self) -> None:
        #: ``session/prompt`` requests not answered yet: id → session.
        self._prompts: dict[Any, str | None] = {}
        #: Sessions whose v2 turn was accepted and has not reported ``idle`` yet.
        self._accepted: set[str] = set()

    def __bool__(self) -> bool:
        """Whether a turn may still run."""
        return bool(self._prompts or self._accepted)

    def sent(self, message: Message, session_id: str | None) -> Any:
        """``message`` is being sent; returns the id of the prompt it starts (``None``: not a prompt)."""
        if type(message) is not dict or message.get("method") != "session/prompt":
            return None
        request_id = message.get("id")
        if type(request_id) is not int and type(request_id) is not str:
            return None
        self._prompts[request_id] = session_id
        return request_id

    def unsent(self, request_id: Any) -> None:
        """The prompt was refused or never left: no turn runs for it."""
        self._prompts.pop(request_id, None)

    def inbound(self, message: Message) -> None:
        """An answer (it may end a v1 turn or accept a v2 one) or a ``state_update`` notification."""
        if type(message) is not dict:
            return
        if "id" not in message:
            self._state(message)
            return
        answered = message.get("id")
        if "method" in message or not self._prompts or (type(answered) is not int and type(answered) is not str):
            return
        if answered not in self._prompts:
            return
        session_id = self._prompts.pop(answered)
        result = message.get("result")
        if session_id is not None and type(result) is dict and "stopReason" not in result:
            self._accepted.add(session_id)  # v2: accepted; the turn ends later with state "idle"

    def _state(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if type(params) is not dict:
            return
        update = params.get("update")
        session_id = params.get("sessionId")
        ended = type(update) is dict and update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"
        if ended and type(session_id) is str:
            self._accepted.discard(session_id)
