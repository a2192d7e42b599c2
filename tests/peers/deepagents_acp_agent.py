"""A LangChain Deep Agent behind deepagents-acp, over stdio, fully offline (run by ``tests/peers/real_agents.py``).

This script runs inside the cached virtual environment that holds deepagents-acp (never in the
project's own environment), so it imports nothing from ``acp_client`` or ``tests``.

The model is a fake LangChain chat model (no network, no key) that never calls a tool; what it
answers depends on the last user message, the same rules as the suite's other offline agents:

- ``slow: WORDS`` streams ``echo: `` and then each word, with a pause of ``--chunk-delay`` seconds
  before each (a turn to cancel or kill mid-way);
- anything else is streamed back as ``echo: `` + the prompt, in two chunks.

Sessions are LangGraph checkpoint threads in a SQLite file (``--store``), so a respawned process
knows the earlier sessions: ``deepagents_acp.server.AgentServerACP(load_sessions=True)`` advertises
``session/load`` and replays a thread's messages (with their LangChain message ids). Removing the
file evicts every session.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from acp import run_agent
from deepagents import create_deep_agent
from deepagents_acp.server import AgentServerACP, AgentSessionContext
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)


def _last_prompt(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and message.additional_kwargs.get("lc_source") != "local_context":
            return _text(message).strip()
    return ""


def _chunks(prompt: str) -> tuple[list[str], bool]:
    if prompt.startswith("slow:"):
        words = prompt.removeprefix("slow:").split()
        return ["echo: ", *(f"{word} " if i < len(words) - 1 else word for i, word in enumerate(words))], True
    half = len(prompt) // 2
    return ["echo: " + prompt[:half], prompt[half:]], False


class EchoChatModel(BaseChatModel):
    """A chat model that echoes the last user prompt (streamed; ``slow:`` prompts paced)."""

    chunk_delay: float = 0.5

    @property
    def _llm_type(self) -> str:
        return "fake-echo"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> EchoChatModel:  # type: ignore[override]
        return self  # it never calls a tool

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        chunks, _ = _chunks(_last_prompt(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="".join(chunks)))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        chunks, _ = _chunks(_last_prompt(messages))
        for chunk in chunks:
            yield ChatGenerationChunk(message=AIMessageChunk(content=chunk))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        chunks, paced = _chunks(_last_prompt(messages))
        for chunk in chunks:
            if paced:
                await asyncio.sleep(self.chunk_delay)
            yield ChatGenerationChunk(message=AIMessageChunk(content=chunk))


async def serve(store: str, chunk_delay: float) -> None:
    async with AsyncSqliteSaver.from_conn_string(store) as checkpointer:

        def build_agent(context: AgentSessionContext) -> Any:
            return create_deep_agent(model=EchoChatModel(chunk_delay=chunk_delay), checkpointer=checkpointer)

        await run_agent(AgentServerACP(agent=build_agent, load_sessions=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", required=True, help="the SQLite file of the LangGraph checkpoints")
    parser.add_argument("--chunk-delay", type=float, default=0.5, help="pause before each chunk of a slow: turn")
    args = parser.parse_args()
    asyncio.run(serve(args.store, args.chunk_delay))


if __name__ == "__main__":
    main()
