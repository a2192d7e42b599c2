"""The session store seam: the :class:`SessionStore` protocol, the :class:`StoredSession` value,
and the canonical :func:`endpoint_key`.

A store remembers, per agent endpoint, the sessions a client had, so that a restarted host can
recover them as after a network drop. It is synchronous (file I/O, run off the event loop) and safe
to call from several threads, one call at a time per thread. Every implementation:

- writes atomically, keyed by ``(endpoint, session_id)``; sessions of another endpoint never appear;
- keeps the conversation apart from the record (``save_transcript`` / ``load_transcript``): saving a
  record never erases it, ``delete`` and ``rename`` take it along. It is a list of JSON objects
  (``acp_client._sessions._conversation``), replaced whole at each turn's end, bounded with
  :func:`bound_conversation`, and kept as given (PostgreSQL: one ``jsonb`` value);
- may offer ``save_turn(endpoint, session_id, entries, *, when, fence=None) -> bool``: a turn's end
  in one atomic step (``last_used_at`` set to ``when``, the conversation replaced; ``False`` when
  the session is not stored), which ``prompt()`` waits for; without it the client calls ``touch``
  then ``save_transcript``.

Ownership (:class:`SharedSessionStore`, a store several clients share): a stored session has at
most one owner at a time, a *lease* held by an owner name until an expiry, and a *fencing token*
that grows each time the lease passes to another owner (or to one after nobody held it). Claims,
renewals and releases are atomic (of two clients claiming one session, exactly one gets it), and a
write carrying a :class:`Fence` applies only while its lease holds, so a stale owner never
overwrites the new owner's work. Expiry is measured on the store's clock (SQLite: this host's UTC
time, or its ``clock``; a database server its own), so clients on several hosts agree; ``now=``
overrides it for one call.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import urlsplit

import attrs

from .._util._checks import DEFAULT_PORTS
from ..exceptions import ConfigurationError
from ..types.lifecycle import ANSWERED, McpServer, Probe
from ..types.session import Session

__all__ = [
    "DEFAULT_TRANSCRIPT_TAIL_BYTES",
    "HOME_KEY",
    "LEFT_BEHIND_KEY",
    "Fence",
    "Lease",
    "SessionStore",
    "SharedSessionStore",
    "StoredSession",
    "bound_conversation",
    "bound_transcript_tail",
    "endpoint_key",
    "pool_key",
    "transcript_tail",
]

#: The default bound of a stored conversation, in bytes of compact JSON (4 MiB: some thousand turns
#: of chat; past it the oldest messages are dropped, and the stored header counts them).
DEFAULT_TRANSCRIPT_TAIL_BYTES: Final = 4 * 1024 * 1024

#: How a store knows its own data: the ``application_id`` ("ACPS") and the ``format`` every
#: built-in store writes.
APPLICATION_ID: Final = 0x41435053
FORMAT: Final = "acp_client.session_store"

#: The key in :attr:`StoredSession.extra` of the instance a session lives on, for a client facing
#: several instances of one agent: its name (:attr:`acp_client.location.Endpoint.name`, redacted).
HOME_KEY: Final = "acp_client.home"
#: The key of the instances that may still hold a copy of a session that moved off them while
#: they were unreachable (names, as for :data:`HOME_KEY`).
LEFT_BEHIND_KEY: Final = "acp_client.left_behind"


def endpoint_key(endpoint: str | Sequence[str]) -> str:
    """The canonical key a store files sessions under for one agent endpoint.

    - ``ws://``, ``wss://``, ``http://``, ``https://`` URLs: scheme and host lowercased, the
      default port dropped, an empty path read as ``/``; user info, query string and fragment
      are removed (they may carry credentials), so two URLs that differ only there share a key.
    - ``stdio:COMMAND ARGS...`` (as :func:`~acp_client.transports.connector_for` takes it), or an argv
      sequence: ``stdio:`` plus the argv, split like a shell would and joined back with minimal
      quoting. The environment is never part of the key.

    Raises ``ConfigurationError`` for an empty endpoint, a URL without a host, a bad port, or another scheme.
    """
    if not isinstance(endpoint, str):
        argv = [str(item) for item in endpoint]
        if not argv or not argv[0]:
            raise ConfigurationError("a stdio endpoint needs a command")
        return "stdio:" + shlex.join(argv)
    text = endpoint.strip()
    if text.startswith("stdio:"):
        try:
            argv = shlex.split(text[len("stdio:") :])
        except ValueError as exc:
            raise ConfigurationError(f"cannot split the stdio command: {exc}") from exc
        return endpoint_key(argv)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        shown = scheme or text[:20]
        raise ConfigurationError(f"no store key for endpoint {shown!r}: use ws(s)://, http(s):// or stdio:")
    host = parts.hostname
    if not host:
        raise ConfigurationError(f"URL has no host: {scheme}://{parts.path}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigurationError(f"bad port in {scheme}://{host}") from exc
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host if port is None or port == DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path or '/'}"


def pool_key(endpoints: Iterable[str]) -> str:
    """The key a client facing several instances of one agent files its sessions under: ``pool:``
    and the instances' :func:`endpoint_key` values, sorted and space-separated. Adding or removing
    an instance changes it: give ``AcpClient(session_store_key=...)`` a name of your own to keep the
    sessions then. Raises ``ConfigurationError``: no endpoints, or one :func:`endpoint_key` refuses.
    """
    keys = sorted({endpoint_key(url) for url in endpoints})
    if not keys:
        raise ConfigurationError("a pool needs at least one endpoint")
    return "pool:" + " ".join(keys)


def as_utc(value: datetime | None) -> datetime:
    """attrs converter: ``None`` → now; a naive datetime is taken as UTC; always UTC out."""
    if value is None:
        return datetime.now(timezone.utc)
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _to_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


def _json_objects(value: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(dict(item) for item in value)


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(item) for item in value)


def _non_empty(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"StoredSession.{attribute.name} must be a non-empty string, got {value!r}")


def _status(value: Probe | str | None) -> Probe | None:
    """A stored record's status: an answer an instance can give (never ``unreachable``)."""
    if value is None:
        return None
    status = Probe(value)
    if status not in ANSWERED:
        raise ValueError(f"a session's status is active, inactive or unknown, not {status.value!r}")
    return status


