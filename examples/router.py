#!/usr/bin/env python3
"""A routing layer: one ACP WebSocket endpoint for editors, N agent instances behind it.

Usage::

    python examples/router.py AGENT_URL AGENT_URL ... [--port 8765] [--placement round_robin]
        [--probe-timeout SECONDS] [--home-wait SECONDS] [--sweep SECONDS]
        [--store URL [--store-key KEY] [--owner NAME] [--lease SECONDS]]

It prints ``READY ws://HOST:PORT/acp`` once it listens; editors connect there as to any agent.

What it does with each editor message (docs/many-instances.md), built on ``acp_client``'s transports and
pool primitives (:mod:`acp_client.pool`):

* ``initialize`` — answered from what the router knows (an instance's answer to an ``initialize``
  proposing the same version; the first time, forwarded to an instance that answers). Links to the
  instances are opened (and initialized with the editor's request) when first needed.
* ``session/new`` — sent to the instance the placement policy picks among those not known to be
  away; one that cannot be reached is left out (logged) and the policy asked again.
* ``session/load`` / ``session/resume`` — the router asks every instance ``session/status`` at
  once, over one kept probe link per instance (:mod:`router_instances`), and sends the call to one
  instance: the session's recorded home when it answers, else — once the home is proven gone —
  the instance that has it ``active``, else one that has it ``inactive``; if no instance knows it,
  the editor gets -32002. A home that does not answer is waited for (``--home-wait``), and a move is
  recorded before the call is forwarded. A copy ``active`` on an instance that is not the home is
  stale: closed (``session/close``), never used. Never to two instances.
* ``session/status`` — answered from that fan-out (a stale copy reads ``inactive``; a recorded home
  that does not answer still knows the session), else -32002.
* ``session/prompt`` and every other call naming a ``sessionId`` — sent to the session's home.
* Anything else (``session/list``, extensions) — to an instance that answers.
* From the agents: responses, ``session/update`` notifications and agent→client requests
  (permissions, ``fs/*``, ``terminal/*``) are relayed to the editor, ids mapped both ways.

When the link to an instance drops, the router closes the editor connections that depended on it (a
session homed there, a call waiting for its answer): the editor reconnects (to the router), probes
its sessions, and the router's fan-out sends them to an instance that can take them — a replay on
another instance when the instances share a store. Other editors are not touched.

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
import time
from collections.abc import AsyncIterator, Callable, Sequence
from http import HTTPStatus
from typing import Any

from router_instances import CLOCK, Instances
from router_store import MemoryHomes, NotOwner, StoreHomes, open_store
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from acp_client.clock import fail_after
from acp_client.exceptions import AcpError, ConnectTimeout
from acp_client.pool import Endpoint, InstanceAnswer, Location, Probe, RouteKind, placement_policy
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


class NoInstance(AcpError):
    """No instance could take a call."""


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
        for link in list(self.links.values()):
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
            known = router.initialize_answer(message)
            if known is not None:  # answered from what the router knows: no instance is tied to it
                await self.to_editor({**known, "id": request_id})
            else:
                await self.forward(await self.first_link(initializing=True), message)
        elif method == "session/new":
            await self.forward(await self.placed_link(), message)
        elif method == "session/status" and session_id is not None:
            await self.answer_status(request_id, await self.router.locate(session_id))
        elif method in ATTACH and session_id is not None:
            await router.homes.acquire(session_id)  # with a store: this replica holds the lease
            self.use(session_id)  # released when this editor goes, whatever the instance answers
            async with router.attaching(session_id):  # one decision at a time per session
                target = await router.attach_target(session_id, str(params.get("cwd") or ""), self)
                if target is not None:  # sent before the next decision: that one sees it at home there
                    await self.forward(await self.link(target.name), message)
            if target is None:
                await self.not_found(request_id, session_id)
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
        instances = [self.router.instances[answer.endpoint] for answer in location.answers]
        if any(i.silent_since is not None and i.gone(self.router.home_wait) is None for i in instances):
            # An instance that did not answer may hold it: not "unknown" (the editor would start afresh).
            await self.to_editor(error(request_id, INTERNAL_ERROR, "an instance did not answer in time; try again"))
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

    async def first_link(self, *, initializing: bool = False) -> Upstream:
        """A link to the first instance that answers (the ones known to be away tried last)."""
        last: AcpError | None = None
        for endpoint in self.router.by_liveness():
            try:
                return await self.link(endpoint.name, initializing=initializing)
            except AcpError as exc:
                last = exc
        assert last is not None
        raise last

    async def placed_link(self) -> Upstream:
        """A link to the instance a new session goes to: the placement policy's choice among the
        instances not known to be away; one that cannot be reached is left out (and logged) and
        the policy asked again.

        Raises:
            AcpError: No instance could be reached.
        """
        router = self.router
        tried: list[str] = []
        while True:
            candidates = [e for e in router.endpoints if e.name not in tried and router.instances[e].usable()]
            if not candidates:  # every instance looks away: try the ones not tried yet anyway
                candidates = [e for e in router.endpoints if e.name not in tried]
            if not candidates:
                raise NoInstance(f"no instance could be reached (tried {', '.join(tried)})")
            endpoint = router.placement(candidates, router.homes.counts())
            try:
                return await self.link(endpoint.name)
            except AcpError as exc:
                logger.warning("session/new: leaving out %s, which cannot be reached: %s", endpoint, exc)
                tried.append(endpoint.name)

    async def link(self, name: str, *, initializing: bool = False) -> Upstream:
        """This editor's link to one instance, opened and initialized (with the editor's own
        ``initialize``) when first needed, within the probe timeout.

        Raises:
            AcpError: The instance could not be reached in time (noted for placement).
        """
        if name in self.links:
            return self.links[name]
        if name not in self.opening:
            self.opening[name] = asyncio.ensure_future(self._open(name, initializing))
        try:
            return await asyncio.shield(self.opening[name])
        finally:
            if self.opening.get(name) is not None and self.opening[name].done():
                self.opening.pop(name, None)

    async def _open(self, name: str, initializing: bool) -> Upstream:
        endpoint = self.router.endpoint(name)
        timeout = self.router.probe_timeout
        link: Upstream | None = None
        try:
            with fail_after(CLOCK, timeout):
                transport = await endpoint.open().connect()
                link = Upstream(name, transport)
                link.reader = asyncio.ensure_future(self.read(link))
                if self.initialize is not None and not initializing:  # the editor's initialize, on this link too
                    answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                    upstream_id = f"init-{next(link.ids)}"
                    link.pending[upstream_id] = (answered, "initialize", None)
                    await transport.send({**self.initialize, "id": upstream_id})
                    await answered
        except (AcpError, TimeoutError) as exc:
            if link is not None and link.reader is not None:
                link.reader.cancel()
                with contextlib.suppress(AcpError):
                    await link.transport.aclose()
            if isinstance(exc, AcpError):
                self.router.instances[name].note_failure(exc)
                raise
            error = ConnectTimeout(f"{name} did not answer within {timeout:g} s")
            self.router.instances[name].note_failure(error)
            raise error from exc
        assert link is not None
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
            if self.links.get(link.name) is link:
                del self.links[link.name]
            if not self.closed and self.depends_on(link):
                # The editor's sessions (or its calls) were there: it reconnects and recovers through us.
                self.spawn(self.close())
            elif not self.closed:
                logger.info("link to %s ended; this editor has nothing there and stays", link.name)

    def depends_on(self, link: Upstream) -> bool:
        """Whether this editor loses anything with ``link``: a call waiting for its answer, or a
        session homed on its instance."""
        if any(not isinstance(editor_id, asyncio.Future) for editor_id, _, _ in link.pending.values()):
            return True
        return any(self.router.homes.cached_home(session_id) in (None, link.name) for session_id in self.sessions)


class Router:
    """The instances, where each session lives (:mod:`router_store`), and the editors connected."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        placement: str = "round_robin",
        probe_timeout: float = 2.0,
        home_wait: float = 10.0,
        sweep: float = 0.5,
        homes: Callable[[Sequence[Endpoint]], MemoryHomes] = MemoryHomes,
    ) -> None:
        self.endpoints = Endpoint.many(urls)
        self.placement = placement_policy(placement)  # type: ignore[arg-type]
        self.probe_timeout = probe_timeout
        self.home_wait = home_wait
        #: Where each session lives: its home instance (with a store: and which replica acts for it).
        self.homes = homes(self.endpoints)
        self.homes.on_lost = self.lost
        self.homes.liveness_ttl = home_wait
        #: What the router knows of each instance: kept probe links, liveness, stale copies.
        self.instances = Instances(
            self.endpoints,
            probe_timeout=probe_timeout,
            home_wait=home_wait,
            sweep=sweep,
            home_of=self.home_of,
            heard_elsewhere=self.homes.heard_elsewhere if self.homes.shared else None,
            heard=self.homes.heard if self.homes.shared else None,
        )
        #: The answers to ``initialize`` per proposed protocol version (any instance's: one agent).
        self.initialized: dict[Any, dict[str, Any]] = {}
        self._attach_locks: dict[str, tuple[asyncio.Lock, int]] = {}  # and how many wait for it
        self.editors: set[EditorConnection] = set()

    def endpoint(self, name: str) -> Endpoint:
        return next(endpoint for endpoint in self.endpoints if endpoint.name == name)

    @contextlib.asynccontextmanager
    async def attaching(self, session_id: str) -> AsyncIterator[None]:
        """Held while one attach of ``session_id`` is decided and sent (two editors reopening one
        session never pick two instances)."""
        lock, users = self._attach_locks.get(session_id, (asyncio.Lock(), 0))
        self._attach_locks[session_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._attach_locks[session_id]
            if users == 1:
                del self._attach_locks[session_id]
            else:
                self._attach_locks[session_id] = (lock, users - 1)

    def by_liveness(self) -> list[Endpoint]:
        """The instances, those not known to be away first."""
        return sorted(self.endpoints, key=lambda endpoint: not self.instances[endpoint].usable())

    def initialize_answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The answer an instance gave to an ``initialize`` proposing the same version, if any."""
        params = message.get("params")
        return self.initialized.get(params.get("protocolVersion") if isinstance(params, dict) else None)

    async def home_of(self, session_id: str) -> Endpoint | None:
        try:
            return await self.homes.home(session_id)
        except NotOwner:
            return None

    async def locate(self, session_id: str) -> Location:
        """Every instance's answer for ``session_id`` (no waiting): a copy ``active`` on an
        instance other than the recorded home is stale, reported ``inactive`` and closed; a
        recorded home that does not answer still counts as knowing the session."""
        home = await self.home_of(session_id)
        answers = await self.instances.ask_all(session_id)
        if home is None:
            return Location(session_id, tuple(answers))
        fixed = []
        for answer in answers:
            if answer.endpoint != home and answer.probe is Probe.ACTIVE:
                self.instances.close_stale_soon(self.instances[answer.endpoint], session_id)
                fixed.append(InstanceAnswer(answer.endpoint, Probe.INACTIVE, raw_status="inactive"))
            elif answer.endpoint == home and answer.probe is Probe.UNREACHABLE:
                fixed.append(InstanceAnswer(home, Probe.INACTIVE, raw_status="inactive"))
            else:
                fixed.append(answer)
        return Location(session_id, tuple(fixed))

    async def attach_target(self, session_id: str, cwd: str, editor: EditorConnection | None = None) -> Endpoint | None:
        """The one instance ``session/load`` / ``session/resume`` of ``session_id`` goes to, or
        ``None`` (no instance knows it).

        A recorded home that does not answer is waited for (:meth:`Instances.wait_for`): the
        session moves only once the home is proven gone, and the move is recorded before the
        call is forwarded; the other editors using the session here are closed (they reconnect and
        attach it where it lives now). Copies ``active`` on other instances are stale: they are
        closed first, and an instance that cannot close its copy is not used. While no instance
        that answered can take the session, the ones that did not answer are waited for too (up
        to ``home_wait``): the editor hears -32002 only when every instance answered.

        Raises:
            NotOwner: With a store, the move could not be recorded.
            NoInstance: No instance that could hold the session answered in time.
        """
        instances = self.instances
        home = await self.home_of(session_id)
        answers = {answer.endpoint: answer for answer in await instances.ask_all(session_id)}
        proof: str | None = None
        if home is not None and answers[home].probe is Probe.UNREACHABLE:
            waited = await instances.wait_for(instances[home], session_id)
            if isinstance(waited, str):
                proof = waited
            else:
                answers[home] = waited
            # What the others said may have changed while we waited: ask them again.
            others = [instances[endpoint] for endpoint in answers if endpoint != home]
            for answer in await asyncio.gather(*(instances.status(other, session_id) for other in others)):
                answers[answer.endpoint] = answer
        deadline = time.monotonic() + self.home_wait
        while True:
            if home is not None:
                for endpoint, answer in list(answers.items()):
                    if endpoint != home and answer.probe is Probe.ACTIVE:
                        closed = await instances.close_stale(instances[endpoint], session_id, since=time.monotonic())
                        answers[endpoint] = InstanceAnswer(endpoint, Probe.INACTIVE if closed else Probe.UNREACHABLE)
            route = Location(session_id, tuple(answers[endpoint] for endpoint in self.endpoints)).route(home)
            if route.kind in (RouteKind.RESUME, RouteKind.REPLAY) and route.endpoint is not None:
                break
            # Nobody that answered can take it; an instance that did not answer may only be slow.
            silent = [
                instances[endpoint]
                for endpoint, answer in answers.items()
                if answer.probe is Probe.UNREACHABLE
                and endpoint != home
                and instances[endpoint].silent_since is not None
            ]
            waiting = [instance for instance in silent if await instances.gone(instance) is None]
            if not waiting or time.monotonic() >= deadline:
                if route.kind is RouteKind.UNAVAILABLE:  # not "unknown": the editor must not start afresh
                    raise NoInstance("no instance that could hold the session answered in time; try again")
                return None
            logger.info("waiting for %s to answer about %s", ", ".join(map(str, waiting)), session_id)
            started = time.monotonic()
            for answer in await asyncio.gather(*(instances.status(instance, session_id) for instance in waiting)):
                answers[answer.endpoint] = answer
            if time.monotonic() - started < self.probe_timeout / 2:  # they failed fast: pace the retries
                await asyncio.sleep(min(self.instances.sweep, self.probe_timeout))
        target = route.endpoint
        if home is not None and target != home:
            why = proof or f"{home} answered {answers[home].probe.value}"
            logger.warning("moving %s from %s to %s: %s", session_id, home, target, why)
            await self.homes.settle(session_id, target, cwd, new=False)  # recorded before anything is sent
            if proof is not None:  # its copy may come back: closed when it answers again
                instances.left_behind(instances[home], session_id)
            for other in list(self.editors):  # attached at the old home: they reattach through us
                if other is not editor and session_id in other.sessions:
                    other.spawn(other.close())
        return target

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
        if method == "initialize":
            self.initialized.setdefault(params.get("protocolVersion"), {k: v for k, v in message.items() if k != "id"})
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
            await self.aclose()

    async def aclose(self) -> None:
        """Close the probe links and stop the sweeps (the homes' store too)."""
        await self.instances.aclose()
        await self.homes.aclose()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", nargs="+", help="the agent instances (ws(s):// or http(s)://)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--placement", default="round_robin", choices=("round_robin", "fewest_sessions"))
    parser.add_argument("--probe-timeout", type=float, default=2.0, metavar="SECONDS")
    parser.add_argument(
        "--home-wait",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long a session's home that does not answer is waited for before it counts as gone (default 10)",
    )
    parser.add_argument(
        "--sweep",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="how often an instance left with stale copies is asked (default 0.5)",
    )
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

    router = Router(
        args.urls,
        placement=args.placement,
        probe_timeout=args.probe_timeout,
        home_wait=args.home_wait,
        sweep=args.sweep,
        homes=homes,
    )
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
