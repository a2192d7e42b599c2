#!/usr/bin/env python3
"""A routing layer: one ACP WebSocket endpoint for editors, N agent instances behind it.

Usage::

    python examples/router.py AGENT_URL AGENT_URL ... [--port 8765] [--placement round_robin]

It prints ``READY ws://HOST:PORT/acp`` once it listens; editors connect there as to any agent.

What it does with each editor message (DESIGN.md §5), built on ``acp_client``'s transports and
pool primitives (:mod:`acp_client.pool`):

* ``initialize`` — forwarded to the first instance that answers; its answer is the editor's. Links
  to the other instances are opened (and initialized with the same request) when first needed.
* ``session/new`` — sent to the instance the placement policy picks; the session is homed there.
* ``session/load`` / ``session/resume`` — the router asks every instance ``session/status`` at
  once (``locate()``) and sends the call to the one instance that has the session ``active``,
  else to one that has it ``inactive`` (its home first); if no instance knows it, the editor gets
  -32002. Never to two instances.
* ``session/status`` — answered from that fan-out: ``active`` if an instance has it in memory,
  else ``inactive`` if one knows it, else -32002.
* ``session/prompt`` and every other call naming a ``sessionId`` — sent to the session's home.
* Anything else (``session/list``, extensions) — to the first instance.
* From the agents: responses, ``session/update`` notifications and agent→client requests
  (permissions, ``fs/*``, ``terminal/*``) are relayed to the editor, ids mapped both ways.

When the link to an instance drops, the router closes the editor connections that used it: the
editor reconnects (to the router), probes its sessions, and the router's fan-out sends them to an
instance that can take them — a replay on another instance when the instances share a store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from acp_client.exceptions import AcpError
from acp_client.pool import Endpoint, Location, Probe, RouteKind, locate, placement_policy
from acp_client.transports.base import Transport

logger = logging.getLogger("router")

SESSION_NOT_FOUND = -32002
INTERNAL_ERROR = -32603
ATTACH = ("session/load", "session/resume")


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


class Upstream:
    """One editor connection's link to one instance: its own ids, the editor's ids it answers."""

    def __init__(self, name: str, transport: Transport) -> None:
        self.name = name
        self.transport = transport
        self.ids = itertools.count(1)
        #: upstream request id -> (editor request id, method, params)
        self.pending: dict[Any, tuple[Any, str, Any]] = {}
        self.reader: asyncio.Task[None] | None = None


class EditorConnection:
    """One editor connected to the router."""

    def __init__(self, router: Router, websocket: ServerConnection) -> None:
        self.router = router
        self.websocket = websocket
        self.links: dict[str, Upstream] = {}
        self.opening: dict[str, asyncio.Future[Upstream]] = {}
        self.initialize: dict[str, Any] | None = None
        #: router id of an agent→client request -> (upstream, the agent's id)
        self.agent_requests: dict[str, tuple[Upstream, Any]] = {}
        self.request_ids = itertools.count(1)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closed = False

    # -- the editor side -----------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            async for frame in self.websocket:
                if isinstance(frame, bytes):
                    continue  # binary frames are not ACP
                try:
                    message = json.loads(frame)
                except json.JSONDecodeError:
                    await self.to_editor(error(None, -32700, "parse error"))
                    continue
                self.spawn(self.from_editor(message))
        except ConnectionClosed:
            pass
        finally:
            await self.close()

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def to_editor(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.websocket.send(json.dumps(message))

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            await self.websocket.close()
        for link in self.links.values():
            if link.reader is not None:
                link.reader.cancel()
            with contextlib.suppress(AcpError):
                await link.transport.aclose()
        for task in list(self.tasks):
            if task is not asyncio.current_task():
                task.cancel()

    async def from_editor(self, message: dict[str, Any]) -> None:
        if "method" not in message:  # the editor answers an agent→client request
            await self.answer_agent(message)
            return
        method, params, request_id = message["method"], message.get("params") or {}, message.get("id")
        try:
            await self.route(method, params, request_id, message)
        except AcpError as exc:
            if request_id is not None:
                await self.to_editor(error(request_id, INTERNAL_ERROR, f"no instance could take {method}: {exc}"))

    async def route(self, method: str, params: dict[str, Any], request_id: Any, message: dict[str, Any]) -> None:
        router = self.router
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if method == "initialize":
            self.initialize = message
            await self.forward(await self.first_link(), message)
        elif method == "session/new":
            await self.forward(await self.link(router.place().name), message)
        elif method == "session/status" and session_id is not None:
            await self.answer_status(request_id, await self.router.locate(session_id))
        elif method in ATTACH and session_id is not None:
            location = await self.router.locate(session_id)
            route = location.route(router.homes.get(session_id))
            if route.kind not in (RouteKind.RESUME, RouteKind.REPLAY) or route.endpoint is None:
                await self.not_found(request_id, session_id)
                return
            await self.forward(await self.link(route.endpoint.name), message)
        elif session_id is not None:
            home = router.homes.get(session_id)
            if home is None:
                if request_id is not None:
                    await self.not_found(request_id, session_id)
                return
            await self.forward(await self.link(home.name), message)
        else:
            await self.forward(await self.first_link(), message)

    async def answer_status(self, request_id: Any, location: Location) -> None:
        for presence in (Probe.ACTIVE, Probe.INACTIVE):
            answers = [answer for answer in location.answers if answer.probe is presence]
            if answers:
                result: dict[str, Any] = {"status": answers[0].raw_status or presence.value}
                if answers[0].state is not None:
                    result["state"] = {"state": answers[0].state.state}
                await self.to_editor({"jsonrpc": "2.0", "id": request_id, "result": result})
                return
        await self.not_found(request_id, location.session_id)

    async def not_found(self, request_id: Any, session_id: str) -> None:
        await self.to_editor(error(request_id, SESSION_NOT_FOUND, "Resource not found", {"sessionId": session_id}))

    async def answer_agent(self, message: dict[str, Any]) -> None:
        target = self.agent_requests.pop(str(message.get("id")), None)
        if target is None:
            return
        link, agent_id = target
        with contextlib.suppress(AcpError):
            await link.transport.send({**message, "id": agent_id})

    # -- the agent side --------------------------------------------------------------------------------

    async def first_link(self) -> Upstream:
        last: AcpError | None = None
        for endpoint in self.router.endpoints:
            try:
                return await self.link(endpoint.name)
            except AcpError as exc:
                last = exc
        assert last is not None
        raise last

    async def link(self, name: str) -> Upstream:
        """This editor's link to one instance, opened and initialized when first needed."""
        if name in self.links:
            return self.links[name]
        if name not in self.opening:
            self.opening[name] = asyncio.ensure_future(self._open(name))
        try:
            return await asyncio.shield(self.opening[name])
        finally:
            if self.opening.get(name) is not None and self.opening[name].done():
                self.opening.pop(name, None)

    async def _open(self, name: str) -> Upstream:
        endpoint = self.router.endpoint(name)
        transport = await endpoint.open().connect()
        link = Upstream(name, transport)
        link.reader = asyncio.ensure_future(self.read(link))
        if self.initialize is not None and self.links:  # another link answered the editor's initialize
            answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            upstream_id = f"init-{next(link.ids)}"
            link.pending[upstream_id] = (answered, "initialize", None)
            await transport.send({**self.initialize, "id": upstream_id})
            await answered
        self.links[name] = link
        return link

    async def forward(self, link: Upstream, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        if request_id is None:
            await link.transport.send(message)
            return
        upstream_id = next(link.ids)
        link.pending[upstream_id] = (request_id, message["method"], message.get("params") or {})
        await link.transport.send({**message, "id": upstream_id})

    async def read(self, link: Upstream) -> None:
        try:
            while True:
                message = await link.transport.receive()
                if not isinstance(message, dict):
                    continue
                if "method" in message:
                    if "id" in message:  # an agent→client request: give it an id of ours
                        router_id = f"agent-{next(self.request_ids)}"
                        self.agent_requests[router_id] = (link, message["id"])
                        message = {**message, "id": router_id}
                    await self.to_editor(message)
                    continue
                pending = link.pending.pop(message.get("id"), None)
                if pending is None:
                    continue
                editor_id, method, params = pending
                if isinstance(editor_id, asyncio.Future):  # our own initialize of this link
                    editor_id.set_result(message)
                    continue
                self.router.answered(link.name, method, params, message)
                await self.to_editor({**message, "id": editor_id})
        except AcpError as exc:
            logger.info("link to %s ended: %s", link.name, exc)
        finally:
            if not self.closed:  # the instance is gone: the editor reconnects and recovers through us
                self.spawn(self.close())


class Router:
    """The instances, where each session lives, and the editors connected."""

    def __init__(self, urls: Sequence[str], *, placement: str = "round_robin", probe_timeout: float = 2.0) -> None:
        self.endpoints = Endpoint.many(urls)
        self.placement = placement_policy(placement)  # type: ignore[arg-type]
        self.probe_timeout = probe_timeout
        #: Where each session lives: its home instance.
        self.homes: dict[str, Endpoint] = {}

    def endpoint(self, name: str) -> Endpoint:
        return next(endpoint for endpoint in self.endpoints if endpoint.name == name)

    def place(self) -> Endpoint:
        """Where a new session goes: the placement policy's choice among the instances."""
        sessions = dict.fromkeys(self.endpoints, 0)
        for home in self.homes.values():
            sessions[home] += 1
        return self.placement(self.endpoints, sessions)

    async def locate(self, session_id: str) -> Location:
        return await locate(session_id, self.endpoints, timeout=self.probe_timeout)

    def answered(self, name: str, method: str, params: Any, message: dict[str, Any]) -> None:
        """Home a session where ``session/new``, ``session/load`` or ``session/resume`` succeeded."""
        result = message.get("result")
        if not isinstance(result, dict):
            return
        if method == "session/new" and isinstance(result.get("sessionId"), str):
            self.homes[result["sessionId"]] = self.endpoint(name)
        elif method in ATTACH and isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            self.homes[params["sessionId"]] = self.endpoint(name)
        elif method == "session/close" and isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            self.homes.pop(params["sessionId"], None)

    async def handle(self, websocket: ServerConnection) -> None:
        await EditorConnection(self, websocket).run()

    async def serve(self, host: str = "127.0.0.1", port: int = 0) -> None:
        async with serve(self.handle, host, port) as server:
            bound = next(iter(server.sockets)).getsockname()
            print(f"READY ws://{bound[0]}:{bound[1]}/acp", flush=True)
            await asyncio.Future()  # until cancelled


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", nargs="+", help="the agent instances (ws(s):// or http(s)://)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--placement", default="round_robin", choices=("round_robin", "fewest_sessions"))
    parser.add_argument("--probe-timeout", type=float, default=2.0, metavar="SECONDS")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="router: %(message)s")
    router = Router(args.urls, placement=args.placement, probe_timeout=args.probe_timeout)
    loop = asyncio.new_event_loop()
    task = loop.create_task(router.serve(args.host, args.port))
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        loop.run_until_complete(task)
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