def _created(record: StoredSession) -> datetime:
    return record.created_at


def _size(entry: Any) -> int:
    """The bytes of ``entry``'s compact JSON."""
    try:
        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"a transcript entry is not JSON-serializable: {exc}") from exc
    return len(text.encode("utf-8"))


def check_owner(owner: object) -> str:
    """A non-empty owner name of at most 200 printable characters (logged and stored), else ``ConfigurationError``."""
    if not isinstance(owner, str) or not owner or len(owner) > 200 or not owner.isprintable():
        raise ConfigurationError(f"owner must be a non-empty printable string of at most 200 characters, not {owner!r}")
    return owner


@attrs.frozen
class Fence:
    """What a fenced write carries: the owner the writer believes holds the session, and the
    fencing token of that owner's lease."""

    owner: str
    token: int


@attrs.frozen
class Lease:
    """Who holds one stored session (``owner``; ``None``: released or never claimed) and until when
    (``expires_at``, aware UTC; past for a released lease). ``token``, the fencing token, only
    grows; ``0`` for a session never claimed."""

    session_id: str
    owner: str | None
    token: int
    expires_at: datetime = attrs.field(converter=as_utc)

    @property
    def fence(self) -> Fence:
        """The :class:`Fence` a write by this lease's owner carries (``ConfigurationError``: nobody holds it)."""
        if self.owner is None:
            raise ConfigurationError(f"session {self.session_id!r} is not owned: no fence")
        return Fence(self.owner, self.token)

    def held(self, now: datetime) -> bool:
        """Whether an owner holds the lease at ``now`` (not released, not expired)."""
        return self.owner is not None and self.expires_at > now


