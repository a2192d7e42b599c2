"""The PostgreSQL store's schema: its tables, its identity, its migrations, and the DSN as shown.

Everything the store keeps is in one PostgreSQL schema (``acp_client`` unless the app names another), so the store can
live in a database the app uses for other things: ``store_meta (key, value)`` (``format``, ``application_id`` as
SQLite's, ``schema_version``, and ``compatible_version``: the oldest schema version whose code may still read and write
it, raised by a migration that breaks older readers), ``sessions`` (one row per ``(endpoint, session_id)``, JSON as
``jsonb``, times as ``timestamptz``, a lease since version 2) and ``transcripts`` (each conversation apart from its
record, which a restore reads without it, tied to it by a cascading foreign key: a delete takes it along, a rename
moves it).

A schema is *ours* when it holds ``store_meta`` with our format and application id; *empty* when it does not exist or
holds no relation (then it is initialized); anything else is another application's, refused without a write. Nothing
here imports psycopg.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ..exceptions import ConfigurationError, SessionStoreCorrupt, SessionStoreError, SessionStoreForeign
from ._rows import JSON_COLUMNS, LEASE, Reads, check_version
from .base import APPLICATION_ID, FORMAT, RECORD_COLUMNS

#: The expiry of a lease nobody holds (released, or never claimed): long past.
_NEVER: Final = "1970-01-01 00:00:00+00"

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# A secret keyword's value, in every form libpq reads or an app may write: single-quoted (with backslash escapes;
# unterminated: to the end), or unquoted — up to the next "key=" or the end, so that a value with spaces (which libpq
# would refuse, in an error that quotes it) is masked whole.
_PASSWORD_KEYWORD: Final = re.compile(
    r"(\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*(?:'|$)|.*?(?=\s+[A-Za-z_][A-Za-z0-9_]*\s*=|\s*$))",
    re.IGNORECASE | re.DOTALL,
)
_PASSWORD_PARAMETER: Final = re.compile(r"(^|&)((?:ssl)?password=)[^&]*", re.IGNORECASE)


def redact_dsn(dsn: str) -> str:
    """The DSN as errors and ``repr`` show it: any password replaced by ``***``, in a ``postgresql://`` URL (user info,
    ``password`` / ``sslpassword`` parameters) and in ``key=value`` keywords (quoted, unquoted, or unquoted with
    spaces)."""
    text = dsn.strip()
    if text.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(text)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hosts = netloc.rpartition("@")
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{hosts}"
        query = _PASSWORD_PARAMETER.sub(r"\1\2***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return _PASSWORD_KEYWORD.sub(r"\1***", text)


class Tables:
    """The store's qualified table names in one schema: a plain PostgreSQL identifier (it is put in SQL as one)."""

    def __init__(self, schema: str) -> None:
        if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema) or schema.lower().startswith("pg_"):
            raise ConfigurationError(
                f"schema must be a plain identifier (letters, digits, _; not pg_*), got {schema!r}"
            )
        self.schema = schema
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


def _v2_leases(cur: Any, t: Tables) -> None:
    """Schema version 2: ownership. Every row gets a lease (nobody's, token 0: the sessions of an older schema are
    adoptable at once). Not additive for writers: older code would write past the leases, so ``compatible_version``
    becomes 2."""
    cur.execute(
        f"ALTER TABLE {t.sessions} ADD COLUMN lease_owner text, "
        "ADD COLUMN lease_token bigint NOT NULL DEFAULT 0, "
        f"ADD COLUMN lease_expires_at timestamptz NOT NULL DEFAULT '{_NEVER}'"
    )
    cur.execute(f"CREATE INDEX sessions_by_owner ON {t.sessions} (endpoint, lease_owner)")
    cur.execute(f"UPDATE {t.meta} SET value = '2' WHERE key = 'compatible_version'")


#: ``MIGRATIONS[n]`` takes a schema from version ``n`` to ``n + 1`` (0: an empty schema).
MIGRATIONS: Final[tuple[Migration, ...]] = (_create_v1, _v2_leases)

#: The newest schema version this acp_client writes to PostgreSQL.
SCHEMA_VERSION: Final = len(MIGRATIONS)


