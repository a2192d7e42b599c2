"""Helpers shared by the tests of Zed's Claude adapters (claude-agent-acp, claude-code-acp): the CLI's
session files, what the fake model was sent, the transcript's typed and inserted messages (the helpers
of every real-agent test are in ``tests/interop/_real_agents.py``).

The adapters themselves come from ``tests/peers/claude_agents.py``, their model from
``tests/peers/fake_anthropic.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from acp_client.transcript import Transcript
from tests._support import eventually
from tests.interop._real_agents import SLOW
from tests.peers.claude_agents import ClaudeAdapter
from tests.peers.fake_anthropic import FakeAnthropic

__all__ = [
    "INTERRUPTED",
    "MODEL_COMMAND",
    "MODEL_SET",
    "NO_RESPONSE",
    "SLOW_PROMPT",
    "TOOL_PROMPT",
    "drop_turn",
    "model_got",
    "remembered",
    "session_file",
    "stored",
    "typed",
]

#: A prompt the fake model answers slowly, one word per delta.
SLOW_PROMPT = "SLOW alpha beta gamma delta epsilon zeta eta theta"
#: What the adapter's replay puts among the prompts before the first prompt of each agent process.
MODEL_COMMAND = (
    "<command-name>/model</command-name>\n            <command-message>model</command-message>\n"
    "            <command-args>default</command-args>"
)
MODEL_SET = "<local-command-stdout>Set model to claude-sonnet-4-6</local-command-stdout>"
INTERRUPTED = "[Request interrupted by user]"
#: The answer the CLI stores (and sends the model) for a turn cut off before it ended.
NO_RESPONSE = "No response requested."
#: A prompt the fake model answers with a call of the CLI's Bash tool (read-only: no permission asked).
TOOL_PROMPT = 'TOOL Bash {"command": "echo hi-from-tool", "description": "say hi"}'


def typed(transcript: Transcript) -> list[tuple[str, str]]:
    """The user's and the agent's messages (agent-inserted user content left out)."""
    return [(m.role, m.text) for m in transcript.all_messages() if not m.inserted]


def remembered(llm: FakeAnthropic, prompt: str) -> tuple[tuple[str, str], ...]:
    """The conversation the CLI sent the model with ``prompt``: what the agent remembered."""
    history = llm.history_for(prompt)
    assert history and history[-1] == ("user", prompt), (prompt, llm.requests)
    return history[:-1]


def session_file(home: Path, session_id: str) -> Path | None:
    found = list(ClaudeAdapter.store_of(home).glob(f"*/{session_id}.jsonl"))
    return found[0] if found else None


async def stored(home: Path, session_id: str, text: str) -> None:
    """Wait until the CLI's session file holds ``text`` (it writes a turn shortly after the turn ends)."""

    def holds() -> bool:
        path = session_file(home, session_id)
        return path is not None and json.dumps(text)[1:-1] in path.read_text(encoding="utf-8")

    await eventually(holds, timeout=SLOW, what=f"the CLI stored {text!r}")


def drop_turn(home: Path, session_id: str, prompt: str) -> None:
    """Cut the CLI's session file before the entry of ``prompt``: what a kill leaves when it comes before
    the CLI wrote the turn (it writes a turn up to a second after answering ``end_turn``)."""
    path = session_file(home, session_id)
    assert path is not None
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)

    def is_prompt(line: str) -> bool:
        entry = json.loads(line)
        message = entry.get("message") or {}
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [b.get("text") for b in content or () if isinstance(b, dict)]
        return entry.get("type") == "user" and prompt in texts

    cut = next(i for i, line in enumerate(lines) if is_prompt(line))
    path.write_text("".join(lines[:cut]), encoding="utf-8")


async def model_got(llm: FakeAnthropic, prompt: str) -> None:
    """Wait until the model was asked ``prompt``."""
    await eventually(lambda: prompt in llm.prompts, timeout=SLOW, what=f"the model asked {prompt!r}")
