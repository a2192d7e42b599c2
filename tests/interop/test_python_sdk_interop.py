"""Our :class:`~acp_client.AcpClient` against the official ACP Python SDK's agent (0.12.1).

Every byte the client reads here is produced by the official SDK (its router, pydantic models and
servers); see ``tests/peers/python_sdk_agent.py`` for the echo agent's behaviour. Each test runs over
the five links the SDK can serve:

- ``ws``: WebSocket,
- ``http1``: Streamable HTTP over HTTP/1.1,
- ``h2c``: Streamable HTTP over HTTP/2 cleartext (prior knowledge, ``http2=True``),
- ``h2``: Streamable HTTP over HTTP/2 over TLS (ALPN; the peer's test CA verifies the certificate),
- ``stdio``: the agent spawned as a child process (with a store file, so a second client -- a second
  process -- still finds the sessions the first one made).

Network links share one peer server for the whole session, so every test works in its own ``cwd``.

Known quirk of the SDK's Streamable HTTP server (0.12.1), pinned by
``test_close_session_ends_it_on_the_agent``: it never forgets a session's SSE stream. After
``session/close`` it still routes the answer of any request naming that session (``session/resume``,
``session/load``...) to that stream, and a GET stream that the client closed stays subscribed on the
server (its ASGI handler ignores the disconnect), so re-opening a session stream on the same connection
loses every other message to the dead subscriber.
"""

from __future__ import annotations

import asyncio
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest

from acp_client import (
    AcpClient,
    Callbacks,
    CapabilityNotSupported,
    ClientHandlers,
    SessionNotFound,
    SessionNotTracked,
    State,
    Timeouts,
    TlsConfig,
    UpdateEvent,
)
from acp_client.testing import RecordingConnector
from acp_client.transports import Connector, connector_for
from acp_client.types import AgentMessageChunk, RequestPermissionRequest, SelectedPermissionOutcome, UserMessageChunk
from tests._support import eventually, within
from tests.peers.python_sdk import PythonSdkPeer

T = TypeVar("T")

TIMEOUT = 20.0
LINKS = ("ws", "http1", "h2c", "h2", "stdio")


@attrs.define
class Link:
    """How to reach the SDK agent over one transport; ``connector()`` makes a fresh recorded connector."""

    name: str
    peer: PythonSdkPeer
    store: Path
    use_store: bool = True
    connectors: list[RecordingConnector] = attrs.field(factory=list)

    @property
    def endpoint(self) -> str:
        if self.name == "ws":
            return self.peer.ws_url
        if self.name in ("http1", "h2c"):
            return self.peer.http_url
        if self.name == "h2":
            return self.peer.https_url
        if not self.use_store:
            return "stdio:" + shlex.join(self.peer.stdio_command)
        return "stdio:" + shlex.join(self.peer.stdio_command_with_store(self.store))

    @property
    def options(self) -> dict[str, Any]:
        """What the app passes to ``AcpClient`` besides the endpoint (``tls`` + ``transport_options``)."""
        if self.name == "h2c":
            return {"transport_options": {"http2": True}}
        if self.name == "h2":
            return {"tls": TlsConfig(ca_file=self.peer.ca_file)}
        return {}

    @property
    def expected_http_version(self) -> str | None:
        return {"http1": "HTTP/1.1", "h2c": "HTTP/2", "h2": "HTTP/2"}.get(self.name)

    def connector(self) -> RecordingConnector:
        options = self.options
        inner: Connector = connector_for(
            self.endpoint, tls=options.get("tls"), **dict(options.get("transport_options", {}))
        )
        recording = RecordingConnector(inner)
        self.connectors.append(recording)
        return recording

    def client(self, **kwargs: Any) -> AcpClient:
        """A client on a fresh recorded connector; no reconnects (a drop must fail the test)."""
        kwargs.setdefault("retry", None)
        kwargs.setdefault("timeouts", Timeouts(request=TIMEOUT))
        return AcpClient(self.connector(), **kwargs)


@pytest.fixture(params=LINKS)
def link(request: pytest.FixtureRequest, python_sdk_peer: PythonSdkPeer, tmp_path: Path) -> Iterator[Link]:
    yield Link(request.param, python_sdk_peer, tmp_path / "sessions.json")


@pytest.fixture
def cwd(tmp_path: Path) -> str:
    """A working directory unique to the test (the shared peer lists every session it ever made)."""
    path = tmp_path / f"project-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return str(path)