def meta_version(meta: Mapping[str, str], key: str) -> int | None:
    """An integer ``store_meta`` value, or ``None`` when missing or not a number."""
    value = meta.get(key)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def open_schema(
    conn: Any, t: Tables, path: str, migrations: Sequence[Migration], *, create: bool, driver_error: type[Exception]
) -> int:
    """Identify the schema on ``conn`` (a psycopg connection in autocommit) and initialize or migrate it when it is ours
    or empty, in one transaction under an advisory lock (one initializer at a time per schema; the others find its work
    done). The schema version; raises as :func:`identify` does, and ``SessionStoreError`` for a missing schema with
    ``create`` false."""
    version, needs_work = identify(conn, t, path, len(migrations), driver_error=driver_error)
    if not needs_work:
        return version
    if version == 0 and not create:
        raise SessionStoreError(f"session store {path} does not exist (create=False)", path=path)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{FORMAT}:{t.schema}",))
        version, needs_work = identify(conn, t, path, len(migrations), driver_error=driver_error)
        if needs_work:
            with conn.cursor() as cur:
                for step in range(version, len(migrations)):
                    migrations[step](cur, t)
                version = len(migrations)
                cur.execute(f"UPDATE {t.meta} SET value = %s WHERE key = 'schema_version'", (str(version),))
    return version


def identify(conn: Any, t: Tables, path: str, supported: int, *, driver_error: type[Exception]) -> tuple[int, bool]:
    """``(schema version, needs initializing or migrating)`` of the schema; reads only. Raises ``SessionStoreForeign``
    (not ours), ``SessionStoreCorrupt`` (our identity without our tables or version) or ``SessionStoreTooNew``."""
    relations = "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    names = {row[0] for row in conn.execute(f"{relations} WHERE n.nspname = %s", (t.schema,))}
    if not names:
        return 0, True  # missing or empty: ours to initialize
    where = f"schema {t.schema!r} of {path}"
    if "store_meta" not in names:
        raise SessionStoreForeign(
            f"{where} holds tables of another application, not a session store (left untouched): "
            "give the store a schema of its own (schema=...)",
            path=path,
        )
    try:
        with conn.transaction():
            meta = dict(conn.execute(f"SELECT key::text, value::text FROM {t.meta}").fetchall())
    except driver_error as exc:
        raise SessionStoreForeign(
            f"{where}: its store_meta table is another application's ({exc}) (left untouched)", path=path
        ) from exc
    if meta.get("format") != FORMAT or meta.get("application_id") != str(APPLICATION_ID):
        raise SessionStoreForeign(
            f"{where} holds another application's store_meta, not a session store (left untouched)", path=path
        )
    version = meta_version(meta, "schema_version")
    if version is None or version < 1 or not {"sessions", "transcripts"} <= names:
        raise SessionStoreCorrupt(
            f"session store {where} is damaged: its tables or its schema version are missing", path=path
        )
    check_version(where, path, version, meta_version(meta, "compatible_version") or version, supported)
    return version, version < supported


#: Now on the database server's clock, unless the call gave ``now`` (one value per statement).
_NOW: Final = "COALESCE(%(now)s::timestamptz, statement_timestamp())"
_CLAIMABLE: Final = f"(lease_owner IS NULL OR lease_owner = %(owner)s OR lease_expires_at <= {_NOW})"
_FENCE: Final = "lease_owner = %(fence_owner)s AND lease_token = %(fence_token)s"


