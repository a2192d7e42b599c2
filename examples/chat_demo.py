"""``python examples/chat.py --demo [--json] [--protocol-version 2]``: every recovery path, end to end.

Needs nothing but this checkout and the ``testing`` extra (hypercorn). It starts the bundled
reference agent (:class:`~acp_client.testing.ReferenceServer`) on a free loopback port behind a
:class:`~acp_client.testing.FaultProxy`, connects the chat client through the proxy over WebSocket,
has a short conversation, and injects three faults:

1. **a network drop** — the proxy cuts the connection; the agent still holds the session in
   memory, ``session/status`` says ``active`` → the client **resumes** it;
2. **an agent restart** — ``ReferenceServer.restart()`` drops every connection and clears the
   agent's memory (sessions stay in its store) → ``inactive`` → the client **replays** the
   history (v1 ``session/load``, v2 ``session/resume`` + ``replayFrom``) and rebuilds its
   transcript without duplicates;
3. **an eviction** — the agent forgets the session entirely, then the proxy cuts →
   ``session/status`` fails with ``-32002`` → the client starts a **new session**.

It exits 0 when all three paths were taken (1 otherwise), in a few seconds. With ``--json`` it
prints only the JSON events (the README's table), so the ``recovered`` events (``resume``, ``replay``,
``new_session``) can be checked from outside; without it, a narrated transcript.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from chat import EXIT_OK, Chat, Output
from chat_ui import TerminalView, make_view

from acp_client import AcpError, ConnectionState, RecoveryOutcome, RetryPolicy, State

__all__ = ["EXIT_DEMO_FAILED", "run_demo"]

#: The exit status when a recovery path did not show up (or a step timed out).
EXIT_DEMO_FAILED = 1
#: The longest the demo waits for one recovery.
RECOVERY_TIMEOUT = 20.0
#: The paths the demo must show.
EXPECTED_PATHS = ("resume", "replay", "new_session")


class _Recoveries:
    """Waits for the next recovery outcome (and the connection being back) without polling."""

    def __init__(self, chat: Chat) -> None:
        self._chat = chat
        self._changed = asyncio.Event()
        chat.state_listeners.append(self._on_state)

    def _on_state(self, _state: ConnectionState) -> None:
        self._changed.set()

    def mark(self) -> int:
        """How many outcomes so far: pass it to :meth:`wait_after`."""
        return len(self._chat.client.recovery_outcomes)

    async def wait_after(self, seen: int, timeout: float = RECOVERY_TIMEOUT) -> RecoveryOutcome:
        """The first outcome after ``seen``, once the client is connected again.

        Raises:
            TimeoutError: No recovery within ``timeout`` seconds.
            AcpError: The client gave up.
        """
        deadline = time.monotonic() + timeout
        client = self._chat.client
        while True:
            outcomes = client.recovery_outcomes
            if len(outcomes) > seen and client.state.state is State.CONNECTED:
                return outcomes[seen]
            if client.state.is_terminal:
                raise AcpError(f"the client stopped: {client.state.cause}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no recovery within {timeout:g}s (state: {client.state})")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=remaining)
            except asyncio.TimeoutError:
                continue


async def run_demo(output: Output, *, protocol_version: int = 1) -> int:
    """Run the demo, writing events to ``output``; returns the exit status."""
    try:
        import hypercorn  # noqa: F401  (ReferenceServer needs it; fail early with a clear message)

        from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer
    except ImportError as exc:
        hint = "pip install 'hypercorn>=0.16' (the 'testing' extra; or pip install -e '.[testing]' in a checkout)"
        output.event("error", message=f"--demo needs hypercorn: {hint} ({exc})")
        return EXIT_DEMO_FAILED

    view: Output = output
    terminal: TerminalView | None = None
    narrate: Callable[[str], None] = _silent
    if not output.json_mode:
        made = make_view(json_mode=False, stream=output.stream, interactive=False)
        assert isinstance(made, TerminalView)
        view = terminal = made
        narrate = _narrator(terminal)

    agent = ReferenceAgent(chunks_per_prompt=4, chunk_delay=0.01)
    async with ReferenceServer(agent) as server, FaultProxy("127.0.0.1", server.port) as proxy:
        url = proxy.url(server.ws_url)
        retry = RetryPolicy(initial_delay=0.1, max_delay=1.0, max_elapsed=RECOVERY_TIMEOUT, suspend_after=None)
        chat = Chat(url, output=view, protocol_version=protocol_version, retry=retry)
        if terminal is not None:
            terminal.chat = chat
            chat.client.add_update_listener(terminal.on_update)
            chat.state_listeners.append(terminal.set_state)
        recoveries = _Recoveries(chat)

        async def say(text: str) -> None:
            if terminal is not None:
                terminal.line(f"you> {text}", "bold cyan")
            await chat.prompt(text)

        try:
            narrate(f"ACP reconnect demo: reference agent at {server.ws_url}, reached through a fault proxy at {url}")
            await chat.start()
            assert chat.handle is not None
            await say("hello, agent")
            await say("please remember the word 'pelican'")

            narrate("1/3 network drop: the proxy cuts the connection; the agent still has the session in memory")
            seen = recoveries.mark()
            await proxy.cut()
            await recoveries.wait_after(seen)
            await say("are you still there?")

            narrate("2/3 agent restart: its memory is cleared, its session store survives")
            seen = recoveries.mark()
            await proxy.blackhole()  # hold reconnects until the restart is complete (no race with it)
            try:
                await server.restart()
            finally:
                await proxy.blackhole(False)
            await recoveries.wait_after(seen)
            transcript = chat.handle.transcript
            narrate(f"   the transcript was rebuilt from the replay: {len(transcript)} messages, no duplicates")
            for message in transcript.messages:
                narrate(f"     {message.role}: {message.text}")
            await say("what was the word?")

            narrate("3/3 eviction: the agent forgets the session, then the network drops again")
            agent.evict(chat.handle.session_id)
            await chat.status()
            seen = recoveries.mark()
            await proxy.cut()
            await recoveries.wait_after(seen)
            await say("hello again")
        except (AcpError, TimeoutError) as exc:
            view.event("error", message=f"demo failed: {exc}")
            return EXIT_DEMO_FAILED
        finally:
            await chat.close()

        taken = [outcome.path.value for outcome in chat.client.recovery_outcomes]
        missing = [path for path in EXPECTED_PATHS if path not in taken]
        if missing:
            view.event("error", message=f"demo failed: recovery paths not taken: {', '.join(missing)}")
            return EXIT_DEMO_FAILED
        narrate(f"done: recovered by {', '.join(taken)} — all three paths")
        return EXIT_OK


def _silent(_text: str) -> None:
    return None


def _narrator(view: TerminalView) -> Callable[[str], None]:
    def narrate(text: str) -> None:
        view.line(text, "bold")

    return narrate
