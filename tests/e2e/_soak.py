"""A soak over real transports: one client, four sessions, prompts all the time, faults at random.

Used by ``tests/e2e/test_soak_real.py`` (a few seconds per transport under ``-m soak``) and by
``benchmarks/soak.py --faults 500`` (the figures). Issue 12, item 4.

**Peers.** ``python_sdk``: the agent on the official ACP Python SDK (``tests/peers/python_sdk_agent.py``)
served by hypercorn in a subprocess, with a session store (a restarted agent still knows its
sessions) and ``--no-resume`` (the client never probes it -- no ``session/status`` -- and recovers by
``session/load``: every recovery is a replay, an evicted session a new one). ``reference``: the
bundled reference agent (``acp_client.testing``) in this process, with ``session/status``: probes
decide between resume (network faults), replay (restarts) and new session (evictions).

**Faults** (drawn from one ``random.Random(seed)``: the same seed gives the same schedule of kinds
and parameters; the moments they land on depend on the machine), through a
:class:`~acp_client.testing.FaultProxy` in front of the peer:

* ``cut``: every connection reset.
* ``blackhole_short``: nothing forwarded for 0.1-0.6 s, then delivered (no drop expected).
* ``blackhole_long``: nothing forwarded for 1.5-3 s, then the partition heals with resets.
* ``refuse``: new connections refused for 0.3-1.5 s, and every connection cut.
* ``restart``: the agent restarts (sessions leave memory, the store keeps them).
* ``evict``: the agent forgets one session (memory and store), then restarts / the link is cut.
* ``cut_streaming``: a cut while a long turn is streaming.
* ``cut_recovery``: a cut, then another one as soon as the client is recovering.

**Workload.** Four sessions, each with a worker sending prompts back to back: short ones
(``"short sI-N"``, an echo) and long streaming ones (``"/slow sI-N"``, cancelled after 0.3-1.2 s).
Every prompt text is unique.

**Invariants, checked as it runs** (each violation is recorded with its time and details):

* ``resolution``: every request on the wire is answered at most once, and only if it was sent on that
  link; every prompt call resolves (none still pending ``HANG_AFTER`` seconds after it was made).
* ``prompt_resent``: no prompt text goes out twice, unless every earlier send was refused by the
  transport before a byte of it left (``maybe_delivered`` false).
* ``received_twice`` / ``not_sent_received`` (at the end, from what the agent itself recorded: the
  peer's ``--received`` file, the reference agent's request log): the agent received each prompt at
  most once, and never one the client called "not sent" -- a send the transport refused as not
  delivered, or a prompt whose caller got ``ConnectionLost`` with ``may_have_executed=False``.
* ``callback``: per recovery, exactly one callback per session, naming the id the app knows
  (``previous_session_id``); after it the handle's id is the one the app learnt. A session that
  received replayed updates in a recovery must be reported by ``on_replay``.
* ``transcript``: each finished turn appears exactly once in its session's transcript, in order, a
  short turn followed by its reply, and no message holds two prompts (checked between turns,
  outside a replay window).
* ``repeated_state``: no state published twice in a row.
* ``resources``: client tasks, file descriptors and memory flat (judged on runs of 60 s or more).
* ``stuck``: the client does not get back to ``connected`` within ``STUCK_AFTER`` seconds.

**Recovery latency** per fault kind: from the client leaving ``connected`` to ``connected`` again,
less the waits the retry policy announced (``retry_in`` of each ``reconnecting`` state).

Only the client's public API is used; from lifecycle calls only ``.session_id`` of the result.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from acp_client import (
    AcpClient,
    AcpError,
    Callbacks,
    ConnectionLost,
    ConnectionState,
    RecoveryFailed,
    RecoveryOutcome,
    RequestTimeout,
    RetryPolicy,
    State,
    Timeouts,
    TransportError,
    UpdateEvent,
)
from acp_client.testing import FaultProxy, ReferenceServer
from acp_client.transports import Connector, Transport, TransportInfo, connector_for
from tests.e2e._support import RecordingAgent

__all__ = ["FAULT_KINDS", "PEERS", "TRANSPORTS", "SoakReport", "run_soak"]

FAULT_KINDS = (
    "cut",
    "blackhole_short",
    "blackhole_long",
    "refuse",
    "restart",
    "evict",
    "cut_streaming",
    "cut_recovery",
)
#: Relative frequency of each kind.
_WEIGHTS = (3, 2, 1, 1, 1, 1, 2, 2)
PEERS = ("python_sdk", "reference")
TRANSPORTS = ("ws", "http")
SESSIONS = 4
CWD = "/tmp/acp-soak"
#: A prompt call still pending this long after it was made is a hang.
HANG_AFTER = 60.0
#: The client must be connected again this long after a fault has ended.
STUCK_AFTER = 45.0
#: Resource growth that counts as a leak (judged on runs of at least RESOURCE_MIN_SECONDS).
RESOURCE_MIN_SECONDS = 60.0
_MAX_TASK_GROWTH = 25
_MAX_FD_GROWTH = 25
_MAX_RSS_GROWTH = 96 * 1024 * 1024
#: Every prompt the soak sends matches this (each text is unique).
PROMPT = re.compile(r"(?:/slow|short) s[0-9]+-[0-9]+")
POLICY = RetryPolicy(initial_delay=0.05, max_delay=0.5, max_elapsed=120.0, reset_after=2.0, suspend_after=None)


# -- peers --------------------------------------------------------------------------------------


class _ReferencePeer:
    """The reference agent in this process, with ``session/status``."""

    name = "reference"

    def __init__(self) -> None:
        self.agent = RecordingAgent(chunks_per_prompt=6, chunk_delay=0.005)
        self.server = ReferenceServer(self.agent)

    async def start(self) -> None:
        await self.server.start()

    @property
    def port(self) -> int:
        return self.server.port

    def url(self, transport: str) -> str:
        return self.server.ws_url if transport == "ws" else self.server.http_url

    async def restart(self, proxy: FaultProxy) -> None:
        self.agent.lose_memory()
        await proxy.cut()

    async def evict(self, proxy: FaultProxy, session_id: str) -> None:
        self.agent.evict(session_id)
        await proxy.cut()

    def server_rss(self) -> int | None:
        return None  # in this process: part of the client's figure

    def received(self) -> collections.Counter[str]:
        """How many times the agent received each prompt text."""
        return collections.Counter(_text(params.get("prompt")) for params in self.agent.params_of("session/prompt"))

    async def aclose(self) -> None:
        await self.server.aclose()


class _PythonSdkPeer:
    """The official-Python-SDK agent in a subprocess (hypercorn), with a store and ``--no-resume``."""

    name = "python_sdk"

    def __init__(self, workdir: Path, extra_args: tuple[str, ...] = ("--no-resume",)) -> None:
        from tests.peers.python_sdk import PeerCertificates, _ServerProcess

        workdir.mkdir(parents=True, exist_ok=True)
        self.store = workdir / "sessions.json"
        self.received_file = workdir / "received.jsonl"
        certs = PeerCertificates.create(workdir)
        args = ["--store", str(self.store), "--received", str(self.received_file)]
        args += ["--slow-interval", "0.03", "--slow-max-ticks", "100", *extra_args]
        self.process = _ServerProcess(certs=certs, workdir=workdir, agent_args=args)

    async def start(self) -> None:
        await asyncio.to_thread(self.process.start)

    @property
    def port(self) -> int:
        return self.process.http_port

    def url(self, transport: str) -> str:
        scheme = "ws" if transport == "ws" else "http"
        return f"{scheme}://127.0.0.1:{self.process.http_port}/acp"

    async def restart(self, proxy: FaultProxy) -> None:
        await asyncio.to_thread(self.process.stop, graceful=False)
        await asyncio.to_thread(self.process.start)

    async def evict(self, proxy: FaultProxy, session_id: str) -> None:
        await asyncio.to_thread(self.process.stop, graceful=False)
        with contextlib.suppress(FileNotFoundError, ValueError):
            data = json.loads(self.store.read_text(encoding="utf-8"))
            data.get("sessions", {}).pop(session_id, None)
            self.store.write_text(json.dumps(data), encoding="utf-8")
        await asyncio.to_thread(self.process.start)

    def server_rss(self) -> int | None:
        pid = self.process.pid
        return _rss(pid) if pid is not None else None

    def received(self) -> collections.Counter[str]:
        """How many times the agent (any of its processes) received each prompt text."""
        counts: collections.Counter[str] = collections.Counter()
        with contextlib.suppress(FileNotFoundError):
            for line in self.received_file.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError):
                    counts[str(json.loads(line)["text"])] += 1
        return counts

    async def aclose(self) -> None:
        await asyncio.to_thread(self.process.stop, graceful=False)


def _text(blocks: Any) -> str:
    """The text of a prompt's content blocks (wire dicts)."""
    if not isinstance(blocks, list):
        return ""
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))


