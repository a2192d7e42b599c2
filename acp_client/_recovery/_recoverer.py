"""The recoverer: after a reconnect, bring every tracked session back over the new connection.

For each session it probes ``session/status`` (when the agent has it), asks the decision table
(:mod:`acp_client._recovery._decisions`; the app's ``decide_recovery`` may override it), runs the
steps and reports one :class:`~acp_client.state.RecoveryOutcome` per session to the app's
callbacks, awaited, before the supervisor releases the requests queued during the outage.

A drop during recovery propagates (the supervisor reconnects again); any other failure abandons
only that session. The outcomes of the sessions a cut-off recovery finished are reported at the
start of the next one, before anything else (their callbacks cannot run on the dead connection: a
callback's own request would wait for the recovery that waits for it), or just before the client
publishes that it failed or closed; so the app learns every change of a session's id, in order,
exactly once. A replay cut off by the drop flags its session (``Tracked.replay_cut_off``) to be
replayed again.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs

from .._codec import from_wire, to_wire
from .._rpc._connection import Connection
from .._sessions._table import SessionTable, Tracked
from .._util._delivery import call_app
from .._util._logging import get_logger
from ..clock import Clock
from ..config import Callbacks, Timeouts
from ..exceptions import ConnectionLost, InvalidMessage, RequestTimeout, RpcError, SessionNotFound, TransportError
from ..state import Continuity, RecoveryContext, RecoveryOutcome
from ..types import (
    InitializeResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    ReplayFromStart,
    ResumeSessionRequest,
    ResumeSessionResponse,
    Session,
    SessionStatusRequest,
    SessionStatusResponse,
    SetSessionModeRequest,
)
from . import _continuity
from . import _decisions as _recovery
from ._decisions import Probe, RecoveryPath, Step, StepFailure
from ._grace import after
from ._not_found import quote, says_retry_later, says_session_not_found
from ._restore import restore

__all__ = [
    "REPLAY_GRACE",
    "Answer",
    "Recoverer",
    "Screen",
    "attach",
    "capabilities",
    "each",
    "open_attach_window",
    "replay_ended",
]

logger = get_logger("acp_client.client")

T = TypeVar("T")
R = TypeVar("R")

#: A window left open after its answer closes once the session was quiet this long (on the
#: client's clock), and at the latest this long after the answer while updates keep coming.
REPLAY_GRACE = 0.5
REPLAY_MAX_LINGER = 10.0

#: How often a step the agent refused "for now" (:func:`~acp_client._recovery._not_found.says_retry_later`)
#: is tried again, and the pause before the first retry (it grows by as much each time).
RETRY_LATER_ATTEMPTS = 4
RETRY_LATER_DELAY = 0.25

#: How many recovery outcomes the client keeps (the most recent ones).
MAX_OUTCOMES = 1000


@attrs.frozen
class Answer:
    """What one instance said about one session: with how it came (an error quoted, for the
    outcome's notes) and the other instances that also claimed it ``active`` (nothing was closed)."""

    probe: Probe
    raw_status: str | None = None
    state: Any = None
    note: str | None = None
    also_active: tuple[str, ...] = ()


#: Whether a recovery round leaves a session to another routine (see :meth:`Recoverer.recover`).
Screen = Callable[[Tracked, Answer | None], Awaitable[bool]]


_OUTCOME_CALLBACK = {
    RecoveryPath.RESUME: "on_resume",
    RecoveryPath.REPLAY: "on_replay",
    RecoveryPath.NEW_SESSION: "on_new_session",
    RecoveryPath.ABANDON: "on_recovery_failed",
}


def open_attach_window(
    table: SessionTable, tracked: Tracked, *, replay: bool, ordered: bool, clock: Clock
) -> Callable[[], None]:
    """Open the window in which updates for ``tracked`` are replay (``replay``) or a resume
    snapshot; returns the function that closes it when the answer arrives (idempotent).

    The window stays open after the answer (it *lingers*) when the replay may still be on its way:
    on a transport whose messages do not share one ordered stream (Streamable HTTP's several SSE
    streams: the answer can overtake the replayed updates), until the session has been quiet for
    :data:`REPLAY_GRACE` seconds or the next prompt goes out; on an ordered one, for a replay of a
    session that had turns when nothing was replayed before the answer (some servers send the
    history only with the session's next message), until :func:`replay_ended` fences it.
    """
    table.open_window(tracked, replay=replay)
    expect_history = tracked.transcript.turns > 0

    def answered() -> None:
        if tracked.window_timer is not None or tracked.window_late or not tracked.window_open:
            return
        if not ordered:
            _linger(table, tracked, clock)
        elif replay and expect_history and tracked.replayed == 0:
            tracked.window_late = True  # replay_ended fences it
        else:
            table.close_window(tracked)

    return answered


def _linger(table: SessionTable, tracked: Tracked, clock: Clock) -> None:
    """Keep ``tracked``'s window open until its updates stop (see :func:`open_attach_window`).

    A late window that nothing could fence and that stays quiet stays open, for an agent that
    echoes prompts back, until the next turn's own first update (``Tracked.window_until_turn``);
    whoever waits for it goes on. Without echoes nothing would mark that turn's start: it closes.
    """
    until = clock.monotonic() + REPLAY_MAX_LINGER
    seen = tracked.window_heard

    def check() -> None:
        nonlocal seen
        tracked.window_timer = None
        if not tracked.window_open:
            return
        if tracked.window_heard != seen and clock.monotonic() < until:
            seen = tracked.window_heard
            tracked.window_timer = after(clock, REPLAY_GRACE, check)
            return
        late = tracked.window_late and tracked.window_heard == 0 and tracked.replaying
        if late and tracked.transcript.echoes_prompts:
            tracked.window_until_turn = True
            table.release_waiters(tracked)
            return
        table.close_window(tracked)

    tracked.window_timer = after(clock, REPLAY_GRACE, check)


async def replay_ended(
    table: SessionTable,
    tracked: Tracked,
    request: Callable[[str, Any], Awaitable[Any]],
    *,
    version: int,
    clock: Clock,
) -> None:
    """After a load / resume answer: wait until its replay (if one may still come) has ended.

    A replay window left open on an ordered transport (:func:`open_attach_window`) is fenced: some
    servers (Qwen Code's daemon over WebSocket) send a ``session/load`` replay only with the
    session's next message, whatever it is; without a fence it would arrive inside the next turn.
    The fence is the one session-scoped v1 request that changes nothing: ``session/set_mode`` to the
    current mode. Once it is answered, every replayed update sent before it has arrived (the
    transport is ordered). Without a current mode (or when the agent refuses it), the window closes
    after the quiet interval instead.
    """
    if not tracked.replaying:
        return
    late = tracked.window_late and tracked.window_open
    modes = tracked.record.modes
    mode = modes.current_mode_id if modes is not None else None
    if late and version < 2 and mode:
        params = to_wire(SetSessionModeRequest(session_id=tracked.session_id, mode_id=mode), protocol_version=version)
        try:
            await request("session/set_mode", params)
        except (RpcError, RequestTimeout, InvalidMessage) as exc:
            logger.info("replay fence for %s refused (%s): waiting for a quiet interval", tracked.session_id, exc)
        else:
            table.close_window(tracked)
    if late and tracked.window_open and tracked.window_timer is None:
        _linger(table, tracked, clock)
    await window_closed(tracked)


async def window_closed(tracked: Tracked) -> None:
    """Wait until ``tracked``'s lingering window (if any) has closed: the replay has ended."""
    lingering = tracked.window_timer is not None or tracked.window_late
    if not lingering or tracked.window_until_turn or not tracked.window_open:
        return
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def closed() -> None:
        if not done.done():
            done.set_result(None)

    tracked.window_waiters.append(closed)
    await done


async def attach(
    table: SessionTable,
    tracked: Tracked,
    method: str,
    send: Callable[[Callable[[], None]], Awaitable[Any]],
    fence: Callable[[str, Any], Awaitable[Any]],
    *,
    replay: bool,
    ordered: bool,
    version: int,
    clock: Clock,
) -> None:
    """Attach ``tracked`` by ``session/load`` / ``session/resume`` (``send`` it, given the function to
    call on its answer) in an attach window, record the answer and wait until its replay has ended.

    A failure before the answer propagates: a drop cuts the window off; a refusal closes it, putting
    back the history the transcript held before any replay began.
    """
    answered = open_attach_window(table, tracked, replay=replay, ordered=ordered, clock=clock)
    try:
        result = await send(answered)
    except BaseException as exc:
        if isinstance(exc, ConnectionLost | TransportError):
            table.cut_off(tracked)
        elif tracked.window_open and tracked.window_timer is None:
            table.close_window(tracked, complete=False)
        raise
    answered()
    sid, cwd = tracked.session_id, tracked.cwd
    if method == "session/load":
        fresh = Session.from_load(sid, from_wire(LoadSessionResponse, result, protocol_version=version), cwd=cwd)
    else:
        fresh = Session.from_resume(sid, from_wire(ResumeSessionResponse, result, protocol_version=version), cwd=cwd)
    tracked.record = tracked.record.merge(fresh)
    await replay_ended(table, tracked, fence, version=version, clock=clock)


class Recoverer:
    """Runs recovery for the sessions in ``table`` (one instance per client).

    ``callbacks`` returns the app's callbacks; ``timeouts.probe`` bounds each ``session/status``,
    ``timeouts.request`` each step; ``concurrency`` sessions recover at once; ``version`` returns
    the negotiated protocol version.
    """

    def __init__(
        self,
        table: SessionTable,
        *,
        callbacks: Callable[[], Callbacks],
        timeouts: Timeouts,
        concurrency: int,
        clock: Clock,
        version: Callable[[], int],
    ) -> None:
        self._table = table
        self._callbacks = callbacks
        self._timeouts = timeouts
        self._concurrency = concurrency
        self._clock = clock
        self._version = version
        self.outcomes: collections.deque[RecoveryOutcome] = collections.deque(maxlen=MAX_OUTCOMES)
        self._unreported: collections.deque[RecoveryOutcome] = collections.deque()  # of a cut-off recovery
        #: Asked before a session is recovered (a shared store: is its lease live?); ``False`` leaves it out.
        self.gate: Callable[[Tracked], Awaitable[bool]] | None = None

    async def recover(
        self,
        conn: Connection,
        init: InitializeResponse,
        *,
        sessions: Sequence[Tracked] | None = None,
        endpoint: str | None = None,
        screen: Screen | None = None,
    ) -> list[RecoveryOutcome]:
        """Recover ``sessions`` (default: every live tracked one) over ``conn`` and report the
        outcomes (returned too), with those of an earlier round a drop cut off.

        ``endpoint`` names the instance (of an endpoint group) in the contexts and outcomes;
        ``screen`` returning ``True`` leaves a session to another routine: asked when a worker
        reaches it (``None``), then with the probe's answer (an endpoint group moves those its
        instance does not have in memory).

        Raises:
            ConnectionLost / TransportError: The new connection dropped too.
        """
        sessions = self._table.live() if sessions is None else sessions
        if not sessions:
            return await self._report_unreported()
        caps = capabilities(init, self._version())

        async def one(tracked: Tracked) -> RecoveryOutcome | None:
            if self.gate is not None and not await self.gate(tracked):
                return None
            if screen is None:  # recover_session probes (the outcome's duration counts it)
                return await self.recover_session(conn, tracked, caps, endpoint=endpoint)
            if await screen(tracked, None):
                return None
            answer = await self._probe(conn, tracked, caps)
            if await screen(tracked, answer):
                return None
            return await self.recover_session(conn, tracked, caps, answer=answer, endpoint=endpoint)

        results = await each(sessions, self._concurrency, one)
        # What finished is folded into what an earlier, cut-off recovery finished: one report per
        # session, and the app still learns every change of id (two changes stay two reports).
        positions = self._positions()
        for outcome in (result for result in results if isinstance(result, RecoveryOutcome)):
            self._fold(outcome, positions)
        for result in results:
            if isinstance(result, ConnectionLost | TransportError | asyncio.CancelledError):
                raise result  # reported by the next recovery (or before the client ends)
            if isinstance(result, BaseException):
                logger.error("recovering a session raised", exc_info=result)
        return await self._report_unreported()

    def _positions(self) -> dict[str, list[int]]:
        """Where each session id stands in the unreported outcomes (so folding N outcomes costs N)."""
        positions: dict[str, list[int]] = {}
        for index, earlier in enumerate(self._unreported):
            if earlier.session_id is not None:
                positions.setdefault(earlier.session_id, []).append(index)
        return positions

    def _fold(self, outcome: RecoveryOutcome, positions: dict[str, list[int]]) -> None:
        previous = outcome.previous_session_id
        for index in positions.get(previous, ()) if previous is not None else ():
            merged = merge_outcomes(self._unreported[index], outcome)
            if merged is not None:
                self._unreported[index] = merged
                if merged.session_id != previous:
                    positions[previous].remove(index)
                    if merged.session_id is not None:
                        bisect.insort(positions.setdefault(merged.session_id, []), index)
                return
        if outcome.session_id is not None:
            positions.setdefault(outcome.session_id, []).append(len(self._unreported))
        self._unreported.append(outcome)

    async def _report_unreported(self) -> list[RecoveryOutcome]:
        reported: list[RecoveryOutcome] = []
        while self._unreported:
            reported.append(self._unreported.popleft())
            await self.report(reported[-1])
        return reported

    def flush_unreported(self, deliver: Callable[..., None]) -> None:
        """The client failed before another recovery could report what a cut-off one finished:
        hand those outcomes to ``deliver(callback, outcome, what=name)`` (not awaited)."""
        while self._unreported:
            outcome = self._unreported.popleft()
            self.outcomes.append(outcome)
            name = _OUTCOME_CALLBACK[outcome.path]
            deliver(getattr(self._callbacks(), name), outcome, what=name)

    async def report(self, outcome: RecoveryOutcome) -> None:
        """Keep ``outcome`` and tell the app (its callback awaited)."""
        self.outcomes.append(outcome)
        logger.info(
            "session %s recovered by %s%s in %.3fs",
            outcome.previous_session_id,
            outcome.path.value,
            f" as {outcome.session_id}" if outcome.session_id != outcome.previous_session_id else "",
            outcome.duration,
        )
        name = _OUTCOME_CALLBACK[outcome.path]
        await call_app(getattr(self._callbacks(), name), outcome, what=name)

    async def _probe(self, conn: Connection, tracked: Tracked, caps: _recovery.Capabilities) -> Answer:
        """``session/status`` for one session over ``conn``, when offered (its record merged with the answer)."""
        if not _recovery.should_probe(caps):
            return Answer(Probe.NOT_PROBED)
        previous, version = tracked.session_id, self._version()
        try:
            request = to_wire(SessionStatusRequest(session_id=previous), protocol_version=version)
            result = await conn.request("session/status", request, timeout=self._timeouts.probe)
            status = from_wire(SessionStatusResponse, result, protocol_version=version)
        except (RpcError, RequestTimeout, InvalidMessage) as exc:
            if isinstance(exc, SessionNotFound) or says_session_not_found(exc, previous):
                return Answer(Probe.UNKNOWN, note=f"session/status: not found ({quote(exc)})")
            logger.info("status probe for %s failed (%s): falling back", previous, exc)
            return Answer(Probe.UNREACHABLE)
        tracked.record = tracked.record.merge(Session.from_status(previous, status))
        return Answer(status.status, status.raw_status, status.state)

    async def recover_session(
        self,
        conn: Connection,
        tracked: Tracked,
        caps: _recovery.Capabilities,
        *,
        answer: Answer | None = None,
        endpoint: str | None = None,
        reason: str | None = None,
    ) -> RecoveryOutcome:
        """Probe, decide and run the steps for one session; never raises for a refused step.

        ``answer``: the instance's answer when the caller has it already (not asked again);
        ``reason``: why this recovery runs outside a reconnect (first in the outcome's notes).
        """
        start = self._clock.monotonic()
        previous, version = tracked.session_id, self._version()
        held_turns = tracked.transcript.turns
        if answer is None:
            answer = await self._probe(conn, tracked, caps)
        probe, raw_status, state = answer.probe, answer.raw_status, answer.state
        decision = _recovery.decide(probe, caps, version, replay_cut_off=tracked.replay_cut_off)
        planned, steps = decision.path, decision.steps
        notes = (*(note for note in (reason, answer.note) if note is not None), *decision.notes)
        decide = self._callbacks().decide_recovery
        if decide is not None:
            context = RecoveryContext(
                session_id=previous,
                probe=probe,
                raw_status=raw_status,
                state=state,
                proposed=planned,
                protocol_version=version,
                capabilities={"status": caps.status, "resume": caps.resume, "load": caps.load},
                endpoint=endpoint,
                also_active=answer.also_active,
            )
            chosen = await call_app(decide, context, what="decide_recovery")
            if chosen is not None and RecoveryPath(chosen) is not planned:
                planned = RecoveryPath(chosen)
                steps, extra = _recovery.steps_for(planned, caps, version)
                notes = (*notes, f"app chose {planned.value}", *extra)
        history: list[tuple[str, str]] = []
        error: BaseException | None = None
        index: int | None = 0 if steps else None
        retried = 0
        common: dict[str, Any] = {"planned": planned, "previous_session_id": previous, "probe": probe}
        common.update(endpoint=endpoint, raw_status=raw_status, state=state)
        while index is not None:
            step = steps[index]
            try:
                extra = await self._run_step(conn, tracked, step)
            except (RpcError, RequestTimeout, InvalidMessage) as exc:  # a timeout is a refusal too
                if isinstance(exc, RpcError) and says_retry_later(exc) and retried < RETRY_LATER_ATTEMPTS:
                    # Busy, not gone (the agent is still closing the session the drop left behind).
                    retried += 1
                    delay = RETRY_LATER_DELAY * retried
                    history.append((step.value, f"retry later: {exc}"))
                    notes = (*notes, f"{step.value} refused for now ({quote(exc)}): again in {delay:g}s")
                    await self._clock.sleep(delay)
                    continue
                error = exc
                gone = isinstance(exc, SessionNotFound) or says_session_not_found(exc, tracked.session_id)
                failure = StepFailure.NOT_FOUND if gone else StepFailure.REFUSED
                history.append((step.value, "not_found" if gone else f"error: {exc}"))
            else:
                history.append((step.value, "ok"))
                path = _recovery.path_of(step, version)
                if step is Step.RESUME and tracked.resume_replayed:
                    path = RecoveryPath.REPLAY  # the replay reached the app: report it as one
                continuity, judged = await self._judge(conn, tracked, path, probe, previous)
                # Counted once the replay has ended (_judge waits for a late one).
                replayed = tracked.replayed if path is RecoveryPath.REPLAY else 0
                extra = (*extra, *judged)
                lost = held_turns if path is RecoveryPath.NEW_SESSION and tracked.session_id != previous else 0
                if lost:
                    extra = (*extra, f"the agent lost the session: {lost} turn(s) kept as earlier history")
                if path is not RecoveryPath.RESUME or tracked.settings.pending:
                    restored, tracked.record = await restore(
                        conn, tracked.settings, tracked.record, version=version, timeout=self._timeouts.request
                    )
                    extra += restored
                tracked.recovered = True
                return RecoveryOutcome(
                    path=path,
                    session_id=tracked.session_id,
                    continuity=continuity,
                    steps=tuple(history),
                    replayed_updates=replayed,
                    duration=self._clock.monotonic() - start,
                    lost_turns=lost,
                    notes=(*notes, *extra),
                    **common,
                )
            index = _recovery.next_step(steps, index, failure)
            following = steps[index] if index is not None else None
            detail = quote(error) if error is not None else ""
            notes = (*notes, _recovery.hop_note(step, failure, detail, following))
        self._table.abandon(tracked, previous, error)
        return RecoveryOutcome(
            path=RecoveryPath.ABANDON,
            session_id=None,
            continuity=Continuity.LOST,
            steps=tuple(history),
            duration=self._clock.monotonic() - start,
            error=error,
            notes=notes,
            **common,
        )

    async def _judge(
        self, conn: Connection, tracked: Tracked, path: RecoveryPath, probe: Probe, previous: str
    ) -> tuple[Continuity, tuple[str, ...]]:
        """What the evidence lets a recovery that succeeded by ``path`` claim (the table in
        :mod:`acp_client._recovery._continuity`), with the notes that explain it; ``tracked`` is then
        held by ``conn``'s agent process."""
        notes: tuple[str, ...] = ()
        verdict: _continuity.Verdict = (Continuity.LOST, None)
        if path is RecoveryPath.REPLAY:
            await window_closed(tracked)  # the replay may still be arriving after the answer
            report = tracked.transcript.last_replay
            if tracked.window_until_turn:
                verdict = (
                    Continuity.UNVERIFIED,
                    f"continuity unverified: nothing replayed within {REPLAY_GRACE:g}s of the answer; "
                    "a replay that comes with the next message is placed as history",
                )
            elif report is None:
                verdict = _continuity.of_replay(checked=False, gap=None)
            else:
                notes = report.notes
                verdict = _continuity.of_replay(checked=self._table.keep_transcripts, gap=report.lacks_history())
        elif path is RecoveryPath.RESUME:
            verdict = _continuity.of_resume(probe, held_by=tracked.agent_process, now=conn.transport.info.agent_process)
        elif tracked.session_id == previous:  # session/new gave the same id back: the agent's own copy, maybe
            verdict = (Continuity.UNVERIFIED, None)
        tracked.held_by(conn.transport.info)
        continuity, why = verdict
        return continuity, notes if why is None else (*notes, why)

    async def _run_step(self, conn: Connection, tracked: Tracked, step: Step) -> tuple[str, ...]:
        """Run one step; returns notes for the outcome.

        Raises:
            RpcError / RequestTimeout / InvalidMessage: The agent refused the step.
            ConnectionLost / TransportError: The connection dropped.
        """
        sid, cwd, servers, version = tracked.session_id, tracked.cwd, tracked.mcp_servers, self._version()
        timeout = self._timeouts.request
        if step is Step.NEW:
            request = NewSessionRequest(
                cwd=cwd, mcp_servers=servers, additional_directories=tracked.additional_directories
            )
            result = await conn.request("session/new", to_wire(request, protocol_version=version), timeout=timeout)
            record = Session.from_new(from_wire(NewSessionResponse, result, protocol_version=version), cwd=cwd)
            if record.session_id == sid:
                # The agent kept the session under its id (e.g. its history on disk): continuity is
                # unverified, and nothing is wiped either; the next replay or resume decides.
                tracked.record = tracked.record.merge(record)
                return ("session/new returned the same session id: transcript kept, continuity unverified",)
            self._table.renamed(tracked, record)
            return ()
        wire: Any
        if step is Step.LOAD:
            method, wire = "session/load", LoadSessionRequest(session_id=sid, cwd=cwd, mcp_servers=servers)
        else:
            replay_from = ReplayFromStart() if step is Step.RESUME_REPLAY else None
            method = "session/resume"
            wire = ResumeSessionRequest(session_id=sid, cwd=cwd, mcp_servers=servers, replay_from=replay_from)
        replay, ordered = step in (Step.LOAD, Step.RESUME_REPLAY), conn.transport.info.ordered

        def send(answered: Callable[[], None]) -> Awaitable[Any]:
            return conn.request(method, to_wire(wire, protocol_version=version), timeout=timeout, on_answer=answered)

        fence = functools.partial(conn.request, timeout=timeout)
        await attach(
            self._table,
            tracked,
            method,
            send,
            fence,
            replay=replay,
            ordered=ordered,
            version=version,
            clock=self._clock,
        )
        return ("the agent replayed history during session/resume",) if tracked.resume_replayed else ()


async def each(items: Sequence[T], concurrency: int, work: Callable[[T], Awaitable[R]]) -> list[R | BaseException]:
    """``work`` on every item, by ``concurrency`` workers taking them in order (not a task per item
    waiting on a semaphore: 10,000 sessions would be 10,000 tasks and waiters for one bound).
    Returns each item's result, or what it raised; a cancellation of the caller still propagates."""
    results: list[R | BaseException] = [asyncio.CancelledError()] * len(items)  # until reached
    queue = iter(enumerate(items))

    async def worker() -> None:
        for index, item in queue:
            try:
                results[index] = await work(item)
            except asyncio.CancelledError as exc:  # this worker stops; the others take the rest
                results[index] = exc
                raise
            except BaseException as exc:  # kept as a result, as one item's failure
                results[index] = exc

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(items)))), return_exceptions=True)
    return results


