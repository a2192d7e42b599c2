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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time

from acp_client.testing import ReferenceAgent, ReferenceServer, SessionStore

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


async def main(instances: int, latency_ms: float) -> None:
    store = SessionStore()
    delay = latency_ms / 1000.0
    servers = [ReferenceServer(ReferenceAgent(name=f"instance-{i}", store=store)) for i in range(instances)]
    relays: list[asyncio.Server] = []
    try:
        for server in servers:
            await server.start()
            if delay > 0:
                relays.append(await _relay(0, server.port, delay))
        ports = [relay.sockets[0].getsockname()[1] for relay in relays] if relays else [s.port for s in servers]
        sys.stdout.write("READY " + " ".join(map(str, ports)) + "\n")
        sys.stdout.flush()
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command = line.strip()
            if command == "cpu":
                sys.stdout.write(f"CPU {time.process_time()!r}\n")
            elif command == "tcp":
                sys.stdout.write(f"TCP {sum(server.tcp_connections for server in servers)}\n")
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
        for server in servers:
            await server.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.0, metavar="MS", help="one-way delay per chunk")
    args = parser.parse_args()
    asyncio.run(main(args.instances, args.latency))
