"""The ACP steps the checks are made of, over one :class:`~._link.Link`, in either protocol version.

``initialize`` is built and read with the client's codec (:class:`~acp_client.types.InitializeRequest`,
:class:`~acp_client.types.InitializeResponse`), with the same version rules as the client's
handshake (an agent agreeing on another version is initialized again in that version's shape; a
v2 answer in the v1 shape is v1; a v2 proposal refused as invalid is proposed again as v1).
Everything after it is plain JSON on purpose: a check looks at what the agent sent, not at what a
lenient decoder makes of it.

A turn ends, in v1, with the ``session/prompt`` answer; in v2 with a ``state_update`` ``idle``
(the prompt answer only says the turn was accepted).
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from .._codec import from_wire, to_wire
from .._codec._jsonrpc import request_message
from ..exceptions import AcpError
from ..types import ClientCapabilities, Implementation, InitializeRequest, InitializeResponse
from ._link import Answer, CheckFailed, Link, update_of

SUPPORTED = (1, 2)
CHECKER_INFO = Implementation(name="acp-reconnect-check", version="1", title="acp-reconnect conformance checker")


@attrs.frozen
class Handshake:
    """What ``initialize`` told the checker.

    Attributes:
        version: The protocol version both sides speak now.
        result: The ``initialize`` result as sent (the last one, when initialized twice).
        response: The same, decoded by the client's codec.
    """

    version: int
    result: dict[str, Any]
    response: InitializeResponse

    @property
    def capabilities(self) -> dict[str, Any]:
        key = "agentCapabilities" if self.version == 1 else "capabilities"
        value = self.result.get(key)
        return value if isinstance(value, dict) else {}

    @property
    def agent(self) -> dict[str, Any]:
        info = self.response.agent_info
        return {"name": info.name if info else None, "version": info.version if info else None}

    def supports(self, method: str) -> bool:
        return (method != "session/load" or self.version == 1) and self.response.agent_capabilities.supports(method)


async def initialize(link: Link, proposed: int) -> Handshake:
    """Initialize ``link``, proposing ``proposed``.

    Raises:
        CheckFailed: No answer, an error, or no version both sides speak.
    """
    reshaped = False
    for _ in range(3):
        request = InitializeRequest(
            protocol_version=proposed, client_info=CHECKER_INFO, client_capabilities=ClientCapabilities()
        )
        answer = await link.request("initialize", to_wire(request, protocol_version=proposed))
        if not answer.ok:
            supported = answer.data.get("supported") if isinstance(answer.data, dict) else None
            common = [v for v in (supported or []) if v in SUPPORTED and v != proposed]
            if common and not reshaped:
                proposed, reshaped = max(common), True
                continue
            if proposed >= 2 and answer.code in (-32602, -32600) and not reshaped:
                # An agent that speaks only v1 may reject the v2 shape as invalid params (agentao
                # 0.5 does) instead of answering -32022 with the versions it supports: ask again in v1.
                proposed, reshaped = 1, True
                continue
            raise CheckFailed(f"initialize {answer.describe()}")
        result = answer.result
        if not isinstance(result, dict):
            raise CheckFailed(f"initialize answered {result!r}, not an object")
        answered = result.get("protocolVersion")
        if answered not in SUPPORTED:
            raise CheckFailed(f"initialize answered protocolVersion {answered!r}; the checker speaks 1 and 2")
        assert isinstance(answered, int)
        if answered >= 2 and _v1_shaped(result):
            answered = 1
        if answered != proposed and not reshaped:
            proposed, reshaped = answered, True
            continue
        try:
            response = from_wire(InitializeResponse, result, protocol_version=answered)
        except AcpError as exc:
            raise CheckFailed(f"the initialize answer does not decode: {exc}") from None
        return Handshake(answered, result, attrs.evolve(response, protocol_version=answered))
    raise CheckFailed("no common protocol version after three initialize attempts")


def _v1_shaped(result: dict[str, Any]) -> bool:
    v1 = "agentCapabilities" in result or "agentInfo" in result
    return v1 and "capabilities" not in result and "info" not in result


def text_prompt(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def attach_params(session_id: str, cwd: str) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": cwd, "mcpServers": []}


async def new_session(link: Link, cwd: str) -> str:
    """``session/new``; the new id.

    Raises:
        CheckFailed: An error or an answer without a ``sessionId``.
    """
    answer = await link.request("session/new", {"cwd": cwd, "mcpServers": []})
    session_id = answer.result.get("sessionId") if answer.ok and isinstance(answer.result, dict) else None
    if not isinstance(session_id, str) or not session_id:
        raise CheckFailed(f"session/new {answer.describe()}, without a sessionId")
    return session_id


def replay_request(version: int, session_id: str, cwd: str) -> tuple[str, dict[str, Any]]:
    """The request that asks for the whole history: v1 ``session/load``, v2 ``session/resume`` + ``replayFrom``."""
    params = attach_params(session_id, cwd)
    if version == 1:
        return "session/load", params
    return "session/resume", {**params, "replayFrom": {"type": "start"}}


@attrs.frozen
class Turn:
    """One prompt turn as the checker saw it."""

    session_id: str
    text: str
    stop_reason: str | None
    answer: Answer
    start: int
    end: int
    seconds: float


@attrs.frozen
class PendingTurn:
    """A ``session/prompt`` sent, its turn not awaited yet."""

    session_id: str
    text: str
    request_id: int
    start: int


async def start_prompt(link: Link, session_id: str, text: str) -> PendingTurn:
    """Send ``session/prompt`` without waiting for the turn."""
    start = len(link.inbound)
    request_id = link.next_id()
    message = request_message(request_id, "session/prompt", {"sessionId": session_id, "prompt": text_prompt(text)})
    link.remember(request_id, message)
    await link.send(message)
    return PendingTurn(session_id, text, request_id, start)


def ended(pending: PendingTurn, message: dict[str, Any], version: int) -> bool:
    """Whether ``message`` ends the turn: the prompt's answer (v1) or a ``state_update`` idle (v2)."""
    if version >= 2:
        update = update_of(message, pending.session_id)
        return update is not None and update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"
    return message.get("id") == pending.request_id and "method" not in message


