"""The PostgreSQL store's schema: its tables, its identity, its migrations, and the DSN as shown.

Everything the store keeps is in one PostgreSQL schema (``acp_client`` unless the app names
another), so the store can live in a database the app uses for other things, and two apps (or two
tests) can share one database under two schema names:

- ``store_meta (key, value)``: ``format`` (:data:`FORMAT`), ``application_id``
  (:data:`APPLICATION_ID`, the SQLite store's ``application_id``), ``schema_version`` and
  ``compatible_version`` (the oldest schema version whose code may still read and write it; a
  migration that breaks older readers raises it).
- ``sessions``: one row per ``(endpoint, session_id)``; JSON fields as ``jsonb``, times as
  ``timestamptz``.
- ``transcripts``: one conversation per session, one ``jsonb`` array, apart from the record (a
  restore reads none of it), tied to its record by a foreign key that cascades: a delete takes the
  conversation along, a rename moves it, and no conversation outlives its record.

A schema is *ours* when it holds ``store_meta`` with our format and application id; *empty* when
it does not exist or holds no relation (then it is initialized); anything else is another
application's, refused without a write. Identifying reads only.

Nothing here imports psycopg: the migrations take a cursor-like object with ``execute``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ..exceptions import ConfigurationError

__all__ = [
    "APPLICATION_ID",
    "FORMAT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "Tables",
    "check_schema_name",
    "redact_dsn",
]

#: Shared with the SQLite store ("ACPS"): how a store knows its own data.
APPLICATION_ID: Final = 0x41435053
FORMAT: Final = "acp_client.session_store"

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_PASSWORD_KEYWORD: Final = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def check_schema_name(name: str) -> str:
    """``name`` if it is a plain PostgreSQL identifier (letters, digits, ``_``; at most 63).

    Raises:
        ConfigurationError: Anything else (it is put in SQL as an identifier).
    """
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or name.lower().startswith("pg_"):
        raise ConfigurationError(f"schema must be a plain identifier (letters, digits, _; not pg_*), got {name!r}")
    return name


def redact_dsn(dsn: str) -> str:
    """The DSN as errors and ``repr`` show it: any password replaced by ``***``.

    Both forms libpq takes: a ``postgresql://`` (or ``postgres://``) URL, whose user info and
    ``password=`` query parameter are masked, and ``key=value`` keywords.
    """
    text = dsn.strip()
    if text.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(text)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hosts = netloc.rpartition("@")
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{hosts}"
        query = re.sub(r"(^|&)(password=)[^&]*", r"\1\2***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return _PASSWORD_KEYWORD.sub(r"\1***", text)


class Tables:
    """The store's qualified table names in one schema (``schema`` checked by :func:`check_schema_name`)."""

    def __init__(self, schema: str) -> None:
        self.schema = check_schema_name(schema)
        quoted = f'"{self.schema}"'
        self.quoted_schema = quoted
        self.meta = f"{quoted}.store_meta"
        self.sessions = f"{quoted}.sessions"
        self.transcripts = f"{quoted}.transcripts"


Migration = Callable[[Any, Tables], None]


def _create_v1(cur: Any, t: Tables) -> None:
    """Schema version 1: the sessions, their conversations, the store's identity."""
    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {t.quoted_schema}")
    cur.execute(f"CREATE TABLE {t.meta} (key text PRIMARY KEY, value text NOT NULL)")
    cur.execute(
        f"""
        CREATE TABLE {t.sessions} (
            endpoint text NOT NULL,
            session_id text NOT NULL,
            cwd text NOT NULL,
            mcp_servers jsonb NOT NULL DEFAULT '[]',
            additional_directories jsonb NOT NULL DEFAULT '[]',
            protocol_version integer NOT NULL DEFAULT 1,
            mode_id text,
            model_id text,
            config_options jsonb NOT NULL DEFAULT '{{}}',
            title text,
            status text,
            raw_status text,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            last_used_at timestamptz NOT NULL,
            previous_session_ids jsonb NOT NULL DEFAULT '[]',
            extra jsonb NOT NULL DEFAULT '{{}}',
            PRIMARY KEY (endpoint, session_id)
        )
        """
    )
    cur.execute(f"CREATE INDEX sessions_by_last_use ON {t.sessions} (endpoint, last_used_at DESC, session_id)")
    cur.execute(
        f"""
        CREATE TABLE {t.transcripts} (
            endpoint text NOT NULL,
            session_id text NOT NULL,
            conversation jsonb NOT NULL,
            PRIMARY KEY (endpoint, session_id),
            FOREIGN KEY (endpoint, session_id) REFERENCES {t.sessions} (endpoint, session_id)
                ON DELETE CASCADE ON UPDATE CASCADE
        )
        """
    )
    cur.execute(
        f"INSERT INTO {t.meta} (key, value) VALUES ('format', %s), ('application_id', %s), "
        "('schema_version', '0'), ('compatible_version', '1')",
        (FORMAT, str(APPLICATION_ID)),
    )


#: ``MIGRATIONS[n]`` takes a schema from version ``n`` to ``n + 1`` (0: an empty schema).
MIGRATIONS: Final[tuple[Migration, ...]] = (_create_v1,)

#: The newest schema version this acp_client writes to PostgreSQL.
SCHEMA_VERSION: Final = len(MIGRATIONS)


def meta_version(meta: Mapping[str, str], key: str) -> int | None:
    """An integer ``store_meta`` value, or ``None`` when missing or not a number."""
    value = meta.get(key)
    return int(value) if isinstance(value, str) and value.isdigit() else None
