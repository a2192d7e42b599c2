"""Client options around recovery: ``retry_unsent_prompts`` (issue 8 item 4) and
``max_incoming_requests`` (issue 9 item 5)."""

from __future__ import annotations

import asyncio

import pytest

from acp_client import AcpClient, ConfigurationError, ConnectionLost, QueueOptions
from acp_client.testing import MemoryConnector, ReferenceAgent, inside

from ._harness import Harness

FAIL_FAST = QueueOptions(enabled=False)


async def _prompt_during_outage(h: Harness, session_id: str) -> asyncio.Future[object]:
    h.connector.refuse(1)  # the first reconnect fails: the outage lasts a little while
    h.connector.drop()
    await h.clock.settle()
    return asyncio.ensure_future(h.client.prompt(session_id, "hello"))


async def test_an_unsent_prompt_is_sent_again_after_recovery_when_asked() -> None:
    async with Harness(client_kwargs={"queue": FAIL_FAST, "retry_unsent_prompts": True}) as h:
        session = await h.client.new_session("/a")
        prompt = await _prompt_during_outage(h, session.session_id)
        result = await h.clock.run(prompt, limit=60.0)
        assert result.stop_reason == "end_turn"  # type: ignore[attr-defined]
        assert h.connector.sent_methods().count("session/prompt") == 1
        assert session.transcript.text() == "user: hello\nagent: echo: hello"


async def test_an_unsent_prompt_fails_without_the_option() -> None:
    async with Harness(client_kwargs={"queue": FAIL_FAST}) as h:
        session = await h.client.new_session("/a")
        prompt = await _prompt_during_outage(h, session.session_id)
        with pytest.raises(ConnectionLost) as caught:
            await h.clock.run(prompt, limit=60.0)
        assert not caught.value.may_have_executed
        await h.until_connected()
        assert "session/prompt" not in h.connector.sent_methods()


async def test_a_prompt_the_agent_may_have_acted_on_is_never_sent_again() -> None:
    async with Harness(client_kwargs={"retry_unsent_prompts": True}, chunk_delay=1.0) as h:
        session = await h.client.new_session("/a")
        prompt = asyncio.ensure_future(session.prompt("hello"))
        await h.clock.advance(0.5)
        assert "session/prompt" in h.connector.sent_methods()
        h.connector.drop()
        with pytest.raises(ConnectionLost) as caught:
            await h.clock.run(prompt, limit=60.0)
        assert caught.value.may_have_executed
        await h.until_connected()
        await h.clock.advance(30.0)
        assert h.connector.sent_methods().count("session/prompt") == 1
        assert len(h.interrupted) == 1


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "8"])
def test_max_incoming_requests_is_validated(value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_incoming_requests"):
        AcpClient(MemoryConnector(ReferenceAgent()), max_incoming_requests=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1, "yes", None])
def test_retry_unsent_prompts_is_validated(value: object) -> None:
    with pytest.raises(ConfigurationError, match="retry_unsent_prompts"):
        AcpClient(MemoryConnector(ReferenceAgent()), retry_unsent_prompts=value)  # type: ignore[arg-type]


def test_replays_on_resume_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="replays_on_resume"):
        AcpClient(MemoryConnector(ReferenceAgent()), replays_on_resume=1)  # type: ignore[arg-type]


async def test_max_incoming_requests_reaches_every_connection() -> None:
    async with Harness(client_kwargs={"max_incoming_requests": 3}) as h:
        conn = inside(h.client).supervisor.connection
        assert conn is not None and conn._cap._limit == 3
        h.connector.drop()
        await h.until_connected()
        conn = inside(h.client).supervisor.connection
        assert conn is not None and conn._cap._limit == 3
