"""Whether a prompt cut off by a drop "may have executed", judged from the wire.

A request is "not sent" (``ConnectionLost.may_have_executed`` false, and then sent again once the
client is back) only when none of its bytes left the client. Here the bytes of a prompt are held
in a :class:`~acp_client.testing.FaultProxy` blackhole (they left the client, the agent has not
seen them yet) while the client finds the link dead (WebSocket ping timeout, SSE idle timeout);
then the partition heals, with resets (the held bytes are lost) or delivering what it held. The
caller must hear "may have executed", the prompt must never go out again, and the agent must get
it at most once. The converse: a prompt that never left (no link to send it on) is sent once the
client is back, and the agent gets it exactly once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_client import AcpClient, ConnectionLost, QueueOptions, RecoveryPath, State, Timeouts
from acp_client.testing import ReferenceServer
from tests._support import DEADLINE, FAST_RETRY, eventually
from tests.e2e._support import Recorder, RecordingAgent, text_of
from tests.peers.reference import FaultProxyFactory

#: Long enough that the client's own pings (a few bytes each) cannot pass for it in the hole.
HELD = "a prompt held in the blackhole " + "x" * 200
#: The keepalive comments of the server (SSE) and the pings of the client (WebSocket) come this often;
#: a link silent for DETECT seconds is dead.
TICK, DETECT = 0.1, 0.6


def _prompts(agent: RecordingAgent, text: str) -> int:
    """How many times the agent received ``session/prompt`` with ``text``."""
    return sum(1 for params in agent.params_of("session/prompt") if text_of(params["prompt"]) == text)


def _options(transport: str) -> dict[str, Any]:
    if transport == "ws":
        return {"ping_interval": TICK, "ping_timeout": DETECT, "open_timeout": 1.0}
    return {"http2": transport == "h2c", "sse_idle_timeout": DETECT, "connect_timeout": 1.0}


def _url(server: ReferenceServer, proxy_url: Any, transport: str) -> str:
    return str(proxy_url(server.ws_url if transport == "ws" else server.http_url))


@pytest.mark.parametrize("resend", [False, True], ids=["default", "retry_unsent"])
@pytest.mark.parametrize("heal", ["resets", "delivers"])
@pytest.mark.parametrize("transport", ["ws", "http1", "h2c"])
async def test_prompt_held_in_a_blackhole_may_have_executed_and_is_never_resent(
    reference_agent: RecordingAgent, fault_proxy: FaultProxyFactory, transport: str, heal: str, resend: bool
) -> None:
    async with ReferenceServer(reference_agent, keepalive_interval=TICK) as server:
        proxy = await fault_proxy(server)
        recorder = Recorder()
        client = AcpClient(
            _url(server, proxy.url, transport),
            retry=FAST_RETRY,
            timeouts=Timeouts(connect=1.0),
            transport_options=_options(transport),
            retry_unsent_prompts=resend,  # then a prompt wrongly judged "not sent" would go out again
            callbacks=recorder.callbacks(),
        )
        async with client:
            session = await client.new_session("/work/project")
            handle = client.session(session.session_id)
            await handle.prompt("before")

            await proxy.blackhole()
            try:
                turn = asyncio.ensure_future(handle.prompt(HELD))
                # Its bytes left the client: they are in the hole (under HTTP/2 its head at least: the
                # body may wait for a flow-control window; the client's pings are a few bytes each).
                least = len(HELD) if transport == "ws" else 1
                await eventually(lambda: proxy.held_client_bytes >= least, what="the prompt in the blackhole")
                await eventually(lambda: client.state.state is not State.CONNECTED, what="the drop to be detected")
                if heal == "resets":
                    await proxy.cut()
            finally:
                await proxy.blackhole(False)

            with pytest.raises(ConnectionLost) as lost:
                await asyncio.wait_for(turn, DEADLINE)
            assert lost.value.method == "session/prompt"
            assert lost.value.may_have_executed, lost.value
            assert [text_of(i.prompt) for i in recorder.interrupted] == [HELD]
            outcome = await recorder.outcome()
            assert outcome.path is RecoveryPath.RESUME

            # A turn on the new link, well after the heal: what the old link delivered has arrived.
            assert (await handle.prompt("after")).stop_reason == "end_turn"
            assert _prompts(reference_agent, HELD) <= 1
            assert _prompts(reference_agent, "after") == 1
            # Never sent again: not on the new link, whatever the old one delivered.
            new_link = reference_agent.connection_ids()[-1]
            sent_on_new_link = [
                params
                for cid, method, params in reference_agent.received
                if cid == new_link and method == "session/prompt" and text_of(params["prompt"]) == HELD
            ]
            assert not sent_on_new_link


@pytest.mark.parametrize("transport", ["ws", "http1"])
async def test_prompt_that_never_left_is_sent_once_when_the_client_is_back(
    reference_agent: RecordingAgent, fault_proxy: FaultProxyFactory, transport: str
) -> None:
    async with ReferenceServer(reference_agent) as server:
        proxy = await fault_proxy(server)
        recorder = Recorder()
        client = AcpClient(
            _url(server, proxy.url, transport),
            retry=FAST_RETRY,
            timeouts=Timeouts(connect=1.0),
            transport_options={"http2": False} if transport == "http1" else {},
            # No outage queue: a prompt made while the link is down fails at once as "not sent"
            # (``ConnectionLost``, ``may_have_executed=False``) and the client sends it when back.
            queue=QueueOptions(enabled=False),
            retry_unsent_prompts=True,
            callbacks=recorder.callbacks(),
        )
        async with client:
            session = await client.new_session("/work/project")
            handle = client.session(session.session_id)
            await handle.prompt("before")

            await proxy.refuse(60)  # every reconnect attempt is refused before a byte of it is sent
            await proxy.cut()
            await eventually(lambda: client.state.state is State.RECONNECTING, what="the drop")
            turn = asyncio.ensure_future(handle.prompt("while down"))
            await eventually(lambda: proxy.refused_connections >= 2, what="two refused attempts")
            assert not turn.done()  # waiting for the client to be back, not failed
            await proxy.refuse(0)

            result = await asyncio.wait_for(turn, DEADLINE)
            assert result.stop_reason == "end_turn"
            assert _prompts(reference_agent, "while down") == 1
            assert not recorder.interrupted
            assert handle.transcript.text().endswith("user: while down\nagent: echo: while down")
