"""Qwen Code's daemon (``qwen serve`` 0.24.4), a real remote ACP server, over Streamable HTTP and WebSocket.

The daemon runs from the tests' cache (``tests/peers/qwen_daemon.py``) fully offline, bound to 127.0.0.1,
its model the fake OpenAI-compatible server on loopback (``tests/peers/fake_openai.py``: ``hello`` is
answered ``echo: hello``; a ``slow: ...`` prompt is streamed word by word, slowly enough to cut). The
client reaches it through a :class:`~acp_client.testing.FaultProxy` (the faults), behind which a
:class:`~tests.peers.qwen_daemon.HostFront` gives each request the daemon's own ``Host`` (the daemon
refuses any other, as a reverse proxy in front of it must know).

What the daemon does (pinned in ``test_facts``): ``initialize`` advertises ``loadSession`` and no
``session/status`` or ``session/resume``, so after a reconnect the client replays the session with
``session/load``; it echoes each prompt back as a ``user_message_chunk`` marked ``_meta.source =
"bridge-echo"``; it numbers its session streams' events and keeps a dropped connection's streams for
10 s; a ``DELETE`` of a connection ends its turns at once.

Each fault leaves every prompt once in the conversation, every answer the model streamed complete and
in order (or marked incomplete and reported to the app), and the running turn not aborted by anything
the client sent: the fake model saw its answer read to the end, and the daemon's log shows no
``DELETE`` of a connection a turn was running on.

One daemon process and one fake model serve the module (the restart test restarts that daemon on its
port); each test opens its own sessions and its own client behind its own fault proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NamedTuple

import attrs
import pytest
import pytest_asyncio

from acp_client import AcpClient, PromptResult, RecoveryPath, SessionHandle, Timeouts
from acp_client.exceptions import ConnectionLost
from acp_client.state import Continuity
from acp_client.testing import FaultProxy, RecordingConnector
from acp_client.transcript import TurnStatus
from acp_client.transports import connector_for
from tests._support import eventually
from tests.e2e._support import Recorder
from tests.interop._real_agents import POLICY, SLOW, describe
from tests.peers.fake_openai import FakeOpenAI, answer_chunks
from tests.peers.qwen_daemon import HostFront, QwenCode, QwenDaemon

# Only the test itself is timed: on a fresh machine the fixture first installs the package (npm).
pytestmark = [pytest.mark.timeout(120, func_only=True), pytest.mark.asyncio(loop_scope="module")]

#: The connection that carries a session's updates, by transport: the session stream, the socket.
STREAM = {"http": "session_stream", "ws": "websocket"}

#: A turn long enough to cut in its middle: ``echo: `` and ten words, one every :data:`CHUNK_DELAY` seconds.
SLOW_PROMPT = "slow: eins two drei four fünf six sieben eight neun ten"
CHUNK_DELAY = 0.3
#: How long a silent socket stays silent before it is reset (the issue's report: 1.5 s).
SILENCE = 1.5


@attrs.frozen
class Qwen:
    """The module's daemon, the front that gives its requests the right ``Host``, and its fake model."""

    daemon: QwenDaemon
    front: HostFront
    llm: FakeOpenAI

    @property
    def workspace(self) -> Path:
        return self.daemon.workspace

    def url(self, kind: str) -> str:
        return self.front.http_url if kind == "http" else self.front.ws_url


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def qwen(qwen_code: QwenCode, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Qwen]:
    home = tmp_path_factory.mktemp("qwen-daemon")
    with (
        FakeOpenAI(chunk_delay=CHUNK_DELAY) as llm,
        QwenDaemon(qwen_code, home, home / "workspace", llm.base_url) as daemon,
    ):
        front = await HostFront(daemon).start()
        try:
            yield Qwen(daemon, front, llm)
        finally:
            await front.aclose()


@pytest_asyncio.fixture(loop_scope="module")
async def proxy(qwen: Qwen) -> AsyncIterator[FaultProxy]:
    async with FaultProxy("127.0.0.1", qwen.front.port) as proxy:
        yield proxy


