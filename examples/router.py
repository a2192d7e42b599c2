#!/usr/bin/env python3
"""A routing layer: one ACP WebSocket endpoint for editors, N agent instances behind it.

Usage::

    python examples/router.py AGENT_URL AGENT_URL ... [--port 8765] [--placement round_robin]
        [--store URL [--store-key KEY] [--owner NAME] [--lease SECONDS]]

It prints ``READY ws://HOST:PORT/acp`` once it listens; editors connect there as to any agent.

What it does with each editor message (docs/many-instances.md), built on ``acp_client``'s transports and
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

``GET /health`` answers 200 (a load balancer's health check).

**Replicas** (``--store URL``: ``postgresql://...`` or an SQLite file path). Without it the homes are
this process's memory. With it (:mod:`router_store`) every session's home is a record in the store,
under the key ``router:`` + ``pool_key(AGENT_URLS)`` (``--store-key`` names another), and the router
acts for a session only while it holds the session's lease (owner ``--owner``, default
``router-HOST-PID-RANDOM``; ``--lease`` seconds, default 10): claimed before it forwards anything for
the session (waiting while another replica's lease is live), renewed while an editor connected here
uses it, released when the last one goes. Several replicas given the same store and agent URLs behind
a load balancer serve the same sessions: when one dies, another takes its sessions over once their
leases expire. A replica that finds its lease taken (it was paused, the database was away) forgets the
session and closes the editors using it here; they reconnect to the owner of the day. When the store
cannot be reached, a replica keeps acting for the sessions whose leases it still holds until they run
out, and refuses (an error answer, never a guess) to take any other.
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
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any

from router_store import MemoryHomes, NotOwner, StoreHomes, open_store
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

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
        #: The sessions this editor created or attached through us (their leases, with a store).
        self.sessions: set[str] = set()
        self.closed = False

    # -- the editor side -----------------------------------------------------------------------------

    async def run(self) -> None:
        self.router.editors.add(self)
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
        self.router.editors.discard(self)
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
        used, self.sessions = list(self.sessions), set()
        await self.router.homes.unuse(used)

    def use(self, session_id: str) -> None:
        if session_id not in self.sessions:
            self.sessions.add(session_id)
            self.router.homes.use(session_id)

    async def from_editor(self, message: dict[str, Any]) -> None:
        if "method" not in message:  # the editor answers an agent→client request
            await self.answer_agent(message)
            return
        method, params, request_id = message["method"], message.get("params") or {}, message.get("id")
        try:
            await self.route(method, params, request_id, message)
        except NotOwner as exc:
            if request_id is not None:
                await self.to_editor(error(request_id, INTERNAL_ERROR, f"cannot act for this session now: {exc}"))
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
            await router.homes.acquire(session_id)  # with a store: this replica holds the lease
            self.use(session_id)  # released when this editor goes, whatever the instance answers
            location = await self.router.locate(session_id)
            route = location.route(await router.homes.home(session_id))
            if route.kind not in (RouteKind.RESUME, RouteKind.REPLAY) or route.endpoint is None:
                await self.not_found(request_id, session_id)
                return
            await self.forward(await self.link(route.endpoint.name), message)
        elif session_id is not None:
            home = await router.homes.home(session_id)
            if home is None:
                if request_id is not None:
                    await self.not_found(request_id, session_id)
                return
            await router.homes.acquire(session_id)
            self.use(session_id)
            home = await router.homes.home(session_id) or home  # read afresh once held: it may have moved
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

    async def answer(self, editor_id: Any, method: str, params: Any, link: Upstream, message: dict[str, Any]) -> None:
        """Relay an instance's answer, after homing the session it created or attached."""
        try:
            session_id = await self.router.answered(link.name, method, params, message)
        except NotOwner as exc:
            await self.to_editor(error(editor_id, INTERNAL_ERROR, f"the session could not be homed: {exc}"))
            return
        if session_id is not None:
            self.use(session_id)
        await self.to_editor({**message, "id": editor_id})

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
                await self.answer(editor_id, method, params, link, message)  # in order: homed first
        except AcpError as exc:
            logger.info("link to %s ended: %s", link.name, exc)
        finally:
            if not self.closed:  # the instance is gone: the editor reconnects and recovers through us
                self.spawn(self.close())


