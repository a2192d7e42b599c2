#!/usr/bin/env python3
"""A fake editor plugin: the synchronous facade (``acp_client.sync``) driven from an editor's own
main loop, surviving a dropped connection in the middle of a conversation.

Usage::

    python examples/editor_plugin.py            # bundled agent; the connection is cut mid-turn
    python examples/editor_plugin.py URL        # a real agent (ws://, wss://, http://, https://,
                                                # stdio:COMMAND...); no fault is injected

There is no real editor: the "editor" is a plain loop on the main thread that wakes every few
milliseconds (``--poll-ms``), like an editor's timer callback. On each tick it polls the client's
event queue, renders what arrived (agent text is printed as it streams, connection states as a
status line), answers the agent's permission request as a user clicking "Allow" would, and moves
its short conversation one step on. It never blocks on a turn: prompts are sent with
``prompt_async`` and their futures checked on later ticks.

Without a URL it starts the bundled ``ReferenceServer`` behind a ``FaultProxy`` on a loop thread of
its own (``EventLoopThread``), then: says hello, asks for something that needs permission, and
while the third answer is streaming cuts the connection. The client reconnects, probes
``session/status`` and resumes the session; the editor shows the recovery and sends one more
prompt. Everything runs headless and ends within ``--deadline`` seconds.

Exit status: 0 when the conversation finished (and, without a URL, the session was recovered),
1 when it did not finish in time, 2 when the client gave up.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import sys
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from acp_client import AcpError, ConnectionLost, RetryPolicy, State
from acp_client.sync import (
    EventLoopThread,
    NewSessionEvent,
    PermissionEvent,
    PermissionRequest,
    ProtocolErrorEvent,
    RecoveryFailedEvent,
    ReplayEvent,
    ResumeEvent,
    SessionUpdateEvent,
    StateEvent,
    SyncAcpClient,
    SyncEvent,
    TurnInterruptedEvent,
)
from acp_client.types import TextContent

EXIT_OK = 0
EXIT_TIMED_OUT = 1
EXIT_GAVE_UP = 2

#: The prompt during which the demo cuts the connection (the agent streams it back slowly).
LONG_PROMPT = "please explain the whole plan step by step, this answer streams for a while"
#: Agent chunks of the long answer to render before the demo cuts the connection.
CUT_AFTER_CHUNKS = 2


class Screen:
    """Where the editor "renders": stdout, one line per event, agent text streamed inline."""

    def __init__(self) -> None:
        self._mid_line = False

    def line(self, text: str) -> None:
        if self._mid_line:
            sys.stdout.write("\n")
            self._mid_line = False
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def stream(self, text: str) -> None:
        if not self._mid_line:
            sys.stdout.write("  agent> ")
            self._mid_line = True
        sys.stdout.write(text)
        sys.stdout.flush()


class FakeEditor:
    """The editor's side: a main loop that polls, renders and drives a conversation.

    Args:
        client: A connected :class:`SyncAcpClient` whose ``event_queue`` is ``events``.
        events: The queue the client puts its events on.
        cut: Cuts the connection (the demo's fault); ``None`` with a real agent.
        cwd: The session's working directory.
    """

    def __init__(
        self,
        client: SyncAcpClient,
        events: queue.Queue[SyncEvent],
        *,
        cut: Callable[[], None] | None,
        cwd: str,
    ) -> None:
        self.client = client
        self.events = events
        self.cut = cut
        self.cwd = cwd
        self.screen = Screen()
        self.session_id: str | None = None
        self.chunks_this_turn = 0
        self.recoveries: list[str] = []
        self.turns_done = 0

    # -- one tick: drain the queue and render ------------------------------------------------------

    def pump(self) -> None:
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return
            self.render(event)

    def render(self, event: SyncEvent) -> None:
        # One class per kind, each with a typed payload: a type checker follows every branch.
        match event:
            case StateEvent(payload=state):
                self.screen.line(f"[status bar] connection: {state}")
            case SessionUpdateEvent(payload=received):
                update = received.update
                content = getattr(update, "content", None)
                if update.kind in ("agent_message_chunk", "agent_message") and isinstance(content, TextContent):
                    self.chunks_this_turn += 1
                    self.screen.stream(content.text)
            case PermissionEvent(payload=request):
                self.answer_permission(request)
            case TurnInterruptedEvent():
                self.screen.line("[editor] turn interrupted by the drop (the client does not re-send it)")
            case (
                ResumeEvent(payload=outcome)
                | ReplayEvent(payload=outcome)
                | NewSessionEvent(payload=outcome)
                | RecoveryFailedEvent(payload=outcome)
            ):
                self.recoveries.append(outcome.path.value)
                if outcome.session_id is not None:
                    self.session_id = outcome.session_id
                verb = "could not recover" if isinstance(event, RecoveryFailedEvent) else "recovered"
                self.screen.line(
                    f"[editor] {verb}: {outcome.path.value} (session {outcome.previous_session_id}"
                    f" -> {outcome.session_id}, probe {outcome.probe.value}, {outcome.duration * 1000:.0f} ms)"
                )
            case ProtocolErrorEvent(payload=error):
                self.screen.line(f"[editor] protocol error: {error}")

    def answer_permission(self, request: PermissionRequest) -> None:
        options = " / ".join(option.name for option in request.options)
        self.screen.line(f'[dialog] the agent asks: "{request.title}"  [{options}]')
        if request.allow():
            self.screen.line("[dialog] user clicked: Allow")
        else:
            self.screen.line("[dialog] too late: the request was withdrawn")

    # -- the conversation, one step per tick ---------------------------------------------------------

    def conversation(self) -> Iterator[None]:
        session = self.client.new_session(self.cwd)
        self.session_id = session.session_id
        self.screen.line(f"[editor] opened session {session.session_id}")
        yield from self.turn("hello from the editor")
        yield from self.turn("/permission")
        cut_done = yield from self.turn(LONG_PROMPT, cut_mid_turn=self.cut is not None)
        if cut_done:
            self.screen.line("[editor] waiting for the client to recover...")
            while not self.recoveries or self.client.state.state is not State.CONNECTED:
                yield
        yield from self.turn("are you still there?")

    def turn(self, text: str, *, cut_mid_turn: bool = False) -> Generator[None, None, bool]:
        """Send one prompt and wait for it on later ticks; returns whether the demo cut the link."""
        assert self.session_id is not None
        self.screen.line(f"  you> {text}")
        self.chunks_this_turn = 0
        cut_done = False
        future = self.client.prompt_async(self.session_id, text)
        while not future.done():
            if cut_mid_turn and not cut_done and self.chunks_this_turn >= CUT_AFTER_CHUNKS and self.cut is not None:
                self.screen.line("[fault] cutting the connection in the middle of the answer")
                self.cut()
                cut_done = True
            yield
        self.pump()  # render what arrived before the turn ended
        try:
            result = future.result()
        except ConnectionLost:
            self.screen.line("[editor] that answer was lost with the connection")
        except AcpError as exc:
            self.screen.line(f"[editor] error: {exc}")
        else:
            self.turns_done += 1
            self.screen.line(f"[editor] turn ended: {result.stop_reason}")
        return cut_done

    def run(self, *, deadline: float, poll: float) -> int:
        """The editor's main loop; returns the exit status."""
        script = self.conversation()
        ends_at = time.monotonic() + deadline
        while True:
            self.pump()
            if self.client.state.state is State.FAILED:
                self.screen.line("[editor] the client gave up")
                return EXIT_GAVE_UP
            try:
                next(script)
            except StopIteration:
                break
            if time.monotonic() > ends_at:
                self.screen.line(f"[editor] the conversation did not finish within {deadline:g}s")
                return EXIT_TIMED_OUT
            time.sleep(poll)
        self.pump()
        if self.cut is not None and not self.recoveries:
            self.screen.line("[editor] the connection was cut but no recovery was seen")
            return EXIT_TIMED_OUT
        if "abandon" in self.recoveries:
            self.screen.line("[editor] the client gave up on the session")
            return EXIT_GAVE_UP
        recovered = ", ".join(self.recoveries) or "none needed"
        self.screen.line(f"[editor] done: {self.turns_done} turns completed, recoveries: {recovered}")
        return EXIT_OK


class BundledAgent:
    """The reference agent on loopback behind a fault proxy, on a loop thread of its own."""

    def __init__(self, protocol_version: int) -> None:
        from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer

        self.protocol_version = protocol_version
        self.loop = EventLoopThread(name="bundled-agent")
        self.loop.start()

        async def start() -> tuple[ReferenceServer, FaultProxy]:
            server = ReferenceServer(ReferenceAgent(chunks_per_prompt=10, chunk_delay=0.05))
            await server.start()
            proxy = FaultProxy("127.0.0.1", server.port)
            await proxy.start()
            return server, proxy

        self.server, self.proxy = self.loop.run(start(), timeout=15.0, method="start the bundled agent")
        self.url = self.proxy.url(self.server.ws_url)

    def cut(self) -> None:
        """Reset every proxied connection (without blocking the editor's tick)."""
        self.loop.submit(self.proxy.cut(), timeout=5.0)

    def close(self) -> None:
        async def stop() -> None:
            await self.proxy.aclose()
            await self.server.aclose()

        try:
            self.loop.run(stop(), timeout=10.0, method="stop the bundled agent")
        finally:
            self.loop.close()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=(
            "Without URL: starts the bundled reference agent behind a fault proxy, cuts the connection "
            "mid-turn and shows the recovery (headless; needs the 'testing' extra). "
            "Exit status: 0 finished, 1 not finished in time, 2 the client gave up."
        ),
    )
    parser.add_argument("url", nargs="?", help="the agent: ws(s)://, http(s):// or stdio:COMMAND (default: bundled)")
    parser.add_argument("--protocol-version", type=int, default=1, choices=(1, 2), help="ACP version to propose")
    parser.add_argument("--poll-ms", type=float, default=5.0, help="editor tick: poll the queue every N ms")
    parser.add_argument("--deadline", type=float, default=20.0, help="give up after this many seconds")
    parser.add_argument("--cwd", default=os.getcwd(), help="the session's working directory")
    parser.add_argument("--verbose", action="store_true", help="log the client's reconnects to stderr")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    bundled = BundledAgent(args.protocol_version) if args.url is None else None
    url = bundled.url if bundled is not None else args.url
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = SyncAcpClient(
        url,
        event_queue=events,
        protocol_version=args.protocol_version,
        retry=RetryPolicy(initial_delay=0.1, max_delay=1.0, max_elapsed=max(1.0, args.deadline)),
        default_timeout=10.0,
        answer_timeout=10.0,
    )
    try:
        print(f"[editor] connecting to {url}", flush=True)
        try:
            client.connect()
        except AcpError as exc:
            print(f"[editor] could not connect: {exc}", flush=True)
            return EXIT_GAVE_UP
        editor = FakeEditor(client, events, cut=bundled.cut if bundled is not None else None, cwd=args.cwd)
        return editor.run(deadline=args.deadline, poll=args.poll_ms / 1000.0)
    finally:
        client.close()
        if bundled is not None:
            bundled.close()


if __name__ == "__main__":
    sys.exit(main())