@pytest.fixture(params=["http", "ws"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@attrs.frozen
class Client:
    """A test's client, what it told the app, and what it sent on each link."""

    acp: AcpClient
    recorder: Recorder
    wire: RecordingConnector


@pytest_asyncio.fixture(loop_scope="module")
async def client(qwen: Qwen, proxy: FaultProxy, kind: str) -> AsyncIterator[Client]:
    recorder = Recorder()
    timeouts = Timeouts(connect=SLOW, request=SLOW)
    wire = RecordingConnector(connector_for(proxy.url(qwen.url(kind))))
    async with AcpClient(wire, retry=POLICY, timeouts=timeouts, callbacks=recorder.callbacks()) as acp:
        yield Client(acp, recorder, wire)


def answer(prompt: str) -> str:
    """The fake model's whole answer to ``prompt``."""
    return "".join(answer_chunks(prompt)[0])


def agent_text(handle: SessionHandle, prompt: str) -> str:
    """What the agent said after ``prompt`` (the running turn's answer so far; empty before it went out)."""
    messages = handle.transcript.messages
    at = next((i for i, m in enumerate(messages) if m.role == "user" and m.text == prompt), None)
    if at is None:
        return ""
    return "".join(
        itertools.takewhile(
            lambda text: text is not None, (m.text if m.role == "agent" else None for m in messages[at + 1 :])
        )
    )


async def streaming(handle: SessionHandle, prompt: str, words: int = 3) -> None:
    """Wait until the answer to ``prompt`` has ``words`` words past ``echo:`` (a cut lands mid-turn)."""
    await eventually(
        lambda: len(agent_text(handle, prompt).split()) > words,
        timeout=SLOW,
        what=lambda: f"streaming: {agent_text(handle, prompt)!r}",
    )


def model_prompt(llm: FakeOpenAI, prompt: str) -> str:
    """What the model was asked for ``prompt``: the last request whose user text ends with it (the agent
    sends a prompt whose turn had no answer together with the next one, as one user message)."""
    return next((asked for asked in reversed(llm.prompts) if asked.endswith(prompt)), prompt)


def check_conversation(handle: SessionHandle, recorder: Recorder, llm: FakeOpenAI, prompts: list[str]) -> None:
    """Every prompt once, in order, each followed by the answer the model streamed for it complete, or by a
    part of it marked incomplete (its turn interrupted and the app told)."""
    shown = [m for m in handle.transcript.all_messages() if m.role in ("user", "agent") and not m.inserted]
    text = (
        describe_transcript(handle)
        + "\n"
        + "\n".join(
            f"{e.update.kind} replay={e.replay} {e.text!r}" for e in recorder.events if e.update.kind.endswith("chunk")
        )
    )
    users = [m.text for m in shown if m.role == "user"]
    assert users == prompts, text
    interrupted = {prompt_text(item.prompt) for item in recorder.interrupted}
    for index, prompt in enumerate(prompts):
        at = next(i for i, m in enumerate(shown) if m.role == "user" and m.text == prompt)
        # The answer: the agent messages up to the next prompt (an update between two chunks, such as the
        # daemon's usage report, ends a message: the answer may be in several).
        following = list(itertools.takewhile(lambda m: m.role == "agent", shown[at + 1 :]))
        said = "".join(m.text for m in following)
        expected = answer(model_prompt(llm, prompt))
        if said == expected:
            assert not any(m.incomplete for m in following), text
            continue
        # Not the whole answer: the turn was cut (a drop: the app was told), or the agent cancelled it (the
        # daemon stopping: the prompt's result said so); either way the transcript says so.
        status = shown[at].status
        assert status in (TurnStatus.INTERRUPTED, TurnStatus.CANCELLED), f"prompt {index} {prompt!r}: {text}"
        replayed = "".join(e.text or "" for e in recorder.events if e.replay and e.update.kind == "agent_message_chunk")
        if status is TurnStatus.INTERRUPTED:
            assert prompt in interrupted, (prompt, interrupted, text)
            assert all(m.incomplete for m in following) or (said and said in replayed), text
        else:
            assert all(m.incomplete for m in following), text
        # An interrupted turn's partial answer is marked incomplete, unless the session's replay brought the
        # agent's own longer record of it (the transcript then holds what the agent has: the daemon ended the
        # turn when its socket broke, and recorded what it had); either way it is the start of the answer.
        assert expected.startswith(said), text


def prompt_text(blocks: tuple[object, ...]) -> str:
    return "".join(str(getattr(block, "text", "")) for block in blocks)


def describe_transcript(handle: SessionHandle) -> str:
    return "\n" + "\n".join(
        f"{m.role}{' [incomplete]' if m.incomplete else ''}{f' [{m.status.value}]' if m.status else ''}: {m.text}"
        for m in handle.transcript.all_messages()
    )


async def not_aborted(qwen: Qwen, client: Client, kind: str, prompt: str, connection: str | None) -> None:
    """Nothing the client sent aborted the turn of ``prompt``: it sent no ``session/cancel`` and no ``DELETE``
    of the connection the turn ran on (the daemon's log would show it), and over HTTP, where the daemon keeps a
    dropped connection's turns for the client to reattach, the model streamed its whole answer. (Over
    WebSocket the daemon itself ends a session's turn when the socket breaks; the client then keeps the part
    it saw, marked incomplete.)"""
    await eventually(
        lambda: prompt in qwen.llm.finished or prompt in qwen.llm.broken, timeout=SLOW, what="the model's answer to end"
    )
    assert "session/cancel" not in client.wire.sent_methods(), client.wire.sent_methods()
    if kind == "http":
        assert prompt in qwen.llm.finished and prompt not in qwen.llm.broken, (qwen.llm.finished, qwen.llm.broken)
    log = qwen.daemon.log()
    if connection is not None:
        assert f"connection deleted {connection[:8]}" not in log, log[-3000:]


def unique(text: str, kind: str, tag: str) -> str:
    """A prompt of its own for one test (the model's record is shared by the module)."""
    return f"{text} {tag}-{kind}"


# -- facts ----------------------------------------------------------------------------------------------


async def test_facts(client: Client, qwen: Qwen, kind: str) -> None:
    """What the daemon offers, and that a turn runs unchanged: each prompt once (its echo is that prompt)."""
    acp, recorder = client.acp, client.recorder
    caps = acp.agent_capabilities
    assert caps is not None
    assert caps.load_session
    assert not caps.session.status and not caps.session.resume
    handle = await acp.new_session(qwen.workspace)
    prompts = [unique("hello", kind, "facts"), unique("again", kind, "facts")]
    for prompt in prompts:
        result = await handle.prompt(prompt)
        assert result.stop_reason == "end_turn"
    echoes = [e for e in recorder.events if e.update.kind == "user_message_chunk" and e.session_id == handle.session_id]
    # Over HTTP the first prompt's echo may go out before the session stream is open: the second one's comes.
    assert [e.text for e in echoes][-1:] == prompts[-1:], echoes
    assert all((e.update.meta or {}).get("source") == "bridge-echo" for e in echoes), echoes
    assert [(m.role, m.text) for m in handle.transcript.messages] == [
        message for prompt in prompts for message in (("user", prompt), ("agent", answer(prompt)))
    ]
    assert all(m.status is TurnStatus.COMPLETE for m in handle.transcript.messages if m.role == "user")


class SlowTurn(NamedTuple):
    """A session with one turn answered and a second one streaming its answer."""

    handle: SessionHandle
    first: str
    slow: str
    connection: str | None
    turn: asyncio.Task[PromptResult]


async def slow_turn(client: Client, qwen: Qwen, kind: str, tag: str, words: int = 3) -> SlowTurn:
    handle = await client.acp.new_session(qwen.workspace)
    first = unique("hello", kind, tag)
    await handle.prompt(first)
    slow = unique(SLOW_PROMPT, kind, tag)
    info = client.acp.transport_info
    turn = asyncio.create_task(handle.prompt(slow))
    await streaming(handle, slow, words=words)
    return SlowTurn(handle, first, slow, info.connection_id if info is not None else None, turn)


async def ends_and_goes_on(client: Client, qwen: Qwen, cut: SlowTurn, kind: str, tag: str, *, reattached: bool) -> None:
    """After a fault during ``cut``'s streamed answer: its turn ends (interrupted over a link that dropped: marked
    and reported, checked by :func:`check_conversation`) and the daemon did not abort it; over HTTP, when the
    stream is ``reattached``, the turn ended on its first connection with the whole answer; then the next turn runs
    as usual."""
    handle, first, slow, connection, turn = cut
    with contextlib.suppress(ConnectionLost):
        await turn
    await not_aborted(qwen, client, kind, slow, connection)
    if reattached and kind == "http":
        assert turn.result().stop_reason == "end_turn"
        assert agent_text(handle, slow) == answer(slow), describe_transcript(handle)
        assert client.wire.sent_methods().count("initialize") == 1, client.wire.sent_methods()
    after = unique("after", kind, tag)
    await handle.prompt(after)
    check_conversation(handle, client.recorder, qwen.llm, [first, slow, after])


# -- faults ----------------------------------------------------------------------------------------------


async def test_every_connection_reset_mid_turn(client: Client, qwen: Qwen, proxy: FaultProxy, kind: str) -> None:
    """Every connection (the socket; over HTTP the POSTs' and every stream's) reset in the middle of a
    streamed answer: the turn is not aborted, and its answer ends complete (or marked incomplete and
    reported); the next turn runs as usual."""
    cut = await slow_turn(client, qwen, kind, "reset")
    await proxy.cut()
    await ends_and_goes_on(client, qwen, cut, kind, "reset", reattached=False)


async def test_a_websocket_reset_then_a_turn(client: Client, qwen: Qwen, proxy: FaultProxy, kind: str) -> None:
    """The link reset between turns, then a turn: the client reloads the session (the daemon replays its
    history, after its answer to ``session/load``); the replay is reported as such, never part of the turn."""
    acp, recorder = client.acp, client.recorder
    handle = await acp.new_session(qwen.workspace)
    prompts = [unique("hello", kind, "between"), unique("again", kind, "between")]
    for prompt in prompts:
        await handle.prompt(prompt)
    await proxy.cut()
    after = unique("after", kind, "between")
    await handle.prompt(after)
    outcome = await recorder.outcome()
    text = describe(outcome, handle.transcript, recorder.events)
    assert outcome.path is RecoveryPath.REPLAY, text
    assert outcome.replayed_updates > 0, text
    assert outcome.continuity is Continuity.KEPT, text
    if kind == "ws":  # the daemon sends the replay only with the session's next message: the fence is that
        assert "session/set_mode" in client.wire.sent_methods(), client.wire.sent_methods()
    check_conversation(handle, recorder, qwen.llm, [*prompts, after])
    live = [e for e in recorder.events if not e.replay and e.update.kind.endswith("_message_chunk")]
    assert "".join(e.text or "" for e in live if e.update.kind == "agent_message_chunk").endswith(answer(after)), text


async def test_the_daemon_restarted_mid_turn(client: Client, qwen: Qwen, proxy: FaultProxy, kind: str) -> None:
    """The daemon restarted (SIGTERM, then started again on its port) in the middle of a streamed answer: the
    turn ends cancelled by the daemon as it stops, or interrupted by the drop (its partial answer marked
    incomplete, the app told), the session comes back by replay, and the next turn runs after it."""
    recorder = client.recorder
    handle, first, slow, _, turn = await slow_turn(client, qwen, kind, "restart")
    await asyncio.get_running_loop().run_in_executor(None, qwen.daemon.restart)
    with contextlib.suppress(ConnectionLost):  # the daemon may also finish the turn before it stops
        await turn
    after = unique("after", kind, "restart")
    result: PromptResult = await handle.prompt(after)
    assert result.stop_reason == "end_turn"
    outcome = recorder.outcomes[-1]
    text = describe(outcome, handle.transcript, recorder.events)
    assert outcome.path is RecoveryPath.REPLAY, text
    assert outcome.replayed_updates > 0, text
    assert [prompt_text(item.prompt) for item in recorder.interrupted] in ([], [slow]), text
    check_conversation(handle, recorder, qwen.llm, [first, slow, after])


async def test_a_session_stream_reset_mid_turn(client: Client, qwen: Qwen, proxy: FaultProxy, kind: str) -> None:
    """The connection that carries the session's updates (over HTTP its session stream, alone; over
    WebSocket the socket) reset in the middle of a streamed answer: over HTTP the stream is reattached
    with ``Last-Event-ID`` on the same connection (no new ``initialize``) and the answer ends whole; over
    WebSocket the client reconnects, and the answer ends whole or marked incomplete. Either way the turn
    runs on in the daemon, and the next turn runs as usual."""
    cut = await slow_turn(client, qwen, kind, "stream")
    await proxy.cut(STREAM[kind])
    await ends_and_goes_on(client, qwen, cut, kind, "stream", reattached=True)
    if kind == "http":
        assert client.recorder.outcomes == []  # reattached: nothing was recovered, before or during the next turn


async def test_a_stream_silent_then_reset(client: Client, qwen: Qwen, proxy: FaultProxy, kind: str) -> None:
    """The session's stream goes silent in the middle of a streamed answer (the daemon keeps sending, nothing
    arrives) — over HTTP until the model has streamed its whole answer, over WebSocket (whose silence holds the
    daemon's turn back) for :data:`SILENCE` seconds —; then it is reset. What the silence swallowed is
    never lost silently: over HTTP the reattached stream brings the middle of the answer (the answer ends
    whole, in order); over WebSocket the answer ends whole or marked incomplete and reported."""
    cut = await slow_turn(client, qwen, kind, "silent", words=1)
    handle, slow = cut.handle, cut.slow
    assert await proxy.silence(STREAM[kind]) == 1
    if kind == "http":
        # Until the model has streamed its whole answer: the daemon sent it all into the silence.
        await eventually(lambda: slow in qwen.llm.finished, timeout=SLOW, what="the model to stream its whole answer")
    else:
        # A silent socket holds the daemon's writes back, and the turn with them: silent for a while.
        await asyncio.sleep(SILENCE)
    heard = agent_text(handle, slow)
    assert heard != answer(slow)  # the silence held the rest of it
    await proxy.cut(STREAM[kind])
    await ends_and_goes_on(client, qwen, cut, kind, "silent", reattached=True)
