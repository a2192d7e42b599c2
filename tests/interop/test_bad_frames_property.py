"""Property: whatever an agent puts on the wire between a request and its answer, the client answers
that request with exactly the agent's answer and stays usable.

A scripted agent on the in-memory transport (:mod:`acp_client.transports.memory`) answers
``initialize``, then, for the test's request, first writes a list of frames Hypothesis made up --

- random bytes (maybe not UTF-8), random text, random JSON values,
- ACP messages generated from the JSON schemas (``tests/codec/_strategies.py`` compiles them; the v1 or
  v2 set, matching the negotiated version): agent->client notifications, requests and responses, often
  with a field dropped or replaced by random JSON, sometimes in a batch --

and then the good answer (a result or a JSON-RPC error). A frame never carries a well-formed response to
the pending request's id (that would legitimately answer it); everything else goes.

Checked for every example: the request resolves with that answer (the result exactly, or the
:class:`~acp_client.exceptions.RpcError` with its code, message and data); every frame that is not even
JSON-RPC framing is reported to ``on_protocol_error``; a second request on the same connection is
answered; the client is still ``connected``; and nothing leaked: no exception escaped to the event loop,
and the client logged no error (a crashed handler or reader logs one).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_client import AcpClient, AcpError, Callbacks, RpcError, State, Timeouts, UpdateEvent
from acp_client._codec._jsonrpc import ErrorResponse, Response, classify, decode_frame
from acp_client.exceptions import MalformedFrame
from acp_client.transports import TransportInfo
from acp_client.transports.base import Transport
from acp_client.transports.memory import MemoryTransport, memory_pair
from tests.codec import _schemas
from tests.codec._strategies import JSON, SchemaStrategies

TIMEOUT = 5.0
PROBE = "_probe"

#: Agent->client requests and notifications: method -> schema definition (when the set has it).
REQUESTS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
    "elicitation/create": "CreateElicitationRequest",
}
NOTIFICATIONS = {
    "session/update": ("SessionNotification", "UpdateSessionNotification"),
    "elicitation/complete": ("CompleteElicitationNotification",),
}
FIELDS = ("jsonrpc", "id", "method", "params", "result", "error")
REQUEST_IDS = st.one_of(st.integers(-3, 50), st.text(max_size=6))
#: Response ids around the client's own (initialize is 0, the requests under test 1 and 2).
NEAR_IDS = st.one_of(st.integers(0, 3), st.sampled_from([None, "1", 1.0, True, [1], {"id": 1}]))


@attrs.frozen
class Raw:
    """A frame written verbatim (bytes or text)."""

    data: bytes | str


@attrs.frozen
class Msg:
    """A JSON value to write; the agent defuses a response to the pending request's id first."""

    value: Any


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[dict[str, Any]]) -> Any:
    """A message with up to two fields dropped or replaced by random JSON, sometimes batched."""
    message = dict(draw(base))
    for _ in range(draw(st.integers(0, 2))):
        operation = draw(st.sampled_from(["drop", "replace", "param"]))
        if operation == "drop" and message:
            message.pop(draw(st.sampled_from(sorted(message))))
        elif operation == "replace":
            message[draw(st.sampled_from(sorted({*message, *FIELDS})))] = draw(JSON)
        elif isinstance(message.get("params"), dict) and message["params"]:
            params = dict(message["params"])
            params[draw(st.sampled_from(sorted(params)))] = draw(JSON)
            message["params"] = params
    if draw(st.integers(0, 9)) == 0:
        return [message, *draw(st.lists(JSON, max_size=2))]
    return message


@functools.cache
def frames_for(key: str) -> st.SearchStrategy[Raw | Msg]:
    """Frames for one schema set (``v1`` / ``v2``)."""
    schemas = SchemaStrategies(key, garbage=True, max_depth=3)
    requests = [
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "id": REQUEST_IDS, "method": st.just(method), "params": schemas.for_def(name)}
        )
        for method, name in REQUESTS.items()
        if _schemas.has_def(key, name)
    ]
    notifications = [
        st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "method": st.just(method), "params": schemas.for_def(name)})
        for method, names in NOTIFICATIONS.items()
        for name in names
        if _schemas.has_def(key, name)
    ]
    responses = st.builds(
        lambda response, request_id: (
            {"jsonrpc": "2.0", **response, "id": request_id} if isinstance(response, dict) else response
        ),
        schemas.for_def("AgentResponse"),
        NEAR_IDS,
    )
    generic = [
        schemas.for_def(name).map(lambda m: {"jsonrpc": "2.0", **m} if isinstance(m, dict) else m)
        for name in ("AgentRequest", "AgentNotification")
    ]
    messages = st.one_of(*requests, *notifications, responses, *generic)
    return st.one_of(
        st.binary(max_size=40).map(Raw),
        st.text(max_size=40).map(Raw),
        JSON.map(lambda value: Raw(json.dumps(value))),
        mutated(messages).map(Msg),
        mutated(messages).map(Msg),
        mutated(messages).map(Msg),
    )


ANSWERS = st.one_of(
    st.fixed_dictionaries({"result": JSON}),
    st.fixed_dictionaries(
        {"error": st.fixed_dictionaries({"code": st.integers(-33000, 33000), "message": st.text(max_size=20)})}
    ),
    st.fixed_dictionaries(
        {
            "error": st.fixed_dictionaries(
                {"code": st.sampled_from([-32002, -32601, -32602, -32603, -32800]), "message": st.text(max_size=20)},
                optional={"data": JSON},
            )
        }
    ),
)


