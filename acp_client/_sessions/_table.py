"""The session table: what the client remembers of the sessions it opened. No I/O, no event loop.

The one per-session table (nothing keeps a side table keyed by session): each session's record,
transcript, replay or snapshot *window* (updates while a ``session/load`` / ``session/resume`` is
pending are history, not new activity), running *turn*, subscribers and the layers' slots.

The rules it enforces:

* **One turn at a time**, and none in an abandoned session (:meth:`SessionTable.begin_turn`).
* **Idle ends the turn (v2)**, but only once the agent accepted the prompt, and never while a
  replay or resume-snapshot window is open (that ``idle`` describes the past).
* **A turn ends exactly once**, with a :class:`~acp_client.state.PromptResult` or an error:
  whichever of idle, drop, abandonment, untracking or closing comes first.
* **Every earlier id still finds the session** after a recovery re-created it under a new id.

The table never waits and never schedules: a turn is settled through the ``settle`` function given
to :meth:`~SessionTable.begin_turn`, subscribers are plain functions, a lingering window's timer is
the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._util._slots import direct_constructor
from ..exceptions import ClientClosed, ConnectionLost, RecoveryFailed, SessionNotTracked, TurnInProgress
from ..state import PromptResult, UpdateEvent
from ..transcript import MESSAGE_KINDS, SegmentStart, Transcript, TurnStatus
from ..types import ContentBlock, McpServer, Session, SessionUpdate
from ._coherence import Settings, with_config_options, with_mode

if TYPE_CHECKING:
    from ..clock import TimerHandle
    from ..store.base import StoredSession
    from ..transports.base import TransportInfo

#: Receives each update of a session, and ``None`` once the session is gone.
Subscriber = Callable[[UpdateEvent | None], None]

#: ``UpdateEvent(session_id, update, replay)``, built once per update: the fast way.
_new_event = direct_constructor(UpdateEvent)


class Turn:
    """One running prompt turn."""

    __slots__ = ("_settle", "accepted", "cancel_sent", "done", "heard", "message_id", "prompt", "recorded", "status")

    def __init__(self, prompt: tuple[ContentBlock, ...], settle: Callable[[PromptResult | BaseException], None]):
        self.prompt = prompt
        self.accepted = False  # the agent answered the prompt request (v2: the turn now runs)
        self.message_id: str | None = None
        self.done = False
        self.recorded = False  # the prompt went out (a re-sent prompt is not added twice)
        self.status: TurnStatus | None = None  # how the turn ended, once the transcript knows
        self.cancel_sent = False  # session/cancel went out for it (a timeout, a cancelled caller)
        self.heard = False  # a live update came after the prompt went out: the agent may be acting on it
        self._settle = settle

    def accept(self) -> None:
        self.accepted = True

    def finish(self, outcome: PromptResult | BaseException) -> bool:
        """End the turn with a result or an error; ``False`` if it had ended already."""
        if self.done:
            return False
        self.done = True
        self._settle(outcome)
        return True


class Tracked:
    """What the client remembers of one session, to recover it."""

    def __init__(
        self,
        record: Session,
        *,
        cwd: str,
        mcp_servers: tuple[McpServer, ...],
        additional_directories: tuple[str, ...],
    ) -> None:
        self.record = record
        self.session_id = record.session_id
        self.cwd = cwd
        self.mcp_servers = mcp_servers
        self.additional_directories = additional_directories
        self.transcript = Transcript(record.session_id)
        self.replaying = False
        self.replayed = 0
        self.snapshot_window = False
        self.window_decided = False  # its first message update was looked at: is the snapshot a replay?
        self.resume_replayed = False  # a plain session/resume's window turned into a replay
        self.replay_cut_off = False  # a drop cut the last replay off: the next recovery replays again
        self.settings = Settings()  # what the app set, re-applied after a replay or new session
        #: The lingering window (``_recoverer.open_attach_window``): its timer, the updates it heard,
        #: whether it is *late* or open until the next turn's first update, and who waits for it.
        self.window_timer: TimerHandle | None = None
        self.window_heard = 0
        self.window_late = False
        self.window_until_turn = False
        self.window_waiters: list[Callable[[], None]] = []
        self.turn: Turn | None = None
        self.turn_task: Any = None  # the current (or last) turn's: a cancelled one may still run: the next prompt waits
        self.subscribers: list[Subscriber] = []
        self.abandoned = False
        self.lost_context_pending = False  # the next prompt carries the lost conversation (carry_lost_context)
        self.recovered = False  # over this connection: a later "session not found" recovers it again, as unknown
        self.stored: StoredSession | None = None  # last written to (or restored from) the store
        self.slots: dict[object, object] = {}  # the layers above, each in a typed ``_util._slots.Slot``
        self.agent_process: str | None = None  # the process that last attached it (continuity evidence)

    def held_by(self, info: TransportInfo) -> None:
        """The link described by ``info`` attached the session."""
        self.agent_process = info.agent_process

    @property
    def window_open(self) -> bool:
        return self.replaying or self.snapshot_window

    def end_subscriptions(self) -> None:
        for subscriber in list(self.subscribers):
            subscriber(None)


class SessionTable:
    """The tracked sessions, keyed by their current id and every earlier one. ``replays_on_resume``:
    whether the agent replays history during a plain ``session/resume`` (``None``: detected)."""

    def __init__(self, *, keep_transcripts: bool = True, replays_on_resume: bool | None = None) -> None:
        self.keep_transcripts = keep_transcripts
        self.replays_on_resume = replays_on_resume
        self._by_id: dict[str, Tracked] = {}

    def get(self, session_id: str) -> Tracked | None:
        return self._by_id.get(session_id)

    def require(self, session_id: str) -> Tracked:
        """The tracked session (by its current or any earlier id); ``SessionNotTracked`` if none."""
        tracked = self._by_id.get(session_id)
        if tracked is None:
            raise SessionNotTracked(session_id)
        return tracked

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._by_id

    def __iter__(self) -> Iterator[Tracked]:
        """Each tracked session once (a re-created one is also keyed by its earlier ids)."""
        return iter(list({id(tracked): tracked for tracked in self._by_id.values()}.values()))

    def live(self) -> list[Tracked]:
        """The sessions recovery should restore (not abandoned)."""
        return [tracked for tracked in self if not tracked.abandoned]

    def current_id(self, session_id: str) -> str:
        """The id a session has now (``session_id`` itself when it is not tracked)."""
        tracked = self._by_id.get(session_id)
        return tracked.session_id if tracked is not None else session_id

    def roots(self, session_id: str) -> list[Path]:
        """The directories the agent may touch in a session."""
        tracked = self._by_id.get(session_id)
        return [] if tracked is None else [Path(tracked.cwd), *map(Path, tracked.additional_directories)]

    def track(
        self,
        record: Session,
        *,
        cwd: str,
        mcp_servers: tuple[McpServer, ...] = (),
        additional_directories: tuple[str, ...] = (),
    ) -> Tracked:
        """Track a session (a live one already tracked under that id only gets its record merged)."""
        existing = self._by_id.get(record.session_id)
        if existing is not None and not existing.abandoned:
            existing.record = existing.record.merge(record)
            return existing
        tracked = Tracked(record, cwd=cwd, mcp_servers=mcp_servers, additional_directories=additional_directories)
        self._by_id[record.session_id] = tracked
        return tracked

    def untrack(self, session_id: str) -> None:
        """Forget a session under all its ids; its running turn fails with ``SessionNotTracked``
        (its v2 ``idle`` could no longer end it) and its subscriptions end."""
        tracked = self._by_id.get(session_id)
        if tracked is None:
            return
        for key in [key for key, value in self._by_id.items() if value is tracked]:
            del self._by_id[key]
        if tracked.turn is not None:
            tracked.turn.finish(SessionNotTracked(session_id, f"session {session_id} is no longer tracked"))
        tracked.end_subscriptions()

    def renamed(self, tracked: Tracked, record: Session) -> None:
        """Recovery re-created the session as ``record`` because the agent lost it: a new id (the
        old ones still find it) and a new transcript segment."""
        tracked.session_id = record.session_id
        tracked.record = record
        lost = tracked.transcript.start_segment(record.session_id, SegmentStart.NEW_AFTER_LOSS, lost=True)
        tracked.lost_context_pending = lost > 0
        tracked.replay_cut_off = False  # nothing left to replay
        self._by_id[record.session_id] = tracked

    def abandon(self, tracked: Tracked, previous_id: str, cause: BaseException | None) -> None:
        """Recovery gave up: the running turn fails with ``RecoveryFailed``, subscriptions end; it stays, flagged."""
        tracked.abandoned = True
        if tracked.turn is not None:
            self.turn_status(tracked, tracked.turn, TurnStatus.INTERRUPTED)
            tracked.turn.finish(RecoveryFailed(previous_id, "abandoned", cause=cause))
        tracked.end_subscriptions()

    def open_window(self, tracked: Tracked, *, replay: bool) -> None:
        """Updates from now on are replayed history (``replay``) or a resume snapshot."""
        self.close_window(tracked)
        tracked.window_heard = 0
        tracked.window_decided = replay
        tracked.resume_replayed = False
        if replay:
            self._begin_replay(tracked)
        else:
            tracked.snapshot_window = True

    def _begin_replay(self, tracked: Tracked) -> None:
        tracked.replaying = True
        tracked.replayed = 0
        if self.keep_transcripts:
            tracked.transcript.begin_replay()

    def close_window(self, tracked: Tracked, *, complete: bool = True) -> None:
        """Updates from now on are live activity. ``complete=False``: the window was cut off (a drop,
        a refusal) before its answer; the transcript goes back to what it held before the replay."""
        if tracked.window_timer is not None:
            tracked.window_timer.cancel()
            tracked.window_timer = None
        if tracked.replaying:
            tracked.transcript.end_replay(complete=complete)
            if complete:
                tracked.replay_cut_off = False
        tracked.replaying = tracked.snapshot_window = tracked.window_late = tracked.window_until_turn = False
        self.release_waiters(tracked)

    def release_waiters(self, tracked: Tracked) -> None:
        """Whoever waits for ``tracked``'s window goes on (it closed, or stays open only until the next turn)."""
        waiters, tracked.window_waiters = tracked.window_waiters, []
        for waiter in waiters:
            waiter()

    def cut_off(self, tracked: Tracked) -> None:
        """The connection dropped while ``tracked``'s window was open: complete if its answer had come
        (a lingering window); any other replay is incomplete, and the next recovery replays again."""
        if not tracked.window_open:
            return
        answered = tracked.window_timer is not None
        if tracked.replaying and not answered:
            tracked.replay_cut_off = True
        self.close_window(tracked, complete=answered)

    def begin_turn(
        self, tracked: Tracked, prompt: tuple[ContentBlock, ...], settle: Callable[[PromptResult | BaseException], None]
    ) -> Turn:
        """Start a turn; ``settle`` is called once with how it ended.

        Raises:
            TurnInProgress: A turn is already running in the session.
            RecoveryFailed: Recovery abandoned the session (the prompt must not be sent).
        """
        if tracked.turn is not None:
            raise TurnInProgress(f"a turn is already running in session {tracked.session_id}")
        if tracked.abandoned:
            raise RecoveryFailed(tracked.session_id, "abandoned by recovery; not attached to the connection")
        turn = tracked.turn = Turn(prompt, settle)
        return turn

    def prompt_sent(self, tracked: Tracked, *, echoes_prompts: bool) -> None:
        """The prompt goes out now: a window lingering after its answer closes (what arrives from now
        on is live), and the transcript records the prompt unless the agent echoes it."""
        if tracked.window_timer is not None or (tracked.window_until_turn and not tracked.transcript.echoes_prompts):
            self.close_window(tracked)
        turn = tracked.turn
        if turn is not None and not turn.recorded:
            turn.recorded = True
            if self.keep_transcripts:
                tracked.transcript.begin_turn(turn.prompt, record=not echoes_prompts)

    def withdraw_prompt(self, tracked: Tracked, turn: Turn) -> None:
        """The agent refused ``turn``'s prompt as "session not found" before anything was heard of
        it: it leaves the transcript (it is sent once more, on the session recovery starts)."""
        if not turn.recorded:
            return
        turn.recorded = False
        if self.keep_transcripts and tracked.turn is turn:
            tracked.transcript.withdraw_turn()

    def turn_status(self, tracked: Tracked, turn: Turn, status: TurnStatus) -> None:
        """How ``turn`` ended, for its transcript (once, and only once its prompt went out)."""
        if turn.status is not None or not turn.recorded:
            return
        turn.status = status
        if self.keep_transcripts and tracked.turn is turn:
            tracked.transcript.finish_turn(status)

    def end_turn(self, tracked: Tracked, turn: Turn) -> None:
        if tracked.turn is turn:
            tracked.turn = None
            if tracked.window_until_turn:  # the turn ended and no echo came: what came was the replay
                self.close_window(tracked)

    def receive(self, session_id: str, update: SessionUpdate) -> UpdateEvent:
        """Apply one ``session/update`` (the module rules) and hand the event to the session's
        subscribers. An update for an untracked session is just passed on."""
        tracked = self._by_id.get(session_id)
        if tracked is None:
            return _new_event(session_id, update, False)
        turn = tracked.turn
        if tracked.window_until_turn and turn is not None and turn.recorded and tracked.transcript.begins_echo(update):
            self.close_window(tracked)  # the next turn's own first update: the replay is over
        if tracked.snapshot_window and not tracked.window_decided and update.kind in MESSAGE_KINDS:
            tracked.window_decided = True
            replays = self.replays_on_resume
            if replays or (replays is None and tracked.transcript.repeats(update)):
                # The agent replays history during a plain resume (docs/agents-conformance.md): the rest of the
                # window is a replay, de-duplicated like one.
                tracked.snapshot_window = False
                tracked.resume_replayed = True
                self._begin_replay(tracked)
        replay = tracked.replaying
        if replay or tracked.snapshot_window:
            tracked.window_heard += 1
        if replay:
            tracked.replayed += 1
        elif turn is not None and turn.recorded and not tracked.snapshot_window:
            turn.heard = True
        if self.keep_transcripts:
            tracked.transcript.apply(update)
        kind = update.kind
        if kind == "current_mode_update":
            tracked.record = with_mode(tracked.record, update.current_mode_id)  # type: ignore[union-attr]
        elif kind == "config_option_update":
            tracked.record = with_config_options(tracked.record, update.config_options)  # type: ignore[union-attr]
        idle = kind == "state_update" and getattr(update, "state", None) == "idle"
        if idle and turn is not None and turn.accepted and not tracked.window_open:
            stop = getattr(update, "stop_reason", None)
            self.turn_status(tracked, turn, TurnStatus.CANCELLED if stop == "cancelled" else TurnStatus.COMPLETE)
            turn.finish(PromptResult(stop, turn.message_id, getattr(update, "usage", None)))
        event = _new_event(session_id, update, replay)
        subscribers = tracked.subscribers
        if len(subscribers) == 1:  # the common case, without the copy that guards one removing itself
            subscribers[0](event)
        elif subscribers:
            for subscriber in list(subscribers):
                subscriber(event)
        return event

    def dropped(self, cause: BaseException, sessions: Iterable[Tracked] | None = None) -> None:
        """The connection dropped (the one drop rule, for every link): running turns of ``sessions``
        (default: all) whose prompt went out fail with ``ConnectionLost`` (it may have executed), windows
        are cut off; a prompt still in the outage queue waits to be sent once the client is back."""
        for tracked in self if sessions is None else list(sessions):
            if tracked.turn is not None and tracked.turn.recorded:
                self.turn_status(tracked, tracked.turn, TurnStatus.INTERRUPTED)
                tracked.turn.finish(ConnectionLost("session/prompt", may_have_executed=True, cause=cause))
            self.cut_off(tracked)

    def closed(self, error: BaseException | None = None, sessions: Iterable[Tracked] | None = None) -> None:
        """The client closed (or a link failed): running turns fail, subscriptions end (``sessions``; default all)."""
        for tracked in self if sessions is None else list(sessions):
            if tracked.turn is not None:
                self.turn_status(tracked, tracked.turn, TurnStatus.INTERRUPTED)
                tracked.turn.finish(error or ClientClosed("the client was closed"))
            tracked.end_subscriptions()
