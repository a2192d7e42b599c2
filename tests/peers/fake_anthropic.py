"""A small Anthropic Messages API server on loopback, for the agents that run the Claude Code CLI.

Zed's Claude adapters (``tests/peers/claude_agents.py``) run the Claude Code CLI, which talks to
``$ANTHROPIC_BASE_URL``; the tests point it here so everything stays on the machine. The answer
depends only on the last user text of the request (``<system-reminder>`` blocks the CLI wraps around
the user's words are dropped):

- ``SLOW WORDS`` streams ``echo: `` and then each word as its own delta, with a pause of
  :attr:`FakeAnthropic.chunk_delay` seconds before each (a turn to cancel or kill mid-way);
- ``TOOL NAME {json}`` answers with one ``tool_use`` block (``stop_reason: tool_use``) calling the
  CLI's tool ``NAME`` with that input; the request that brings the tool's result back is answered
  ``tool said: RESULT``;
- anything else is answered ``echo: `` + the prompt, streamed in two deltas.

The CLI's own blocks in a user message (its ``<command-name>/model`` run and what it printed, the
``[Request interrupted by user]`` mark) are not the user's words and are left out of both.

It serves ``POST /v1/messages`` (server-sent events when the request asks for ``stream``: message_start,
content_block_start / _delta / _stop, message_delta with the stop reason, message_stop; one JSON body
otherwise) and ``POST /v1/messages/count_tokens``; a query string (``?beta=true``) is ignored. Any
other request is logged in :attr:`FakeAnthropic.unknown` and answered 404.

Every Messages request is kept in :attr:`FakeAnthropic.requests` as a :class:`ModelRequest`: its
last user text and the conversation it carried (``(role, text)`` of each message). The CLI sends the
whole conversation with each turn, so :meth:`FakeAnthropic.history_for` tells what the agent remembered
when it answered a prompt: the evidence a test needs before it calls a recovery's continuity kept.

It runs in a thread of its own (``tests/peers/_fake_model.py``): it does not depend on the test's event
loop, and an agent killed mid-stream only breaks that one response.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import attrs

from tests.peers._fake_model import FakeModelHandler, RecordingFakeModel

__all__ = ["FakeAnthropic", "ModelRequest", "answer_for", "conversation_of"]

MODEL = "claude-fake-echo"

#: Context the CLI wraps around the user's words; not the prompt.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
#: Text blocks the CLI itself puts into a user message (its ``/model`` command and what it printed,
#: the mark of an interrupted turn): never a prompt.
_INSERTED = re.compile(
    r"^(<(local-command-caveat|command-name|command-message|command-args|local-command-stdout|local-command-stderr)>"
    r"|\[Request interrupted by user)"
)


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        content = block.get("content")
        inner = content if isinstance(content, str) else "".join(_block_text(part) for part in content or ())
        return f"[tool_result {inner.strip()}]"
    if kind == "tool_use":
        return f"[tool_use {block.get('name')}]"
    return ""


def _texts_of(content: Any) -> list[str]:
    blocks = [content] if isinstance(content, str) else content if isinstance(content, list) else []
    texts = (_REMINDER.sub("", _block_text(block)).strip() for block in blocks)
    return [text for text in texts if text and not _INSERTED.match(text)]


def conversation_of(messages: Any) -> tuple[tuple[str, str], ...]:
    """``(role, text)`` of a Messages request's conversation: one entry per text block of a user message
    (the CLI merges consecutive user turns into one message), one per assistant message; reminders and
    the CLI's own blocks dropped."""
    if not isinstance(messages, list):
        return ()
    found: list[tuple[str, str]] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role"))
        texts = _texts_of(message.get("content"))
        if role == "user":
            found.extend((role, text) for text in texts)
        elif texts:
            found.append((role, "".join(texts)))
    return tuple(found)


@attrs.frozen
class ModelRequest:
    """One Messages request the agent made.

    Attributes:
        prompt: The last user text (what the model was asked now).
        history: ``(role, text)`` of every message it carried, the prompt last.
        model: The model the agent asked for.
        stream: Whether it asked for server-sent events.
    """

    prompt: str
    history: tuple[tuple[str, str], ...]
    model: str
    stream: bool


@attrs.frozen
class _Answer:
    chunks: tuple[str, ...] = ()
    paced: bool = False
    tool: tuple[str, dict[str, Any]] | None = None


