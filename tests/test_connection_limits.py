"""What a hostile agent can do to one connection: floods, echo amplification, false alarms."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from acp_client._codec import _jsonrpc
from acp_client._rpc._connection import Connection
from acp_client.exceptions import ConfigurationError, RequestTimeout, RpcError
from acp_client.transports.memory import MemoryTransport, memory_pair
from tests._harness import ConnectionPair

_MIB = 1024 * 1024
_DEFAULT_CAP = 64  # the documented default of max_incoming_requests


def _permission_request(request_id: int) -> dict[str, Any]:
    params = {"sessionId": "s", "toolCall": {"toolCallId": f"t{request_id}"}, "options": []}
    return _jsonrpc.request_message(request_id, "session/request_permission", params)


# -- in-flight cap on agent→client requests ------------------------------------------------------------


async def test_a_flood_of_requests_is_capped_and_the_clients_own_requests_still_resolve() -> None:
    started = 0
    never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def never_answers(method: str, params: Any) -> Any:
        nonlocal started
        started += 1
        return await never

    h = ConnectionPair(never_answers)
    flood = 5000

    async def run() -> None:
        for i in range(flood):
            await h.agent.send(_permission_request(i))
        refused: set[Any] = set()
        while len(refused) < flood - _DEFAULT_CAP:
            reply = await h.agent_receive()
            assert reply["error"]["code"] == -32603
            assert "concurrent" in reply["error"]["message"]
            refused.add(reply["id"])
        assert refused == set(range(_DEFAULT_CAP, flood))
        # The client's own request still goes out and resolves while the 64 handlers hang.
        call = asyncio.ensure_future(h.conn.request("session/status", {"sessionId": "s"}))
        request = await h.agent_receive()
        assert request["method"] == "session/status"
        await h.agent.send(_jsonrpc.result_message(request["id"], {"status": "active"}))
        assert await call == {"status": "active"}

    await asyncio.wait_for(run(), 20)
    assert started == _DEFAULT_CAP
    await h.conn.aclose()


class GatedSends:
    """The client end of a memory pair whose sends wait until ``gate`` is set (a slow uplink)."""

    def __init__(self, inner: MemoryTransport, gate: asyncio.Event) -> None:
        self.inner = inner
        self.gate = gate

    @property
    def info(self) -> Any:
        return self.inner.info

    async def send(self, message: Any) -> None:
        await self.gate.wait()
        await self.inner.send(message)

    async def receive(self) -> Any:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_refusing_a_flood_takes_bounded_tasks_even_when_replies_cannot_be_sent() -> None:
    never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def never_answers(method: str, params: Any) -> Any:
        return await never

    client_side, agent = memory_pair()
    gate = asyncio.Event()
    conn = Connection(GatedSends(client_side, gate), on_request=never_answers)  # type: ignore[arg-type]
    conn.start()
    before = len(asyncio.all_tasks())
    for i in range(5000):
        await agent.send(_permission_request(i))
    for _ in range(20):
        await asyncio.sleep(0)
    # 64 handlers and one sender of refusals; the reader waits while 256 refusals are queued.
    assert len(asyncio.all_tasks()) - before < _DEFAULT_CAP + 16
    gate.set()
    refused = 0
    while refused < 5000 - _DEFAULT_CAP:
        reply = await asyncio.wait_for(agent.receive(), 5)
        assert reply["error"]["code"] == -32603
        refused += 1
    await conn.aclose()


async def test_the_cap_is_configurable_and_frees_up_as_handlers_finish() -> None:
    gate = asyncio.Event()

    async def waits(method: str, params: Any) -> Any:
        await gate.wait()
        return {"ok": True}

    h = ConnectionPair(waits, max_incoming_requests=2)
    for i in range(3):
        await h.agent.send(_permission_request(i))
    refused = await h.agent_receive()
    assert refused["id"] == 2 and refused["error"]["code"] == -32603
    gate.set()
    answered = {(await h.agent_receive())["id"], (await h.agent_receive())["id"]}
    assert answered == {0, 1}
    await h.agent.send(_permission_request(3))  # a slot is free again
    assert (await h.agent_receive()) == {"jsonrpc": "2.0", "id": 3, "result": {"ok": True}}
    await h.conn.aclose()


async def test_reused_ids_cannot_get_around_the_cap() -> None:
    never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def never_answers(method: str, params: Any) -> Any:
        return await never

    h = ConnectionPair(never_answers, max_incoming_requests=3)
    for _ in range(5):
        await h.agent.send(_permission_request(7))  # the same id over and over
    replies = [await h.agent_receive(), await h.agent_receive()]
    assert all(reply["error"]["code"] == -32603 for reply in replies)
    await h.conn.aclose()


async def test_batches_count_against_the_cap() -> None:
    gate = asyncio.Event()

    async def waits(method: str, params: Any) -> Any:
        await gate.wait()
        return {"ok": True}

    h = ConnectionPair(waits, max_incoming_requests=2)
    await h.agent.send([_permission_request(i) for i in range(4)])
    await asyncio.sleep(0)
    gate.set()
    replies = {reply["id"]: reply for reply in await h.agent_receive()}
    assert {i for i, r in replies.items() if "result" in r} == {0, 1}
    assert {i for i, r in replies.items() if r.get("error", {}).get("code") == -32603} == {2, 3}
    await h.conn.aclose()


@pytest.mark.parametrize("bad", [0, -1, 2.5, "64", True])
def test_the_cap_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_incoming_requests"):
        Connection(memory_pair()[0], max_incoming_requests=bad)


# -- echo amplification ----------------------------------------------------------------------------------


async def test_a_huge_method_name_gets_a_small_method_not_found() -> None:
    h = ConnectionPair()  # no handler: every request is method-not-found
    method = "x" * (4 * _MIB)
    await h.agent.send(_jsonrpc.request_message(1, method, {}))
    reply = await h.agent_receive()
    assert reply["error"]["code"] == -32601
    assert len(_jsonrpc.encode(reply)) < 1024
    assert reply["error"]["data"]["method"].startswith("x" * 128)
    assert str(4 * _MIB) in reply["error"]["message"]  # says how long it was
    await h.conn.aclose()


async def test_a_short_method_name_is_echoed_whole() -> None:
    error = RpcError.method_not_found("fs/nope")
    assert error.message == "Method not found: fs/nope"
    assert error.data == {"method": "fs/nope"}


async def test_the_client_router_does_not_echo_a_huge_method_either() -> None:
    from pathlib import Path

    from acp_client.handlers import ClientHandlers, RequestRouter

    router = RequestRouter(ClientHandlers(), session_roots=lambda _s: [Path("/")], protocol_version=lambda: 1)
    h = ConnectionPair(router)
    await h.agent.send(_jsonrpc.request_message(1, "fs/" + "y" * (4 * _MIB), {}))
    reply = await h.agent_receive()
    assert reply["error"]["code"] == -32601
    assert len(_jsonrpc.encode(reply)) < 1024
    await h.conn.aclose()


async def test_an_app_error_echoing_a_huge_input_is_cut() -> None:
    async def echoes(method: str, params: Any) -> Any:
        raise RpcError(f"bad input: {params['blob']}", code=-32602)

    h = ConnectionPair(echoes)
    await h.agent.send(_jsonrpc.request_message(1, "_x/echo", {"blob": "z" * _MIB}))
    reply = await h.agent_receive()
    assert reply["error"]["code"] == -32602
    assert len(reply["error"]["message"]) <= 1024 + 3
    await h.conn.aclose()


# -- late answers to requests the client gave up on ----------------------------------------------------


async def test_a_late_answer_after_a_timeout_is_not_a_protocol_error(caplog: pytest.LogCaptureFixture) -> None:
    h = ConnectionPair(request_timeout=5)
    call = asyncio.ensure_future(h.conn.request("session/status", {"sessionId": "s"}))
    request = await h.agent_receive()
    await h.clock.advance(6)
    with pytest.raises(RequestTimeout):
        await call
    assert (await h.agent_receive())["method"] == "$/cancel_request"
    with caplog.at_level(logging.DEBUG, logger="acp_client._rpc._connection"):
        await h.agent.send(_jsonrpc.result_message(request["id"], {"status": "active"}))
        follow = asyncio.ensure_future(h.conn.request("ping", timeout=None))
        await h.agent.send(_jsonrpc.result_message((await h.agent_receive())["id"], {}))
        await follow
    assert h.errors == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("abandoned" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)
    await h.conn.aclose()


async def test_a_late_answer_after_cancellation_is_not_a_protocol_error(caplog: pytest.LogCaptureFixture) -> None:
    h = ConnectionPair()
    call = asyncio.ensure_future(h.conn.request("session/list"))
    request = await h.agent_receive()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert (await h.agent_receive())["method"] == "$/cancel_request"
    with caplog.at_level(logging.DEBUG, logger="acp_client._rpc._connection"):
        await h.agent.send(_jsonrpc.error_message(request["id"], -32800, "Request cancelled"))
        follow = asyncio.ensure_future(h.conn.request("ping"))
        await h.agent.send(_jsonrpc.result_message((await h.agent_receive())["id"], {}))
        await follow
    assert h.errors == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    await h.conn.aclose()


async def test_an_answer_to_an_id_never_sent_is_still_reported() -> None:
    h = ConnectionPair()
    await h.agent.send(_jsonrpc.result_message(999, {}))
    follow = asyncio.ensure_future(h.conn.request("ping"))
    await h.agent.send(_jsonrpc.result_message((await h.agent_receive())["id"], {}))
    await follow
    assert len(h.errors) == 1 and "unknown request id 999" in str(h.errors[0])
    await h.conn.aclose()


async def test_a_second_late_answer_to_the_same_id_is_reported() -> None:
    h = ConnectionPair(request_timeout=1)
    call = asyncio.ensure_future(h.conn.request("session/status"))
    request = await h.agent_receive()
    await h.clock.advance(2)
    with pytest.raises(RequestTimeout):
        await call
    for _ in range(2):
        await h.agent.send(_jsonrpc.result_message(request["id"], {}))
    follow = asyncio.ensure_future(h.conn.request("ping", timeout=None))
    await h.agent_receive()  # $/cancel_request
    await h.agent.send(_jsonrpc.result_message((await h.agent_receive())["id"], {}))
    await follow
    assert len(h.errors) == 1  # the first late answer is expected, a repeat is not


async def test_abandoned_ids_are_remembered_within_a_bound() -> None:
    h = ConnectionPair(request_timeout=1)
    calls = [asyncio.ensure_future(h.conn.request("m")) for _ in range(1100)]
    await asyncio.sleep(0)
    await h.clock.advance(2)
    await asyncio.gather(*calls, return_exceptions=True)
    assert len(h.conn._abandoned._ids) == 1024
    assert 0 not in h.conn._abandoned._ids and 1099 in h.conn._abandoned._ids
    await h.conn.aclose()