def defuse(value: Any, pending: int) -> Any:
    """Move a response that would answer the pending request onto another id (it is not a bad frame).

    Only what the client would accept as that answer is moved: a malformed message carrying the
    pending id stays as it is, and must not resolve the request.
    """
    if isinstance(value, list):
        return [defuse(member, pending) for member in value]
    try:
        item = classify(value)
    except MalformedFrame:
        return value
    if isinstance(item, Response | ErrorResponse) and item.id == pending and type(item.id) is int:
        return {**value, "id": pending + 1_000_000}
    return value


class ScriptedAgent:
    """Serves the agent end of a memory link: ``initialize``, then ``_probe`` requests from a script."""

    def __init__(self, version: int, script: list[tuple[list[Raw | Msg], dict[str, Any]]]) -> None:
        self.version = version
        self.script = list(script)
        self.sent_frames: list[bytes | str] = []
        self.replies: list[Any] = []

    async def serve(self, link: MemoryTransport) -> None:
        info_key = "agentInfo" if self.version == 1 else "info"  # a v2 answer in the v1 shape is read as v1
        with_info = {"protocolVersion": self.version, info_key: {"name": "scripted", "version": "0"}}
        while True:
            try:
                message = await link.receive()
            except AcpError:
                return
            if not isinstance(message, dict) or "method" not in message:
                self.replies.append(message)
                continue
            if "id" not in message:
                continue
            if message["method"] == "initialize":
                await link.send({"jsonrpc": "2.0", "id": message["id"], "result": with_info})
            elif message["method"] == PROBE:
                frames, answer = self.script.pop(0)
                for frame in frames:
                    if isinstance(frame, Raw):
                        data: bytes | str = frame.data
                    else:
                        data = json.dumps(defuse(frame.value, message["id"]))
                    self.sent_frames.append(data)
                    link.send_raw(data)
                await link.send({"jsonrpc": "2.0", "id": message["id"], **answer})


class ScriptedConnector:
    """Opens one memory link served by a :class:`ScriptedAgent`."""

    def __init__(self, agent: ScriptedAgent) -> None:
        self.agent = agent
        self.tasks: list[asyncio.Task[None]] = []

    @property
    def target(self) -> str:
        return "memory://scripted"

    async def connect(self) -> Transport:
        client_end, agent_end = memory_pair()
        self.tasks.append(asyncio.ensure_future(self.agent.serve(agent_end)))
        return _Plain(client_end)


class _Plain:
    """The client end as a plain :class:`Transport` (hides ``send_raw`` and the test hooks)."""

    def __init__(self, inner: MemoryTransport) -> None:
        self._inner = inner

    @property
    def info(self) -> TransportInfo:
        return self._inner.info

    async def send(self, message: Any) -> None:
        await self._inner.send(message)

    async def receive(self) -> Any:
        return await self._inner.receive()

    async def aclose(self) -> None:
        await self._inner.aclose()


def undecodable(frame: bytes | str) -> int:
    """How many protocol errors a frame must at least cause: 1 if it is not even a JSON object/array."""
    try:
        decode_frame(frame)
    except MalformedFrame:
        return 1
    return 0


def expect_answer(outcome: Any, answer: dict[str, Any]) -> None:
    if "result" in answer:
        assert not isinstance(outcome, BaseException), outcome
        assert outcome == answer["result"]
    else:
        assert isinstance(outcome, RpcError), outcome
        error = answer["error"]
        assert outcome.code == error["code"]
        assert outcome.message == error["message"]
        assert outcome.data == error.get("data")
        assert type(outcome) is type(RpcError.from_error(error["code"]))


class _ErrorLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def scenario(version: int, frames: list[Raw | Msg], answer: dict[str, Any], then: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    leaked: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: leaked.append(context))
    errors: list[AcpError] = []
    updates: list[UpdateEvent] = []
    agent = ScriptedAgent(version, [(frames, answer), ([], then)])
    connector = ScriptedConnector(agent)
    log = _ErrorLog()
    logging.getLogger("acp_client").addHandler(log)
    try:
        async with AcpClient(
            connector,
            protocol_version=version,
            retry=None,
            timeouts=Timeouts(request=TIMEOUT),
            callbacks=Callbacks(on_protocol_error=errors.append, on_update=updates.append),
        ) as client:
            assert client.protocol_version == version
            first = await asyncio.gather(asyncio.wait_for(client.request(PROBE, {}), TIMEOUT), return_exceptions=True)
            expect_answer(first[0], answer)
            assert len(errors) >= sum(undecodable(frame) for frame in agent.sent_frames), errors
            second = await asyncio.gather(asyncio.wait_for(client.request(PROBE, {}), TIMEOUT), return_exceptions=True)
            expect_answer(second[0], then)
            assert client.state.state is State.CONNECTED
        for task in connector.tasks:
            task.cancel()
        await asyncio.gather(*connector.tasks, return_exceptions=True)
        gc.collect(1)  # young generations: cheap, and where a just-finished task lands
        assert leaked == [], leaked
        assert [record.getMessage() for record in log.records] == []
    finally:
        logging.getLogger("acp_client").removeHandler(log)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_bad_frames_never_disturb_the_answer(data: st.DataObject, version: int) -> None:
    frames = data.draw(st.lists(frames_for(f"v{version}"), max_size=8), label="frames")
    answer = data.draw(ANSWERS, label="answer")
    then = data.draw(ANSWERS, label="then")
    asyncio.run(scenario(version, frames, answer, then))
