"""A small OpenAI-compatible chat-completions server on loopback, for real agents that call an LLM.

agentao and isaac-acp talk to an OpenAI-style endpoint; the tests point them here (``base_url``)
so they run fully offline. The answer depends only on the last user message, the same rules as
the other offline agents of the suite:

- ``slow: WORDS`` streams ``echo: `` and then each word, with a pause of :attr:`FakeOpenAI.chunk_delay`
  seconds before each (a turn to cancel or kill mid-way);
- anything else is answered ``echo: `` + the prompt, streamed in two chunks.

It serves ``POST /v1/chat/completions`` (streamed as server-sent events when the request asks for
``stream``, one JSON body otherwise) and ``GET /v1/models``; any path ending in those works, so a
base URL with or without ``/v1`` does. It never calls tools. Each request's last user text is kept
in :attr:`FakeOpenAI.prompts` (what the agent actually asked the model, in order; ``<system-reminder>``
blocks an agent adds around the user's words are dropped); which answers were streamed to their end
(:attr:`FakeOpenAI.finished`) and which the agent stopped reading (:attr:`FakeOpenAI.broken`: it went
away, or aborted the turn) are kept too.

It runs in a thread of its own (``tests/peers/_fake_model.py``): it does not depend on the test's event
loop, and an agent killed mid-stream only breaks that one response.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from tests.peers._fake_model import FakeModel, FakeModelHandler

__all__ = ["FakeOpenAI", "answer_chunks"]

MODEL = "fake-echo"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


#: Context an agent wraps around the user's words (agentao prepends the date in one); not the prompt.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def last_user_text(messages: Any) -> str:
    """The text of the last ``user`` message of a chat-completions request, without ``<system-reminder>`` blocks."""
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _REMINDER.sub("", _text_of(message.get("content"))).strip()
    return ""


def answer_chunks(prompt: str) -> tuple[list[str], bool]:
    """The chunks of the answer to ``prompt`` and whether they are paced (a ``slow:`` prompt)."""
    prompt = prompt.strip()
    if prompt.startswith("slow:"):
        words = prompt.removeprefix("slow:").split()
        return ["echo: ", *(f"{word} " if i < len(words) - 1 else word for i, word in enumerate(words))], True
    half = len(prompt) // 2
    return ["echo: " + prompt[:half], prompt[half:]], False


class _Handler(FakeModelHandler):
    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "tests"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        try:
            request = json.loads(self._body() or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        prompt = last_user_text(request.get("messages"))
        owner = self.server.owner
        with owner.lock:
            owner.prompts.append(prompt)
        chunks, paced = answer_chunks(prompt)
        model = str(request.get("model") or MODEL)
        try:
            if request.get("stream"):
                self._stream(model, chunks, paced)
            else:
                self._json(200, self._completion(model, "".join(chunks)))
        except (BrokenPipeError, ConnectionResetError):
            with owner.lock:
                owner.broken.append(prompt)
            return  # the agent went away mid-answer (killed, or it aborted the turn)
        with owner.lock:
            owner.finished.append(prompt)

    def _completion(self, model: str, text: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def _stream(self, model: str, chunks: list[str], paced: bool) -> None:
        self._start_stream()
        ident = f"chatcmpl-{time.monotonic_ns()}"
        created = int(time.time())

        def event(delta: dict[str, Any], finish: str | None = None, usage: bool = False) -> None:
            body: dict[str, Any] = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if usage:
                body["usage"] = {"prompt_tokens": 1, "completion_tokens": len(chunks), "total_tokens": 1 + len(chunks)}
            self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
            self.wfile.flush()

        event({"role": "assistant", "content": ""})
        for chunk in chunks:
            self._pace(paced)
            event({"content": chunk})
        event({}, finish="stop", usage=True)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class FakeOpenAI(FakeModel):
    """The fake endpoint; ``with FakeOpenAI() as llm:`` serves it on ``llm.base_url`` (``.../v1``) until the
    block ends.

    Attributes:
        chunk_delay: The pause before each chunk of a ``slow:`` answer, in seconds.
        prompts: The last user text of every chat-completions request, in arrival order.
        finished: The last user text of every request whose answer was sent to its end, in order.
        broken: The last user text of every request whose answer the agent stopped reading (it
            went away or aborted the turn), in order.
    """

    handler = _Handler
    name = "fake-openai"
    path = "/v1"

    def __init__(self, chunk_delay: float = 0.5) -> None:
        super().__init__(chunk_delay)
        self.prompts: list[str] = []
        self.finished: list[str] = []
        self.broken: list[str] = []
