"""Command line: ``python -m acp_client.testing.reference_agent --stdio | --serve [options]``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Callable, Sequence

from ._agent import ReferenceAgent
from ._faults import FAULTS
from ._meta_log import MetaRecord
from ._server import ReferenceServer
from ._stdio import serve_stdio
from ._store import SessionStore


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m acp_client.testing.reference_agent",
        description="The acp_client reference agent: an ACP v1/v2 echo agent for tests.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="serve one client on stdin/stdout")
    mode.add_argument("--serve", action="store_true", help="serve WebSocket and Streamable HTTP on a port")
    parser.add_argument(
        "--store",
        metavar="DIR",
        help="keep sessions as JSON files in DIR (survives restarts; several instances may share one DIR: "
        "a session saved by one is inactive on the others)",
    )
    parser.add_argument("--no-status", action="store_true", help="do not advertise session/status")
    parser.add_argument("--no-resume", action="store_true", help="do not advertise session/resume")
    parser.add_argument("--no-load", action="store_true", help="do not advertise session/load")
    parser.add_argument(
        "--vocabulary",
        choices=["proposal", "sdk"],
        default="proposal",
        help="status words: active/inactive (proposal) or open/saved (sdk)",
    )
    parser.add_argument("--chunks", type=int, default=3, metavar="N", help="chunks per answer (default 3)")
    parser.add_argument("--chunk-delay", type=float, default=0.0, metavar="S", help="seconds between chunks")
    parser.add_argument(
        "--name", default="acp-reference-agent", help="the agent name to advertise (tells instances apart)"
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        choices=sorted(FAULTS),
        help="a deliberate defect (repeatable), to see a conformance check fail: " + ", ".join(sorted(FAULTS)),
    )
    parser.add_argument("--host", default="127.0.0.1", help="--serve: address to listen on")
    parser.add_argument("--port", type=int, default=0, help="--serve: port (default: a free one)")
    parser.add_argument("--tls-cert", metavar="FILE", help="--serve: certificate file (enables wss/https)")
    parser.add_argument("--tls-key", metavar="FILE", help="--serve: key file for --tls-cert")
    parser.add_argument("--keepalive", type=float, default=15.0, metavar="S", help="--serve: SSE keepalive interval")
    parser.add_argument(
        "--resumable-streams",
        action="store_true",
        help="--serve: number SSE events and resume a stream from Last-Event-ID",
    )
    parser.add_argument(
        "--stream-grace",
        type=float,
        metavar="S",
        help="--serve: end an HTTP connection whose connection stream stayed gone this long (default: never)",
    )
    parser.add_argument(
        "--record-meta",
        metavar="FILE",
        help="append one JSON line per request received or sent with a trace context: direction, method, _meta",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr at DEBUG level")
    return parser


async def _serve_network(agent: ReferenceAgent, args: argparse.Namespace) -> None:
    tls = (args.tls_cert, args.tls_key) if args.tls_cert and args.tls_key else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if sys.platform != "win32":  # the Windows event loops have no signal handlers
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
    async with ReferenceServer(
        agent,
        host=args.host,
        port=args.port,
        tls=tls,
        keepalive_interval=args.keepalive,
        resumable_streams=args.resumable_streams,
        stream_grace=args.stream_grace,
    ) as server:
        sys.stdout.write(f"ws:   {server.ws_url}\nhttp: {server.http_url}\n")
        sys.stdout.flush()
        await stop.wait()


def _appender(path: str) -> Callable[[MetaRecord], None]:
    def append(record: MetaRecord) -> None:
        line = json.dumps({"direction": record.direction, "method": record.method, "meta": record.meta})
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")

    return append


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    try:
        agent = ReferenceAgent(
            name=args.name,
            advertise_status=not args.no_status,
            advertise_resume=not args.no_resume,
            advertise_load=not args.no_load,
            status_vocabulary=args.vocabulary,
            chunks_per_prompt=args.chunks,
            chunk_delay=args.chunk_delay,
            store=SessionStore(args.store) if args.store else None,
            faults=args.fault,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.record_meta:
        agent.meta_log.on_record = _appender(args.record_meta)
    try:
        if args.stdio:
            asyncio.run(serve_stdio(agent))
        else:
            asyncio.run(_serve_network(agent, args))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
