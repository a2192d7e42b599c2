#!/usr/bin/env python3
"""Recovery, scripted: a custom ``decide_recovery`` hook and recovery callbacks, under real faults.

Runs the bundled reference agent (``ReferenceServer``, the ``testing`` extra) on loopback behind a
``FaultProxy`` and drives four flows against it with an :class:`~acp_client.AcpClient`, printing
what happened and checking it::

    python examples/reconnect_flows.py [--protocol-version {1,2}] [--transport {ws,http}]

1. **drop → resume, scratch session abandoned.** Two sessions are open; the proxy cuts the link.
   The agent still has both in memory (``session/status``: ``active``). The hook keeps the proposed
   *resume* for the main session and returns *abandon* for the scratch one (not worth recovering):
   ``on_resume`` and ``on_recovery_failed`` fire.
2. **stale view → replay instead of resume.** The UI "reloads" and loses its on-screen copy of the
   conversation. After the next drop the hook overrides *resume* with *replay*, so the agent sends
   the history again; ``on_replay`` rebuilds the view from the transcript accumulator
   (``handle.transcript``). The same rule applies when a v2 probe says the agent kept working while
   we were away (state ``running`` / ``requires_action``): a resume would miss what it said.
3. **agent restart → replay.** ``ReferenceServer.restart()`` clears the agent's memory (its session
   store survives): ``inactive`` → replay; ``on_replay`` rebuilds the view and checks that the
   replay did not duplicate a single message.
4. **eviction mid-turn → new session, prompt re-sent after asking the user.** The agent asks for a
   permission (``/permission``); while the question is open, the network drops and the agent
   forgets the session. The pending permission request is withdrawn, the turn is reported
   interrupted (``on_turn_interrupted``: the client never re-sends a prompt by itself), recovery
   gets ``-32002`` → new session; ``on_new_session`` asks the user (a simulated "yes") and re-sends
   the interrupted prompt in the new session.

Callbacks run *during* recovery, before requests queued in the outage are released. A callback
may await requests of its own (they go straight to the recovering connection); flow 4 still
re-sends its prompt from a task, so recovery does not wait for a whole turn.

Exit status: 0 when every flow ended as expected, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from acp_client import (
    AcpClient,
    Callbacks,
    ClientHandlers,
    ConnectionLost,
    RecoveryContext,
    RecoveryOutcome,
    RecoveryPath,
    RetryPolicy,
    SessionHandle,
    State,
    Transcript,
    TurnInterrupted,
)
from acp_client.state import Probe
from acp_client.testing import FaultProxy, ReferenceAgent, ReferenceServer
from acp_client.types import (
    CancelledPermissionOutcome,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
    TextContent,
)

STEP_TIMEOUT = 15.0


def say(text: str) -> None:
    print(text, flush=True)


def render(transcript: Transcript) -> list[str]:
    """The app's on-screen view of a conversation: one line per message."""
    return [f"{message.role}: {message.text}" for message in transcript.messages]


