"""What Qwen Code's daemon does around a reconnect, on the fake clock: replays that arrive after the answer to
``session/load``, prompts echoed back, a load refused while the daemon still closes the session.

The reference agent (no ``session/status``, no ``session/resume``: recovery replays with ``session/load``)
sits behind :class:`QwenLike`, a link that behaves as Qwen Code's daemon does: it answers ``session/load``
first and sends the replayed history only afterwards — at once (``late="after"``), or only with the
session's next message, whatever it is (``late="next"``, the daemon over WebSocket) — and it echoes every
prompt back as a ``user_message_chunk`` (``_meta.source = "bridge-echo"``). ``unordered`` makes the link
report that its messages do not share one ordered stream (Streamable HTTP); ``closing=[N]`` refuses the next N
loads "for now", as the daemon does while it closes a session whose WebSocket dropped.

Every test checks that the replay is counted and judged as a replay (``replayed_updates``, continuity),
placed where it belongs (never after a later prompt), and that each prompt is in the conversation once.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from acp_client import AcpClient, Callbacks, ConnectionState, RecoveryOutcome, RecoveryPath, State
from acp_client._codec._jsonrpc import Message
from acp_client._recovery._recoverer import REPLAY_GRACE
from acp_client.state import Continuity
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent
from acp_client.transports.base import Transport, TransportInfo
from tests._harness import FAST_RETRY

#: The modes the link adds to the load answer (what Qwen Code's daemon reports).
MODES = {"currentModeId": "auto", "availableModes": [{"id": "auto", "name": "Auto"}, {"id": "plan", "name": "Plan"}]}


class QwenLikeTransport:
    """One link (see the module docstring)."""

    def __init__(
        self, inner: Transport, *, late: str | None, echo: bool, modes: bool, unordered: bool, closing: list[int]
    ) -> None:
        self.inner = inner
        self.closing = closing
        self.late = late
        self.echo = echo
        self.modes = modes
        self.unordered = unordered
        self.loads: set[Any] = set()
        self.held: list[Message] = []
        self.sent: list[Message] = []
        self._queue: asyncio.Queue[Message | BaseException] = asyncio.Queue()
        self._pump = asyncio.get_running_loop().create_task(self._run())

    @property
    def info(self) -> TransportInfo:
        return attrs.evolve(self.inner.info, ordered=not self.unordered)

    async def _run(self) -> None:
        try:
            while True:
                message = await self.inner.receive()
                if self.late and isinstance(message, dict) and message.get("method") == "session/update" and self.loads:
                    self.held.append(message)  # the replay: kept until after the answer
                    continue
                if isinstance(message, dict) and message.get("id") in self.loads:
                    self.loads.discard(message["id"])
                    if self.modes and isinstance(message.get("result"), dict):
                        message = {**message, "result": {**message["result"], "modes": MODES}}
                    self._queue.put_nowait(message)
                    if self.late == "after":
                        self._flush()
                    continue
                self._queue.put_nowait(message)
        except Exception as exc:  # the link ended: the client reads it after what was queued
            self._queue.put_nowait(exc)

    def _flush(self) -> None:
        held, self.held = self.held, []
        for message in held:
            self._queue.put_nowait(message)

    async def receive(self) -> Message:
        item = await self._queue.get()
        if isinstance(item, BaseException):
            self._queue.put_nowait(item)
            raise item
        return item

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        if not isinstance(message, dict):
            await self.inner.send(message)
            return
        method, params = message.get("method"), message.get("params")
        if self.held and isinstance(params, dict) and "sessionId" in params:
            self._flush()  # the session's next message brings the replay out first
        if method == "session/load" and self.closing[0] > 0:  # still closing the session the drop left
            self.closing[0] -= 1
            sid = params["sessionId"] if isinstance(params, dict) else ""
            error = {
                "code": -32602,
                "message": f'No session with id "{sid}". The session is closing; retry after close completes',
                "data": {"sessionId": sid},
            }
            self._queue.put_nowait({"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        if method == "session/load":
            self.loads.add(message["id"])
        if method == "session/set_mode":  # the daemon's modes, served here
            self._queue.put_nowait({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            return
        if method == "session/prompt" and self.echo and isinstance(params, dict):
            for block in params["prompt"]:
                update = {"sessionUpdate": "user_message_chunk", "content": block, "_meta": {"source": "bridge-echo"}}
                self._queue.put_nowait(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {"sessionId": params["sessionId"], "update": update},
                    }
                )
        await self.inner.send(message)

    async def aclose(self) -> None:
        self._pump.cancel()
        await self.inner.aclose()


class QwenLike:
    """A connector whose links are :class:`QwenLikeTransport` over memory links to ``agent``."""

    def __init__(self, agent: ReferenceAgent, **options: Any) -> None:
        self.memory = MemoryConnector(agent)
        self.options = options
        self.transports: list[QwenLikeTransport] = []

    @property
    def target(self) -> str:
        return self.memory.target

    async def connect(self) -> Transport:
        transport = QwenLikeTransport(await self.memory.connect(), **self.options)
        self.transports.append(transport)
        return transport

    def sent_methods(self) -> list[str]:
        return [m["method"] for t in self.transports for m in t.sent if isinstance(m, dict) and "method" in m]


@attrs.define
class World:
    clock: FakeClock
    agent: ReferenceAgent
    link: QwenLike
    client: AcpClient
    outcomes: list[RecoveryOutcome]
    connected: asyncio.Event

    async def drop_and_recover(self) -> RecoveryOutcome:
        before = len(self.outcomes)
        self.link.memory.drop()
        await self.clock.settle()
        await self.clock.run(self.connected.wait())
        assert len(self.outcomes) == before + 1, self.outcomes
        return self.outcomes[-1]


async def world(**options: Any) -> AsyncIterator[World]:
    clock = FakeClock()
    agent = ReferenceAgent(clock=clock, advertise_status=False, advertise_resume=False)
    defaults = {"late": None, "echo": False, "modes": False, "unordered": False, "closing": [0]}
    link = QwenLike(agent, **{**defaults, **options})
    outcomes: list[RecoveryOutcome] = []
    connected = asyncio.Event()

    def state(value: ConnectionState) -> None:
        if value.state is State.CONNECTED:
            connected.set()
        else:
            connected.clear()

    callbacks = Callbacks(on_state_change=state, on_replay=outcomes.append, on_new_session=outcomes.append)
    client = AcpClient(link, clock=clock, retry=FAST_RETRY, callbacks=callbacks)
    await client.connect()
    try:
        yield World(clock, agent, link, client, outcomes, connected)
    finally:
        await client.aclose()
        await link.memory.aclose()


def conversation(handle: Any) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in handle.transcript.messages]


def turns(*prompts: str) -> list[tuple[str, str]]:
    return [message for prompt in prompts for message in (("user", prompt), ("agent", f"echo: {prompt}"))]


@pytest.mark.parametrize("echo", [False, True])
async def test_an_echoed_prompt_is_that_prompt_once(echo: bool) -> None:
    async for w in world(echo=echo):
        handle = await w.client.new_session("/work")
        await w.clock.run(handle.prompt("one"))
        await w.clock.run(handle.prompt("two three"))
        assert conversation(handle) == turns("one", "two three")


@pytest.mark.parametrize(
    ("late", "modes", "unordered"),
    [
        pytest.param("next", True, False, id="only-with-the-next-message-fenced"),
        pytest.param("next", False, False, id="only-with-the-next-message-no-fence"),
        pytest.param("after", False, False, id="right-after-the-answer"),
        pytest.param("after", False, True, id="right-after-the-answer-unordered"),
        pytest.param(None, True, True, id="before-the-answer-unordered"),
    ],
)
async def test_a_replay_after_the_load_answer_belongs_to_the_replay(
    late: str | None, modes: bool, unordered: bool
) -> None:
    async for w in world(late=late, echo=True, modes=modes, unordered=unordered):
        handle = await w.client.new_session("/work")
        for prompt in ("one", "two"):
            await w.clock.run(handle.prompt(prompt))
        updates: list[Any] = []
        w.client.add_update_listener(updates.append)
        outcome = await w.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY, outcome
        if late == "next" and not modes:
            # Nothing fences the replay: the quiet interval passes and the outcome says what was seen
            # (continuity unverified, not lost); the replay, when it comes with the next prompt, is still
            # the replay: the window stays open until that turn's own first update (the echo).
            assert outcome.replayed_updates == 0 and outcome.continuity is Continuity.UNVERIFIED, outcome
        else:
            assert outcome.replayed_updates > 0, outcome
            assert outcome.continuity is Continuity.KEPT, outcome
            assert all(event.replay for event in updates if event.update.kind.endswith("message_chunk")), updates
        if late == "next" and modes:
            assert w.link.sent_methods()[-1:] == ["session/set_mode"]  # the fence, to the current mode
            assert w.link.transports[-1].sent[-1]["params"]["modeId"] == "auto"
        await w.clock.run(handle.prompt("three"))
        assert conversation(handle) == turns("one", "two", "three"), conversation(handle)
        live = [e for e in updates if not e.replay and e.update.kind == "agent_message_chunk"]
        assert "".join(e.text or "" for e in live) == "echo: three", [(e.replay, e.text) for e in updates]


async def test_the_quiet_interval_starts_again_with_each_replayed_update() -> None:
    """On an unordered link the window closes only once the session has been quiet for the grace interval:
    replayed updates that keep coming (each within the interval) all count."""
    async for w in world(late="after", unordered=True):
        handle = await w.client.new_session("/work")
        for prompt in ("one", "two", "three"):
            await w.clock.run(handle.prompt(prompt))
        w.agent.chunk_delay = REPLAY_GRACE * 0.8  # the agent replays slowly too (the replay is chunked)
        outcome = await w.drop_and_recover()
        assert outcome.replayed_updates > 0 and outcome.continuity is Continuity.KEPT, outcome
        assert conversation(handle) == turns("one", "two", "three")
        assert collections.Counter(m.role for m in handle.transcript.messages) == {"user": 3, "agent": 3}


async def test_a_load_refused_for_now_is_tried_again() -> None:
    """The agent refuses the load while it still closes the session the drop left behind ("retry after close
    completes"): the client tries the load again after a pause (on its clock), never a new session."""
    closing = [2]
    async for w in world(closing=closing):
        handle = await w.client.new_session("/work")
        await w.clock.run(handle.prompt("one"))
        outcome = await w.drop_and_recover()
        assert outcome.path is RecoveryPath.REPLAY and outcome.continuity is Continuity.KEPT, outcome
        assert [step for step, _ in outcome.steps] == ["session/load"] * 3
        assert [result.split(":")[0] for _, result in outcome.steps] == ["retry later", "retry later", "ok"]
        assert closing == [0] and outcome.session_id == handle.session_id
        assert conversation(handle) == turns("one")
