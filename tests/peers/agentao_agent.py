"""agentao (``python -m agentao.acp``), over stdio, fully offline (run by ``tests/peers/real_agents.py``).

This script runs inside the cached virtual environment that holds agentao (never in the project's
own environment), so it imports nothing from ``acp_client`` or ``tests``.

agentao reads its LLM settings from the environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``OPENAI_MODEL``) and its user settings from ``~/.agentao``. This launcher sets ``HOME`` to
``--home`` and points the OpenAI settings at ``--base-url`` (the suite's fake OpenAI-compatible
server on loopback, ``tests/peers/fake_openai.py``), then runs agentao's ACP server.

agentao keeps a session in ``<session cwd>/.agentao/sessions/`` and writes it only when the server
shuts down cleanly (end of stdin): an agent killed with SIGKILL loses every turn since its last
clean exit. That is the agent's behaviour, and what the recovery tests exercise.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

MODEL = "fake-echo"

#: Provider settings agentao would pick up from the environment: none may leak in (the run is offline).
_FOREIGN = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "LLM_PROVIDER", "OPENAI_ORG_ID", "OPENAI_PROJECT")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--home", required=True, help="the agent's HOME (its ~/.agentao)")
    parser.add_argument("--base-url", required=True, help="the OpenAI-compatible endpoint (http://127.0.0.1:PORT/v1)")
    args = parser.parse_args()
    home = Path(args.home)
    home.mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(home)
    os.environ["OPENAI_BASE_URL"] = args.base_url
    os.environ["OPENAI_API_KEY"] = "sk-offline-test"
    os.environ["OPENAI_MODEL"] = MODEL
    for key in _FOREIGN:
        os.environ.pop(key, None)
    from agentao.acp.__main__ import main as serve  # after the environment is set

    serve()


if __name__ == "__main__":
    main()