class ChatApp:
    """A tiny chat app: its view of each session, and its recovery policy and callbacks."""

    def __init__(self) -> None:
        self.views: dict[str, list[str]] = {}  # session id -> on-screen lines
        self.stale: set[str] = set()  # sessions whose on-screen view cannot be trusted
        self.scratch: set[str] = set()  # sessions not worth recovering
        self.outcomes: list[RecoveryOutcome] = []
        self.interrupted: dict[str, str] = {}  # session id -> prompt text cut off by a drop
        self.replaced: dict[str, str] = {}  # old session id -> new one (new-session recoveries)
        self.resent: asyncio.Future[tuple[str, str | None]] | None = None
        self.permission_asked = asyncio.Event()
        self.hold_permission = False
        self.withdrawn_permissions = 0
        self.client: AcpClient | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- the hook ------------------------------------------------------------------------------------

    def decide_recovery(self, context: RecoveryContext) -> RecoveryPath | None:
        """Return a path to override the decision table, ``None`` to keep its proposal."""
        sid = context.session_id
        if sid in self.scratch:
            say(f"  [decide] {sid}: scratch session, probe={context.probe.value} -> abandon")
            return RecoveryPath.ABANDON
        agent_was_busy = getattr(context.state, "state", None) in ("running", "requires_action")
        if context.proposed is RecoveryPath.RESUME and (sid in self.stale or agent_was_busy):
            why = "our view is stale" if sid in self.stale else f"the agent kept working ({context.state})"
            say(f"  [decide] {sid}: probe={context.probe.value}, {why} -> replay instead of resume")
            return RecoveryPath.REPLAY
        probe = f"probe={context.probe.value} (raw {context.raw_status!r})"
        say(f"  [decide] {sid}: {probe} -> keep {context.proposed.value}")
        return None

    # -- the callbacks -------------------------------------------------------------------------------

    def on_resume(self, outcome: RecoveryOutcome) -> None:
        self.outcomes.append(outcome)
        view = self.views.get(outcome.previous_session_id, [])
        took = f"{outcome.duration * 1000:.0f} ms"
        say(f"  [on_resume] {outcome.session_id} resumed in {took}; view kept ({len(view)} lines)")

    def on_replay(self, outcome: RecoveryOutcome) -> None:
        self.outcomes.append(outcome)
        handle = self._handle(outcome.session_id)
        before = self.views.get(outcome.previous_session_id, [])
        after = render(handle.transcript)
        self.views[handle.session_id] = after
        self.stale.discard(outcome.previous_session_id)
        duplicates = len(after) - len(set(after))
        say(
            f"  [on_replay] {outcome.session_id}: {outcome.replayed_updates} updates replayed "
            f"({', '.join(step for step, _ in outcome.steps)}); view rebuilt from handle.transcript: "
            f"{len(before)} -> {len(after)} lines, {duplicates} duplicates"
        )
        for line in after:
            say(f"      | {line}")

    def on_new_session(self, outcome: RecoveryOutcome) -> None:
        self.outcomes.append(outcome)
        old, new = outcome.previous_session_id, outcome.session_id
        assert new is not None
        self.replaced[old] = new
        self.views[new] = [*self.views.pop(old, []), "-- the agent lost the session; a new one started here --"]
        say(f"  [on_new_session] {old} is gone (probe {outcome.probe.value}); continuing in {new}")
        self._maybe_resend(old)

    def on_recovery_failed(self, outcome: RecoveryOutcome) -> None:
        self.outcomes.append(outcome)
        self.views.pop(outcome.previous_session_id, None)
        say(f"  [on_recovery_failed] {outcome.previous_session_id} abandoned (planned: {outcome.planned.value})")

    def on_turn_interrupted(self, turn: TurnInterrupted) -> None:
        text = "".join(block.text for block in turn.prompt if isinstance(block, TextContent))
        self.interrupted[turn.session_id] = text
        say(f"  [on_turn_interrupted] {turn.session_id}: {text!r} was cut off (may have executed)")
        self._maybe_resend(turn.session_id)

    def on_state_change(self, state: Any) -> None:
        if state.state in (State.RECONNECTING, State.RECOVERING):
            say(f"  [state] {state}")

    async def permission(self, request: RequestPermissionRequest) -> Any:
        """Allow, unless the flow wants the question left open (flow 4)."""
        if not self.hold_permission:
            return SelectedPermissionOutcome(option_id=request.options[0].option_id)
        self.permission_asked.set()
        try:
            await asyncio.Event().wait()  # the user never answers: the drop withdraws the question
        except asyncio.CancelledError:
            self.withdrawn_permissions += 1
            say("  [permission] the open question was withdrawn by the drop")
            raise
        return CancelledPermissionOutcome()

    # -- helpers ---------------------------------------------------------------------------------------

    def _handle(self, session_id: str | None) -> SessionHandle:
        assert self.client is not None and session_id is not None
        return self.client.session(session_id)

    def _maybe_resend(self, old: str) -> None:
        """Both known (the prompt that was cut off and the session that replaced it, in either
        order): ask the user, then re-send in a task — never awaited inside a recovery callback."""
        if old not in self.interrupted or old not in self.replaced:
            return
        text, new = self.interrupted.pop(old), self.replaced[old]
        if ask_user(f"the agent lost the session; send {text!r} again in the new session?"):
            task = asyncio.ensure_future(self._resend(new, text))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _resend(self, session_id: str, text: str) -> None:
        assert self.resent is not None
        try:
            result = await self._handle(session_id).prompt(text)
        except Exception as exc:
            if not self.resent.done():
                self.resent.set_exception(exc)
            return
        if not self.resent.done():
            self.resent.set_result((session_id, result.stop_reason))


