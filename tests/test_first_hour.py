"""Issue 10's "first hour" items on the library side, each as a new user would meet it:

* the sync facade: ``prompt()`` has no default timeout and the defaults agree with the async
  client; a mistyped keyword names ``SyncAcpClient``; parity (``agent_info``,
  ``agent_capabilities``, ``fork_session``, ``set_mode``, ``request``, state changes);
* ``UpdateEvent.text``;
* the stdio agent's process id (``transport_info.pid``);
* the wire logger ``acp_client.wire`` (DEBUG, redacted).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from acp_client import (
    AcpClient,
    ConfigurationError,
    RequestTimeout,
    RetryPolicy,
    State,
    Timeouts,
    UpdateEvent,
)
from acp_client._rpc._wire_log import MAX_LOGGED_CHARS, redact_frame
from acp_client.sync import EventLoopThread, SyncAcpClient
from acp_client.testing import ReferenceAgent, ReferenceServer
from acp_client.types import (
    AgentMessage,
    AgentMessageChunk,
    AgentThoughtChunk,
    ImageContent,
    Plan,
    TextContent,
    ToolCall,
    UserMessageChunk,
)
from tests._support import agent_on_its_own_loop

DEADLINE = 10.0


@pytest.fixture
def agent_side() -> Iterator[tuple[EventLoopThread, ReferenceAgent, ReferenceServer]]:
    with agent_on_its_own_loop(DEADLINE) as side:
        yield side


# -- the sync facade ------------------------------------------------------------------------------------


def test_sync_prompt_has_no_default_timeout_and_defaults_agree() -> None:
    client = SyncAcpClient("ws://127.0.0.1:1/acp")
    assert client.default_timeout is None  # the async client's own timeouts rule
    assert client.client.timeouts == Timeouts()  # request 60 s, connect 30 s, probe 10 s: as async
    client.close()


def test_a_sync_prompt_outlives_the_old_30_second_default(
    agent_side: tuple[EventLoopThread, ReferenceAgent, ReferenceServer],
) -> None:
    """A turn longer than ``default_timeout``: the blocking prompt still waits for it (the old
    facade cancelled every turn after 30 s)."""
    _loop, agent, server = agent_side
    agent.chunk_delay = 0.25  # three chunks: each turn takes about 0.75 s
    with SyncAcpClient(server.ws_url, default_timeout=0.3) as client:
        session = client.new_session("/work")
        assert session.prompt("take your time").stop_reason == "end_turn"
        assert client.prompt(session.session_id, "again").stop_reason == "end_turn"
        with pytest.raises(RequestTimeout):  # an explicit timeout still applies
            session.prompt("too slow", timeout=0.2)


@pytest.mark.parametrize("cls", [AcpClient, SyncAcpClient])
def test_a_mistyped_keyword_names_the_class_and_the_closest_option(cls: type) -> None:
    typo = rf"{cls.__name__}\(\) got an unexpected option 'retry_policy'; did you mean 'retry'\?"
    with pytest.raises(ConfigurationError, match=typo):
        cls("ws://127.0.0.1:1/acp", retry_policy=None)
    renamed = rf"{cls.__name__}\(\).*'request_timeout'; did you mean timeouts=Timeouts\(request=...\)\?"
    with pytest.raises(ConfigurationError, match=renamed):
        cls("ws://127.0.0.1:1/acp", request_timeout=5)
    if cls is SyncAcpClient:  # the facade's own options are suggested too
        with pytest.raises(ConfigurationError, match=r"'default_timeot'; did you mean 'default_timeout'\?"):
            cls("ws://127.0.0.1:1/acp", default_timeot=5)


def test_sync_facade_parity(agent_side: tuple[EventLoopThread, ReferenceAgent, ReferenceServer]) -> None:
    loop, agent, server = agent_side
    retry = RetryPolicy(initial_delay=0.05, max_delay=0.2)
    with SyncAcpClient(server.ws_url, retry=retry) as client:
        assert client.agent_info is not None and client.agent_info.name
        assert client.agent_capabilities.supports("session/fork")
        assert client.initialize_result.protocol_version == 1
        assert client.transport_info is not None and client.transport_info.kind == "websocket"
        parent = client.new_session("/work")
        parent.prompt("hello")
        fork = client.fork_session(parent.session_id, "/work")
        assert fork.session_id != parent.session_id and fork.session_id in agent.sessions
        assert client.request("session/list", {})["sessions"]
        client.notify("_hello", {})
        client.forget_session(fork.session_id)
        assert [h.session_id for h in client.client.sessions] == [parent.session_id]
        seen: list[State] = []

        def watch() -> None:
            for state in client.state_changes(timeout=DEADLINE):
                seen.append(state.state)
                if state.state is State.CONNECTED:
                    return

        watcher = threading.Thread(target=watch)
        watcher.start()
        client.wait_for_state(State.CONNECTED)
        loop.run(server.drop_connections(), timeout=DEADLINE)
        watcher.join(DEADLINE)
        assert seen[:1] == [State.RECONNECTING] and seen[-1] is State.CONNECTED
        with pytest.raises(RequestTimeout):
            next(iter(client.state_changes(timeout=0.05)))


def test_sync_set_mode_is_forwarded(agent_side: tuple[EventLoopThread, ReferenceAgent, ReferenceServer]) -> None:
    _loop, _agent, server = agent_side
    with SyncAcpClient(server.ws_url) as client:
        session = client.new_session("/work")
        with pytest.raises(Exception) as caught:  # the reference agent has no modes: its refusal comes back
            client.set_mode(session.session_id, "architect")
        assert "session/set_mode" in str(caught.value)


# -- UpdateEvent.text -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("update", "text"),
    [
        (AgentMessageChunk(content=TextContent(text="Hel")), "Hel"),
        (UserMessageChunk(content=TextContent(text="hi")), "hi"),
        (AgentThoughtChunk(content=TextContent(text="hmm")), "hmm"),
        (AgentMessage(message_id="m1", content=(TextContent(text="a"), TextContent(text="b"))), "ab"),
        (AgentMessageChunk(content=ImageContent(data="AA==", mime_type="image/png")), None),
        (ToolCall(tool_call_id="t1", title="Read file"), None),
        (Plan(entries=()), None),
    ],
)
def test_update_event_text(update: Any, text: str | None) -> None:
    assert UpdateEvent("s", update).text == text


# -- the stdio agent's pid --------------------------------------------------------------------------------


async def test_the_stdio_agent_pid_is_known(reference_agent_command: list[str]) -> None:
    endpoint = "stdio:" + " ".join(reference_agent_command)
    client = AcpClient(endpoint, retry=None)
    assert client.transport_info is None
    async with client:
        info = client.transport_info
        assert info is not None and info.kind == "stdio" and isinstance(info.pid, int)
        os.kill(info.pid, 0)  # a live process of ours
    assert client.transport_info is None


# -- the wire logger --------------------------------------------------------------------------------------


async def test_the_wire_logger_shows_every_frame_redacted(caplog: pytest.LogCaptureFixture) -> None:
    agent = ReferenceAgent()
    env = [{"name": "DB_PASSWORD", "value": "hunter2"}]
    server_entry = {"name": "db", "command": "db", "args": [], "env": env}
    params = {"cwd": "/work", "mcpServers": [server_entry], "apiToken": "t0k"}
    caplog.set_level(logging.DEBUG, logger="acp_client.wire")
    async with ReferenceServer(agent) as server, AcpClient(server.ws_url, retry=None) as client:
        session = await client.request("session/new", params)
        prompt = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "hello wire"}]}
        await client.request("session/prompt", prompt)
        url = server.ws_url
    records = [record for record in caplog.records if record.name == "acp_client.wire"]
    assert all(record.levelno == logging.DEBUG for record in records)
    lines = [record.getMessage() for record in records]
    sent = [line for line in lines if " > " in line]
    received = [line for line in lines if " < " in line]
    assert any('"method":"initialize"' in line for line in sent)
    assert any('"method":"session/prompt"' in line and "hello wire" in line for line in sent)
    assert any('"sessionUpdate":"agent_message_chunk"' in line for line in received)
    assert any('"stopReason":"end_turn"' in line for line in received)
    assert all(line.startswith(url) for line in lines)
    joined = "\n".join(lines)
    assert "hunter2" not in joined and "t0k" not in joined and "DB_PASSWORD" in joined


def test_redaction_rules() -> None:
    frame = {
        "params": {
            "mcpServers": [
                {"headers": [{"name": "Authorization", "value": "Bearer x"}], "env": [{"name": "K", "value": "v"}]}
            ],
            "meta": {"accessToken": "a", "password": "p", "apiKey": "k", "cookie": "c", "nothing": None},
            "text": "a token is fine in text",
        }
    }
    redacted = redact_frame(frame)
    text = json.dumps(redacted)
    for secret in ("Bearer x", '"v"', '"a"', '"p"', '"k"', '"c"'):
        assert secret not in text
    assert redacted["params"]["text"] == "a token is fine in text"
    assert redacted["params"]["meta"]["nothing"] is None
    assert frame["params"]["meta"]["password"] == "p"  # the frame itself is untouched
    assert MAX_LOGGED_CHARS >= 1000
