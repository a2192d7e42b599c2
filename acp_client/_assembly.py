"""From :class:`~acp_client.AcpClient`'s options to a running engine, and the session calls whose
work is more than one request (placement on a pool, fork homes, status merge, list pages).

Everything here is private: the client's public methods keep their contracts in their docstrings
and hand the work to these functions, so the facade stays a list of public methods.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ._checks import check_count, check_flag, check_instance, check_seconds
from ._connection import Connection
from ._engine import Engine
from ._handshake import SUPPORTED_PROTOCOL_VERSIONS
from ._pooled import PoolSpec, pool_spec
from ._sessions import Tracked
from ._version import __version__
from .clock import Clock, SystemClock
from .config import Callbacks, QueueOptions, Timeouts
from .exceptions import ConfigurationError, SessionNotFound
from .handlers import ClientHandlers
from .pool import Endpoint, Location
from .pool import _locate_many as locate_many
from .retry import RetryPolicy
from .state import SessionPage, State
from .store import SessionStore, endpoint_key, pool_key
from .store._bridge import StoreBridge
from .telemetry import Telemetry
from .transports import CookieStore, TlsConfig
from .transports._security import check_session_id
from .transports.base import Connector, Limits
from .transports.endpoint import connector_for
from .types import (
    CloseSessionRequest,
    ForkSessionRequest,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    McpServer,
    NewSessionRequest,
    NewSessionResponse,
    Session,
    SessionStatus,
    SessionStatusRequest,
    SessionStatusResponse,
)

__all__ = ["assemble", "close", "fork", "list_page", "locate", "new", "status"]

CLIENT_INFO = Implementation(name="acp-reconnect", version=__version__, title="acp_client")

_KINDS: dict[str, type | tuple[type, ...]] = {
    "client_info": Implementation,
    "handlers": ClientHandlers,
    "retry": RetryPolicy,
    "callbacks": Callbacks,
    "timeouts": Timeouts,
    "queue": QueueOptions,
    "headers": Mapping,
    "tls": TlsConfig,
    "cookies": CookieStore,
    "limits": Limits,
    "transport_options": Mapping,
    "clock": Clock,
    "rng": random.Random,
    "session_store": SessionStore,
    "session_store_key": str,
    "telemetry": Telemetry,
}


def check_options(options: Mapping[str, Any]) -> None:
    """Every option of the client, checked (``ConfigurationError`` naming the first bad one)."""
    version = options["protocol_version"]
    check_instance("protocol_version", version, int)
    if version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise ConfigurationError(f"protocol_version must be one of {SUPPORTED_PROTOCOL_VERSIONS}")
    for name in ("recovery_concurrency", "max_incoming_requests"):
        check_count(name, options[name])
    for name, kind in _KINDS.items():
        check_instance(name, options[name], kind, optional=True)
    check_flag("keep_transcripts", options["keep_transcripts"])
    check_instance("replays_on_resume", options["replays_on_resume"], bool, optional=True)
    check_flag("retry_unsent_prompts", options["retry_unsent_prompts"])
    check_seconds("failover_delay", options["failover_delay"])
    secret = options["secret_headers"]
    if isinstance(secret, str) or not all(isinstance(item, str) for item in secret):
        raise ConfigurationError("secret_headers must be a collection of header names")


def _with_connect_timeout(endpoint: str, connect: float, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The transport options, with the transport's own opening bound set to ``Timeouts.connect``
    (unless the app set it): the client bounds the whole opening with that one value."""
    merged = dict(options or {})
    if endpoint.startswith(("ws://", "wss://")):
        merged.setdefault("open_timeout", connect)
    elif endpoint.startswith(("http://", "https://")):
        merged.setdefault("connect_timeout", connect)
    return merged