async def finish_prompt(link: Link, version: int, pending: PendingTurn, timeout: float) -> Turn:
    """Wait for the turn started by :func:`start_prompt` to end.

    Raises:
        CheckFailed: An error answer, or no end within ``timeout``.
    """
    began = time.monotonic()
    request_id, start = pending.request_id, pending.start
    reply = await link.wait_for(lambda m: m.get("id") == request_id and "method" not in m, start=start, timeout=timeout)
    if reply is None:
        if link.closed_reason is not None:
            raise CheckFailed(f"the link ended during the turn: {link.closed_reason}")
        raise CheckFailed(f"session/prompt was not answered within {timeout:g} s")
    answer = link.answer_of(request_id, reply)
    if not answer.ok:
        raise CheckFailed(f"session/prompt {answer.describe()}")
    stop: Any = answer.result.get("stopReason") if isinstance(answer.result, dict) else None
    if version >= 2:
        remaining = max(0.1, timeout - (time.monotonic() - began))
        idle = await link.wait_for(lambda m: ended(pending, m, version), start=start, timeout=remaining)
        if idle is None and link.closed_reason is not None:
            raise CheckFailed(f"the link ended during the turn: {link.closed_reason}")
        if idle is None:
            raise CheckFailed(f"no state_update idle ended the v2 turn within {timeout:g} s")
        stop = idle["params"]["update"].get("stopReason")
    return Turn(
        pending.session_id,
        pending.text,
        stop if isinstance(stop, str) else None,
        answer,
        start,
        len(link.inbound),
        time.monotonic() - began,
    )


@attrs.frozen
class Message:
    """One conversation message rebuilt from updates: ``role``, ``text``, ``message_id`` (or ``None``)."""

    role: str
    text: str
    message_id: str | None


_ROLE = {
    "user_message_chunk": ("user", True),
    "agent_message_chunk": ("agent", True),
    "user_message": ("user", False),
    "agent_message": ("agent", False),
}


def _text(content: Any) -> str:
    if isinstance(content, dict):
        return str(content.get("text", "")) if content.get("type") == "text" else ""
    if isinstance(content, list):
        return "".join(_text(block) for block in content)
    return ""


def messages_of(updates: list[dict[str, Any]]) -> list[Message]:
    """The user and agent messages in ``updates``, in order.

    Chunks append to the current message of their role; a new ``messageId`` (or a change of role)
    starts a new message; a full ``user_message`` / ``agent_message`` (v2) replaces the message of
    its id, or starts one. Thoughts, tool calls and other updates are not messages.
    """
    found: list[Message] = []
    by_id: dict[str, int] = {}
    for update in updates:
        kind = update.get("sessionUpdate")
        if kind not in _ROLE:
            continue
        role, chunk = _ROLE[kind]
        raw_id = update.get("messageId")
        message_id = raw_id if isinstance(raw_id, str) and raw_id else None
        text = _text(update.get("content"))
        if message_id is not None and message_id in by_id and found[by_id[message_id]].role == role:
            index = by_id[message_id]
            old = found[index]
            found[index] = Message(role, old.text + text if chunk else text, message_id)
            continue
        last = found[-1] if found else None
        if chunk and message_id is None and last is not None and last.role == role and last.message_id is None:
            found[-1] = Message(role, last.text + text, None)
            continue
        if message_id is not None:
            by_id[message_id] = len(found)
        found.append(Message(role, text, message_id))
    return found


def tool_call_ids(updates: list[dict[str, Any]]) -> list[str]:
    """The ``toolCallId`` of each ``tool_call`` update, in order (repeats kept)."""
    return [
        str(update["toolCallId"])
        for update in updates
        if update.get("sessionUpdate") == "tool_call" and isinstance(update.get("toolCallId"), str)
    ]