def _rss(pid: int | str = "self") -> int | None:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


# -- the report -----------------------------------------------------------------------------------


@attrs.frozen
class Violation:
    at: float
    kind: str
    detail: str


@attrs.define
class SoakReport:
    """What one soak run saw."""

    peer: str
    transport: str
    seed: int
    duration: float = 0.0
    faults: collections.Counter[str] = attrs.Factory(collections.Counter)
    prompts: collections.Counter[str] = attrs.Factory(collections.Counter)
    wire_requests: int = 0
    wire_answered: int = 0
    paths: collections.Counter[str] = attrs.Factory(collections.Counter)
    recoveries: int = 0
    violations: list[Violation] = attrs.Factory(list)
    latencies: dict[str, list[float]] = attrs.Factory(lambda: collections.defaultdict(list))
    samples: list[tuple[float, int | None, int, int, int | None]] = attrs.Factory(list)
    final_state: str = ""
    #: Things seen that are not violations (e.g. v1 replays merging consecutive user prompts).
    notes: collections.Counter[str] = attrs.Factory(collections.Counter)
    errors: collections.Counter[str] = attrs.Factory(collections.Counter)

    @property
    def resolved(self) -> int:
        return sum(self.prompts.values())

    def violation_counts(self) -> collections.Counter[str]:
        return collections.Counter(v.kind for v in self.violations)

    def resource_trend(self) -> dict[str, tuple[float, float]]:
        """``name -> (start, end)``: medians of the first and the last third of the samples."""
        samples = self.samples
        if len(samples) < 3:
            return {}
        third = max(1, len(samples) // 3)
        head, tail = samples[:third], samples[-third:]
        trend: dict[str, tuple[float, float]] = {}
        for index, name in ((1, "rss_mib"), (2, "tasks"), (3, "fds"), (4, "server_rss_mib")):
            first = [s[index] for s in head if s[index] is not None]
            last = [s[index] for s in tail if s[index] is not None]
            if first and last:
                start, end = float(statistics.median(first)), float(statistics.median(last))
                if name.endswith("mib"):
                    start, end = start / 2**20, end / 2**20
                trend[name] = (start, end)
        return trend

    def format(self) -> str:
        lines = [
            f"soak: peer {self.peer}, transport {self.transport}, seed {self.seed}, "
            f"{self.duration:.0f} s, {sum(self.faults.values())} faults, final state {self.final_state}",
            "faults by kind: " + ", ".join(f"{k} {self.faults[k]}" for k in FAULT_KINDS if self.faults[k]),
            f"prompts resolved: {self.resolved} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(self.prompts.items()))
            + f"); wire requests {self.wire_requests}, answered {self.wire_answered}",
            f"recoveries: {self.recoveries}; outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.paths.items())),
            f"violations: {len(self.violations)}"
            + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(self.violation_counts().items())) + ")")
            * bool(self.violations),
        ]
        for note, count in sorted(self.notes.items()):
            lines.append(f"  note x{count}: {note}")
        for error, count in self.errors.most_common(5):
            lines.append(f"  prompt error x{count}: {error}")
        for violation in self.violations[:50]:
            lines.append(f"  [{violation.at:7.2f}s] {violation.kind}: {violation.detail}")
        if len(self.violations) > 50:
            lines.append(f"  ... {len(self.violations) - 50} more")
        lines.append("recovery latency (drop -> connected, less the policy's waits), ms:")
        lines.append(f"  {'kind':<16}{'n':>5}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}")
        everything = [x for values in self.latencies.values() for x in values]
        for kind in (*FAULT_KINDS, "all"):
            values = everything if kind == "all" else self.latencies.get(kind, [])
            if values:
                p50, p90, p99 = (percentile(values, q) for q in (50, 90, 99))
                lines.append(
                    f"  {kind:<16}{len(values):>5}{p50 * 1000:>9.1f}{p90 * 1000:>9.1f}"
                    f"{p99 * 1000:>9.1f}{max(values) * 1000:>9.1f}"
                )
        trend = self.resource_trend()
        if trend:
            lines.append(
                "resources (first third -> last third, medians): "
                + ", ".join(f"{name} {a:.1f} -> {b:.1f}" for name, (a, b) in trend.items())
            )
        return "\n".join(lines)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# -- the wire watcher -------------------------------------------------------------------------------


