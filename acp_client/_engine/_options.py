"""The options of :class:`~acp_client.AcpClient`: checked once, then turned into its engine (the
connectors built from URLs, the session store seen under the client's key, and the links)."""

from __future__ import annotations

import difflib
import functools
import random
from collections.abc import Collection, Mapping
from typing import Any

from .._rpc._connection import DEFAULT_MAX_INCOMING_REQUESTS
from .._rpc._handshake import SUPPORTED_PROTOCOL_VERSIONS
from .._util._checks import check_count, check_flag, check_instance, check_seconds
from ..clock import Clock, SystemClock
from ..config import Callbacks, ClientOptions, QueueOptions, Timeouts
from ..exceptions import ConfigurationError, SessionStoreError, SessionStoreFenced
from ..group import EndpointGroup, LinksPlan
from ..handlers import ClientHandlers
from ..retry import RetryPolicy
from ..state import SessionPage
from ..store import SessionStore, SharedSessionStore, endpoint_key
from ..store._bridge import StoreBridge
from ..store.base import check_owner
from ..telemetry import Telemetry
from ..transports import CookieStore, TlsConfig
from ..transports.base import Connector, Limits
from ..transports.endpoint import connector_for
from ..types import Implementation
from ._engine import Engine
from ._ownership import DEFAULT_LEASE_DURATION, FencedStore, Ownership, default_owner

#: The default of every :class:`~acp_client.config.ClientOptions` key (``None``: the client builds
#: its own, as the key's documentation says).
DEFAULTS: Mapping[str, Any] = {
    **dict.fromkeys(ClientOptions.__annotations__),
    "protocol_version": 1,
    "retry": RetryPolicy(),
    "recovery_concurrency": 4,
    "secret_headers": (),
    "keep_transcripts": True,
    "retry_unsent_prompts": False,
    "carry_lost_context": False,
    "max_incoming_requests": DEFAULT_MAX_INCOMING_REQUESTS,
    "lease_duration": DEFAULT_LEASE_DURATION,
    "auto_adopt": True,
}

#: Keywords of older releases, and where their setting lives now.
_RENAMED = {f"{kind}_timeout": f"timeouts=Timeouts({kind}=...)" for kind in ("request", "connect", "probe")}


def check_keywords(owner: str, given: Collection[str], known: Collection[str]) -> None:
    """Raise ``ConfigurationError`` for the first of ``given`` that ``owner`` does not take,
    suggesting the closest of ``known`` (a typo is caught where it is made)."""
    for name in given:
        if name in known:
            continue
        if name in _RENAMED:
            hint = f"; did you mean {_RENAMED[name]}?"
        else:
            # An option the name starts with ("retry_policy": "retry"), else the closest spelling.
            close = sorted((k for k in known if name.startswith(k)), key=len)[-1:]
            close = close or difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigurationError(f"{owner}() got an unexpected option {name!r}{hint}")