@attrs.frozen
class StoredSession:
    """What a store keeps of one session: enough to track it again after a restart.

    Attributes:
        endpoint: The endpoint key (see :func:`endpoint_key`).
        cwd: The working directory the session was created with (recovery reuses it).
        mcp_servers: The MCP servers, as JSON objects in the wire form of ``protocol_version``
            (see :meth:`from_mcp_servers` / :meth:`decoded_mcp_servers`). They may hold
            credentials (``env``, ``headers``): the store is as secret as they are.
        mode_id, model_id, config_options: What the app set (``session/set_mode``, ``set_model``,
            ``set_config_option``: option id → value).
        status: The last known normalized status (``ACTIVE``, ``INACTIVE``, ``UNKNOWN``);
            ``raw_status``: as the agent spelled it.
        created_at, updated_at, last_used_at: Aware UTC (a naive one is taken as UTC; ``None``:
            now). Left out, ``created_at`` is now and the other two equal it. ``last_used_at``
            orders :meth:`SessionStore.load`.
        previous_session_ids: Ids this session had before a new-session recovery, oldest first.
        extra: JSON data the store does not interpret: the app's keys, and the client's, which
            begin with ``acp_client.`` (:data:`HOME_KEY`, :data:`LEFT_BEHIND_KEY`).
        lease: Who held the session when it was read (filled in by a :class:`SharedSessionStore`).
            The store's bookkeeping: writes ignore it, and it takes no part in ``==``.

    The JSON fields must be JSON-serializable (checked when a store writes them). Derive changed
    copies with :func:`attrs.evolve`.
    """

    endpoint: str = attrs.field(validator=_non_empty)
    session_id: str = attrs.field(validator=_non_empty)
    cwd: str
    mcp_servers: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=_json_objects)
    additional_directories: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    protocol_version: int = 1
    mode_id: str | None = None
    model_id: str | None = None
    config_options: dict[str, Any] = attrs.field(factory=dict, converter=_to_dict)
    title: str | None = None
    status: Probe | None = attrs.field(default=None, converter=_status)
    raw_status: str | None = None
    created_at: datetime = attrs.field(default=None, converter=as_utc)
    updated_at: datetime = attrs.field(default=attrs.Factory(_created, takes_self=True), converter=as_utc)
    last_used_at: datetime = attrs.field(default=attrs.Factory(_created, takes_self=True), converter=as_utc)
    previous_session_ids: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    extra: dict[str, Any] = attrs.field(factory=dict, converter=_to_dict)
    lease: Lease | None = attrs.field(default=None, eq=False)

    @classmethod
    def from_mcp_servers(
        cls,
        endpoint: str,
        session_id: str,
        cwd: str,
        mcp_servers: Iterable[McpServer],
        *,
        protocol_version: int = 1,
        **fields: Any,
    ) -> StoredSession:
        """A record whose MCP servers are given as wire types (``fields``: the other attributes, by name)."""
        from .._codec import to_wire

        servers = tuple(to_wire(server, protocol_version=protocol_version) for server in mcp_servers)
        return cls(endpoint, session_id, cwd, servers, protocol_version=protocol_version, **fields)

    @property
    def home(self) -> str | None:
        """The name of the instance the session lived on when it was written (``None``: not recorded)."""
        home = self.extra.get(HOME_KEY)
        return home if type(home) is str and home else None

    @property
    def left_behind(self) -> tuple[str, ...]:
        """The instances that may still hold a copy of the session (it moved off them while they were unreachable)."""
        names = self.extra.get(LEFT_BEHIND_KEY)
        return tuple(n for n in names if type(n) is str and n) if type(names) is list else ()

    def with_placement(self, home: str, left_behind: Iterable[str] = ()) -> StoredSession:
        """This record with ``home`` and ``left_behind`` recorded (the same record when nothing changes)."""
        left = sorted(set(left_behind))
        if home == self.home and tuple(left) == self.left_behind:
            return self
        extra = {key: value for key, value in self.extra.items() if key not in (HOME_KEY, LEFT_BEHIND_KEY)}
        extra[HOME_KEY] = home
        if left:
            extra[LEFT_BEHIND_KEY] = left
        return attrs.evolve(self, extra=extra)

    def to_session(self) -> Session:
        """The :class:`~acp_client.types.Session` record a client tracks this session with until the agent answers."""
        updated = self.updated_at if self.updated_at >= self.created_at else None
        return Session(
            session_id=self.session_id,
            cwd=self.cwd,
            title=self.title,
            created_at=self.created_at,
            updated_at=updated,
            status=self.status,
            raw_status=self.raw_status,
            additional_directories=self.additional_directories or None,
        )

    def decoded_mcp_servers(self) -> tuple[McpServer, ...]:
        """The MCP servers as wire types (unknown: ``UnknownMcpServer``; ``InvalidMessage``: a damaged store)."""
        from .._codec import from_wire

        return tuple(
            from_wire(McpServer, server, protocol_version=self.protocol_version)  # type: ignore[arg-type]
            for server in self.mcp_servers
        )


