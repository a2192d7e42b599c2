"""The JSON-RPC connection over the in-memory transport, with a fake clock."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from acp_client._codec import _jsonrpc
from acp_client._rpc._connection import Connection
from acp_client.exceptions import (
    ConnectionLost,
    InternalError,
    MalformedFrame,
    RequestTimeout,
    SessionNotFound,
    TransportClosed,
    UnexpectedResponse,
)
from acp_client.testing.clock import FakeClock
from acp_client.transports.base import TransportInfo
from acp_client.transports.memory import MemoryTransport, memory_pair
from tests._harness import ConnectionPair


async def test_request_response_correlation() -> None:
    h = ConnectionPair()
    first = asyncio.ensure_future(h.conn.request("a", {"x": 1}))
    second = asyncio.ensure_future(h.conn.request("b"))
    r1, r2 = await h.agent_receive(), await h.agent_receive()
    assert r1 == {"jsonrpc": "2.0", "id": 0, "method": "a", "params": {"x": 1}}
    assert r2 == {"jsonrpc": "2.0", "id": 1, "method": "b"}  # no "params": null
    await h.agent.send(_jsonrpc.result_message(1, {"b": True}))
    await h.agent.send(_jsonrpc.result_message(0, {"a": True}))
    assert await first == {"a": True}
    assert await second == {"b": True}
    assert not h.conn._pending


async def test_error_answers_map_to_typed_errors() -> None:
    h = ConnectionPair()
    call = asyncio.ensure_future(h.conn.request("session/status", {"sessionId": "s"}))
    request = await h.agent_receive()
    await h.agent.send(_jsonrpc.error_message(request["id"], -32002, "Resource not found", {"sessionId": "s"}))
    with pytest.raises(SessionNotFound) as info:
        await call
    assert info.value.session_id == "s"


async def test_a_long_burst_of_notifications_lets_other_tasks_run() -> None:
    # A transport hands over all that one network read brought without waiting: an updates()
    # consumer must get to run during such a burst, not only after it.
    h = ConnectionPair()
    for i in range(1000):
        await h.agent.send(_jsonrpc.notification_message("session/update", {"i": i}))
    seen: list[int] = []

    async def watch() -> None:
        while len(h.notifications) < 1000:
            seen.append(len(h.notifications))
            await asyncio.sleep(0)

    await asyncio.wait_for(watch(), 5)
    assert len([n for n in seen if 0 < n < 1000]) >= 5
    assert [p["i"] for _, p in h.notifications] == list(range(1000))


async def test_notifications_arrive_in_order() -> None:
    h = ConnectionPair()
    for i in range(50):
        await h.agent.send(_jsonrpc.notification_message("session/update", {"i": i}))
    call = asyncio.ensure_future(h.conn.request("ping"))
    await h.answer({})
    await call
    assert [p["i"] for _, p in h.notifications] == list(range(50))


async def test_bad_frames_are_reported_and_the_next_response_still_resolves() -> None:
    h = ConnectionPair()
    call = asyncio.ensure_future(h.conn.request("m"))
    request = await h.agent_receive()
    for frame in [
        "garbage",
        "42",
        "[",
        '{"jsonrpc":"1.0","id":0,"result":{}}',
        '{"jsonrpc":"2.0","id":999,"result":{}}',
        "[" * 5000 + "]" * 5000,
        '{"n":' + "1" * 5000 + "}",
        b"\xff\x00",
        '"str"',
    ]:
        h.agent.send_raw(frame)
    await h.agent.send(_jsonrpc.result_message(request["id"], {"ok": 1}))
    assert await call == {"ok": 1}
    kinds = [type(e) for e in h.errors]
    assert kinds.count(MalformedFrame) == 8
    assert kinds.count(UnexpectedResponse) == 1


async def test_broken_request_gets_invalid_request_answer() -> None:
    h = ConnectionPair()
    h.agent.send_raw('{"jsonrpc":"2.0","id":true,"method":"x"}')
    reply = await h.agent_receive()
    assert reply["id"] is None and reply["error"]["code"] == -32600


async def test_timeout_uses_the_clock_and_cancels_remotely() -> None:
    h = ConnectionPair(request_timeout=30.0)
    call = asyncio.ensure_future(h.conn.request("slow"))
    request = await h.agent_receive()
    await h.clock.advance(29.0)
    assert not call.done()
    await h.clock.advance(1.0)
    with pytest.raises(RequestTimeout):
        await call
    cancel = await h.agent_receive()
    assert cancel == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request["id"]}}
    # A late answer to a request the client gave up on is neither a crash nor a protocol error.
    await h.agent.send(_jsonrpc.result_message(request["id"], {}))
    await h.clock.settle()
    assert h.errors == []


async def test_caller_cancellation_sends_cancel_request() -> None:
    h = ConnectionPair()
    call = asyncio.ensure_future(h.conn.request("slow"))
    request = await h.agent_receive()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert (await h.agent_receive())["params"] == {"requestId": request["id"]}


async def test_transport_end_fails_every_pending_request_once() -> None:
    h = ConnectionPair()
    calls = [asyncio.ensure_future(h.conn.request(f"m{i}")) for i in range(5)]
    for _ in range(5):
        await h.agent_receive()
    h.agent.close("agent went away")
    for call in calls:
        with pytest.raises(ConnectionLost) as info:
            await call
        assert info.value.may_have_executed
        assert "agent went away" in str(info.value)
    assert h.conn.is_closed
    with pytest.raises(ConnectionLost) as info:
        await h.conn.request("after")
    assert not info.value.may_have_executed


async def test_agent_requests_are_dispatched() -> None:
    async def handler(method: str, params: Any) -> Any:
        if method == "ok":
            return {"echo": params}
        if method == "missing":
            raise SessionNotFound("Resource not found", {"sessionId": "x"})
        raise RuntimeError("bug in the app")

    clock = FakeClock()
    client_side, agent = memory_pair()
    conn = Connection(client_side, on_request=handler, clock=clock)
    conn.start()
    await agent.send(_jsonrpc.request_message(1, "ok", {"a": 1}))
    assert await agent.receive() == {"jsonrpc": "2.0", "id": 1, "result": {"echo": {"a": 1}}}
    await agent.send(_jsonrpc.request_message(2, "missing"))
    assert (await agent.receive())["error"]["code"] == -32002
    await agent.send(_jsonrpc.request_message(3, "boom"))
    reply = await agent.receive()
    assert reply["error"]["code"] == InternalError.code
    assert "bug in the app" not in reply["error"]["message"]


async def test_no_handler_means_method_not_found() -> None:
    client_side, agent = memory_pair()
    Connection(client_side).start()
    await agent.send(_jsonrpc.request_message("r1", "fs/read_text_file", {}))
    assert (await agent.receive())["error"]["code"] == -32601


async def test_agent_cancel_request_cancels_the_handler() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def handler(method: str, params: Any) -> Any:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    client_side, agent = memory_pair()
    Connection(client_side, on_request=handler).start()
    await agent.send(_jsonrpc.request_message(7, "session/request_permission", {}))
    await started.wait()
    await agent.send(_jsonrpc.notification_message("$/cancel_request", {"requestId": 7}))
    reply = await agent.receive()
    assert reply == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
    assert cancelled.is_set()


async def test_agent_cancel_request_before_the_handler_starts_is_still_answered() -> None:
    # The request and its $/cancel_request arrive together (one read): the handler task is
    # cancelled before it runs, yet the agent is owed a -32800 answer, and nothing is kept.
    async def handler(method: str, params: Any) -> Any:
        await asyncio.Event().wait()

    client_side, agent = memory_pair()
    conn = Connection(client_side, on_request=handler)
    await agent.send(_jsonrpc.request_message(7, "session/request_permission", {}))
    await agent.send(_jsonrpc.notification_message("$/cancel_request", {"requestId": 7}))
    agent.send_raw(
        '[{"jsonrpc": "2.0", "id": 8, "method": "x"},'
        ' {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 8}}]'
    )
    conn.start()
    cancelled = {"code": -32800, "message": "Request cancelled"}
    assert await asyncio.wait_for(agent.receive(), 5) == {"jsonrpc": "2.0", "id": 7, "error": cancelled}
    assert await asyncio.wait_for(agent.receive(), 5) == [{"jsonrpc": "2.0", "id": 8, "error": cancelled}]
    assert not conn._peer_cancelled


async def test_handlers_are_cancelled_when_the_connection_dies() -> None:
    cancelled = asyncio.Event()

    async def handler(method: str, params: Any) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    client_side, agent = memory_pair()
    conn = Connection(client_side, on_request=handler)
    conn.start()
    await agent.send(_jsonrpc.request_message(1, "slow", {}))
    await asyncio.sleep(0)
    agent.close("bye")
    await conn.wait_closed()
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_batches() -> None:
    async def handler(method: str, params: Any) -> Any:
        return {"m": method}

    notes: list[str] = []
    client_side, agent = memory_pair()
    Connection(client_side, on_request=handler, on_notification=lambda m, p: notes.append(m)).start()
    # Mixed batch: one reply array with both answers plus an Invalid Request for the broken entry.
    await agent.send(
        [
            _jsonrpc.request_message(1, "a"),
            _jsonrpc.notification_message("n1"),
            _jsonrpc.request_message(2, "b"),
            {"jsonrpc": "2.0", "method": 5},
        ]
    )
    reply = await agent.receive()
    assert isinstance(reply, list)
    assert sorted((r["id"] is None, r.get("result", {}).get("m")) for r in reply) == [
        (False, "a"),
        (False, "b"),
        (True, None),
    ]
    assert notes == ["n1"]
    # Notification-only batch: no reply at all; empty batch: one Invalid Request object.
    await agent.send([_jsonrpc.notification_message("n2"), _jsonrpc.notification_message("n3")])
    agent.send_raw("[]")
    reply = await agent.receive()
    assert reply == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request: empty batch"}}
    assert notes == ["n1", "n2", "n3"]


async def test_batch_of_responses() -> None:
    h = ConnectionPair()
    a = asyncio.ensure_future(h.conn.request("a"))
    b = asyncio.ensure_future(h.conn.request("b"))
    ra, rb = await h.agent_receive(), await h.agent_receive()
    await h.agent.send([_jsonrpc.result_message(rb["id"], 2), _jsonrpc.result_message(ra["id"], 1)])
    assert (await a, await b) == (1, 2)


async def test_on_answer_runs_before_later_messages() -> None:
    h = ConnectionPair()
    order: list[str] = []
    h.conn._on_notification = lambda m, p: order.append(m)
    call = asyncio.ensure_future(h.conn.request("session/load", on_answer=lambda: order.append("answer")))
    request = await h.agent_receive()
    await h.agent.send(_jsonrpc.notification_message("before"))
    await h.agent.send(_jsonrpc.result_message(request["id"], {}))
    await h.agent.send(_jsonrpc.notification_message("after"))
    await call
    await h.clock.settle()
    assert order == ["before", "answer", "after"]


async def test_sending_on_a_closed_transport_is_connection_lost() -> None:
    client_side = MemoryTransport()
    conn = Connection(client_side)
    with pytest.raises(ConnectionLost) as info:
        await conn.request("x")
    assert not info.value.may_have_executed


class _QueuedAlready:
    """A transport whose inbound messages are all queued: handed over by ``receive_ready()``."""

    info = TransportInfo(kind="memory", target="queued")

    def __init__(self, items: list[Any]) -> None:
        self.items = collections.deque(items)
        self.waits = 0
        self.waiting = asyncio.Event()
        self.ended = asyncio.Event()

    async def send(self, message: Any) -> None:
        return None

    def receive_ready(self) -> Any:
        if not self.items:
            return None
        item = self.items.popleft()
        if isinstance(item, Exception):
            raise item
        return item

    async def receive(self) -> Any:
        self.waits += 1
        self.waiting.set()
        await self.ended.wait()
        raise TransportClosed("ended")

    async def aclose(self) -> None:
        self.ended.set()


async def test_a_transport_with_receive_ready_hands_over_its_queue_without_a_wait_per_message() -> None:
    notes = [_jsonrpc.notification_message("session/update", {"i": i}) for i in range(3)]
    transport = _QueuedAlready([notes[0], MalformedFrame("not JSON"), notes[1], notes[2]])
    seen: list[Any] = []
    errors: list[Any] = []
    conn = Connection(
        transport,  # type: ignore[arg-type]
        on_notification=lambda method, params: seen.append(params["i"]),
        on_protocol_error=errors.append,
        clock=FakeClock(),
    )
    conn.start()
    await asyncio.wait_for(transport.waiting.wait(), 5)  # the queue is empty once the reader waits in receive()
    assert seen == [0, 1, 2]  # in order; the bad frame reported in its place, the reading went on
    assert [type(error) for error in errors] == [MalformedFrame]
    assert transport.waits == 1
    await conn.aclose()
