"""An agent built on chuk-acp-agent, over stdio, fully offline (run by ``tests/peers/real_agents.py``).

This script runs inside the cached virtual environment that holds chuk-acp-agent (never in the
project's own environment), so it imports nothing from ``acp_client`` or ``tests``.

chuk-acp-agent is a kit: an agent is a subclass of its ``Agent`` class that streams its answer from
``on_prompt``; the kit (and the ``chuk-acp`` library under it) does all the protocol work. The agent
here asks an OpenAI-compatible chat-completions endpoint (``--base-url``: the suite's fake server on
loopback, ``tests/peers/fake_openai.py``) and streams what it answers, chunk by chunk, as the kit
intends. ``HOME`` is ``--home``. The kit keeps sessions in memory only.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from chuk_acp_agent import Agent, Context

MODEL = "fake-echo"


def stream_answer(base_url: str, prompt: str) -> Iterator[str]:
    """The text chunks the endpoint streams for ``prompt`` (a chat-completions request with ``stream``)."""
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": prompt}]}
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-offline-test"},
    )
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    with direct.open(request, timeout=60) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[5:]).get("choices", []):
                text = (choice.get("delta") or {}).get("content")
                if text:
                    yield text


class EchoAgent(Agent):
    """Streams the model's answer to each prompt."""

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self._base_url = base_url

    async def on_prompt(self, ctx: Context, prompt: str) -> AsyncIterator[str]:
        for chunk in stream_answer(self._base_url, prompt):
            yield chunk


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--home", required=True, help="the agent's HOME")
    parser.add_argument("--base-url", required=True, help="the OpenAI-compatible endpoint (http://127.0.0.1:PORT/v1)")
    args = parser.parse_args()
    home = Path(args.home)
    home.mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(home)
    EchoAgent(args.base_url).run()


if __name__ == "__main__":
    main()