#: The columns of a stored record, in the order every store keeps them: the key (endpoint, session
#: id), then the record's fields. The lease is kept beside them (see :class:`SharedSessionStore`).
RECORD_COLUMNS: Final = tuple(field.name for field in attrs.fields(StoredSession) if field.name != "lease")


def transcript_tail(
    messages: Iterable[Any], *, max_bytes: int = DEFAULT_TRANSCRIPT_TAIL_BYTES
) -> tuple[dict[str, Any], ...]:
    """The tail of a conversation as JSON objects a store can keep, bounded to ``max_bytes``: each of
    ``messages`` (``handle.transcript.messages``, or anything with ``role``, ``text`` and
    ``message_id``) becomes ``{"role": ..., "text": ...}`` plus ``"messageId"`` when known.
    """
    entries = []
    for message in messages:
        entry: dict[str, Any] = {"role": message.role, "text": message.text}
        if message.message_id is not None:
            entry["messageId"] = message.message_id
        entries.append(entry)
    return bound_transcript_tail(entries, max_bytes)


def bound_transcript_tail(entries: Sequence[Mapping[str, Any]], max_bytes: int) -> tuple[dict[str, Any], ...]:
    """The longest suffix of ``entries`` whose compact JSON array fits in ``max_bytes`` (an entry is
    never cut). Raises ``ConfigurationError`` for an entry that is not JSON-serializable.
    """
    if max_bytes <= 2:
        return ()
    kept: list[dict[str, Any]] = []
    size = 2  # the brackets
    for entry in reversed(entries):
        cost = _size(entry) + (1 if kept else 0)
        if size + cost > max_bytes:
            break
        kept.append(dict(entry))
        size += cost
    kept.reverse()
    return tuple(kept)