def answer_for(prompt: str) -> _Answer:
    """What the fake model answers to ``prompt`` (see the module docstring)."""
    prompt = prompt.strip()
    if prompt.startswith("[tool_result"):
        return _Answer(("tool said: " + prompt.removeprefix("[tool_result").removesuffix("]").strip(),))
    if prompt.startswith("TOOL "):
        name, _, raw = prompt.removeprefix("TOOL ").partition(" ")
        return _Answer(tool=(name, json.loads(raw or "{}")))
    if prompt.startswith("SLOW"):
        words = prompt.split()
        return _Answer(("echo: ", *(f"{word} " if i < len(words) - 1 else word for i, word in enumerate(words))), True)
    half = len(prompt) // 2
    return _Answer(("echo: " + prompt[:half], prompt[half:]))


class _Handler(FakeModelHandler):
    def _not_found(self, body: bytes = b"") -> None:
        with self.server.owner.lock:
            self.server.owner.unknown.append(f"{self.command} {self.path} {body[:200]!r}")
        self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {self.path}"}})

    def do_GET(self) -> None:
        self._not_found()

    def do_HEAD(self) -> None:
        self._not_found()

    def do_POST(self) -> None:
        raw = self._body()
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "not JSON"}})
            return
        if path.endswith("/v1/messages/count_tokens"):
            history = conversation_of(request.get("messages"))
            self._json(200, {"input_tokens": 1 + sum(len(text) // 4 for _, text in history)})
            return
        if not path.endswith("/v1/messages"):
            self._not_found(raw)
            return
        history = conversation_of(request.get("messages"))
        prompt = next((text for role, text in reversed(history) if role == "user"), "")
        model = str(request.get("model") or MODEL)
        stream = bool(request.get("stream"))
        self.server.owner.record(ModelRequest(prompt, history, model, stream))
        answer = answer_for(prompt)
        try:
            if stream:
                self._stream(model, answer)
            else:
                self._json(200, self._message(model, answer))
        except (BrokenPipeError, ConnectionResetError):
            return  # the agent went away mid-answer (killed): nothing to do

    @staticmethod
    def _ident(prefix: str) -> str:
        return f"{prefix}_{time.monotonic_ns():x}"

    def _message(self, model: str, answer: _Answer) -> dict[str, Any]:
        if answer.tool is not None:
            name, arguments = answer.tool
            content: list[dict[str, Any]] = [
                {"type": "tool_use", "id": self._ident("toolu"), "name": name, "input": arguments}
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": "".join(answer.chunks)}]
            stop = "end_turn"
        return {
            "id": self._ident("msg"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": max(1, len(answer.chunks))},
        }

    def _stream(self, model: str, answer: _Answer) -> None:
        self._start_stream()

        def event(name: str, body: dict[str, Any]) -> None:
            self.wfile.write(f"event: {name}\ndata: {json.dumps({'type': name, **body})}\n\n".encode())
            self.wfile.flush()

        whole = self._message(model, answer)
        start = {**whole, "content": [], "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
        event("message_start", {"message": start})
        if answer.tool is not None:
            block = {**whole["content"][0], "input": {}}
            event("content_block_start", {"index": 0, "content_block": block})
            partial = json.dumps(answer.tool[1])
            event("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": partial}})
        else:
            event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            for chunk in answer.chunks:
                self._pace(answer.paced)
                event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": chunk}})
        event("content_block_stop", {"index": 0})
        stop = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
        event("message_delta", {"delta": stop, "usage": {"output_tokens": whole["usage"]["output_tokens"]}})
        event("message_stop", {})


class FakeAnthropic(RecordingFakeModel[ModelRequest]):
    """The fake endpoint; ``with FakeAnthropic() as llm:`` serves it on ``llm.base_url`` until the block ends
    (``http://127.0.0.1:PORT``: the CLI appends ``/v1/messages``).

    Attributes:
        chunk_delay: The pause before each delta of a ``SLOW`` answer, in seconds.
        requests: Every Messages request, in arrival order.
        unknown: Every other request (method, path, start of the body), answered 404.
    """

    handler = _Handler
    name = "fake-anthropic"

    def __init__(self, chunk_delay: float = 0.4) -> None:
        super().__init__(chunk_delay)
        self.unknown: list[str] = []

    def history_for(self, prompt: str) -> tuple[tuple[str, str], ...]:
        """The conversation the agent sent with the last request that asked ``prompt`` (``()`` if none did)."""
        found = self.asked(prompt)
        return found[-1].history if found else ()