_STRENGTH = {RecoveryPath.RESUME: 0, RecoveryPath.REPLAY: 1, RecoveryPath.NEW_SESSION: 2, RecoveryPath.ABANDON: 3}


def _renames(outcome: RecoveryOutcome) -> bool:
    return outcome.session_id is not None and outcome.session_id != outcome.previous_session_id


def merge_outcomes(earlier: RecoveryOutcome, later: RecoveryOutcome) -> RecoveryOutcome | None:
    """One report for two recoveries of a session when a drop cut the first one off before it was
    reported, from the first id to the last: the stronger path (a replay that reached the app stays
    a replay), the weaker continuity. ``None`` when both renamed the session (the app must learn
    both ids, in order)."""
    if _renames(earlier) and _renames(later):
        return None
    return attrs.evolve(
        later,
        path=max(earlier.path, later.path, key=_STRENGTH.__getitem__),
        planned=earlier.planned,
        previous_session_id=earlier.previous_session_id,
        continuity=earlier.continuity.weaker(later.continuity),
        steps=earlier.steps + later.steps,
        notes=(*earlier.notes, "a drop cut that recovery off before it was reported; then:", *later.notes),
        replayed_updates=earlier.replayed_updates + later.replayed_updates,
        lost_turns=earlier.lost_turns + later.lost_turns,
        duration=earlier.duration + later.duration,
    )


def capabilities(init: InitializeResponse, version: int) -> _recovery.Capabilities:
    """The recovery-relevant part of what the agent advertised in ``init``."""
    caps = init.agent_capabilities
    return _recovery.Capabilities(
        status=caps.supports("session/status"),
        resume=caps.supports("session/resume"),
        load=version < 2 and caps.supports("session/load"),
    )
