"""The store seam: endpoint keys, the StoredSession value, transcript tails (pure, no I/O)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import attrs
import pytest

from acp_client import ConfigurationError
from acp_client.state import Probe
from acp_client.store import (
    DEFAULT_TRANSCRIPT_TAIL_BYTES,
    SessionStore,
    SqliteSessionStore,
    StoredSession,
    bound_transcript_tail,
    endpoint_key,
    transcript_tail,
)
from acp_client.transcript import Transcript
from acp_client.types import AgentMessageChunk, EnvVariable, HttpHeader, McpServerHttp, McpServerStdio, TextContent


@pytest.mark.parametrize(
    ("endpoint", "key"),
    [
        ("ws://localhost:8080/acp", "ws://localhost:8080/acp"),
        ("WS://LocalHost:8080/acp", "ws://localhost:8080/acp"),
        ("ws://user:secret@localhost:8080/acp?token=abc#frag", "ws://localhost:8080/acp"),
        ("wss://agent.example:443/acp", "wss://agent.example/acp"),
        ("http://agent.example:80", "http://agent.example/"),
        ("https://agent.example/acp/", "https://agent.example/acp/"),
        ("http://[::1]:9000/acp", "http://[::1]:9000/acp"),
        ("  ws://h/acp  ", "ws://h/acp"),
        ("stdio:python -m agent --flag 'two words'", "stdio:python -m agent --flag 'two words'"),
        ("stdio:  python   -m agent", "stdio:python -m agent"),
    ],
)
def test_endpoint_key_is_canonical_and_drops_credentials(endpoint: str, key: str) -> None:
    assert endpoint_key(endpoint) == key


def test_endpoint_key_of_an_argv_matches_the_stdio_string() -> None:
    assert endpoint_key(["python", "-m", "agent", "two words"]) == endpoint_key("stdio:python -m agent 'two words'")


def test_endpoint_key_keeps_transports_and_ports_apart() -> None:
    keys = {endpoint_key(url) for url in ("ws://h/acp", "http://h/acp", "ws://h:81/acp", "ws://h/other")}
    assert len(keys) == 4


@pytest.mark.parametrize(
    "endpoint", ["ftp://h/acp", "h:80", "", "ws:///acp", "ws://h:99999/acp", "stdio:", [], "stdio:'"]
)
def test_endpoint_key_refuses_what_it_cannot_key(endpoint: str | list[str]) -> None:
    with pytest.raises(ConfigurationError):
        endpoint_key(endpoint)


def test_stored_session_normalizes_times_to_utc_and_defaults_them_to_now() -> None:
    before = datetime.now(timezone.utc)
    record = StoredSession(endpoint="ws://h/", session_id="s", cwd="/w")
    assert before <= record.created_at <= datetime.now(timezone.utc)
    assert record.last_used_at.tzinfo is timezone.utc
    assert record.created_at == record.updated_at == record.last_used_at  # one "now", not three
    assert StoredSession(endpoint="e", session_id="s", cwd="/", updated_at=None).updated_at >= record.created_at
    plus_two = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=2)))
    naive = datetime(2026, 1, 2, 3, 4, 5)
    record = attrs.evolve(record, created_at=plus_two, updated_at=naive)
    assert record.created_at == plus_two and record.created_at.tzinfo is timezone.utc
    assert record.updated_at == naive.replace(tzinfo=timezone.utc)


def test_stored_session_validates_identity_and_status() -> None:
    with pytest.raises(ConfigurationError):
        StoredSession(endpoint="", session_id="s", cwd="/w")
    with pytest.raises(ConfigurationError):
        StoredSession(endpoint="ws://h/", session_id="", cwd="/w")
    assert StoredSession(endpoint="e", session_id="s", cwd="/", status="inactive").status is Probe.INACTIVE


@pytest.mark.parametrize("version", [1, 2])
def test_mcp_servers_round_trip_through_their_wire_form(version: int) -> None:
    servers = (
        McpServerStdio(name="fs", command="/bin/fs", args=("--ro",), env=(EnvVariable(name="K", value="v"),)),
        McpServerHttp(name="web", url="https://mcp.example", headers=(HttpHeader(name="X", value="y"),)),
    )
    record = StoredSession.from_mcp_servers("ws://h/", "s", "/w", servers, protocol_version=version, title="t")
    assert record.protocol_version == version and record.title == "t"
    assert all(isinstance(server, dict) for server in record.mcp_servers)
    json.dumps(record.mcp_servers)  # JSON as stored
    assert record.decoded_mcp_servers() == servers


def test_bound_transcript_tail_keeps_the_newest_whole_entries_within_the_bound() -> None:
    entries = [{"role": "agent", "text": f"message {i:04d} " + "x" * 80} for i in range(500)]
    tail = bound_transcript_tail(entries, 4096)
    encoded = json.dumps(list(tail), separators=(",", ":")).encode()
    assert len(encoded) <= 4096
    assert tail[-1] == entries[-1]
    assert list(tail) == entries[-len(tail) :]
    assert len(encoded) + len(json.dumps(entries[-len(tail) - 1], separators=(",", ":"))) + 1 > 4096  # maximal
    assert bound_transcript_tail(entries, 0) == ()
    assert bound_transcript_tail([{"text": "x" * 100}], 50) == ()  # an entry is never cut
    assert len(bound_transcript_tail(entries, 10**9)) == 500


def test_bound_transcript_tail_refuses_non_json() -> None:
    with pytest.raises(ConfigurationError):
        bound_transcript_tail([{"when": datetime.now()}], 1000)


def test_transcript_tail_from_a_transcript() -> None:
    transcript = Transcript()
    transcript.add_user_prompt([TextContent(text="hello")])
    transcript.apply(AgentMessageChunk(content=TextContent(text="hi "), message_id="m1"))
    transcript.apply(AgentMessageChunk(content=TextContent(text="there"), message_id="m1"))
    assert transcript_tail(transcript.messages) == (
        {"role": "user", "text": "hello"},
        {"role": "agent", "text": "hi there", "messageId": "m1"},
    )
    assert transcript_tail(transcript.messages, max_bytes=60) == (
        {"role": "agent", "text": "hi there", "messageId": "m1"},
    )
    assert DEFAULT_TRANSCRIPT_TAIL_BYTES == 4 * 1024 * 1024


def test_the_sqlite_store_satisfies_the_protocol() -> None:
    with SqliteSessionStore(":memory:") as store:
        assert isinstance(store, SessionStore)


@pytest.mark.parametrize(
    "endpoint",
    ["ws://u:p@H:80/acp?x=1", "https://agent.example", "http://[::1]:9000/acp", "stdio:python -m 'my agent' --x=1"],
)
def test_endpoint_key_is_idempotent(endpoint: str) -> None:
    key = endpoint_key(endpoint)
    assert endpoint_key(key) == key


def test_to_session_gives_the_record_a_client_tracks_until_the_agent_answers() -> None:
    created = datetime(2026, 1, 1, tzinfo=timezone.utc)
    stored = StoredSession(
        endpoint="ws://h/",
        session_id="s",
        cwd="/w",
        title="t",
        status="inactive",
        raw_status="saved",
        created_at=created,
        updated_at=created + timedelta(hours=1),
        additional_directories=("/x",),
    )
    session = stored.to_session()
    assert (session.session_id, session.cwd, session.title) == ("s", "/w", "t")
    assert (session.status, session.raw_status) == (Probe.INACTIVE, "saved")
    assert (session.created_at, session.updated_at) == (created, created + timedelta(hours=1))
    assert session.additional_directories == ("/x",)
    skewed = attrs.evolve(stored, updated_at=created - timedelta(seconds=1), additional_directories=())
    assert skewed.to_session().updated_at is None  # another host's clock: never an invalid Session
    assert skewed.to_session().additional_directories is None