class Statements(Reads):
    """The store's SQL, for one schema, with named parameters (``%(name)s``)."""

    def __init__(self, t: Tables) -> None:
        super().__init__(t.sessions, t.transcripts, "conversation", "%({})s".format, _NOW)
        one = self.one
        columns = ", ".join(RECORD_COLUMNS)
        value = {name: f"%({name})s::jsonb" if name in JSON_COLUMNS else f"%({name})s" for name in RECORD_COLUMNS}
        values = ", ".join(value.values())
        keep = ", ".join(f"{name} = excluded.{name}" for name in RECORD_COLUMNS[2:])
        self.get_for_update = f"{self.get} FOR UPDATE"
        # An unfenced save never touches the lease; a fenced one writes only under its lease.
        self.upsert = (
            f"INSERT INTO {t.sessions} ({columns}) VALUES ({values}) "
            f"ON CONFLICT (endpoint, session_id) DO UPDATE SET {keep}"
        )
        assign = ", ".join(f"{name} = {value[name]}" for name in RECORD_COLUMNS[2:])
        self.update_fenced = f"UPDATE {t.sessions} SET {assign} WHERE {one} AND {_FENCE}"
        # Insert or replace and take the lease, in one statement: a new session is never unowned, and a live lease of
        # another owner leaves the row as it was (no row returned).
        self.save_owned = (
            f"INSERT INTO {t.sessions} ({columns}, lease_owner, lease_token, lease_expires_at) "
            f"VALUES ({values}, %(owner)s, 1, {_NOW} + make_interval(secs => %(duration)s)) "
            f"ON CONFLICT (endpoint, session_id) DO UPDATE SET {keep}, "
            f"lease_token = CASE WHEN {t.sessions}.lease_owner IS NOT DISTINCT FROM %(owner)s "
            f"THEN {t.sessions}.lease_token ELSE {t.sessions}.lease_token + 1 END, "
            "lease_owner = excluded.lease_owner, lease_expires_at = excluded.lease_expires_at "
            f"WHERE {t.sessions}.lease_owner IS NULL OR {t.sessions}.lease_owner = %(owner)s "
            f"OR {t.sessions}.lease_expires_at <= {_NOW} "
            f"RETURNING {LEASE}"
        )
        self.delete = f"DELETE FROM {t.sessions} WHERE {one}"
        self.delete_fenced = f"{self.delete} AND {_FENCE}"
        # The conversation follows by the foreign key's ON UPDATE CASCADE; the lease stays on the row.
        self.rename = (
            f"UPDATE {t.sessions} SET session_id = %(new_session_id)s, "
            "previous_session_ids = %(previous_session_ids)s::jsonb, updated_at = %(updated_at)s "
            f"WHERE {one}"
        )
        self.touch = f"UPDATE {t.sessions} SET last_used_at = %(when)s WHERE {one}"
        self.touch_fenced = f"{self.touch} AND {_FENCE}"
        # FOR UPDATE: a takeover committing meanwhile is seen (its row re-checked), never written past.
        self.save_transcript = (
            f"INSERT INTO {t.transcripts} (endpoint, session_id, conversation) "
            f"SELECT endpoint, session_id, %(conversation)s::jsonb FROM {t.sessions} WHERE {one} "
            "{fence} FOR UPDATE "
            "ON CONFLICT (endpoint, session_id) DO UPDATE SET conversation = excluded.conversation"
        )
        self.save_transcript_fenced = self.save_transcript.format(fence=f"AND {_FENCE}")
        self.save_transcript = self.save_transcript.format(fence="")
        # The end of a turn in one statement (one round trip): the record's last use, and the conversation only where
        # that update landed (the row locked by it, the lease checked in it).
        self.save_turn = (
            f"WITH touched AS (UPDATE {t.sessions} SET last_used_at = %(when)s WHERE {one} {{fence}} "
            "RETURNING endpoint, session_id) "
            f"INSERT INTO {t.transcripts} (endpoint, session_id, conversation) "
            "SELECT endpoint, session_id, %(conversation)s::jsonb FROM touched "
            "ON CONFLICT (endpoint, session_id) DO UPDATE SET conversation = excluded.conversation"
        )
        self.save_turn_fenced = self.save_turn.format(fence=f"AND {_FENCE}")
        self.save_turn = self.save_turn.format(fence="")
        # Ownership: each one statement, so two clients can never both take a session.
        self.claim = (
            f"UPDATE {t.sessions} SET "
            "lease_token = CASE WHEN lease_owner IS NOT DISTINCT FROM %(owner)s "
            "THEN lease_token ELSE lease_token + 1 END, "
            f"lease_owner = %(owner)s, lease_expires_at = {_NOW} + make_interval(secs => %(duration)s) "
            f"WHERE endpoint = %(endpoint)s AND session_id = ANY(%(session_ids)s) AND {_CLAIMABLE} "
            f"RETURNING {LEASE}"
        )
        self.renew = (
            f"UPDATE {t.sessions} SET lease_expires_at = {_NOW} + make_interval(secs => %(duration)s) "
            f"WHERE endpoint = %(endpoint)s AND lease_owner = %(owner)s RETURNING {LEASE}"
        )
        self.release = (
            f"UPDATE {t.sessions} SET lease_owner = NULL, lease_expires_at = '{_NEVER}' "
            "WHERE endpoint = %(endpoint)s AND lease_owner = %(owner)s"
        )
        self.release_some = f"{self.release} AND session_id = ANY(%(session_ids)s)"