class _WatchedTransport:
    def __init__(self, inner: Transport, soak: _Soak, link: int) -> None:
        self._inner = inner
        self._soak = soak
        self._link = link

    @property
    def info(self) -> TransportInfo:
        return self._inner.info

    async def send(self, message: Any) -> None:
        members = [m for m in (message if isinstance(message, list) else [message]) if isinstance(m, dict)]
        for member in members:
            self._soak.on_wire_send(self._link, member)
        try:
            await self._inner.send(message)
        except TransportError as exc:
            if not exc.maybe_delivered:  # the transport says no byte of it left
                for member in members:
                    self._soak.on_wire_refused(member)
            raise

    async def receive(self) -> Any:
        message = await self._inner.receive()
        for member in message if isinstance(message, list) else [message]:
            if isinstance(member, dict):
                self._soak.on_wire_receive(self._link, member)
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WatchedConnector:
    def __init__(self, inner: Connector, soak: _Soak) -> None:
        self._inner = inner
        self._soak = soak
        self.links = 0

    @property
    def target(self) -> str:
        return self._inner.target

    async def connect(self) -> Transport:
        transport = await self._inner.connect()
        self.links += 1
        return _WatchedTransport(transport, self._soak, self.links)


# -- the soak -------------------------------------------------------------------------------------