def _cut_to(entry: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """``entry`` (a message), its text cut to its newest part when the entry's JSON exceeds ``limit``."""
    size = _size(entry)
    text = entry.get("text")
    if size <= limit or not isinstance(text, str):
        return dict(entry)
    cut = {key: value for key, value in entry.items() if key != "content"}  # the text says it now
    data = text.encode("utf-8", "surrogatepass")
    room = max(0, limit - (size - len(data)) - 64)  # the rest of the entry, and the marker
    while True:
        rest = data[len(data) - room :].decode("utf-8", "ignore") if room else ""
        cut["text"] = f"… {len(data) - len(rest.encode('utf-8', 'surrogatepass'))} bytes dropped … {rest}"
        if room == 0 or _size(cut) <= limit:
            return cut
        room //= 2  # text that JSON escapes (controls, quotes) takes more room than its bytes


def bound_conversation(entries: Sequence[Mapping[str, Any]], max_bytes: int) -> tuple[dict[str, Any], ...]:
    """A stored conversation (see ``acp_client._sessions._conversation``) cut to about ``max_bytes``.

    The header (a first entry with ``"format"``) is always kept; a message larger than a quarter
    of the bound is cut first, to its newest quarter, its text then starting with
    ``… N bytes dropped … `` (so one oversized message never drops the whole conversation); then
    the oldest entries after the header are dropped until the rest fits, counted in the header's
    ``dropped``, and the segment marker of the first kept message is kept too. A list without a
    header is bounded like :func:`bound_transcript_tail` (which raises the same).
    """
    if not entries or not isinstance(entries[0], Mapping) or "format" not in entries[0]:
        return bound_transcript_tail(entries, max_bytes)
    header = dict(entries[0])
    budget = max_bytes - _size(header) - 1
    body = [_cut_to(entry, budget // 4) for entry in entries[1:]]
    kept = list(bound_transcript_tail(body, budget)) if body else []
    cut = len(body) - len(kept)
    if cut == 0:
        return (header, *kept)
    dropped = sum(1 for entry in body[:cut] if "role" in entry)
    header["dropped"] = int(header.get("dropped", 0) or 0) + dropped
    if not kept or "segment" not in kept[0]:
        marker = next((entry for entry in reversed(body[:cut]) if "segment" in entry), None)
        if marker is not None:
            kept.insert(0, dict(marker))
    return (header, *kept)


@runtime_checkable
class SessionStore(Protocol):
    """Where a client keeps its sessions between processes (see the module docstring).

    Every method raises :class:`~acp_client.exceptions.SessionStoreError` (a subclass, never a
    third-party error) when the store cannot be read or written, and a write raises
    ``ConfigurationError`` for a value that is not JSON-serializable.
    """

    def load(self, endpoint: str) -> list[StoredSession]:
        """Every session stored for ``endpoint``, most recently used first."""

    def get(self, endpoint: str, session_id: str) -> StoredSession | None:
        """One stored session, or ``None``."""

    def save(self, session: StoredSession) -> None:
        """Insert or replace ``session`` (keyed by endpoint and session id), atomically."""

    def delete(self, endpoint: str, session_id: str) -> bool:
        """Remove one session; ``True`` when it was stored."""

    def rename(
        self, endpoint: str, old_session_id: str, new_session_id: str, *, when: datetime | None = None
    ) -> StoredSession | None:
        """Move a session to a new id in one atomic step (new-session recovery).

        The old id is appended to ``previous_session_ids``, ``updated_at`` is set to ``when``
        (default: now), and a record already stored under the new id is replaced. Returns the
        renamed record, or ``None`` (nothing written) when ``old_session_id`` is not stored. An
        empty ``new_session_id`` raises ``ConfigurationError``.
        """

    def touch(self, endpoint: str, session_id: str, *, when: datetime | None = None) -> bool:
        """Set ``last_used_at`` (default: now); ``True`` when the session is stored."""

    def save_transcript(self, endpoint: str, session_id: str, entries: Sequence[Mapping[str, Any]]) -> bool:
        """Replace the session's stored conversation (JSON objects, oldest first), atomically,
        bounded by the store (:func:`bound_conversation`). ``False`` (nothing written) when the
        session is not stored."""

    def load_transcript(self, endpoint: str, session_id: str) -> tuple[dict[str, Any], ...]:
        """The session's stored conversation, as saved (empty when none is stored)."""


@runtime_checkable
class SharedSessionStore(SessionStore, Protocol):
    """A :class:`SessionStore` several clients may share, with ownership (see the module docstring).

    Its record writes (``save``, ``delete``, ``rename``, ``touch``, ``save_transcript``, and
    ``save_turn`` where it has one) also take a keyword ``fence: Fence | None = None``: given, the
    write applies only while ``fence.owner`` holds the session with ``fence.token`` (an expired
    lease nobody took over still counts), else it raises
    :class:`~acp_client.exceptions.SessionStoreFenced` with nothing written; without one, a write
    applies as in any store and never touches the lease. A fenced ``save`` of a session that is not
    stored (the new owner deleted it) is refused the same way; any other fenced write of one answers
    as for a session not stored. ``rename`` takes the lease along. Reads fill in
    :attr:`StoredSession.lease`. ``duration`` is a finite number of seconds above zero, ``now`` an
    aware datetime (default: the store's clock); a bad ``owner`` or ``duration`` raises
    ``ConfigurationError``.
    """

    def claim(
        self, endpoint: str, session_ids: Sequence[str], owner: str, *, duration: float, now: datetime | None = None
    ) -> list[Lease]:
        """Take the lease of each of ``session_ids`` that is unowned, ``owner``'s already, or
        expired, until ``now + duration``, in one atomic step; the token grows for each session
        whose owner changes. Returns the leases ``owner`` now holds among them (a session held by
        another live owner, or not stored, is left out)."""

    def save_owned(self, session: StoredSession, owner: str, *, duration: float, now: datetime | None = None) -> Lease:
        """Insert or replace ``session`` and take its lease for ``owner`` (as :meth:`claim`) in one
        atomic step: a new session is never visible unowned.

        Raises:
            SessionStoreFenced: Another owner holds the session's live lease (nothing written).
        """

    def renew(self, endpoint: str, owner: str, *, duration: float, now: datetime | None = None) -> list[Lease]:
        """Extend every lease ``owner`` holds for ``endpoint`` to ``now + duration`` in one statement,
        and return them (an expired one nobody took over is renewed too)."""

    def release(self, endpoint: str, owner: str, session_ids: Sequence[str] | None = None) -> int:
        """Give up ``owner``'s leases for ``endpoint`` (all, or those of ``session_ids``): the
        sessions become unowned at once (adoptable), their tokens kept. How many were released."""

    def adoptable(self, endpoint: str, *, now: datetime | None = None) -> list[StoredSession]:
        """The sessions of ``endpoint`` nobody holds at ``now`` (unowned, or their owner's lease
        expired), most recently used first, each with its :attr:`~StoredSession.lease`."""
