"""Session stores: sessions that outlive the process.

A store keeps, per agent endpoint, what a client needs to track its sessions again after a
restart (cwd, MCP servers, the options the app set, timestamps, last known status, a bounded
conversation, bounded). :class:`SessionStore` is the seam (synchronous: the client calls it from a
worker thread); :class:`SqliteSessionStore` is the built-in implementation on the standard
library's ``sqlite3``. Nothing is written to disk unless the app opens a store.
"""

from .base import (
    DEFAULT_TRANSCRIPT_TAIL_BYTES,
    SessionStore,
    StoredSession,
    bound_conversation,
    bound_transcript_tail,
    endpoint_key,
    pool_key,
    transcript_tail,
)
from .sqlite import APPLICATION_ID, SCHEMA_VERSION, SqliteSessionStore

__all__ = [
    "APPLICATION_ID",
    "DEFAULT_TRANSCRIPT_TAIL_BYTES",
    "SCHEMA_VERSION",
    "SessionStore",
    "SqliteSessionStore",
    "StoredSession",
    "bound_conversation",
    "bound_transcript_tail",
    "endpoint_key",
    "pool_key",
    "transcript_tail",
]