def agent_text(events: list[UpdateEvent], session_id: str, *, replay: bool | None = None) -> list[str]:
    """The agent message chunks of a session, in order."""
    return [
        block.text
        for event in events
        if event.session_id == session_id
        and isinstance(event.update, AgentMessageChunk)
        and (replay is None or event.replay is replay)
        for block in [event.update.content]
        if hasattr(block, "text")
    ]


# -- initialize ------------------------------------------------------------------------------------


async def test_initialize_negotiates_v1_and_reads_capabilities(link: Link) -> None:
    async with link.client() as client:
        init = client.initialize_result
        assert client.protocol_version == 1
        assert init.protocol_version == 1
        assert client.agent_info is not None
        assert client.agent_info.name == "acp-python-sdk-peer"
        assert client.agent_info.version == "0.12.1"
        caps = client.agent_capabilities
        assert caps.load_session is True
        for method in ("session/load", "session/list", "session/resume", "session/close", "session/new"):
            assert caps.supports(method), method
        for method in ("session/status", "session/fork"):
            assert not caps.supports(method), method
        assert client.state.state is State.CONNECTED

        transport = link.connectors[-1].current
        first = transport.sent[0]
        assert isinstance(first, dict)
        assert first["method"] == "initialize"
        assert first["params"]["protocolVersion"] == 1
        assert first["params"]["clientInfo"]["name"] == "acp-reconnect"
        info = transport.info
        assert info.kind == {"ws": "websocket", "stdio": "stdio"}.get(link.name, "http")
        assert info.http_version == link.expected_http_version
        if link.name == "stdio":
            assert info.pid is not None
        else:
            assert info.connection_id  # the SDK server assigns one (101 header / initialize answer)


async def test_endpoint_string_proposing_v2_settles_on_the_agents_v1(link: Link, cwd: str) -> None:
    """The plain app path -- ``AcpClient(url, tls=..., transport_options=...)``, no recording wrapper --
    proposing v2: the SDK agent answers version 1 and the client speaks v1 (a turn ends with the response)."""
    events: list[UpdateEvent] = []
    async with AcpClient(
        link.endpoint,
        protocol_version=2,
        retry=None,
        timeouts=Timeouts(request=TIMEOUT),
        callbacks=Callbacks(on_update=events.append),
        **link.options,
    ) as client:
        assert client.protocol_version == 1
        session = await within(client.new_session(cwd))
        result = await within(client.prompt(session.session_id, "v2 please"))
        assert result.stop_reason == "end_turn"
        assert "".join(agent_text(events, session.session_id)) == "echo: v2 please"
        assert client.session(session.session_id).transcript.text() == "user: v2 please\nagent: echo: v2 please"


# -- sessions and turns -----------------------------------------------------------------------------


async def test_prompt_streams_three_chunks_then_ends_the_turn(link: Link, cwd: str) -> None:
    events: list[UpdateEvent] = []
    async with link.client(callbacks=Callbacks(on_update=events.append)) as client:
        session = await within(client.new_session(cwd))
        assert session.session_id.startswith("sess_")
        assert session.cwd == cwd
        handle = client.session(session.session_id)

        result = await within(handle.prompt("hello there"))

        assert result.stop_reason == "end_turn"
        chunks = agent_text(events, session.session_id)
        assert len(chunks) == 3
        assert "".join(chunks) == "echo: hello there"
        assert all(event.replay is False for event in events)
        assert handle.transcript.text() == "user: hello there\nagent: echo: hello there"

        second = await within(handle.prompt("again"))
        assert second.stop_reason == "end_turn"
        assert handle.transcript.text() == (
            "user: hello there\nagent: echo: hello there\nuser: again\nagent: echo: again"
        )


async def test_permission_allowed_by_the_app_handler(link: Link, cwd: str) -> None:
    asked: list[RequestPermissionRequest] = []

    def allow(request: RequestPermissionRequest) -> SelectedPermissionOutcome:
        asked.append(request)
        return SelectedPermissionOutcome(option_id="allow")

    events: list[UpdateEvent] = []
    async with link.client(
        handlers=ClientHandlers(permission=allow), callbacks=Callbacks(on_update=events.append)
    ) as client:
        session = await within(client.new_session(cwd))
        result = await within(client.prompt(session.session_id, "/permission"))

        assert result.stop_reason == "end_turn"
        assert "".join(agent_text(events, session.session_id)) == "echo: permission selected allow"
        assert len(asked) == 1
        request = asked[0]
        assert request.session_id == session.session_id
        assert [(o.option_id, o.kind) for o in request.options] == [("allow", "allow_once"), ("reject", "reject_once")]
        assert request.tool_call is not None
        assert request.tool_call.title == "Write to notes.txt"
        replies = [m for m in link.connectors[-1].sent() if "method" not in m]
        assert replies and replies[-1]["result"] == {"outcome": {"outcome": "selected", "optionId": "allow"}}


