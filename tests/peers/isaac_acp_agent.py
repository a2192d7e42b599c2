"""isaac-acp, over stdio, fully offline (run by ``tests/peers/real_agents.py``).

This script runs inside the cached virtual environment that holds isaac-acp (never in the
project's own environment), so it imports nothing from ``acp_client`` or ``tests``.

isaac-acp keeps its configuration and its sessions in the platform directories (platformdirs:
``$XDG_CONFIG_HOME/isaac``, ``$XDG_STATE_HOME/isaac/sessions``). This launcher points all of them
into ``--home`` (so a test's agent shares nothing with the user's or another test's), writes a
model entry ``fake:echo`` (isaac's ``openai`` provider, model ``fake-echo``) and selects it, and
points the OpenAI client at ``--base-url`` (the suite's fake OpenAI-compatible server on loopback,
``tests/peers/fake_openai.py``), then runs isaac's own entry point. A respawned process with the
same ``--home`` knows the earlier sessions; removing ``HOME/state/isaac/sessions`` evicts them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

MODEL_ID = "fake:echo"

#: Provider keys isaac would pick up from the environment: none may leak in (the run is offline).
_FOREIGN_KEYS = ("ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "LOGFIRE_TOKEN")


def prepare(home: Path, base_url: str) -> None:
    """Point isaac's directories into ``home`` and its OpenAI provider at ``base_url``."""
    for variable, name in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_DATA_HOME", "data"),
    ):
        os.environ[variable] = str(home / name)
    os.environ["HOME"] = str(home)
    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ["OPENAI_API_KEY"] = "sk-offline-test"
    for key in _FOREIGN_KEYS:
        os.environ.pop(key, None)
    config = home / "config" / "isaac"
    config.mkdir(parents=True, exist_ok=True)
    models = {"models": {MODEL_ID: {"provider": "openai", "model": "fake-echo", "description": "offline test model"}}}
    (config / "models.json").write_text(json.dumps(models), encoding="utf-8")
    (config / "isaac.ini").write_text(f"[models]\ncurrent_model = {MODEL_ID}\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--home", required=True, help="directory for isaac's config and sessions")
    parser.add_argument("--base-url", required=True, help="the OpenAI-compatible endpoint (http://127.0.0.1:PORT/v1)")
    args = parser.parse_args()
    prepare(Path(args.home), args.base_url)
    from isaac.agent import main_entry  # after prepare(): isaac reads its directories at import

    sys.exit(main_entry())


if __name__ == "__main__":
    main()