class _Session:
    """What the app (the soak) knows of one session."""

    def __init__(self, index: int, session_id: str) -> None:
        self.index = index
        self.known_id = session_id
        self.finished: list[tuple[str, str]] = []  # (prompt text, "short" | "long")
        self.replayed_since_report = 0
        self.long_streaming = False
        self.abandoned = False
        #: Transcript faults already reported (each is reported once, when first seen).
        self.reported: set[tuple[str, str]] = set()


class _Soak:
    def __init__(self, peer: Any, transport: str, seed: int, workdir: Path) -> None:
        self.peer = peer
        self.transport = transport
        self.seed = seed
        self.workdir = workdir
        self.rng = random.Random(seed)
        self.report = SoakReport(peer.name, transport, seed)
        self.start = time.monotonic()
        self.sessions: list[_Session] = []
        self.handles: list[Any] = []
        self.by_id: dict[str, _Session] = {}
        self.stop = asyncio.Event()
        self.connected = asyncio.Event()
        self.recovering = asyncio.Event()
        self.state: ConnectionState | None = None
        self.round: collections.Counter[int] | None = None
        self.drop_at: float | None = None
        self.slept = 0.0
        self.fault_kind = "none"
        self.pending: dict[int, tuple[float, str]] = {}
        self.calls = 0
        self.sent: dict[tuple[int, Any], str] = {}
        self.answered: set[tuple[int, Any]] = set()
        #: Each prompt text sent on the wire: how many sends the transport took, and how many it
        #: refused saying no byte of the message left the client (``maybe_delivered`` false).
        self.prompt_sends: collections.Counter[str] = collections.Counter()
        self.prompt_refusals: collections.Counter[str] = collections.Counter()
        #: Prompts the app was told were not sent (``ConnectionLost``, ``may_have_executed=False``).
        self.not_sent: set[str] = set()
        self.proxy: FaultProxy | None = None
        self.client: AcpClient | None = None
        self.streaming = asyncio.Event()
        self.dropped = asyncio.Event()

    # -- bookkeeping -------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.start

    def violate(self, kind: str, detail: str) -> None:
        self.report.violations.append(Violation(self.now(), kind, detail))

    def on_wire_send(self, link: int, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            self.sent[(link, message["id"])] = method
            self.report.wire_requests += 1
        if method == "session/prompt":
            text = _text((message.get("params") or {}).get("prompt"))
            # Sent again: only right if every earlier send was refused before a byte of it left.
            if self.prompt_sends[text] > self.prompt_refusals[text]:
                self.violate("prompt_resent", f"{text!r} sent again (link {link})")
            self.prompt_sends[text] += 1

    def on_wire_refused(self, message: dict[str, Any]) -> None:
        if message.get("method") == "session/prompt":
            self.prompt_refusals[_text((message.get("params") or {}).get("prompt"))] += 1

    def check_receipts(self, received: collections.Counter[str]) -> None:
        """What the agent received, against what the client said: each prompt at most once, and none
        of those the client called "not sent" (refused by the transport, or ``may_have_executed``
        false for the app) more often than the sends the transport took."""
        for text, count in sorted(received.items()):
            if not PROMPT.fullmatch(text):
                continue
            if count > 1:
                self.violate("received_twice", f"the agent received {text!r} {count} times")
            delivered = self.prompt_sends[text] - self.prompt_refusals[text]
            if count > delivered and (self.prompt_refusals[text] or text in self.not_sent):
                said = "the app was told it was not sent" if text in self.not_sent else "its send was refused"
                self.violate(
                    "not_sent_received",
                    f"the agent received {text!r} ({count}x) but {said} "
                    f"({self.prompt_sends[text]} sends, {self.prompt_refusals[text]} refused as not sent)",
                )
            elif count and text in self.not_sent:  # a send the transport took, then "not sent" for the app
                self.violate("not_sent_received", f"the app was told {text!r} was not sent; the agent received it")

    def on_wire_receive(self, link: int, message: dict[str, Any]) -> None:
        if "method" in message or "id" not in message:
            return
        key = (link, message["id"])
        if key not in self.sent:
            self.violate("resolution", f"a response to id {message['id']!r} never sent on link {link}")
        elif key in self.answered:
            self.violate("resolution", f"{self.sent[key]} id {message['id']!r} answered twice on link {link}")
        else:
            self.answered.add(key)
            self.report.wire_answered += 1

    def on_state(self, state: ConnectionState) -> None:
        if self.state is not None and state == self.state:
            self.violate("repeated_state", f"{state} published twice in a row")
        previous, self.state = self.state, state
        now = time.monotonic()
        kind = state.state
        if kind in (State.RECONNECTING, State.SUSPENDED):
            self.connected.clear()
            self.dropped.set()
            self.recovering.clear()
            self.round = None  # a recovery cut off: what it reported stays reported
            if self.drop_at is None:
                self.drop_at, self.slept = now, 0.0
            self.slept += state.retry_in or 0.0
        elif kind is State.RECOVERING:
            self.round = collections.Counter()
            self.recovering.set()
        elif kind is State.CONNECTED:
            self.recovering.clear()
            if previous is not None and previous.state is State.RECOVERING:
                self._end_round()
            self.round = None
            if self.drop_at is not None:
                self.report.latencies[self.fault_kind].append(max(0.0, now - self.drop_at - self.slept))
                self.drop_at = None
            self.connected.set()
        else:
            self.connected.clear()

    def _end_round(self) -> None:
        self.report.recoveries += 1
        counts = self.round or collections.Counter()
        for session, handle in zip(self.sessions, self.handles, strict=True):
            if session.abandoned:
                continue
            if counts[session.index] != 1:
                self.violate(
                    "callback",
                    f"session {session.index} got {counts[session.index]} callbacks in a recovery (want 1)",
                )
            if handle.session_id != session.known_id:
                self.violate(
                    "callback",
                    f"session {session.index} is {handle.session_id} but the app learnt {session.known_id}",
                )

    def on_outcome(self, outcome: RecoveryOutcome) -> None:
        self.report.paths[outcome.path.value] += 1
        session = self.by_id.get(outcome.previous_session_id)
        if session is None or session.known_id != outcome.previous_session_id:
            self.violate("callback", f"{outcome.path.value} names {outcome.previous_session_id}, unknown to the app")
            return
        if self.round is None:
            self.violate("callback", f"{outcome.path.value} for session {session.index} outside a recovery")
        else:
            self.round[session.index] += 1
            if self.round[session.index] > 1:
                self.violate("callback", f"session {session.index}: a second callback ({outcome.path.value})")
        if session.replayed_since_report and outcome.path.value != "replay":
            self.violate(
                "callback",
                f"session {session.index}: {session.replayed_since_report} replayed updates reported as "
                f"{outcome.path.value}",
            )
        session.replayed_since_report = 0
        if outcome.path.value == "new_session" and outcome.session_id is not None:
            session.known_id = outcome.session_id
            self.by_id[outcome.session_id] = session
            session.finished.clear()
        elif outcome.path.value == "abandon":
            session.abandoned = True
        elif outcome.session_id != outcome.previous_session_id:
            self.violate("callback", f"{outcome.path.value} changed the id of session {session.index}")

    def on_update(self, event: UpdateEvent) -> None:
        session = self.by_id.get(event.session_id)
        if session is not None and session.long_streaming and not event.replay:
            self.streaming.set()
        if session is not None and event.replay:
            session.replayed_since_report += 1

    # -- transcripts ---------------------------------------------------------------------------

    def _transcript_fault(self, session: _Session, what: str, texts: list[str], detail: str) -> None:
        fresh = [text for text in texts if (what, text) not in session.reported]
        if fresh:
            session.reported.update((what, text) for text in fresh)
            self.violate("transcript", f"session {session.index}: {detail}")

    def check_transcript(self, session: _Session, handle: Any) -> None:
        transcript = handle.transcript
        if transcript.replaying or session.abandoned:
            return
        messages = transcript.messages
        users = [m.text for m in messages if m.role == "user"]
        # ACP v1 replays carry no message ids: two user prompts with no agent text between them (a
        # turn cut off before its first reply chunk, then the next prompt) come back as one user
        # run. The client knows the prompts it sent and splits the run: one message holding two
        # prompts is a fused turn.
        found = [PROMPT.findall(text) for text in users]
        counts = collections.Counter(prompt for prompts in found for prompt in prompts)
        for text, prompts in zip(users, found, strict=True):
            if len(prompts) > 1:
                self._transcript_fault(session, "fused", [text], f"prompts fused into one message: {prompts[:4]}")
        repeated = sorted(text for text, n in counts.items() if n > 1)
        if repeated:
            self._transcript_fault(session, "repeated", repeated, f"turns repeated: {repeated[:3]}")
        missing = [text for text, _ in session.finished if counts[text] == 0]
        if missing:
            self._transcript_fault(
                session,
                "missing",
                missing,
                f"{len(missing)} of {len(session.finished)} finished turns missing (first {missing[0]!r}, "
                f"last {missing[-1]!r})",
            )
        position: dict[str, int] = {}
        for index, message in enumerate(messages):
            if message.role == "user":
                for prompt in PROMPT.findall(message.text):
                    position.setdefault(prompt, index)
        order = [position[text] for text, _ in session.finished if text in position]
        if order != sorted(order):
            self._transcript_fault(session, "order", [str(order)], "finished turns out of order")
        for text, kind in session.finished:
            if kind != "short" or text not in position or messages[position[text]].text != text:
                continue
            index = position[text]
            reply = messages[index + 1] if index + 1 < len(messages) else None
            if reply is None or reply.role != "agent" or reply.text != f"echo: {text}":
                got = None if reply is None else f"{reply.role}: {reply.text[:40]!r}"
                self._transcript_fault(session, "reply", [text], f"the reply to {text!r} is {got}")
                break

    # -- workers -------------------------------------------------------------------------------

    async def worker(self, session: _Session, handle: Any) -> None:
        rng = random.Random(f"{self.seed}-worker-{session.index}")
        turn = 0
        while not self.stop.is_set() and not session.abandoned:
            turn += 1
            long = rng.random() < 0.3
            text = f"{'/slow' if long else 'short'} s{session.index}-{turn}"
            call = self.calls = self.calls + 1
            self.pending[call] = (time.monotonic(), text)
            canceller = None
            if long:
                canceller = asyncio.ensure_future(self._cancel_later(handle, rng.uniform(0.3, 1.2)))
            session.long_streaming = long
            try:
                await handle.prompt(text, timeout=HANG_AFTER)
            except ConnectionLost as exc:
                self.report.prompts["interrupted" if exc.may_have_executed else "not sent"] += 1
                if not exc.may_have_executed:
                    self.not_sent.add(text)
            except RecoveryFailed:
                self.report.prompts["abandoned"] += 1
                session.abandoned = True
            except RequestTimeout:
                self.report.prompts["timeout"] += 1
                self.violate("resolution", f"prompt {text!r} did not resolve within {HANG_AFTER:g}s")
            except AcpError as exc:
                self.report.prompts[f"error {type(exc).__name__}"] += 1
                self.report.errors[f"{type(exc).__name__}: {exc}"[:100]] += 1
                if "already running" in str(exc):  # a turn the agent still runs from a dropped link
                    with contextlib.suppress(AcpError):
                        await handle.cancel()
                await asyncio.sleep(0.1)
            else:
                self.report.prompts["finished"] += 1
                session.finished.append((text, "long" if long else "short"))
                self.check_transcript(session, handle)
            finally:
                session.long_streaming = False
                self.pending.pop(call, None)
                if canceller is not None:
                    canceller.cancel()
                    with contextlib.suppress(asyncio.CancelledError, AcpError):
                        await canceller
            await asyncio.sleep(rng.uniform(0.0, 0.03))

    async def _cancel_later(self, handle: Any, delay: float) -> None:
        await asyncio.sleep(delay)
        while handle.turn_running:
            if self.connected.is_set():
                with contextlib.suppress(AcpError):
                    await handle.cancel()
            await asyncio.sleep(1.0)

    async def watchdog(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for call, (since, text) in list(self.pending.items()):
                if now - since > HANG_AFTER + 5:
                    self.violate("resolution", f"prompt {text!r} pending for {now - since:.0f}s")
                    self.pending.pop(call, None)
            rss, tasks, fds = _rss(), len(asyncio.all_tasks()), _fds()
            self.report.samples.append((self.now(), rss, tasks, fds, self.peer.server_rss()))

    # -- faults --------------------------------------------------------------------------------

    async def wait_connected(self) -> bool:
        try:
            await asyncio.wait_for(self.connected.wait(), STUCK_AFTER)
        except asyncio.TimeoutError:
            self.violate("stuck", f"not connected {STUCK_AFTER:g}s after the last fault (state {self.state})")
            return False
        return True

    async def inject(self, kind: str, draw: dict[str, float]) -> None:
        proxy = self.proxy
        assert proxy is not None
        self.fault_kind = kind
        self.report.faults[kind] += 1
        self.dropped.clear()
        if kind == "cut":
            await proxy.cut()
        elif kind in ("blackhole_short", "blackhole_long"):
            await proxy.blackhole(True)
            try:
                await asyncio.sleep(draw["short"] if kind == "blackhole_short" else draw["long"])
                if kind == "blackhole_long":
                    await proxy.cut()
            finally:
                await proxy.blackhole(False)
        elif kind == "refuse":
            await proxy.refuse(draw["refuse"])
            await proxy.cut()
        elif kind == "restart":
            await self.peer.restart(proxy)
        elif kind == "evict":
            victim = self.sessions[int(draw["victim"] * len(self.sessions))]
            await self.peer.evict(proxy, victim.known_id)
        elif kind == "cut_streaming":
            self.streaming.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.streaming.wait(), 3.0)
            await asyncio.sleep(draw["short"] / 2)  # some way into the stream
            await proxy.cut()
        elif kind == "cut_recovery":
            await proxy.cut()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.recovering.wait(), 10.0)
                await asyncio.sleep(draw["tiny"])
                if self.recovering.is_set():
                    await proxy.cut()


