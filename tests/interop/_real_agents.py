"""Helpers shared by the real-agent tests (pydantic-acp, fast-agent, isaac-acp, deepagents-acp, agentao, and
the agents on a fake model: Zed's Claude adapters, codex-acp, pi-acp): permission answers, waits, kills,
evictions, the shared agent of a module, and what the fake models answer and are sent.

The agents themselves come from ``tests/peers/real_agents.py``; the client reaches them through a
``stdio:`` URL (wrapped in a :class:`~acp_client.testing.RecordingConnector` where a test needs the
agent's pid or what went out on the wire).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs
import pytest

from acp_client import (
    AcpClient,
    Callbacks,
    ConnectionLost,
    PromptResult,
    RecoveryPath,
    SessionHandle,
    Timeouts,
    UpdateEvent,
)
from acp_client.handlers import ClientHandlers
from acp_client.state import Continuity
from acp_client.store import SqliteSessionStore
from acp_client.testing import RecordingConnector
from acp_client.transcript import SegmentStart, Transcript, TranscriptMessage
from acp_client.transports import connector_for
from acp_client.types import RequestPermissionRequest, SelectedPermissionOutcome
from tests._support import FAST_RETRY, eventually
from tests.e2e._support import Recorder
from tests.peers._fake_model import FakeModel

__all__ = [
    "POLICY",
    "SLOW_PROMPT",
    "SLOW_WORDS_PROMPT",
    "ModelledAgent",
    "Permissions",
    "SharedAgent",
    "assert_lost_then_new",
    "chunks",
    "conversation",
    "describe",
    "echo_turn",
    "evict",
    "kill_agent",
    "kill_mid_turn",
    "message_counts",
    "messages",
    "model_history",
    "modelled_agent",
    "once",
    "replayed_chunks",
    "session_with",
    "stdio_url",
    "stored_client",
    "streaming",
    "wait_for_agent_text",
    "wired_client",
]

#: Reconnect quickly; the agents take a second or two to start, so allow a longer outage than loopback tests do.
POLICY = attrs.evolve(FAST_RETRY, max_elapsed=60)

#: Real agents start slowly (fast-agent: ~2 s, more under load); every wait allows for it.
SLOW = 60.0
#: A prompt the fake models answer slowly, chunk by chunk (a turn long enough to cut or cancel).
SLOW_PROMPT = "slow: one two three four five six seven eight"
#: The same for the fake Responses API model (codex-acp, pi-acp): answered ``echo: `` and then word by word.
SLOW_WORDS_PROMPT = "SLOW one two three four five six seven eight nine ten"


def echo_turn(prompt: str) -> list[tuple[str, str]]:
    """A completed turn as :func:`conversation` shows it: ``prompt`` and the fake model's ``echo: prompt``."""
    return [("user", prompt), ("agent", f"echo: {prompt}")]


def model_history(turns: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The history a fake model is sent for ``turns`` (the client's roles to the model APIs': ``assistant``)."""
    return tuple(("assistant" if role == "agent" else role, text) for role, text in turns)


def once(transcript: Transcript, role: str, text: str) -> TranscriptMessage:
    """The one message of ``role`` with ``text`` in the whole conversation (fails on none or several)."""
    found = [m for m in transcript.all_messages() if m.role == role and m.text == text]
    assert len(found) == 1, (role, text, [(m.role, m.text) for m in transcript.all_messages()])
    return found[0]


def replayed_chunks(events: Sequence[UpdateEvent]) -> list[tuple[str, str | None, str | None]]:
    """``(kind, text, messageId)`` of each message chunk among ``events`` that came in a replay."""
    return [
        (
            e.update.kind,
            getattr(getattr(e.update, "content", None), "text", None),
            getattr(e.update, "message_id", None),
        )
        for e in events
        if e.replay and e.update.kind.endswith("_message_chunk")
    ]


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


def stored_client(url: str, store: SqliteSessionStore, recorder: Recorder) -> AcpClient:
    """A client on ``url`` with a session store (an editor that restarts on it)."""
    return AcpClient(
        url, retry=POLICY, timeouts=Timeouts(connect=SLOW), session_store=store, callbacks=recorder.callbacks()
    )


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


async def kill_mid_turn(wire: RecordingConnector, turn: asyncio.Task[PromptResult]) -> None:
    """SIGKILL the agent while ``turn`` runs: the prompt fails with :class:`ConnectionLost`, maybe executed."""
    kill_agent(wire)
    with pytest.raises(ConnectionLost) as lost:
        await turn
    assert lost.value.may_have_executed


async def session_with(client: AcpClient, cwd: Path, *prompts: str) -> tuple[SessionHandle, list[tuple[str, str]]]:
    """A new session in which each of ``prompts`` was sent and answered: the session and its conversation
    as :func:`conversation` shows it (each prompt and the fake model's ``echo:``)."""
    handle = await client.new_session(cwd)
    for prompt in prompts:
        await handle.prompt(prompt)
    return handle, [message for prompt in prompts for message in echo_turn(prompt)]


async def streaming(
    handle: SessionHandle, events: list[UpdateEvent], prompt: str, *, until: str
) -> asyncio.Task[PromptResult]:
    """Send ``prompt`` (one the fake model answers slowly) and return its running turn once the agent's answer
    shows ``until``."""
    start = len(events)
    turn = asyncio.create_task(handle.prompt(prompt))
    await wait_for_agent_text(events, until, start=start)
    return turn


async def wait_for_agent_text(events: list[UpdateEvent], needle: str, *, start: int = 0) -> None:
    """Wait until the agent's message chunks after ``events[start]`` contain ``needle``."""

    def seen() -> bool:
        return needle in "".join(
            getattr(getattr(event.update, "content", None), "text", "") or ""
            for event in events[start:]
            if event.update.kind == "agent_message_chunk"
        )

    await eventually(seen, timeout=SLOW, what=f"agent text {needle!r}")


def assert_lost_then_new(outcome: Any, transcript: Any, old_id: str, lost_turns: int, seen: str) -> None:
    """The new-session path after a loss: continuity lost, an earlier segment marked lost, an empty new one."""
    assert outcome.path is RecoveryPath.NEW_SESSION and outcome.continuity is Continuity.LOST, seen
    assert outcome.previous_session_id == old_id and outcome.session_id not in (None, old_id), seen
    assert outcome.lost_turns == lost_turns, seen
    earlier, current = transcript.segments
    assert (earlier.session_id, earlier.lost, earlier.turns) == (old_id, True, lost_turns), seen
    assert (current.session_id, current.began, current.messages) == (
        outcome.session_id,
        SegmentStart.NEW_AFTER_LOSS,
        [],
    ), seen


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


L = TypeVar("L", bound=FakeModel)


@attrs.frozen
class ModelledAgent(Generic[L]):
    """One client for a module's tests of an agent on a fake model (each kill respawns the next test's
    agent), that model, and the agent's home."""

    agent: SharedAgent
    llm: L
    home: Path


@contextlib.asynccontextmanager
async def modelled_agent(
    llm: L, command: Callable[[Path, str], Sequence[str]], home: Path
) -> AsyncIterator[ModelledAgent[L]]:
    """Serve ``llm`` and run one :class:`SharedAgent` on it (``command(home, llm.base_url)``) while the block runs."""
    with llm:
        agent = SharedAgent(command(home, llm.base_url), store=home)
        async with agent.client:
            yield ModelledAgent(agent, llm, home)
