"""A fake OpenAI Responses API server on loopback, for the agents built on it (codex-acp, pi-acp).

codex and pi stream every model turn from ``POST /v1/responses`` (``stream: true``); the tests point
them here so they run fully offline. The answer depends only on the last user text of the request:

- ``SLOW WORDS`` streams ``echo: `` and then each word as its own delta, :attr:`FakeResponses.chunk_delay`
  seconds apart (a turn long enough to cancel or kill mid-stream);
- ``TOOL NAME JSON`` asks for the function tool ``NAME`` with the arguments ``JSON`` (a function call
  item); the request that brings the tool's output back is answered ``tool said: <output>``;
- anything else is answered ``echo: `` + the prompt, in two deltas.

What makes it useful for recovery tests: every request's **history** is recorded
(:attr:`FakeResponses.requests`, each a :class:`ModelRequest`), the user and assistant texts the agent
sent, in order, without the context an agent adds of its own (codex's ``<environment_context>``, its
AGENTS.md and permission notes, the ``<turn_aborted>`` note it adds after a cancel). A test reads it to
prove whether the agent still had the earlier turns after a recovery: the agent remembers exactly what
it sends its model.

It also answers ``GET /v1/models`` (one model, :data:`MODEL`). The events of a streamed answer are the
Responses API's: ``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta`` (one per chunk),
``response.output_text.done``, ``response.content_part.done``, ``response.output_item.done``,
``response.completed`` (for a tool call: the item is a ``function_call`` with
``response.function_call_arguments.delta``/``.done``).

It runs in a thread of its own (``tests/peers/_fake_model.py``): it does not depend on the test's event
loop, and an agent killed mid-stream only breaks that one response.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import attrs

from tests.peers._fake_model import FakeModelHandler, RecordingFakeModel

__all__ = ["MODEL", "FakeResponses", "ModelRequest", "answer_for"]

MODEL = "fake-echo"

#: A user message an agent adds of its own (context, instructions), not a prompt the user typed.
_CONTEXT = re.compile(
    r"^\s*(<environment_context>|<user_instructions>|<permissions instructions>|<turn_aborted>|# AGENTS\.md)"
)


@attrs.frozen
class ModelRequest:
    """One request the agent sent its model.

    Attributes:
        history: ``(role, text)`` of every user and assistant message of the input, in order (``role``
            ``user`` or ``assistant``; the agent's own context messages left out), tool outputs as
            ``("tool", output)``.
        prompt: The last user text (what the answer depends on).
        body: The whole request body, as sent.
    """

    history: tuple[tuple[str, str], ...]
    prompt: str
    body: dict[str, Any]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def history_of(body: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The conversation a Responses request carries (see :attr:`ModelRequest.history`)."""
    items = body.get("input")
    if isinstance(items, str):
        return (("user", items),)
    found: list[tuple[str, str]] = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") in ("user", "assistant"):
            text = _text_of(item.get("content"))
            if item["role"] == "user" and _CONTEXT.match(text):
                continue
            found.append((str(item["role"]), text))
        elif kind == "function_call_output":
            found.append(("tool", _text_of(item.get("output"))))
    return tuple(found)


def answer_for(history: tuple[tuple[str, str], ...]) -> tuple[list[str], bool, tuple[str, str] | None]:
    """The answer to a request: its text chunks, whether they are paced, and a tool call ``(name, arguments)``."""
    if history and history[-1][0] == "tool":
        return [f"tool said: {history[-1][1]}"], False, None
    prompt = next((text for role, text in reversed(history) if role == "user"), "").strip()
    if prompt.startswith("SLOW"):
        words = prompt.removeprefix("SLOW").split()
        return ["echo: ", *(f"{word} " if i < len(words) - 1 else word for i, word in enumerate(words))], True, None
    if prompt.startswith("TOOL "):
        name, _, arguments = prompt.removeprefix("TOOL ").partition(" ")
        return [], False, (name, arguments.strip() or "{}")
    half = len(prompt) // 2
    return ["echo: " + prompt[:half], prompt[half:]], False, None


class _Handler(FakeModelHandler):
    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "tests"}
            self._json(200, {"object": "list", "data": [model], "models": []})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        try:
            body = json.loads(self._body() or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        if not self.path.split("?")[0].rstrip("/").endswith("/responses"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        history = history_of(body)
        prompt = next((text for role, text in reversed(history) if role == "user"), "")
        self.server.owner.record(ModelRequest(history, prompt, body))
        chunks, paced, tool = answer_for(history)
        try:
            self._stream(str(body.get("model") or MODEL), chunks, paced, tool)
        except (BrokenPipeError, ConnectionResetError):
            return  # the agent went away mid-answer (killed): nothing to do

    def _stream(self, model: str, chunks: list[str], paced: bool, tool: tuple[str, str] | None) -> None:
        self._start_stream()
        owner = self.server.owner
        serial = next(owner.serials)
        sequence = itertools.count()
        response: dict[str, Any] = {
            "id": f"resp_{serial}",
            "object": "response",
            "created_at": int(time.time()),
            "model": model,
            "status": "in_progress",
            "output": [],
            "usage": None,
        }

        def send(kind: str, **fields: Any) -> None:
            event = {"type": kind, "sequence_number": next(sequence), **fields}
            self.wfile.write(f"event: {kind}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()

        send("response.created", response=response)
        send("response.in_progress", response=response)
        if tool is not None:
            name, arguments = tool
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{serial}",
                "call_id": f"call_{serial}",
                "name": name,
                "arguments": "",
                "status": "in_progress",
            }
            send("response.output_item.added", output_index=0, item=item)
            send("response.function_call_arguments.delta", item_id=item["id"], output_index=0, delta=arguments)
            send("response.function_call_arguments.done", item_id=item["id"], output_index=0, arguments=arguments)
            item = {**item, "arguments": arguments, "status": "completed"}
        else:
            item_id = f"msg_{serial}"
            item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
            place = {"item_id": item_id, "output_index": 0, "content_index": 0}
            send("response.output_item.added", output_index=0, item=item)
            send("response.content_part.added", **place, part={"type": "output_text", "text": "", "annotations": []})
            for chunk in chunks:
                self._pace(paced)
                send("response.output_text.delta", **place, delta=chunk, logprobs=[])
            text = "".join(chunks)
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            send("response.output_text.done", **place, text=text, logprobs=[])
            send("response.content_part.done", **place, part=part)
            item = {**item, "status": "completed", "content": [part]}
        send("response.output_item.done", output_index=0, item=item)
        usage = {
            "input_tokens": 1,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": max(1, len(chunks)),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 1 + max(1, len(chunks)),
        }
        send("response.completed", response={**response, "status": "completed", "output": [item], "usage": usage})


class FakeResponses(RecordingFakeModel[ModelRequest]):
    """The fake endpoint; ``with FakeResponses() as llm:`` serves it on ``llm.base_url`` (``.../v1``) until the
    block ends.

    Attributes:
        chunk_delay: The pause before each delta of a ``SLOW`` answer, in seconds.
        requests: Every Responses request, in arrival order.
        lock: Held while :attr:`requests` grows (a request thread appends).
    """

    handler = _Handler
    name = "fake-responses"
    path = "/v1"

    def __init__(self, chunk_delay: float = 0.3) -> None:
        super().__init__(chunk_delay)
        self.serials: Iterator[int] = itertools.count(1)

    def history_for(self, prompt: str) -> tuple[tuple[str, str], ...]:
        """The history of the last request whose last user text is ``prompt`` (what the agent remembered then)."""
        found = [request.history for request in self.asked(prompt)]
        assert found, f"the model was never asked {prompt!r}; it was asked {self.prompts}"
        return found[-1]