def ask_user(question: str) -> bool:
    """Stands in for a real dialog: always answers yes (and says so)."""
    say(f"  [ask_user] {question} -> yes (simulated)")
    return True


async def wait_for(predicate: Callable[[], bool], what: str, changed: asyncio.Event) -> None:
    """Wait until ``predicate()`` holds, re-checking on every state change, up to STEP_TIMEOUT."""
    deadline = time.monotonic() + STEP_TIMEOUT
    while not predicate():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"timed out waiting for {what}")
        changed.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=min(remaining, 0.5))


async def held(proxy: FaultProxy, fault: Callable[[], Awaitable[None] | None]) -> None:
    """Run ``fault`` while the proxy holds new connections, so the client's reconnect cannot
    overtake it (deterministic ordering, no sleeps)."""
    await proxy.blackhole()
    try:
        result = fault()
        if result is not None:
            await result
    finally:
        await proxy.blackhole(False)


async def run(protocol_version: int, transport: str) -> int:
    checks: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append((name, ok, detail))
        say(f"  {'ok ' if ok else 'FAIL'} {name}: {detail}")

    app = ChatApp()
    changed = asyncio.Event()
    with tempfile.TemporaryDirectory() as workdir:
        agent = ReferenceAgent(chunks_per_prompt=3)
        async with ReferenceServer(agent) as server, FaultProxy("127.0.0.1", server.port) as proxy:
            url = proxy.url(server.ws_url if transport == "ws" else server.http_url)
            say(f"reference agent behind a fault proxy: {url} (ACP v{protocol_version} proposed)")

            def on_state(state: Any) -> None:
                changed.set()
                app.on_state_change(state)

            client = AcpClient(
                url,
                protocol_version=protocol_version,
                retry=RetryPolicy(initial_delay=0.05, max_delay=0.5, max_elapsed=STEP_TIMEOUT),
                handlers=ClientHandlers(permission=app.permission),
                callbacks=Callbacks(
                    decide_recovery=app.decide_recovery,
                    on_resume=app.on_resume,
                    on_replay=app.on_replay,
                    on_new_session=app.on_new_session,
                    on_recovery_failed=app.on_recovery_failed,
                    on_turn_interrupted=app.on_turn_interrupted,
                    on_state_change=on_state,
                ),
            )
            app.client = client

            async def converse(handle: SessionHandle, text: str) -> None:
                result = await handle.prompt(text)
                app.views[handle.session_id] = render(handle.transcript)
                say(f"  you> {text}  -> {result.stop_reason}")

            def recovered(count: int) -> Callable[[], bool]:
                return lambda: len(app.outcomes) >= count and client.state.state is State.CONNECTED

            async with client:
                main = await client.new_session(workdir)
                scratch = await client.new_session(workdir)
                app.scratch.add(scratch.session_id)
                await converse(main, "hello")
                await converse(main, "remember: pelican")
                await converse(scratch, "a throwaway question")

                say("\n1. network drop -> resume; the hook abandons the scratch session")
                await proxy.cut()
                await wait_for(recovered(2), "flow 1's recoveries", changed)
                paths = {o.previous_session_id: o.path.value for o in app.outcomes[-2:]}
                check("drop resumes the main session", paths.get(main.session_id) == "resume", str(paths))
                check(
                    "the hook abandons the scratch session",
                    paths.get(scratch.session_id) == "abandon" and scratch.abandoned,
                    f"abandoned={scratch.abandoned}",
                )
                await converse(main, "still there?")

                say("\n2. the UI reloads and loses its view -> the hook asks for a replay although the agent has it")
                lines_before = list(app.views[main.session_id])
                app.views[main.session_id] = []
                app.stale.add(main.session_id)
                await proxy.cut()
                await wait_for(recovered(3), "flow 2's recovery", changed)
                outcome = app.outcomes[-1]
                check(
                    "stale view: replay chosen over resume",
                    outcome.path is RecoveryPath.REPLAY
                    and outcome.planned is RecoveryPath.REPLAY
                    and outcome.probe is Probe.ACTIVE,
                    f"path={outcome.path.value} probe={outcome.probe.value} notes={list(outcome.notes)}",
                )
                check(
                    "view rebuilt from the replayed transcript",
                    app.views[main.session_id] == lines_before and outcome.replayed_updates > 0,
                    f"{outcome.replayed_updates} updates replayed, {len(app.views[main.session_id])} lines"
                    f" (had {len(lines_before)})",
                )

                say("\n3. agent restart -> replay (the agent reloads the session from its store)")
                lines_before = list(app.views[main.session_id])
                await held(proxy, server.restart)
                await wait_for(recovered(4), "flow 3's recovery", changed)
                outcome = app.outcomes[-1]
                check(
                    "restart replays",
                    outcome.path is RecoveryPath.REPLAY and outcome.probe is Probe.INACTIVE,
                    f"path={outcome.path.value} probe={outcome.probe.value}",
                )
                check(
                    "replay did not duplicate the conversation",
                    app.views[main.session_id] == lines_before,
                    f"{len(app.views[main.session_id])} lines (had {len(lines_before)})",
                )
                await converse(main, "what was the word?")

                say("\n4. eviction while the agent waits for a permission -> new session, prompt re-sent")
                old_id = main.session_id
                app.resent = asyncio.get_running_loop().create_future()
                app.hold_permission = True
                turn = asyncio.ensure_future(main.prompt("/permission"))
                await asyncio.wait_for(app.permission_asked.wait(), STEP_TIMEOUT)
                app.hold_permission = False

                async def evict_and_cut() -> None:
                    await proxy.cut()
                    agent.evict(old_id)

                await held(proxy, evict_and_cut)
                try:
                    await asyncio.wait_for(turn, STEP_TIMEOUT)
                    interrupted = False
                except ConnectionLost as exc:
                    interrupted = exc.may_have_executed
                check("the turn was reported interrupted", interrupted, "ConnectionLost(may_have_executed=True)")
                new_id, stop_reason = await asyncio.wait_for(app.resent, STEP_TIMEOUT)
                outcome = app.outcomes[-1]
                check(
                    "eviction -> new session",
                    outcome.path is RecoveryPath.NEW_SESSION and outcome.probe is Probe.UNKNOWN,
                    f"path={outcome.path.value} {old_id} -> {outcome.session_id}",
                )
                check(
                    "prompt re-sent in the new session after asking the user",
                    new_id == main.session_id != old_id and stop_reason == "end_turn",
                    f"{new_id}: stop reason {stop_reason}; agent said {main.transcript.messages[-1].text!r}",
                )
                check(
                    "the open permission question was withdrawn",
                    app.withdrawn_permissions == 1,
                    f"{app.withdrawn_permissions} withdrawn",
                )

    failed = [name for name, ok, _ in checks if not ok]
    say(f"\n{len(checks) - len(failed)}/{len(checks)} checks passed" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    first, _, rest = (__doc__ or "").partition("\n\n")
    parser = argparse.ArgumentParser(
        description=first, epilog=rest, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--protocol-version", type=int, default=1, choices=(1, 2), help="ACP version to propose")
    parser.add_argument("--transport", default="ws", choices=("ws", "http"), help="WebSocket or Streamable HTTP")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(run(args.protocol_version, args.transport))
    except (TimeoutError, asyncio.TimeoutError) as exc:
        say(f"FAIL: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
