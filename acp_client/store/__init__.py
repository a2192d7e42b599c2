"""Session stores: sessions that outlive the process.

A store keeps, per agent endpoint, what a client needs to track its sessions again after a restart (cwd, MCP servers,
the options the app set, timestamps, last known status, a bounded conversation). :class:`SessionStore` is the seam
(synchronous: the client calls it from a worker thread); :class:`SqliteSessionStore` is the built-in implementation on
the standard library's ``sqlite3``, :class:`PostgresSessionStore` the one a service's replicas share (the ``postgres``
extra: psycopg 3). Nothing is written anywhere unless the app opens a store, and ``sqlite3`` / ``psycopg`` are only
imported once their store is first used.
"""

import importlib
from typing import TYPE_CHECKING, Any, Final

from ..exceptions import (
    SessionStoreBusy,
    SessionStoreCorrupt,
    SessionStoreDriverMissing,
    SessionStoreError,
    SessionStoreFenced,
    SessionStoreForeign,
    SessionStoreReadOnly,
    SessionStoreTooNew,
    SessionStoreUnavailable,
)
from .base import (
    APPLICATION_ID,
    DEFAULT_TRANSCRIPT_TAIL_BYTES,
    HOME_KEY,
    LEFT_BEHIND_KEY,
    Fence,
    Lease,
    SessionStore,
    SharedSessionStore,
    StoredSession,
    bound_conversation,
    bound_transcript_tail,
    endpoint_key,
    pool_key,
    transcript_tail,
)

if TYPE_CHECKING:
    from .postgres import PostgresSessionStore
    from .sqlite import SCHEMA_VERSION, SqliteSessionStore

# Name -> the module defining it (the postgres module imports psycopg only when a store is made).
_LAZY: Final = {
    "SCHEMA_VERSION": ".sqlite",
    "SqliteSessionStore": ".sqlite",
    "PostgresSessionStore": ".postgres",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "APPLICATION_ID",
    "DEFAULT_TRANSCRIPT_TAIL_BYTES",
    "HOME_KEY",
    "LEFT_BEHIND_KEY",
    "SCHEMA_VERSION",
    "Fence",
    "Lease",
    "PostgresSessionStore",
    "SessionStore",
    "SessionStoreBusy",
    "SessionStoreCorrupt",
    "SessionStoreDriverMissing",
    "SessionStoreError",
    "SessionStoreFenced",
    "SessionStoreForeign",
    "SessionStoreReadOnly",
    "SessionStoreTooNew",
    "SessionStoreUnavailable",
    "SharedSessionStore",
    "SqliteSessionStore",
    "StoredSession",
    "bound_conversation",
    "bound_transcript_tail",
    "endpoint_key",
    "pool_key",
    "transcript_tail",
]