async def test_permission_default_handler_answers_cancelled(link: Link, cwd: str) -> None:
    events: list[UpdateEvent] = []
    async with link.client(callbacks=Callbacks(on_update=events.append)) as client:
        session = await within(client.new_session(cwd))
        result = await within(client.prompt(session.session_id, "/permission"))

        assert result.stop_reason == "end_turn"
        assert "".join(agent_text(events, session.session_id)) == "echo: permission cancelled"
        replies = [m for m in link.connectors[-1].sent() if "method" not in m]
        assert replies and replies[-1]["result"] == {"outcome": {"outcome": "cancelled"}}


async def test_cancel_ends_a_streaming_turn_with_cancelled(link: Link, cwd: str) -> None:
    events: list[UpdateEvent] = []
    async with link.client(callbacks=Callbacks(on_update=events.append)) as client:
        session = await within(client.new_session(cwd))
        handle = client.session(session.session_id)
        turn = asyncio.ensure_future(handle.prompt("/slow"))
        try:
            await eventually(lambda: len(agent_text(events, session.session_id)) >= 2, what="two ticks")
            assert handle.turn_running
            await within(handle.cancel())
            result = await within(turn)
        finally:
            turn.cancel()
        assert result.stop_reason == "cancelled"
        assert agent_text(events, session.session_id)[0] == "tick 1 "
        assert not handle.turn_running
        assert "session/cancel" in link.connectors[-1].sent_methods()
        # The session is still usable after the cancelled turn.
        events.clear()
        assert (await within(handle.prompt("after"))).stop_reason == "end_turn"
        assert "".join(agent_text(events, session.session_id)) == "echo: after"


async def test_load_and_resume_on_other_clients(link: Link, cwd: str) -> None:
    """A session made by one client is loaded by a second (history replayed, marked ``replay``, the
    transcript rebuilt without duplicates even when loaded twice) and resumed by a third (no replay)."""
    async with link.client() as first:
        session = await within(first.new_session(cwd))
        sid = session.session_id
        for text in ("one", "two"):
            assert (await within(first.prompt(sid, text))).stop_reason == "end_turn"

    expected = "user: one\nagent: echo: one\nuser: two\nagent: echo: two"
    events: list[UpdateEvent] = []
    async with link.client(callbacks=Callbacks(on_update=events.append)) as second:
        loaded = await within(second.load_session(sid, cwd))
        assert loaded.session_id == sid
        assert "session/load" in link.connectors[-1].sent_methods()
        handle = second.session(sid)
        # Over HTTP the replay may still be arriving on another stream after the answer.
        await eventually(lambda: handle.transcript.text() == expected, what="the replayed transcript")
        replayed = [event for event in events if event.session_id == sid]
        assert replayed and all(event.replay for event in replayed)
        kinds = [type(event.update) for event in replayed]
        assert kinds == [UserMessageChunk, AgentMessageChunk, UserMessageChunk, AgentMessageChunk]

        # Loading again rebuilds the transcript instead of appending the history twice.
        events.clear()
        await within(second.load_session(sid, cwd))
        await eventually(lambda: len([e for e in events if e.session_id == sid]) == 4, what="the second replay")
        assert all(event.replay for event in events)
        assert handle.transcript.text() == expected

        # Live updates after a load are not replay, and extend the rebuilt transcript.
        events.clear()
        assert (await within(handle.prompt("three"))).stop_reason == "end_turn"
        assert [event.replay for event in events] == [False, False, False]
        assert handle.transcript.text() == expected + "\nuser: three\nagent: echo: three"

    events.clear()
    async with link.client(callbacks=Callbacks(on_update=events.append)) as third:
        with pytest.raises(SessionNotFound) as unknown:
            await within(third.resume_session("sess_doesnotexist", cwd))
        assert unknown.value.session_id == "sess_doesnotexist"

        resumed = await within(third.resume_session(sid, cwd))
        assert resumed.session_id == sid
        sent = link.connectors[-1].sent_methods()
        assert "session/resume" in sent and "session/load" not in sent
        result = await within(third.prompt(sid, "after"))
        assert result.stop_reason == "end_turn"
        assert [event.replay for event in events] == [False, False, False]
        assert "".join(agent_text(events, sid)) == "echo: after"
        assert third.session(sid).transcript.text() == "user: after\nagent: echo: after"


