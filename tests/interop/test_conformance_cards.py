"""Report cards: ``acp-reconnect check`` against each real agent of the suite, pinned.

Each agent's card (``expected/<agent>.json``) is the checker's report with the volatile parts
normalized: no ``seconds``, the evidence cut to its first line (the finding) with timings, times
and ids replaced by placeholders, the target reduced to the agent's name. A new agent release that
changes behaviour shows up as a diff of its card. To rewrite the cards after a deliberate change:
``ACP_UPDATE_CARDS=1 pytest tests/interop/test_conformance_cards.py``.

Each verdict is a reading of the wire (``-v`` prints it): ``docs/conformance.md`` lists the real
agents that fail each check. A card's run targets :data:`MINUTE` seconds (the checker reuses one agent
for the checks that need no isolation); the test fails past :data:`LOAD_FACTOR` times that.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_client.check import Report, Settings, Target, run_checks
from tests.peers.claude_agents import ClaudeAdapter
from tests.peers.codex_pi_agents import CodexAcpAgent, PiAcpAgent
from tests.peers.fake_anthropic import FakeAnthropic
from tests.peers.fake_openai import FakeOpenAI
from tests.peers.fake_responses import FakeResponses
from tests.peers.real_agents import (
    AgentaoAgent,
    ChukAcpAgent,
    DeepagentsAcpAgent,
    FastAgent,
    GptmeAcpAgent,
    IsaacAcpAgent,
    PydanticAcpAgent,
)

pytestmark = pytest.mark.timeout(900)

EXPECTED = Path(__file__).with_name("expected")
#: Real agents start in seconds, slower under load: every answer may take this long.
TIMEOUT = 30.0
SLOW_WORDS = "slow: " + " ".join(f"w{i}" for i in range(40))
#: The fake Anthropic and Responses models stream a ``SLOW ...`` prompt word by word.
SLOW_MODEL = "SLOW " + " ".join(f"w{i}" for i in range(40))
#: The target for one agent's whole card on this machine, in seconds.
MINUTE = 60.0
#: On a loaded machine every step slows down: the test fails only past this many times the target (a
#: checker that spawned an agent per check again would be well past it).
LOAD_FACTOR = 2.0

_VOLATILE = [
    (re.compile(r"\d+(?:\.\d+)? ?ms\b"), "<ms>"),
    (re.compile(r"\d+(?:\.\d+)? s\b"), "<s>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?"), "<time>"),
    (re.compile(r"acp-check-unknown-[0-9a-f]{32}"), "<unknown-id>"),
    (re.compile(r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b\d{10}-[0-9A-Za-z]{6}\b"), "<id>"),
    (re.compile(r"\bsess_[0-9a-zA-Z]+\b"), "<id>"),
    (re.compile(r"/tmp/[^\s'\"]+"), "<path>"),
]


def normalize(report: Report, name: str) -> dict[str, Any]:
    """The card: the report without what changes from run to run."""
    data = report.to_json()
    data["target"] = name
    del data["seconds"]
    for check in data["checks"]:
        del check["seconds"]
        finding = check["evidence"].split("\n", 1)[0]
        for pattern, placeholder in _VOLATILE:
            finding = pattern.sub(placeholder, finding)
        check["evidence"] = finding
    return data


def _compare(card: dict[str, Any], name: str) -> None:
    path = EXPECTED / f"{name}.json"
    text = json.dumps(card, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("ACP_UPDATE_CARDS") == "1":
        path.write_text(text, encoding="utf-8")
    expected = json.loads(path.read_text(encoding="utf-8"))
    if card != expected:
        lines = []
        for got, want in zip(card["checks"], expected["checks"], strict=False):
            if got != want:
                was, now = f"{want['status']} ({want['evidence']})", f"{got['status']} ({got['evidence']})"
                lines.append(f"{got['id']}: expected {was}, got {now}")
        for key in ("protocolVersion", "agent", "capabilities", "summary"):
            if card[key] != expected[key]:
                lines.append(f"{key}: expected {expected[key]!r}, got {card[key]!r}")
        pytest.fail(
            f"{name}'s report card changed (ACP_UPDATE_CARDS=1 rewrites it):\n" + "\n".join(lines), pytrace=False
        )


async def _card(
    argv: list[str], name: str, cwd: Path, cancel_prompt: str, *, tool_prompt: str | None = None, version: int = 1
) -> None:
    cwd.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        Target("stdio:" + shlex.join(argv)),
        protocol_version=version,
        cwd=str(cwd),
        timeout=TIMEOUT,
        cancel_prompt=cancel_prompt,
        tool_prompt=tool_prompt,
        verbose=True,
    )
    report = await run_checks(settings)
    wire = os.environ.get("ACP_CARD_WIRE")
    if wire:  # the whole report, the wire excerpts included: what each verdict is read from
        Path(wire).mkdir(parents=True, exist_ok=True)
        (Path(wire) / f"{name}.json").write_text(report.dumps() + "\n", encoding="utf-8")
    _compare(normalize(report, name), name)
    assert report.seconds <= MINUTE * LOAD_FACTOR, f"{name}: {report.seconds:.1f} s for the card, target {MINUTE:g} s"


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(chunk_delay=0.3) as server:
        yield server


@pytest.mark.parametrize("unstable", [False, True], ids=["stable", "unstable"])
async def test_pydantic_acp(pydantic_acp_agent: PydanticAcpAgent, tmp_path: Path, unstable: bool) -> None:
    argv = pydantic_acp_agent.command(tmp_path / "store", unstable=unstable, chunk_delay=0.3)
    name = f"pydantic-acp-{'unstable' if unstable else 'stable'}"
    await _card(argv, name, tmp_path / "work", SLOW_WORDS, tool_prompt="tool: buy milk")


async def test_fast_agent(fast_agent: FastAgent, tmp_path: Path) -> None:
    argv = fast_agent.command(tmp_path / "home")
    tool = '***CALL_TOOL write_note {"text": "buy milk"}'
    await _card(argv, "fast-agent", tmp_path / "work", '***CALL_TOOL wait {"seconds": 60}', tool_prompt=tool)


async def test_isaac_acp(isaac_acp_agent: IsaacAcpAgent, tmp_path: Path, llm: FakeOpenAI) -> None:
    argv = isaac_acp_agent.command(tmp_path / "home", llm.base_url)
    await _card(argv, "isaac-acp", tmp_path / "work", SLOW_WORDS)


async def test_deepagents_acp(deepagents_acp_agent: DeepagentsAcpAgent, tmp_path: Path) -> None:
    argv = deepagents_acp_agent.command(tmp_path / "store.sqlite", chunk_delay=0.3)
    await _card(argv, "deepagents-acp", tmp_path / "work", SLOW_WORDS)


async def test_agentao(agentao_agent: AgentaoAgent, tmp_path: Path, llm: FakeOpenAI) -> None:
    argv = agentao_agent.command(tmp_path / "home", llm.base_url)
    await _card(argv, "agentao", tmp_path / "work", SLOW_WORDS)


async def test_gptme(gptme_acp_agent: GptmeAcpAgent, tmp_path: Path, llm: FakeOpenAI) -> None:
    argv = gptme_acp_agent.command(tmp_path / "home", llm.base_url)
    await _card(argv, "gptme", tmp_path / "work", SLOW_WORDS)


async def test_chuk_acp_agent(chuk_acp_agent: ChukAcpAgent, tmp_path: Path, llm: FakeOpenAI) -> None:
    argv = chuk_acp_agent.command(tmp_path / "home", llm.base_url)
    await _card(argv, "chuk-acp-agent", tmp_path / "work", SLOW_WORDS)


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(chunk_delay=0.3) as server:
        yield server


@pytest.fixture
def responses() -> Iterator[FakeResponses]:
    with FakeResponses(chunk_delay=0.3) as server:
        yield server


def _without_sandbox(argv: list[str]) -> list[str]:
    """The checker passes its whole environment on; the machine's ``IS_SANDBOX`` makes the CLI refuse the
    flag the adapter passes as root (the client's own environment allowlist keeps it out)."""
    return [argv[0], "-u", "IS_SANDBOX", *argv[1:]]


async def test_claude_agent_acp(claude_agent_acp: ClaudeAdapter, tmp_path: Path, anthropic: FakeAnthropic) -> None:
    argv = _without_sandbox(claude_agent_acp.command(tmp_path / "home", anthropic.base_url))
    await _card(argv, "claude-agent-acp", tmp_path / "work", SLOW_MODEL)


async def test_claude_code_acp(claude_code_acp: ClaudeAdapter, tmp_path: Path, anthropic: FakeAnthropic) -> None:
    argv = _without_sandbox(claude_code_acp.command(tmp_path / "home", anthropic.base_url))
    await _card(argv, "claude-code-acp", tmp_path / "work", SLOW_MODEL)


async def test_codex_acp(codex_acp_agent: CodexAcpAgent, tmp_path: Path, responses: FakeResponses) -> None:
    argv = codex_acp_agent.command(tmp_path / "home", responses.base_url)
    await _card(argv, "codex-acp", tmp_path / "work", SLOW_MODEL)


async def test_pi_acp(pi_acp_agent: PiAcpAgent, tmp_path: Path, responses: FakeResponses) -> None:
    argv = pi_acp_agent.command(tmp_path / "home", responses.base_url)
    await _card(argv, "pi-acp", tmp_path / "work", SLOW_MODEL)
