"""A farm of reference-agent instances for the locate benchmark. Not a real deployment.

Run as a subprocess (``python benchmarks/_farm.py --instances N --latency MS``): it serves ``N``
instances of the bundled reference agent (``acp_client.testing``; one shared in-memory store, so a
session one instance holds is ``inactive`` on the others), each on its own loopback port behind a
small TCP relay that delays every chunk by ``MS`` milliseconds in each direction (a network
round trip of ``2 x MS``; with ``--latency 0`` the instances are reached directly, as on
loopback). It prints ``READY <port> <port> ...`` and serves until its stdin closes. Commands on
stdin, one per line, each answered with one line: ``cpu`` -> ``CPU <seconds>``, the CPU time it
has used so far; ``tcp`` -> ``TCP <n>``, the TCP connections its instances accepted so far;
``drop`` -> ``DROPPED``, once every instance dropped its connections (the clients see resets; the
sessions stay in memory). Its CPU is not the benchmark's: the instances stand for other machines.

With ``--resumable`` the instances number their SSE events (``resumable_streams``) and each is
reached through a :class:`~acp_client.testing.FaultProxy` of its own (instead of the relay):
``cut`` -> ``CUT`` once every proxy reset its connections (the network failed; the instances keep
their HTTP connections, so the clients can reattach their streams); ``reattached`` ->
``REATTACHED <n>``, the streams reopened with ``Last-Event-ID`` (answered 200) since the last cut.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time

from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer, RequestRecord, SessionStore

_CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay`` seconds after it was read (in order)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.ensure_future(deliver())
    try:
        while True:
            data = await reader.read(_CHUNK)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                break
        await sender
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        sender.cancel()
        with contextlib.suppress(Exception):
            writer.close()


async def _relay(listen_port: int, upstream_port: int, delay: float) -> asyncio.Server:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(delay)  # the SYN's trip
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.sleep(delay)  # the SYN-ACK's trip back
        await asyncio.gather(
            _pipe(client_reader, upstream_writer, delay),
            _pipe(upstream_reader, client_writer, delay),
            return_exceptions=True,
        )

    return await asyncio.start_server(handle, "127.0.0.1", listen_port, backlog=512)


def _reattached(records: list[RequestRecord], since: RequestRecord | None) -> int:
    """The stream reattachments answered 200 among ``records`` after ``since``."""
    start = next((i + 1 for i in range(len(records) - 1, -1, -1) if records[i] is since), 0)
    return sum(1 for r in records[start:] if r.method == "GET" and r.status == 200 and r.header("last-event-id"))


async def main(instances: int, latency_ms: float, resumable: bool) -> None:
    store = SessionStore()
    delay = latency_ms / 1000.0
    servers = [
        ReferenceServer(ReferenceAgent(name=f"instance-{i}", store=store), resumable_streams=resumable)
        for i in range(instances)
    ]
    relays: list[asyncio.Server] = []
    proxies: list[FaultProxy] = []
    cut_at: list[RequestRecord | None] = [None] * instances
    try:
        for server in servers:
            await server.start()
            if resumable:
                proxies.append(FaultProxy("127.0.0.1", server.port))
                await proxies[-1].start()
            elif delay > 0:
                relays.append(await _relay(0, server.port, delay))
        if proxies:
            ports = [proxy.port for proxy in proxies]
        elif relays:
            ports = [relay.sockets[0].getsockname()[1] for relay in relays]
        else:
            ports = [server.port for server in servers]
        sys.stdout.write("READY " + " ".join(map(str, ports)) + "\n")
        sys.stdout.flush()
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command = line.strip()
            if command == "cpu":
                sys.stdout.write(f"CPU {time.process_time()!r}\n")
            elif command == "tcp":
                sys.stdout.write(f"TCP {sum(server.tcp_connections for server in servers)}\n")
            elif command == "cut":
                cut_at = [server.requests[-1] if server.requests else None for server in servers]
                for proxy in proxies:
                    await proxy.cut()
                sys.stdout.write("CUT\n")
            elif command == "reattached":
                count = sum(_reattached(server.requests, since) for server, since in zip(servers, cut_at, strict=True))
                sys.stdout.write(f"REATTACHED {count}\n")
            elif command == "drop":
                for server in servers:
                    await server.drop_connections()
                sys.stdout.write("DROPPED\n")
            else:
                sys.stdout.write(f"UNKNOWN {command!r}\n")
            sys.stdout.flush()
    finally:
        for relay in relays:
            relay.close()
        for proxy in proxies:
            await proxy.aclose()
        for server in servers:
            await server.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.0, metavar="MS", help="one-way delay per chunk")
    parser.add_argument("--resumable", action="store_true", help="resumable streams, each instance behind a FaultProxy")
    args = parser.parse_args()
    asyncio.run(main(args.instances, args.latency, args.resumable))
