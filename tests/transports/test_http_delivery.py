"""Whether a POST that failed may have reached the agent (``maybe_delivered``), judged from the wire.

A message is "not delivered" only when no byte of it left the client. A POST whose bytes are on
their way (held here by a :class:`~acp_client.testing.FaultProxy` blackhole) when the client
releases the link, as it does after a drop, may have been delivered: the agent gets the bytes if
the partition heals. A send on a link that is already closed writes nothing.
"""

from __future__ import annotations

import asyncio

import pytest

from acp_client._codec._jsonrpc import request_message
from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer
from acp_client.transports import TransportClosed
from acp_client.transports.base import Transport
from acp_client.transports.http import HttpConnector
from tests._support import DEADLINE, eventually

TEXT = "a prompt held in the blackhole " + "x" * 200


async def _exchange(transport: Transport, request_id: int, method: str, params: object) -> dict[str, object]:
    await transport.send(request_message(request_id, method, params))
    answer = await asyncio.wait_for(transport.receive(), DEADLINE)
    assert answer["id"] == request_id and "result" in answer, answer
    return dict(answer["result"])


def _prompt(session_id: object) -> dict[str, object]:
    return request_message(3, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": TEXT}]})


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
async def test_a_post_under_way_when_the_link_is_released_may_have_been_delivered(http2: bool) -> None:
    agent = ReferenceAgent()
    async with ReferenceServer(agent) as server, FaultProxy("127.0.0.1", server.port) as proxy:
        # A short connect timeout bounds the DELETE that closing an open link sends into the hole.
        connector = HttpConnector(proxy.url(server.http_url), http2=http2, connect_timeout=0.3)
        transport = await connector.connect()
        try:
            await _exchange(transport, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            session = await _exchange(transport, 2, "session/new", {"cwd": "/", "mcpServers": []})
            await proxy.blackhole()
            send = asyncio.ensure_future(transport.send(_prompt(session["sessionId"])))
            # Bytes of it are in the hole (under HTTP/2 its head at least: the body may wait for
            # a flow-control window the blackholed server cannot open).
            await eventually(lambda: proxy.held_client_bytes > 0, what="the POST in the blackhole")
            assert not send.done()  # waiting for its answer

            await transport.aclose()  # released while the POST waits for its answer
            with pytest.raises(TransportClosed) as closed:
                await asyncio.wait_for(send, DEADLINE)
            assert closed.value.maybe_delivered, closed.value
        finally:
            await proxy.blackhole(False)
            await transport.aclose()


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
async def test_a_send_on_a_released_link_was_not_delivered(http2: bool) -> None:
    async with ReferenceServer(ReferenceAgent()) as server:
        transport = await HttpConnector(server.http_url, http2=http2).connect()
        await _exchange(transport, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        session = await _exchange(transport, 2, "session/new", {"cwd": "/", "mcpServers": []})
        await transport.aclose()
        with pytest.raises(TransportClosed) as closed:
            await transport.send(_prompt(session["sessionId"]))
        assert not closed.value.maybe_delivered
