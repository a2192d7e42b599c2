"""Serving a :class:`ReferenceAgent` over stdio: newline-delimited JSON on stdin / stdout.

stdout carries only JSON-RPC messages; logs go to stderr (through :mod:`logging`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from typing import Any, Protocol

from ..._codec._jsonrpc import RequestId, encode
from ...exceptions import MessageTooLarge, TransportClosed
from ._agent import ReferenceAgent
from ._faults import ESCAPES

logger = logging.getLogger(__name__)

#: The longest line read from stdin (one JSON-RPC message).
MAX_LINE_BYTES = 16 * 1024 * 1024


class LineWriter(Protocol):
    """Where :func:`serve_stdio` writes (an :class:`asyncio.StreamWriter` fits)."""

    def write(self, data: bytes) -> Any: ...

    async def drain(self) -> None: ...


class _BlockingWriter:
    """Writes to a binary file object (stdout that is not a pipe, e.g. a regular file)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, data: bytes) -> None:
        self._stream.write(data)
        self._stream.flush()

    async def drain(self) -> None:
        return None


async def _stdin_reader() -> asyncio.StreamReader:
    """An asyncio reader over stdin: a pipe transport when possible, else a daemon thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    with contextlib.suppress(ValueError, OSError):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
        return reader
    fd = sys.stdin.fileno()

    def pump() -> None:
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop may be closed already
                loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="reference-agent-stdin", daemon=True).start()
    return reader


async def _stdout_writer() -> LineWriter:
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    except (ValueError, OSError):
        return _BlockingWriter(sys.stdout.buffer)
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def serve_stdio(
    agent: ReferenceAgent, *, reader: asyncio.StreamReader | None = None, writer: LineWriter | None = None
) -> None:
    """Serve one client over newline-delimited JSON until the input ends.

    Args:
        reader: Where messages come from (stdin by default).
        writer: Where messages go (stdout by default).
    """
    reader = reader if reader is not None else await _stdin_reader()
    writer = writer if writer is not None else await _stdout_writer()
    lock = asyncio.Lock()

    async def send(message: dict[str, Any], cause: RequestId | None) -> None:
        async with lock:
            try:
                writer.write(encode(message).encode() + b"\n")
                await writer.drain()
            except (OSError, RuntimeError) as exc:
                raise TransportClosed(f"stdout closed: {exc}") from exc

    if agent.hostile:  # the escapes fault: the agent's stderr is hostile too
        sys.stderr.write(f"reference agent starting {ESCAPES}\n")
        sys.stderr.flush()
    connection = agent.connect(send)
    try:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if line.strip():
                    await connection.handle_frame(line)
                break
            except asyncio.LimitOverrunError:
                await _skip_line(reader)
                await connection.report_bad_frame(MessageTooLarge("line too long", limit=MAX_LINE_BYTES))
                continue
            if line.strip():
                await connection.handle_frame(line)
    finally:
        await connection.close()


async def _skip_line(reader: asyncio.StreamReader) -> None:
    """Discard input up to and including the next newline."""
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return
