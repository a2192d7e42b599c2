"""The Streamable HTTP transport against a hostile server (issue 9): bounded memory, bounded
streams, no crash on absurd fields, every stream end noticed at once.

Real loopback servers (hypercorn, in-process); memory peaks measured with tracemalloc against
the configured caps.
"""

from __future__ import annotations

import functools
import logging
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from acp_client._codec._jsonrpc import request_message
from acp_client.exceptions import MessageTooLarge, TransportClosed, TransportError
from acp_client.transports import Limits
from acp_client.transports.http import HttpConnector
from tests._support import eventually

from ._http_servers import END, FakeAcpServer, Hypercorn, Recorded, Reply
from ._http_support import Link, Serve, init, new_session, recv

T = TypeVar("T")
MIB = 1 << 20
CAP = 2 * MIB
BOMB_SIZE = 64 * MIB
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "zlib": zlib.MAX_WBITS, "raw": -zlib.MAX_WBITS}
_HEADER = {"gzip": "gzip", "zlib": "deflate", "raw": "deflate"}


@functools.cache
def bomb(kind: str, prefix: bytes = b"") -> bytes:
    """``prefix`` then 64 MiB of zeros, compressed as ``kind`` (a few tens of kilobytes)."""
    z = zlib.compressobj(9, zlib.DEFLATED, _WBITS[kind])
    block = b"0" * MIB
    parts = [z.compress(prefix)] + [z.compress(block) for _ in range(BOMB_SIZE // MIB)] + [z.flush()]
    return b"".join(parts)


async def peak_of(action: Awaitable[T]) -> tuple[T | BaseException, int]:
    """Run ``action``; returns its result (or exception) and the traced memory peak above the start."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        try:
            result: T | BaseException = await action
        except Exception as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def chunked(data: bytes, size: int = 16 * 1024) -> Callable[[], AsyncIterator[bytes]]:
    async def produce() -> AsyncIterator[bytes]:
        for i in range(0, len(data), size):
            yield data[i : i + size]

    return produce


# --------------------------------------------------------------------------------------------
# 1. decompression bombs


@pytest.mark.parametrize("kind", ["gzip", "zlib", "raw"])
async def test_a_compressed_json_body_bomb_stays_under_twice_the_cap(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link, kind: str
) -> None:
    app, server = fake
    body = bomb(kind, b'{"jsonrpc":"2.0","id":0,"result":{"x":"')
    assert len(body) < 200_000
    headers = [("content-type", "application/json"), ("content-encoding", _HEADER[kind]), ("acp-connection-id", "c1")]

    def hook(record: Recorded) -> Reply | None:
        return Reply(200, headers, stream=chunked(body)) if record.rpc_method == "initialize" else None

    app.hook = hook
    transport = await link(server.url, initialize=False, limits=Limits(max_http_body_bytes=CAP))
    result, peak = await peak_of(init(transport))
    assert isinstance(result, MessageTooLarge) and result.limit == CAP
    assert peak < 2 * CAP, f"peak {peak / CAP:.1f}x the cap"


@pytest.mark.parametrize("kind", ["gzip", "zlib", "raw"])
async def test_a_compressed_sse_bomb_stays_under_twice_the_cap(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link, kind: str
) -> None:
    app, server = fake
    body = bomb(kind, b"data: ")
    headers = [("content-type", "text/event-stream"), ("content-encoding", _HEADER[kind])]

    def hook(record: Recorded) -> Reply | None:
        return Reply(200, headers, stream=chunked(body)) if record.method == "GET" else None

    app.hook = hook
    limits = Limits(max_sse_line_bytes=CAP, max_message_bytes=CAP)
    transport = await link(server.url, initialize=False, limits=limits)

    async def run() -> list[Any]:
        await transport.send(request_message(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
        seen: list[Any] = []
        while True:
            try:
                seen.append(await recv(transport, timeout=20))
            except TransportError as exc:
                seen.append(exc)
                if isinstance(exc, TransportClosed):
                    return seen

    result, peak = await peak_of(run())
    assert not isinstance(result, BaseException), result
    # The initialize answer may come before or after the skipped event (two streams).
    assert sorted(type(item).__name__ for item in result) == ["MessageTooLarge", "TransportClosed", "dict"]
    assert peak < 2 * CAP, f"peak {peak / CAP:.1f}x the cap"


# --------------------------------------------------------------------------------------------
# 3. an absurd retry field


async def test_a_5000_digit_retry_field_does_not_kill_the_stream(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link, caplog: pytest.LogCaptureFixture
) -> None:
    app, server = fake
    transport = await link(server.url)
    caplog.set_level(logging.DEBUG)
    for n in range(3):  # an agent may repeat it
        app.connection.stream.push(b"retry: " + b"7" * 5000 + b"\n\n")
        app.connection.stream.push({"jsonrpc": "2.0", "method": "x/alive", "params": {"n": n}})
        assert (await recv(transport))["params"] == {"n": n}
    assert not transport.closed
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


# --------------------------------------------------------------------------------------------
# 4. forged session streams


def session_gets(app: FakeAcpServer) -> list[Recorded]:
    return [r for r in app.of("GET") if "acp-session-id" in r.headers]


@pytest.mark.parametrize("dialect", ["python", "typescript"])
async def test_forged_answers_open_no_session_stream(serve: Serve, link: Link, dialect: str) -> None:
    app = FakeAcpServer(dialect)  # type: ignore[arg-type]
    server = await serve(app)
    transport = await link(server.url)
    for n in range(300):
        forged = {"jsonrpc": "2.0", "id": f"forged-{n}", "result": {"sessionId": f"forged-{n}"}}
        app.connection.stream.push(forged)
    for n in range(300):
        assert (await recv(transport))["id"] == f"forged-{n}"
    assert transport._sessions == {}  # decided as each answer arrived: no stream is due for any
    # A real session still gets its stream, and it is the only one ever opened.
    sid = await new_session(transport, 1)
    await eventually(lambda: len(session_gets(app)) >= 1)
    assert list(transport._sessions) == [sid]
    assert [r.headers["acp-session-id"] for r in session_gets(app)] == [sid]


async def test_session_streams_are_capped(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link, caplog: pytest.LogCaptureFixture
) -> None:
    app, server = fake
    transport = await link(server.url, max_session_streams=3)
    with caplog.at_level(logging.DEBUG, logger="acp_client.transports.http"):
        sids = [await new_session(transport, n) for n in range(1, 6)]
    # Said once per connection (a recovery meets the cap once per session past it), the rest at debug level.
    capped = [r for r in caplog.records if "max_session_streams" in r.getMessage()]
    assert [r.levelno for r in capped] == [logging.WARNING, logging.DEBUG]
    assert sids[3] in capped[0].getMessage() and sids[4] in capped[1].getMessage()
    assert list(transport._sessions) == sids[:3]  # decided as each answer arrived
    await eventually(lambda: len(session_gets(app)) >= 3)
    assert sorted(r.headers["acp-session-id"] for r in session_gets(app)) == sorted(sids[:3])
    # A session left without a stream is a typed error when the app uses it, never a hang.
    with pytest.raises(TransportError, match="session streams") as refused:
        await transport.send(request_message(9, "session/prompt", {"sessionId": sids[4], "prompt": []}))
    assert refused.value.maybe_delivered is False
    await transport.send(request_message(10, "session/prompt", {"sessionId": sids[0], "prompt": []}))


def test_the_session_stream_cap_is_validated() -> None:
    with pytest.raises(ValueError, match="max_session_streams"):
        HttpConnector("http://127.0.0.1:1/acp", max_session_streams=0)


# --------------------------------------------------------------------------------------------
# 12. a stream that ends right after an oversized, skipped event


@pytest.mark.parametrize("where", ["connection", "session"])
@pytest.mark.parametrize("dialect", ["python", "typescript"])
async def test_a_stream_ending_after_a_skipped_event_is_a_drop_at_once(
    serve: Serve, link: Link, dialect: str, where: str
) -> None:
    app = FakeAcpServer(dialect)  # type: ignore[arg-type]
    app.keepalive = 0.05  # a reopened stream would stay alive: only the idle timeout could end it
    server = await serve(app)
    transport = await link(server.url, sse_idle_timeout=30, limits=Limits(max_message_bytes=4096))
    sid = await new_session(transport)
    await eventually(lambda: sid in app.connection.sessions and app.connection.sessions[sid].receivers == 1)
    outbox = app.connection.stream if where == "connection" else app.connection.sessions[sid]
    # The skipped event may have been the answer a turn waits for: only a recovery can tell.
    outbox.push(b"data: " + b"x" * 10_000 + b"\n\n")
    outbox.push(END)
    with pytest.raises(MessageTooLarge):
        await recv(transport)
    with pytest.raises(TransportClosed) as closed:
        await recv(transport, timeout=3)
    assert transport.closed
    if where == "session":
        assert "oversized" in closed.value.reason


async def test_a_session_stream_ending_cleanly_is_still_reopened(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    transport = await link(server.url, limits=Limits(max_message_bytes=4096))
    sid = await new_session(transport)
    conn = app.connection
    await eventually(lambda: sid in conn.sessions and conn.sessions[sid].receivers == 1)
    conn.sessions[sid].push({"jsonrpc": "2.0", "method": "x/small", "params": {}})
    conn.sessions[sid].push(END)
    assert (await recv(transport))["method"] == "x/small"
    await eventually(lambda: len([g for g in app.of("GET") if g.headers.get("acp-session-id") == sid]) == 2)
    assert not transport.closed