def with_defaults(endpoint: object, options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of :class:`~acp_client.AcpClient` (``options`` over :data:`DEFAULTS`), checked."""
    check_keywords("AcpClient", options, DEFAULTS)
    merged = {"endpoint": endpoint, **DEFAULTS, **options}
    check_options(merged)
    return merged


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
    endpoint = options["endpoint"]
    if isinstance(endpoint, list | tuple):
        raise ConfigurationError(
            "endpoint must be a URL, a Connector or an EndpointGroup, not a list: several instances of one agent "
            "are one EndpointGroup (see docs/many-instances.md)"
        )
    check_instance("endpoint", endpoint, (str, Connector, EndpointGroup))
    version = options["protocol_version"]
    check_instance("protocol_version", version, int)
    if version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise ConfigurationError(f"protocol_version must be one of {SUPPORTED_PROTOCOL_VERSIONS}")
    for name in ("recovery_concurrency", "max_incoming_requests"):
        check_count(name, options[name])
    for name, kind in _KINDS.items():
        check_instance(name, options[name], kind, optional=True)
    for name in ("keep_transcripts", "retry_unsent_prompts", "carry_lost_context", "auto_adopt"):
        check_flag(name, options[name])
    check_instance("replays_on_resume", options["replays_on_resume"], bool, optional=True)
    check_seconds("lease_duration", options["lease_duration"])
    if options["owner"] is not None:
        check_owner(options["owner"])
        store = options["session_store"]
        if store is not None and not isinstance(store, SharedSessionStore):
            raise ConfigurationError(
                f"owner= needs a session store with ownership (a SharedSessionStore), not {type(store).__name__}"
            )
    secret = options["secret_headers"]
    if isinstance(secret, str) or not all(isinstance(item, str) for item in secret):
        raise ConfigurationError("secret_headers must be a collection of header names")


def _bridge(
    options: Mapping[str, Any], plan: LinksPlan | None, clock: Clock
) -> tuple[StoreBridge | None, Ownership | None]:
    """The store seen under the client's key (``session_store_key``, else the endpoint's); a shared
    store with every write fenced by this client's leases (:mod:`acp_client._engine._ownership`)."""
    endpoint, store, key = options["endpoint"], options["session_store"], options["session_store_key"]
    if store is None:
        return None, None
    if key is None:
        key = plan.store_key if plan is not None else endpoint_key(endpoint) if isinstance(endpoint, str) else None
    if key is None:
        raise ConfigurationError("session_store_key is required when an endpoint is a Connector")
    if not isinstance(store, SharedSessionStore):
        return StoreBridge(store, key), None
    owner = options["owner"] if options["owner"] is not None else default_owner()
    fenced = FencedStore(store, key, owner, options["lease_duration"])
    bridge = StoreBridge(fenced, key)
    callbacks: Callbacks = options["callbacks"] or Callbacks()
    ownership = Ownership(
        bridge, fenced, clock=clock, auto_adopt=options["auto_adopt"], decide=lambda: callbacks.decide_adoption
    )
    return bridge, ownership


def _connector_factory(options: Mapping[str, Any], cookies: CookieStore) -> Any:
    """``connector(url_or_connector)`` for checked ``options``: every connector built from a URL
    shares ``cookies``, the client's headers, TLS, limits and transport options."""
    timeouts: Timeouts = options["timeouts"] or Timeouts()

    def connector(value: str | Connector) -> Connector:
        if not isinstance(value, str):
            return value
        # The client bounds the whole opening with Timeouts.connect: so does the transport's own
        # opening bound, unless the app set it.
        extra = dict(options["transport_options"] or {})
        if value.startswith(("ws://", "wss://")):
            extra.setdefault("open_timeout", timeouts.connect)
        elif value.startswith(("http://", "https://")):
            extra.setdefault("connect_timeout", timeouts.connect)
        return connector_for(
            value,
            headers=options["headers"],
            secret_headers=options["secret_headers"],
            tls=options["tls"],
            cookies=cookies,
            limits=options["limits"],
            **extra,
        )

    return connector


def assemble(options: Mapping[str, Any], cookies: CookieStore) -> tuple[Engine, Connector]:
    """The engine for checked ``options`` (its connectors share ``cookies``), and its first link's connector."""
    connector = _connector_factory(options, cookies)
    endpoint = options["endpoint"]
    plan = endpoint.links_plan(connector) if isinstance(endpoint, EndpointGroup) else None
    first = plan.first if plan is not None else connector(endpoint)
    clock = options["clock"] or SystemClock()
    bridge, ownership = _bridge(options, plan, clock)
    engine = Engine(first, options, clock=clock, plan=plan, store=bridge)
    if ownership is not None:
        ownership.bind(engine)
    if bridge is not None:
        bridge.on_error = functools.partial(_store_failed, engine, ownership)
    return engine, first


def _store_failed(engine: Engine, ownership: Ownership | None, error: SessionStoreError) -> None:
    """A write the client made on its own failed: a refused (fenced) one loses its session
    (``on_ownership_lost``); any other is the app's ``on_store_error``."""
    if isinstance(error, SessionStoreFenced):
        if ownership is not None:
            ownership.refused(error)
        return
    engine.dispatcher.deliver(engine.callbacks.on_store_error, error, what="on_store_error")


def next_cursor(page: SessionPage, seen: set[str]) -> str | None:
    """The cursor to follow after ``page`` (``seen``: the ones followed so far, updated):
    ``None`` at the end, and when the agent hands out a cursor it gave before (a loop)."""
    cursor = page.next_cursor
    if cursor is None or cursor in seen:
        return None
    seen.add(cursor)
    return cursor
