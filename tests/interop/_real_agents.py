"""Helpers shared by the real-agent tests (pydantic-acp, fast-agent, isaac-acp, deepagents-acp, agentao):
permission answers, waits, kills, evictions.

The agents themselves come from ``tests/peers/real_agents.py``; the client reaches them through a
``stdio:`` URL (wrapped in a :class:`~acp_client.testing.RecordingConnector` where a test needs the
agent's pid or what went out on the wire).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from acp_client import AcpClient, Callbacks, Timeouts, UpdateEvent, connector_for
from acp_client.handlers import ClientHandlers
from acp_client.testing import RecordingConnector
from acp_client.types import RequestPermissionRequest, SelectedPermissionOutcome
from tests._support import FAST_RETRY, eventually
from tests.e2e._support import Recorder

__all__ = [
    "POLICY",
    "SLOW_PROMPT",
    "Permissions",
    "SharedAgent",
    "chunks",
    "conversation",
    "describe",
    "evict",
    "kill_agent",
    "message_counts",
    "messages",
    "stdio_url",
    "wait_for_agent_text",
    "wired_client",
]

#: Reconnect quickly; the agents take a second or two to start, so allow a longer outage than loopback tests do.
POLICY = attrs.evolve(FAST_RETRY, max_elapsed=60)

#: Real agents start slowly (fast-agent: ~2 s, more under load); every wait allows for it.
SLOW = 60.0
#: A prompt the fake models answer slowly, chunk by chunk (a turn long enough to cut or cancel).
SLOW_PROMPT = "slow: one two three four five six seven eight"


def chunks(events: Sequence[UpdateEvent], kind: str = "agent_message_chunk") -> list[tuple[str | None, str | None]]:
    """``(text, messageId)`` of each ``kind`` chunk among ``events``."""
    return [
        (getattr(e.update.content, "text", None), getattr(e.update, "message_id", None))
        for e in events
        if e.update.kind == kind
    ]


def stdio_url(argv: Sequence[str]) -> str:
    """The ``stdio:`` endpoint that spawns ``argv``."""
    return "stdio:" + shlex.join(argv)


class Permissions:
    """A permission handler that picks the first option of ``kind`` and records every request."""

    def __init__(self, kind: str = "allow_once") -> None:
        self.kind = kind
        self.requests: list[RequestPermissionRequest] = []

    def __call__(self, request: RequestPermissionRequest) -> SelectedPermissionOutcome:
        self.requests.append(request)
        option = next(option for option in request.options if option.kind == self.kind)
        return SelectedPermissionOutcome(option_id=option.option_id)

    def handlers(self) -> ClientHandlers:
        return ClientHandlers(permission=self)


def wired_client(
    argv: Sequence[str], recorder: Recorder, *, permissions: Permissions | None = None, **options: Any
) -> tuple[AcpClient, RecordingConnector]:
    """A client on ``stdio:ARGV`` whose connector records the wire and the spawned transports (pids)."""
    wire = RecordingConnector(connector_for(stdio_url(argv)))
    handlers = (permissions or Permissions()).handlers()
    timeouts = Timeouts(connect=SLOW)
    client = AcpClient(
        wire, retry=POLICY, handlers=handlers, timeouts=timeouts, callbacks=recorder.callbacks(), **options
    )
    return client, wire


def kill_agent(wire: RecordingConnector) -> int:
    """SIGKILL the agent of the current link (its whole process group: fast-agent's MCP child too)."""
    pid = wire.transports[-1].info.pid
    assert pid is not None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return pid


def evict(store: Path) -> None:
    """Remove an agent's session store (a directory or a file): the agent forgets every session in it."""
    if store.is_dir():
        shutil.rmtree(store)
    else:
        store.unlink(missing_ok=True)
    assert not store.exists(), store


async def wait_for_agent_text(events: list[UpdateEvent], needle: str, *, start: int = 0) -> None:
    """Wait until the agent's message chunks after ``events[start]`` contain ``needle``."""

    def seen() -> bool:
        return needle in "".join(
            getattr(getattr(event.update, "content", None), "text", "") or ""
            for event in events[start:]
            if event.update.kind == "agent_message_chunk"
        )

    await eventually(seen, timeout=SLOW, what=f"agent text {needle!r}")


def describe(outcome: Any, transcript: Any, events: Sequence[UpdateEvent] = ()) -> str:
    """What a recovery did, for failure messages: path, steps, notes, the transcript, replay flags."""
    replay_flags = Counter(f"{event.update.kind} replay={event.replay}" for event in events)
    return (
        f"\npath={outcome.path.value} planned={outcome.planned.value} probe={outcome.probe.value} "
        f"continuity={outcome.continuity} session {outcome.previous_session_id} -> {outcome.session_id}"
        f"\nsteps={list(outcome.steps)}\nnotes={list(outcome.notes)}\nerror={outcome.error!r}"
        f"\ntranscript ({len(transcript.messages)} messages):\n{transcript.text()}"
        f"\nsegments:\n{_segments(transcript)}"
        f"\nupdates: {dict(replay_flags)}"
    )


def _segments(transcript: Any) -> str:
    lines = []
    for segment in getattr(transcript, "segments", ()):
        lines.append(f"  [{segment.session_id} began={segment.began.value} lost={segment.lost}]")
        for m in segment.messages:
            flags = f" status={m.status.value}" if getattr(m, "status", None) is not None else ""
            flags += " incomplete" if getattr(m, "incomplete", False) else ""
            lines.append(f"    {m.role}: {m.text!r}{flags}")
    return "\n".join(lines)


def message_counts(transcript_text: str) -> Counter[str]:
    """How often each ``role: text`` line occurs in a transcript's text."""
    return Counter(transcript_text.splitlines())


def messages(transcript: Any, role: str | None = None) -> list[tuple[str, str]]:
    """``(role, text)`` of each message of a transcript (only ``role``'s when given)."""
    return [(m.role, m.text) for m in transcript.messages if role is None or m.role == role]


def conversation(transcript: Any) -> list[tuple[str, str]]:
    """``(role, text)`` of every message of the whole conversation, earlier segments (a lost one too) first."""
    return [(m.role, m.text) for m in transcript.all_messages()]


#: The callbacks a :class:`SharedAgent` passes on to the current test's recorder.
_FORWARDED = (
    "on_resume",
    "on_replay",
    "on_new_session",
    "on_recovery_failed",
    "on_state_change",
    "on_update",
    "on_turn_interrupted",
)


class SharedAgent:
    """One client, and so one agent process, for a module's kill and evict tests: the agent the
    previous test's kill respawned is the next test's agent, which saves a start per test (real
    agents take seconds to start). Each test calls :meth:`take` for a recorder of its own and
    :meth:`release` when it ends (its sessions are forgotten: the next kill recovers only the next
    test's). A test that needs a client of its own options (a store, another protocol version)
    does not use it.
    """

    def __init__(self, argv: Sequence[str], *, store: Path | None = None, **options: Any) -> None:
        #: The agent's store (its home, a file), for a test that evicts.
        self.store = store
        self.recorder = Recorder()
        self._current = self.recorder.callbacks()
        # The client's callbacks pass everything on to whichever recorder the running test holds.
        self.client, self.wire = wired_client(argv, self, **options)  # type: ignore[arg-type]

    def callbacks(self) -> Callbacks:
        """What the shared client is given (what :func:`wired_client` asks a recorder for)."""
        def forward(name: str) -> Any:
            def call(*args: Any) -> Any:
                target = getattr(self._current, name)
                return target(*args) if target is not None else None

            return call

        return Callbacks(**{name: forward(name) for name in _FORWARDED})

    def take(self) -> tuple[AcpClient, RecordingConnector, Recorder]:
        """The client, its wire and a fresh recorder for one test."""
        self.recorder = Recorder()
        self._current = self.recorder.callbacks()
        return self.client, self.wire, self.recorder

    def release(self) -> None:
        """The test is over: forget its sessions (they are not recovered by the next test's kill)."""
        for handle in self.client.sessions:
            self.client.forget_session(handle.session_id)
