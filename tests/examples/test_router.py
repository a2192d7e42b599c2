"""``examples/router.py``: one ACP endpoint for editors in front of two agent instances (issue 11 item 4).

In-process: the router on a loopback port, an ``AcpClient`` as the editor, two reference agents
sharing one store. End to end: ``chat.py --script --json`` → ``router.py`` (a subprocess) → the two
agents; the instance holding the session dies, and the session comes back through the router on
the other one (a replay).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from websockets.asyncio.server import serve

from acp_client import AcpClient, ClientHandlers
from acp_client.exceptions import SessionNotFound
from acp_client.state import Probe
from acp_client.testing import ReferenceAgent, ReferenceServer, SessionStore
from acp_client.types import RequestPermissionRequest, SelectedPermissionOutcome
from tests.examples._chat_support import EXAMPLES, ChatProcess, _env, named

ROUTER = EXAMPLES / "router.py"
sys.path.insert(0, str(EXAMPLES))
from router import Router  # noqa: E402


class Instances:
    def __init__(self, tmp_path: Path) -> None:
        store = SessionStore(tmp_path / "shared")
        self.agents = [ReferenceAgent(name="agent-a", store=store), ReferenceAgent(name="agent-b", store=store)]
        self.servers = [ReferenceServer(agent) for agent in self.agents]


@pytest_asyncio.fixture
async def instances(tmp_path: Path) -> AsyncIterator[Instances]:
    farm = Instances(tmp_path)
    for server in farm.servers:
        await server.__aenter__()
    yield farm
    for server in farm.servers:
        await server.__aexit__(None, None, None)


async def test_the_router_places_finds_and_relays(instances: Instances) -> None:
    router = Router([server.ws_url for server in instances.servers])
    asked: list[RequestPermissionRequest] = []

    def allow(request: RequestPermissionRequest) -> Any:
        asked.append(request)
        return SelectedPermissionOutcome(option_id=request.options[0].option_id)

    async with serve(router.handle, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        url = f"ws://127.0.0.1:{port}/acp"
        async with AcpClient(url, retry=None, handlers=ClientHandlers(permission=allow)) as editor:
            first = await editor.new_session("/tmp")
            second = await editor.new_session("/tmp")
            a, b = instances.agents
            assert a.sessions[first.session_id].in_memory and not b.sessions[first.session_id].in_memory
            assert b.sessions[second.session_id].in_memory  # round robin: the second on b
            updates: list[str] = []

            def text(event: Any) -> None:
                updates.append(getattr(getattr(event.update, "content", None), "text", ""))

            editor.add_update_listener(text)
            assert (await second.prompt("hello")).stop_reason == "end_turn"
            await second.prompt("/permission")  # an agent→client request, relayed both ways
            assert len(asked) == 1
            assert "permission: selected" in "".join(updates), updates
            status = await editor.session_status(second.session_id)
            assert status.status is Probe.ACTIVE
            assert (await editor.session_status("sess_nowhere")).status is Probe.UNKNOWN
        # Another editor asks for the session held by b: the router finds it there, never on a.
        async with AcpClient(url, retry=None) as other:
            loaded = await other.load_session(second.session_id, "/tmp")
            assert (await loaded.prompt("again")).stop_reason == "end_turn"
        assert not a.sessions[second.session_id].in_memory
        async with AcpClient(url, retry=None) as third:
            with pytest.raises(SessionNotFound):  # no instance knows it: -32002 from the router
                await third.load_session("sess_nowhere", "/tmp")
    await router.aclose()


async def start_router(urls: list[str]) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROUTER),
        *urls,
        "--port",
        "0",
        "--probe-timeout",
        "1",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    assert line.startswith("READY "), line
    return process, line.split()[1]


async def test_chat_through_the_router_survives_an_instance_dying(
    instances: Instances, chat_script: Callable[..., Awaitable[ChatProcess]]
) -> None:
    a, b = instances.servers
    router, url = await start_router([a.ws_url, b.ws_url])
    chat = await chat_script(url, ["hello", "/wait-recovery", "after"])
    try:
        session = await chat.next_event("session")
        await chat.next_event("turn_end")
        assert instances.agents[0].sessions[session["sessionId"]].in_memory  # placed on a
        await a.aclose()  # the instance holding the session dies
        recovered = await chat.next_event("recovered")
        assert recovered["path"] == "replay" and recovered["sessionId"] == session["sessionId"]
        status, events, err = await chat.finish()
    finally:
        if router.returncode is None:
            router.kill()
            await router.wait()
    assert status == 0, err
    turns = named(events, "turn_end")
    assert len(turns) == 2 and turns[-1]["sessionId"] == session["sessionId"]
    assert instances.agents[1].sessions[session["sessionId"]].in_memory  # it lives on b now