def _bridge(endpoint: object, spec: PoolSpec | None, store: SessionStore | None, key: str | None) -> StoreBridge | None:
    """The store seen under the client's key: ``session_store_key``, else the endpoint's key (a
    pool's: :func:`~acp_client.store.pool_key` of its URLs)."""
    if store is None:
        return None
    if key is not None:
        return StoreBridge(store, key)
    if spec is not None:
        if any(e.connector is not None for e in spec.endpoints):
            raise ConfigurationError("session_store_key is required when an endpoint is a Connector")
        return StoreBridge(store, pool_key(e.url for e in spec.endpoints))
    if isinstance(endpoint, list | tuple):  # a list of one
        endpoint = endpoint[0]
    if not isinstance(endpoint, str):
        raise ConfigurationError("session_store_key is required when the endpoint is a Connector")
    return StoreBridge(store, endpoint_key(endpoint))


def assemble(options: Mapping[str, Any], cookies: CookieStore) -> tuple[Engine, Connector]:
    """The engine (and the first endpoint's connector) for checked ``options``; every connector
    built from a URL shares ``cookies``."""
    timeouts: Timeouts = options["timeouts"] or Timeouts()

    def connector(value: str | Connector) -> Connector:
        if not isinstance(value, str):
            return value
        return connector_for(
            value,
            headers=options["headers"],
            secret_headers=options["secret_headers"],
            tls=options["tls"],
            cookies=cookies,
            limits=options["limits"],
            **_with_connect_timeout(value, timeouts.connect, options["transport_options"]),
        )

    endpoint = options["endpoint"]
    spec = pool_spec(endpoint, options["placement"], options["failover_delay"], connector)
    first: Connector = spec.connectors[0] if spec is not None else connector(endpoint)
    engine = Engine(
        first,
        protocol_version=options["protocol_version"],
        client_info=options["client_info"] or CLIENT_INFO,
        handlers=options["handlers"] or ClientHandlers(),
        retry=options["retry"],
        callbacks=options["callbacks"] or Callbacks(),
        timeouts=timeouts,
        queue=options["queue"] or QueueOptions(),
        recovery_concurrency=options["recovery_concurrency"],
        clock=options["clock"] or SystemClock(),
        rng=options["rng"],
        keep_transcripts=options["keep_transcripts"],
        pool=spec,
        replays_on_resume=options["replays_on_resume"],
        retry_unsent_prompts=options["retry_unsent_prompts"],
        max_incoming_requests=options["max_incoming_requests"],
        store=_bridge(endpoint, spec, options["session_store"], options["session_store_key"]),
        telemetry=options["telemetry"],
    )
    return engine, first


# -- session calls ------------------------------------------------------------------------------------


async def new(engine: Engine, cwd: str, mcp_servers: tuple[McpServer, ...], extra: tuple[str, ...]) -> Tracked:
    """``session/new`` on the instance the placement picks (the only one without a pool)."""
    request = NewSessionRequest(cwd=cwd, mcp_servers=mcp_servers, additional_directories=extra)
    pool = engine.pool
    link = (await pool.place()) if pool is not None else None
    supervisor = link.supervisor if link is not None and link.supervisor is not None else engine.primary
    result = await supervisor.call("session/new", lambda: engine.wire(request))
    record = Session.from_new(engine.decode(NewSessionResponse, result), cwd=cwd)
    tracked = engine.table.track(record, cwd=cwd, mcp_servers=mcp_servers, additional_directories=extra)
    if pool is not None and link is not None:
        pool.bind(tracked, link)
    return engine.stored(tracked)


