"""gptme's ACP agent (``python -m gptme.acp``), over stdio, fully offline (run by ``tests/peers/real_agents.py``).

This script runs inside the cached virtual environment that holds gptme (never in the project's
own environment), so it imports nothing from ``acp_client`` or ``tests``.

gptme keeps its configuration under ``$XDG_CONFIG_HOME/gptme`` and its conversations (one
directory per session, ``conversation.jsonl``) under ``$XDG_DATA_HOME/gptme/logs``. This launcher
points ``HOME`` and every XDG directory into ``--home`` (so a test's agent shares nothing with the
user's or another test's), selects gptme's ``local`` provider (an OpenAI-compatible endpoint) with
the model ``fake-echo`` at ``--base-url`` (the suite's fake OpenAI-compatible server on loopback,
``tests/peers/fake_openai.py``), keeps telemetry off and never lets tiktoken fetch an encoding (its
first use downloads one), then runs gptme's ACP entry point. A respawned process with the same
``--home`` knows the earlier sessions; removing ``HOME/data/gptme/logs`` evicts them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

MODEL = "local/fake-echo"

#: Provider and proxy settings gptme would pick up from the environment: none may leak in (the run is offline).
_FOREIGN = (
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "GROQ_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "OTLP_ENDPOINT",
    "GPTME_MODEL",
    "GPTME_LOGS_HOME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


def prepare(home: Path, base_url: str) -> None:
    """Point gptme's directories into ``home`` and its model at ``base_url``."""
    for variable, name in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_DATA_HOME", "data"),
    ):
        (home / name).mkdir(parents=True, exist_ok=True)
        os.environ[variable] = str(home / name)
    os.environ["HOME"] = str(home)
    for key in _FOREIGN:
        os.environ.pop(key, None)
    os.environ["MODEL"] = MODEL
    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ["OPENAI_API_KEY"] = "sk-offline-test"
    os.environ["GPTME_TELEMETRY_ENABLED"] = "false"
    os.environ["GPTME_TIKTOKEN_TIMEOUT"] = "0"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--home", required=True, help="the agent's HOME (its config and conversations)")
    parser.add_argument("--base-url", required=True, help="the OpenAI-compatible endpoint (http://127.0.0.1:PORT/v1)")
    args = parser.parse_args()
    prepare(Path(args.home), args.base_url)
    from gptme.acp.__main__ import main as serve  # after prepare(): gptme reads its directories at import

    sys.exit(serve())


if __name__ == "__main__":
    main()