class Router:
    """The instances, where each session lives (:mod:`router_store`), and the editors connected."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        placement: str = "round_robin",
        probe_timeout: float = 2.0,
        homes: Callable[[Sequence[Endpoint]], MemoryHomes] = MemoryHomes,
    ) -> None:
        self.endpoints = Endpoint.many(urls)
        self.placement = placement_policy(placement)  # type: ignore[arg-type]
        self.probe_timeout = probe_timeout
        #: Where each session lives: its home instance (with a store: and which replica acts for it).
        self.homes = homes(self.endpoints)
        self.homes.on_lost = self.lost
        self.editors: set[EditorConnection] = set()

    def endpoint(self, name: str) -> Endpoint:
        return next(endpoint for endpoint in self.endpoints if endpoint.name == name)

    def place(self) -> Endpoint:
        """Where a new session goes: the placement policy's choice among the instances."""
        return self.placement(self.endpoints, self.homes.counts())

    async def locate(self, session_id: str) -> Location:
        return await locate(session_id, self.endpoints, timeout=self.probe_timeout)

    def lost(self, session_id: str) -> None:
        """Another replica took the session over: the editors using it here reconnect (to it)."""
        for editor in list(self.editors):
            if session_id in editor.sessions:
                editor.spawn(editor.close())

    async def answered(self, name: str, method: str, params: Any, message: dict[str, Any]) -> str | None:
        """Home a session where ``session/new``, ``session/load`` or ``session/resume`` succeeded;
        the session homed, if any.

        Raises:
            NotOwner: With a store, the home could not be stored (the editor gets an error).
        """
        result = message.get("result")
        if not isinstance(result, dict) or not isinstance(params, dict):
            return None
        session_id = params.get("sessionId")
        cwd = str(params.get("cwd") or "")
        if method == "session/new" and isinstance(result.get("sessionId"), str):
            await self.homes.settle(result["sessionId"], self.endpoint(name), cwd, new=True)
            return str(result["sessionId"])
        if method in ATTACH and isinstance(session_id, str):
            await self.homes.settle(session_id, self.endpoint(name), cwd, new=False)
            return session_id
        if method == "session/close" and isinstance(session_id, str):
            await self.homes.forget(session_id)
        return None

    async def handle(self, websocket: ServerConnection) -> None:
        await EditorConnection(self, websocket).run()

    @staticmethod
    def health(connection: ServerConnection, request: Request) -> Response | None:
        """``GET /health`` answers 200: the load balancer's health check."""
        if request.path == "/health":
            return connection.respond(HTTPStatus.OK, "ok\n")
        return None

    async def serve(self, host: str = "127.0.0.1", port: int = 0) -> None:
        await self.homes.start()
        try:
            async with serve(self.handle, host, port, process_request=self.health) as server:
                bound = next(iter(server.sockets)).getsockname()
                print(f"READY ws://{bound[0]}:{bound[1]}/acp", flush=True)
                await asyncio.Future()  # until cancelled
        finally:
            await self.homes.aclose()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", nargs="+", help="the agent instances (ws(s):// or http(s)://)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--placement", default="round_robin", choices=("round_robin", "fewest_sessions"))
    parser.add_argument("--probe-timeout", type=float, default=2.0, metavar="SECONDS")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="keep session homes and ownership in a shared store: postgresql://... or an SQLite file path "
        "(replicas given the same store serve the same sessions)",
    )
    parser.add_argument("--store-key", metavar="KEY", help="the store's endpoint key (default: router:pool:URLS)")
    parser.add_argument("--owner", help="this replica's owner name (default: router-HOST-PID-RANDOM)")
    parser.add_argument("--lease", type=float, default=10.0, metavar="SECONDS", help="lease duration (default 10)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="router: %(message)s")
    homes: Callable[[Sequence[Endpoint]], MemoryHomes] = MemoryHomes
    if args.store:
        store = open_store(args.store)

        def homes(endpoints: Sequence[Endpoint]) -> MemoryHomes:
            return StoreHomes(endpoints, store, key=args.store_key, owner=args.owner, lease=args.lease)

    router = Router(args.urls, placement=args.placement, probe_timeout=args.probe_timeout, homes=homes)
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