async def fork(engine: Engine, session_id: str, cwd: str, mcp_servers: tuple[McpServer, ...]) -> Tracked:
    """``session/fork`` where the parent lives; the fork lives there too."""
    engine.require("session/fork")
    parent = engine.table.current_id(session_id)
    request = ForkSessionRequest(session_id=parent, cwd=cwd, mcp_servers=mcp_servers)
    source = engine.table.get(parent)
    supervisor = await engine.link_for(source, "session/fork")
    result = await supervisor.call("session/fork", lambda: engine.wire(request))
    record = Session.from_fork(engine.decode(ForkSessionResponse, result), cwd=cwd, forked_from=parent)
    tracked = engine.table.track(record, cwd=cwd, mcp_servers=mcp_servers)
    if engine.pool is not None and source is not None:
        engine.pool.bind(tracked, engine.pool.home(source))
    return engine.stored(tracked)


async def list_page(engine: Engine, cwd: str | Path | None, cursor: str | None) -> SessionPage:
    """One page of ``session/list`` (read-only: retried transparently on a drop)."""
    engine.require("session/list")
    request = ListSessionsRequest(cwd=str(cwd) if cwd is not None else None, cursor=cursor)
    result = await engine.primary.call("session/list", lambda: engine.wire(request), idempotent=True)
    response = engine.decode(ListSessionsResponse, result)
    return SessionPage(tuple(Session.from_info(info) for info in response.sessions), response.next_cursor)


def next_cursor(page: SessionPage, seen: set[str]) -> str | None:
    """The cursor to follow after ``page`` (``seen``: the ones followed so far, updated):
    ``None`` at the end, and when the agent hands out a cursor it gave before (a loop)."""
    cursor = page.next_cursor
    if cursor is None or cursor in seen:
        return None
    seen.add(cursor)
    return cursor


async def status(engine: Engine, session_id: str) -> Session:
    """``session/status``, merged into the tracked record; -32002 is ``SessionStatus.UNKNOWN``."""
    engine.require("session/status")
    table = engine.table
    current = check_session_id(table.current_id(session_id))

    def params() -> Any:  # at send time: a recovery it waited for may have renamed the session
        nonlocal current
        current = table.current_id(session_id)
        return engine.wire(SessionStatusRequest(session_id=current))

    try:
        result = await engine.call(table.get(current), "session/status", params, idempotent=True)
    except SessionNotFound:
        return Session(session_id=current, status=SessionStatus.UNKNOWN)
    record = Session.from_status(current, engine.decode(SessionStatusResponse, result))
    tracked = table.get(current)
    if tracked is None:
        return record
    tracked.record = tracked.record.merge(record)
    return tracked.record


async def close(engine: Engine, session_id: str, forget: Callable[[str], None]) -> None:
    """``session/close`` where the session lives, then ``forget`` it (by its id at that time)."""
    engine.require("session/close")
    # The id is resolved when the request is sent: a recovery it waited for may have renamed it.
    current = engine.table.current_id
    request = lambda: engine.wire(CloseSessionRequest(session_id=current(session_id)))  # noqa: E731
    await engine.call(engine.table.get(session_id), "session/close", request)
    forget(current(session_id))


def forget(engine: Engine, session_id: str) -> None:
    """Stop tracking a session (its pool home and its stored record go too)."""
    tracked = engine.table.get(session_id)
    if tracked is not None and engine.pool is not None:
        engine.pool.forget(tracked)
    engine.untrack(session_id)


async def locate(engine: Engine, session_id: str, timeout: float | None) -> Location:
    """Every instance's ``session/status`` answer, over the live links where there are some."""
    if engine.pool is not None:
        return (await engine.pool.locate_many([session_id], timeout=timeout, warm=True))[session_id]
    sup = engine.supervisor
    endpoint = Endpoint(engine.connector.target, connector=engine.connector)
    live: dict[Endpoint, tuple[Connection, InitializeResponse]] = {}
    if sup.connection is not None and sup.init_result is not None and sup.state.state is State.CONNECTED:
        live[endpoint] = (sup.connection, sup.init_result)
    timeout = timeout or engine.timeouts.probe
    located = await locate_many([session_id], [endpoint], timeout=timeout, protocol_version=engine.version,
                                clock=engine.clock, live=live)  # fmt: skip
    return located[session_id]
