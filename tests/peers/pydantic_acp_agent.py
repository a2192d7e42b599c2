"""A pydantic-ai agent behind pydantic-acp, over stdio, fully offline (run by ``tests/peers/real_agents.py``).

This script runs inside the cached virtual environment that holds pydantic-acp (never in the
project's own environment), so it imports nothing from ``acp_client`` or ``tests``.

The model is pydantic-ai's ``FunctionModel`` (no network, no key); what it answers depends on the
last user prompt:

- ``tool: TEXT`` calls the ``write_note`` tool, which requires approval: pydantic-acp then sends
  ``session/request_permission``; once the tool ran (or was denied) the model answers
  ``note saved: TEXT`` (or ``note refused``).
- ``slow: TEXT`` streams ``echo: `` and then each word of ``TEXT`` with a pause of
  ``--chunk-delay`` seconds before each (for cancelling or killing the agent mid-turn).
- anything else is streamed back as ``echo: `` + the prompt, in two chunks.

Sessions are kept in a ``FileSessionStore`` under ``--store`` (a directory), so a respawned process
knows the earlier sessions (``session/load`` replays them). ``--unstable`` turns on the ACP SDK's
unstable methods (``session/resume``, ``session/fork``, ``session/close``), which pydantic-acp
advertises either way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from acp import run_agent
from pydantic_acp import AdapterConfig, create_acp_agent
from pydantic_acp.session.store import FileSessionStore
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

TOOL = "write_note"


def _last_request(messages: list[ModelMessage]) -> ModelRequest | None:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            return message
    return None


def _last_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "user-prompt":
                    content = part.content
                    return content if isinstance(content, str) else " ".join(str(item) for item in content)
    return ""


def _tool_result(messages: list[ModelMessage]) -> ToolReturnPart | None:
    request = _last_request(messages)
    if request is None:
        return None
    for part in request.parts:
        if isinstance(part, ToolReturnPart) and part.tool_name == TOOL:
            return part
        if part.part_kind == "retry-prompt" and getattr(part, "tool_name", None) == TOOL:
            return None
    return None


def _answer(messages: list[ModelMessage]) -> tuple[str, list[str]] | tuple[str, dict[str, str]]:
    """``("text", chunks)`` or ``("tool", args)``."""
    request = _last_request(messages)
    if request is not None and any(part.part_kind in ("tool-return", "retry-prompt") for part in request.parts):
        result = _tool_result(messages)
        if result is not None and isinstance(result.content, str) and result.content.startswith("saved "):
            return "text", [f"note saved: {result.content.removeprefix('saved ')}"]
        return "text", ["note refused"]
    prompt = _last_prompt(messages)
    if prompt.startswith("tool:"):
        return "tool", {"text": prompt.removeprefix("tool:").strip()}
    if prompt.startswith("slow:"):
        words = prompt.removeprefix("slow:").split()
        return "text", ["echo: ", *(f"{word} " if i < len(words) - 1 else word for i, word in enumerate(words))]
    half = len(prompt) // 2
    return "text", ["echo: " + prompt[:half], prompt[half:]]


def build_model(chunk_delay: float) -> FunctionModel:
    def function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        kind, value = _answer(messages)
        if kind == "tool":
            assert isinstance(value, dict)
            return ModelResponse(parts=[ToolCallPart(TOOL, value)])
        assert isinstance(value, list)
        return ModelResponse(parts=[TextPart("".join(value))])

    async def stream_function(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        kind, value = _answer(messages)
        if kind == "tool":
            assert isinstance(value, dict)
            yield {0: DeltaToolCall(name=TOOL, json_args=json.dumps(value), tool_call_id=f"call-{len(messages)}")}
            return
        assert isinstance(value, list)
        slow = _last_prompt(messages).startswith("slow:")
        for chunk in value:
            if slow:
                await asyncio.sleep(chunk_delay)
            yield chunk

    return FunctionModel(function, stream_function=stream_function, model_name="echo")


def build_agent(chunk_delay: float) -> Agent[None, str | DeferredToolRequests]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        build_model(chunk_delay), output_type=[str, DeferredToolRequests], name="echo-agent"
    )

    @agent.tool_plain(requires_approval=True)
    def write_note(text: str) -> str:
        """Save a note (needs the user's approval)."""
        return f"saved {text}"

    return agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="directory of the FileSessionStore")
    parser.add_argument("--unstable", action="store_true", help="serve session/resume, fork and close")
    parser.add_argument("--chunk-delay", type=float, default=0.3, help="pause before each chunk of a slow: turn")
    args = parser.parse_args()
    config = AdapterConfig(session_store=FileSessionStore(Path(args.store)))
    adapter = create_acp_agent(agent=build_agent(args.chunk_delay), config=config)
    asyncio.run(run_agent(adapter, use_unstable_protocol=args.unstable))


if __name__ == "__main__":
    main()