async def test_close_session_ends_it_on_the_agent(link: Link, cwd: str) -> None:
    """After ``session/close`` the agent forgot the session: resuming it again is refused (-32002).

    Over Streamable HTTP this is where the SDK server (0.12.1) bites: it keeps routing the answers of
    requests that name a closed session to that session's SSE stream, which our transport released on
    close -- so the -32002 never arrives (see the module docstring).
    """
    link.use_store = False  # a stdio agent with a store file could resume it from there
    async with link.client(timeouts=Timeouts(request=5.0)) as client:
        session = await within(client.new_session(cwd))
        other = await within(client.new_session(cwd))
        await within(client.close_session(session.session_id))

        assert [h.session_id for h in client.sessions] == [other.session_id]
        with pytest.raises(SessionNotTracked):
            client.session(session.session_id)
        close = [m for m in link.connectors[-1].sent() if m.get("method") == "session/close"]
        assert [m["params"] for m in close] == [{"sessionId": session.session_id}]
        # The other session is untouched.
        assert (await within(client.prompt(other.session_id, "still here"))).stop_reason == "end_turn"
        # The agent forgot the closed one.
        with pytest.raises(SessionNotFound) as caught:
            await within(client.resume_session(session.session_id, cwd))
        assert caught.value.session_id == session.session_id
        assert (await within(client.prompt(other.session_id, "and still"))).stop_reason == "end_turn"


async def test_unadvertised_methods_raise_without_touching_the_wire(link: Link, cwd: str) -> None:
    """The SDK agent has no status (nor fork) capability: the client refuses before sending anything."""
    async with link.client() as client:
        session = await within(client.new_session(cwd))
        connector = link.connectors[-1]
        before = list(connector.sent())

        with pytest.raises(CapabilityNotSupported) as caught:
            await within(client.session_status(session.session_id))
        assert caught.value.method == "session/status"
        assert caught.value.capability == "agentCapabilities.sessionCapabilities.status"
        with pytest.raises(CapabilityNotSupported):
            await within(client.session(session.session_id).session_status())
        with pytest.raises(CapabilityNotSupported) as fork:
            await within(client.fork_session(session.session_id, cwd))
        assert fork.value.method == "session/fork"

        assert connector.sent() == before
        assert len(connector.transports) == 1
        # And the client is still perfectly usable.
        assert (await within(client.prompt(session.session_id, "fine"))).stop_reason == "end_turn"


async def test_many_sessions_answer_promptly_and_list_by_cwd(link: Link, cwd: str, tmp_path: Path) -> None:
    """Five sessions on one connection (over HTTP: a connection stream and five session streams at
    once), then ``session/list`` with and without the ``cwd`` filter.

    Every answer must come well before the server's 15 s SSE keepalive (``request_timeout`` turns a
    stall into a failure): under HTTP/2, httpcore starves a stream's reader while another idle
    stream's reader holds the connection, so each answer used to wait for the next keepalive.
    """
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    events: list[UpdateEvent] = []
    async with link.client(timeouts=Timeouts(request=5.0), callbacks=Callbacks(on_update=events.append)) as client:
        sessions = [await within(client.new_session(cwd)) for _ in range(4)]
        other = await within(client.new_session(elsewhere))
        everyone = [*sessions, other]
        for index, session in enumerate(everyone):
            result = await within(client.prompt(session.session_id, f"turn {index}"))
            assert result.stop_reason == "end_turn"
        results = await within(
            asyncio.gather(*(client.prompt(s.session_id, f"together {i}") for i, s in enumerate(everyone)))
        )
        assert [r.stop_reason for r in results] == ["end_turn"] * 5
        for index, session in enumerate(everyone):
            assert "".join(agent_text(events, session.session_id)) == f"echo: turn {index}echo: together {index}"

        page = await within(client.list_sessions(cwd=cwd))
        assert {s.session_id for s in page.sessions} == {s.session_id for s in sessions}
        assert all(s.cwd == cwd for s in page.sessions)
        assert all(s.updated_at is not None for s in page.sessions)
        assert page.next_cursor is None
        everything = await within(client.list_sessions())
        assert {s.session_id for s in everyone} <= {s.session_id for s in everything.sessions}
        listed = [m for m in link.connectors[-1].sent() if m.get("method") == "session/list"]
        assert [m.get("params") for m in listed] == [{"cwd": cwd}, {}]