def _draw(rng: random.Random, kinds: tuple[str, ...] = FAULT_KINDS) -> tuple[str, dict[str, float]]:
    """One fault: its kind and every parameter (drawn in a fixed order: repeatable by seed)."""
    weights = [weight for kind, weight in zip(FAULT_KINDS, _WEIGHTS, strict=True) if kind in kinds]
    kind = rng.choices([kind for kind in FAULT_KINDS if kind in kinds], weights=weights)[0]
    draw = {
        "short": rng.uniform(0.1, 0.6),
        "long": rng.uniform(1.5, 3.0),
        "refuse": rng.uniform(0.3, 1.5),
        "victim": rng.random(),
        "tiny": rng.uniform(0.0, 0.02),
        "gap": rng.uniform(0.1, 0.8),
    }
    return kind, draw


async def run_soak(
    peer: str,
    transport: str,
    *,
    seed: int,
    workdir: Path,
    faults: int | None = None,
    seconds: float | None = None,
    progress: Callable[[str], None] | None = None,
    kinds: tuple[str, ...] = FAULT_KINDS,
) -> SoakReport:
    """Run one soak until ``faults`` faults were injected or ``seconds`` have passed.

    Args:
        peer: ``"python_sdk"`` or ``"reference"``.
        transport: ``"ws"`` or ``"http"``.
        seed: Seeds the fault schedule and the workload.
        workdir: Where the subprocess peer keeps its store, certificate and log.
        faults: Stop after this many faults.
        seconds: Stop after this long (whichever comes first).
        progress: Called with a line now and then.
        kinds: The fault kinds to draw from (all by default).
    """
    if peer not in PEERS or transport not in TRANSPORTS:
        raise ValueError(f"unknown peer {peer!r} or transport {transport!r}")
    if not kinds or not set(kinds) <= set(FAULT_KINDS):
        raise ValueError(f"fault kinds must be among {FAULT_KINDS}")
    if faults is None and seconds is None:
        raise ValueError("give faults or seconds")
    server = _PythonSdkPeer(workdir) if peer == "python_sdk" else _ReferencePeer()
    await server.start()
    soak = _Soak(server, transport, seed, workdir)
    tasks: list[asyncio.Task[Any]] = []
    try:
        async with FaultProxy("127.0.0.1", server.port) as proxy:
            soak.proxy = proxy
            options: dict[str, Any] = {"ping_interval": 1.0, "ping_timeout": 1.0} if transport == "ws" else {}
            connector = _WatchedConnector(connector_for(proxy.url(server.url(transport)), **options), soak)
            client = AcpClient(
                connector,
                retry=POLICY,
                timeouts=Timeouts(request=30.0),
                rng=random.Random(seed),
                callbacks=Callbacks(
                    on_state_change=soak.on_state,
                    on_resume=soak.on_outcome,
                    on_replay=soak.on_outcome,
                    on_new_session=soak.on_outcome,
                    on_recovery_failed=soak.on_outcome,
                    on_update=soak.on_update,
                ),
            )
            soak.client = client
            async with client:
                for index in range(SESSIONS):
                    created = await client.new_session(CWD)
                    session = _Session(index, created.session_id)
                    soak.sessions.append(session)
                    soak.by_id[session.known_id] = session
                    soak.handles.append(client.session(created.session_id))
                tasks.append(asyncio.ensure_future(soak.watchdog()))
                tasks += [
                    asyncio.ensure_future(soak.worker(s, h)) for s, h in zip(soak.sessions, soak.handles, strict=True)
                ]
                deadline = None if seconds is None else time.monotonic() + seconds
                injected = 0
                while (faults is None or injected < faults) and (deadline is None or time.monotonic() < deadline):
                    if not await soak.wait_connected():
                        break
                    kind, draw = _draw(soak.rng, kinds)
                    await asyncio.sleep(draw["gap"])
                    await soak.inject(kind, draw)
                    injected += 1
                    if kind != "blackhole_short":  # let the client notice the drop before the next fault
                        with contextlib.suppress(asyncio.TimeoutError):
                            await asyncio.wait_for(soak.dropped.wait(), 5.0)
                    if progress is not None and injected % 25 == 0:
                        progress(
                            f"  {injected} faults, {soak.report.resolved} prompts, "
                            f"{len(soak.report.violations)} violations, {soak.now():.0f}s"
                        )
                await soak.wait_connected()
                soak.stop.set()
                workers = tasks[1:]
                done, still = await asyncio.wait(workers, timeout=HANG_AFTER + 10)
                for task in still:
                    task.cancel()
                    soak.violate("resolution", "a worker did not finish its last prompt")
                for task in done:
                    if task.exception() is not None:
                        soak.violate("resolution", f"a worker crashed: {task.exception()!r}")
                await asyncio.sleep(0.7)  # past the replay grace window of unordered transports
                for session, handle in zip(soak.sessions, soak.handles, strict=True):
                    soak.check_transcript(session, handle)
                soak.check_receipts(server.received())
                assert soak.state is not None
                soak.report.final_state = soak.state.state.value
                if soak.state.state is not State.CONNECTED:
                    soak.violate("stuck", f"the client ended {soak.state}")
                _judge_resources(soak)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.aclose()
        soak.report.duration = soak.now()
    return soak.report


def _judge_resources(soak: _Soak) -> None:
    report = soak.report
    if report.samples and report.samples[-1][0] < RESOURCE_MIN_SECONDS:
        return
    trend = report.resource_trend()
    limits = {"tasks": _MAX_TASK_GROWTH, "fds": _MAX_FD_GROWTH, "rss_mib": _MAX_RSS_GROWTH / 2**20}
    for name, limit in limits.items():
        if name in trend:
            start, end = trend[name]
            if end - start > limit:
                soak.violate("resources", f"{name} grew from {start:.1f} to {end:.1f}")
