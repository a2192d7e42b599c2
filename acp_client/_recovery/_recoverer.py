"""The recoverer: after a reconnect, bring every tracked session back over the new connection.

For each session it probes ``session/status`` (when the agent has it), asks the decision table
(:mod:`acp_client._recovery._decisions`; the app's ``decide_recovery`` may override it), runs the
steps and reports one :class:`~acp_client.state.RecoveryOutcome` per session to the app's
callbacks, awaited, before the supervisor releases the requests queued during the outage.

A drop during recovery propagates (the supervisor reconnects again); any other failure abandons
only that session. What a cut-off recovery finished is reported at the start of the next one (a
callback's own request would wait for the recovery that waits for it), or just before the client
says it failed or closed: the app learns every change of a session's id, in order, exactly once.
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
from ..state import Continuity, Probe, RecoveryContext, RecoveryOutcome, RecoveryPath
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
from ._decisions import Step, StepFailure
from ._grace import after
from ._not_found import quote, says_retry_later, says_session_not_found
from ._restore import restore

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
    """What one instance said about one session, a note for the outcome (an error quoted), and the
    other instances that also claimed it ``active``."""

    probe: Probe
    raw_status: str | None = None
    state: Any = None
    note: str | None = None
    also_active: tuple[str, ...] = ()


#: Whether a recovery round leaves a session to another routine (see :meth:`Recoverer.recover`).
Screen = Callable[[Tracked, Answer | None], Awaitable[bool]]
#: Sends one request on the session's link and returns its answer (the replay fence's way out).
Request = Callable[[str, Any], Awaitable[Any]]


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
    snapshot; returns the (idempotent) function to call when the answer arrives.

    The window *lingers* after the answer while the replay may still be on its way: on an unordered
    transport (Streamable HTTP's SSE streams: the answer can overtake the replay) until the session
    is quiet for :data:`REPLAY_GRACE` seconds or the next prompt goes out; on an ordered one, when a
    session with turns had nothing replayed before the answer (some servers send the history only
    with the session's next message), until :func:`replay_ended` fences it.
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
    """Keep ``tracked``'s window open until its updates stop. A late window nothing could fence
    that stays quiet stays open until the next turn's own first update (``window_until_turn``)
    when the agent echoes prompts (nothing else marks that turn's start); waiters go on."""
    until = clock.monotonic() + REPLAY_MAX_LINGER
    seen = tracked.window_heard

    def check() -> None:  # the window is open: closing it cancels this timer
        nonlocal seen
        tracked.window_timer = None
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


async def replay_ended(table: SessionTable, tracked: Tracked, request: Request, *, version: int, clock: Clock) -> None:
    """After a load / resume answer: wait until its replay (if one may still come) has ended.

    A late window on an ordered transport is fenced: some servers (Qwen Code's daemon over
    WebSocket) send a ``session/load`` replay only with the session's next message, whatever it is.
    The fence is the one session-scoped v1 request that changes nothing, ``session/set_mode`` to the
    current mode: once answered, the replay sent before it has arrived. Without a current mode (or
    when refused), the window closes after the quiet interval instead.
    """
    if not tracked.replaying:
        return
    modes = tracked.record.modes
    mode = modes.current_mode_id if modes is not None else None
    if tracked.window_late and version < 2 and mode:
        params = to_wire(SetSessionModeRequest(session_id=tracked.session_id, mode_id=mode), protocol_version=version)
        try:
            await request("session/set_mode", params)
        except (RpcError, RequestTimeout, InvalidMessage) as exc:
            logger.info("replay fence for %s refused (%s): waiting for a quiet interval", tracked.session_id, exc)
        else:
            table.close_window(tracked)
    if tracked.window_late and tracked.window_timer is None:
        _linger(table, tracked, clock)
    if tracked.window_timer is None or tracked.window_until_turn:  # closed, or open only until the next turn
        return
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def closed() -> None:
        if not done.done():  # the waiter may have been cancelled
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

    When the request fails (the error propagates), a drop cuts the window off; a refusal closes it,
    putting back the history the transcript held before any replay began.
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
    """Runs recovery for the sessions in ``table`` (one instance per client); ``timeouts.probe``
    bounds each ``session/status``, ``timeouts.request`` each step."""

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
        """Recover ``sessions`` (default: every live one) over ``conn`` and report the outcomes
        (returned too), after those of an earlier round a drop cut off. ``endpoint`` names the
        instance; ``screen`` returning ``True`` leaves a session to another routine (an endpoint
        group moves those its instance does not hold): asked first, then with the probe's answer.

        Raises:
            ConnectionLost / TransportError: The new connection dropped too.
        """
        sessions = self._table.live() if sessions is None else sessions
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
        # Folded into what a cut-off recovery finished: one report per session, but two changes of id stay two.
        # ``positions``: where each id stands among the unreported outcomes (so folding N outcomes costs N).
        positions: dict[str, list[int]] = {}
        for index, earlier in enumerate(self._unreported):
            if earlier.session_id is not None:
                positions.setdefault(earlier.session_id, []).append(index)
        for outcome in (result for result in results if isinstance(result, RecoveryOutcome)):
            self._fold(outcome, positions)
        for result in results:
            if isinstance(result, ConnectionLost | TransportError | asyncio.CancelledError):
                raise result  # reported by the next recovery (or before the client ends)
            if isinstance(result, BaseException):
                logger.error("recovering a session raised", exc_info=result)
        return await self._report_unreported()

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
        if not caps.status:
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
        """Probe (unless the caller has the ``answer``), decide and run the steps for one session;
        never raises for a refused step. ``reason``: why it runs outside a reconnect (noted first)."""
        start = self._clock.monotonic()
        previous, version = tracked.session_id, self._version()
        held_turns = tracked.transcript.turns
        if answer is None:
            answer = await self._probe(conn, tracked, caps)
        probe, raw_status, state = answer.probe, answer.raw_status, answer.state
        decision = _recovery.decide(probe, caps, version, replay_cut_off=tracked.replay_cut_off)
        planned, steps = decision.path, decision.steps
        notes = [note for note in (reason, answer.note) if note is not None]
        notes += decision.notes
        decide = self._callbacks().decide_recovery
        if decide is not None:
            context = RecoveryContext(
                session_id=previous,
                probe=probe,
                raw_status=raw_status,
                state=state,
                proposed=planned,
                protocol_version=version,
                capabilities=attrs.asdict(caps),
                endpoint=endpoint,
                also_active=answer.also_active,
            )
            chosen = await call_app(decide, context, what="decide_recovery")
            if chosen is not None and RecoveryPath(chosen) is not planned:
                planned = RecoveryPath(chosen)
                steps, degraded = _recovery.steps_for(planned, caps, version)
                notes += (f"app chose {planned.value}", *degraded)
        history: list[tuple[str, str]] = []

        def outcome(path: RecoveryPath, continuity: Continuity, **fields: Any) -> RecoveryOutcome:
            return RecoveryOutcome(
                path=path,
                planned=planned,
                previous_session_id=previous,
                continuity=continuity,
                probe=probe,
                raw_status=raw_status,
                state=state,
                steps=tuple(history),
                notes=tuple(notes),
                duration=self._clock.monotonic() - start,
                endpoint=endpoint,
                **fields,
            )

        error: BaseException | None = None
        index: int | None = 0 if steps else None
        retried = 0
        while index is not None:
            step = steps[index]
            try:
                notes += await self._run_step(conn, tracked, step)
            except (RpcError, RequestTimeout, InvalidMessage) as exc:  # a timeout is a refusal too
                if isinstance(exc, RpcError) and says_retry_later(exc) and retried < RETRY_LATER_ATTEMPTS:
                    # Busy, not gone (the agent is still closing the session the drop left behind).
                    retried += 1
                    delay = RETRY_LATER_DELAY * retried
                    history.append((step.value, f"retry later: {exc}"))
                    notes.append(f"{step.value} refused for now ({quote(exc)}): again in {delay:g}s")
                    await self._clock.sleep(delay)
                    continue
                error = exc
                gone = isinstance(exc, SessionNotFound) or says_session_not_found(exc, tracked.session_id)
                failure = StepFailure.NOT_FOUND if gone else StepFailure.REFUSED
                history.append((step.value, "not_found" if gone else f"error: {exc}"))
                index = _recovery.next_step(steps, index, failure)
                notes.append(_recovery.hop_note(step, failure, quote(exc), None if index is None else steps[index]))
                continue
            history.append((step.value, "ok"))
            path = _recovery.path_of(step)
            if step is Step.RESUME and tracked.resume_replayed:
                path = RecoveryPath.REPLAY  # the replay reached the app: report it as one
            continuity = self._judge(conn, tracked, path, probe, previous, notes=notes)
            lost = held_turns if path is RecoveryPath.NEW_SESSION and tracked.session_id != previous else 0
            if lost:
                notes.append(f"the agent lost the session: {lost} turn(s) kept as earlier history")
            if path is not RecoveryPath.RESUME or tracked.settings.pending:
                restored, tracked.record = await restore(
                    conn, tracked.settings, tracked.record, version=version, timeout=self._timeouts.request
                )
                notes += restored
            tracked.recovered = True
            return outcome(
                path,
                continuity,
                session_id=tracked.session_id,
                replayed_updates=tracked.replayed if path is RecoveryPath.REPLAY else 0,
                lost_turns=lost,
            )
        self._table.abandon(tracked, previous, error)
        return outcome(RecoveryPath.ABANDON, Continuity.LOST, session_id=None, error=error)

    def _judge(
        self, conn: Connection, tracked: Tracked, path: RecoveryPath, probe: Probe, previous: str, *, notes: list[str]
    ) -> Continuity:
        """What the evidence lets a recovery that succeeded by ``path`` claim (the ``_continuity`` table), its
        notes added to ``notes``; ``tracked`` is then held by ``conn``'s agent process. A replay has
        ended by now (:func:`replay_ended` waited for a late one)."""
        verdict: _continuity.Verdict = (Continuity.LOST, None)
        if path is RecoveryPath.REPLAY:
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
                notes += report.notes
                verdict = _continuity.of_replay(checked=self._table.keep_transcripts, gap=report.lacks_history())
        elif path is RecoveryPath.RESUME:
            verdict = _continuity.of_resume(probe, held_by=tracked.agent_process, now=conn.transport.info.agent_process)
        elif tracked.session_id == previous:  # session/new gave the same id back: the agent's own copy, maybe
            verdict = (Continuity.UNVERIFIED, None)
        tracked.held_by(conn.transport.info)
        continuity, why = verdict
        if why is not None:
            notes.append(why)
        return continuity

    async def _run_step(self, conn: Connection, tracked: Tracked, step: Step) -> tuple[str, ...]:
        """Run one step; returns notes for the outcome. A refusal (``RpcError``, ``RequestTimeout``,
        ``InvalidMessage``) or a drop propagates."""
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
    """``work`` on every item by ``concurrency`` workers (not a task per item on a semaphore: 10,000
    sessions would be 10,000 tasks); each item's result or what it raised. Cancellation propagates."""
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
    """One report for two recoveries of a session, the first cut off before it was reported: the
    stronger path (a replay that reached the app stays one), the weaker continuity. ``None`` when
    both renamed the session (the app must learn both ids, in order)."""
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
