"""How a replay that is not the live conversation once, in order, is described (pure)."""

from __future__ import annotations

from acp_client.check._checks_history import _diagnose
from acp_client.check._protocol import Message


def _conversation(*pairs: tuple[str, str]) -> list[Message]:
    return [Message(role, text, None) for role, text in pairs]


LIVE = _conversation(("user", "first turn"), ("agent", "echo: first turn"), ("user", "second turn"))


def test_the_same_conversation_is_no_problem() -> None:
    assert _diagnose(LIVE, list(LIVE), []) is None


def test_a_prompt_replayed_inside_a_longer_message_is_fused_not_dropped() -> None:
    # The agent's own command messages, replayed as chunks of the same id-less user message.
    replayed = _conversation(
        ("user", "<command-name>/model</command-name>first turn"),
        ("agent", "echo: first turn"),
        ("user", "second turn"),
    )
    assert _diagnose(LIVE, replayed, []) == "fuses user 'first turn' with other content"


def test_a_missing_prompt_is_dropped() -> None:
    replayed = _conversation(("agent", "echo: first turn"), ("user", "second turn"))
    assert _diagnose(LIVE, replayed, []) == "drops user 'first turn'"


def test_repeats_and_additions_are_named() -> None:
    replayed = [*LIVE, *_conversation(("agent", "echo: first turn"), ("agent", "something else"))]
    assert _diagnose(LIVE, replayed, []) == (
        "repeats agent 'echo: first turn'; adds 1 messages the live turns did not have"
    )
