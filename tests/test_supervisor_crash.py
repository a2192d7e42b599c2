"""If one of the client's own tasks dies of an unexpected error (a bug), the client fails with that
cause and every pending or queued request fails — nothing hangs (before: "Task exception was never
retrieved" and a prompt that never resolved)."""

from __future__ import annotations

import asyncio

import pytest

from acp_client import ClientClosed, ConnectionLost, State
from acp_client.testing import inside
from tests._harness import Harness


class Boom(Exception):
    pass


async def test_a_crashed_recovery_task_fails_the_client_and_its_queued_requests() -> None:
    async with Harness() as h:
        session = await h.client.new_session("/work")
        inside(h.client).crash(Boom("bug in recovery"), recovering=True)  # the reconnect task will die of it
        h.connector.refuse(1)
        h.connector.drop()
        await h.clock.settle()
        queued = asyncio.ensure_future(session.session_status())  # waits for the reconnect
        await h.clock.settle()
        with pytest.raises(ClientClosed) as caught:
            await h.clock.run(queued, limit=60)
        assert isinstance(caught.value.__cause__, Boom)
        assert h.client.state.state is State.FAILED and "bug in recovery" in (h.client.state.cause or "")
        with pytest.raises(ClientClosed):  # new work fails at once too
            await session.prompt("anyone?")


@pytest.mark.parametrize("version", [1, 2])
async def test_a_crashed_task_fails_pending_requests_and_turns_with_that_cause(version: int) -> None:
    async with Harness(protocol_version=version) as h:
        session = await h.client.new_session("/work")
        turn = asyncio.ensure_future(session.prompt("/slow"))  # v1: a pending request; v2: a running turn
        await h.clock.advance(1.0)
        assert session.turn_running
        inside(h.client).crash(Boom("bug in a supervisor task"))
        with pytest.raises((ConnectionLost, ClientClosed)) as caught:
            await h.clock.run(turn, limit=60)
        error = caught.value
        cause = error.cause if isinstance(error, ConnectionLost) else error.__cause__
        assert isinstance(cause, Boom), error
        assert h.client.state.state is State.FAILED


async def test_the_done_callback_notices_a_task_that_died() -> None:
    async with Harness() as h:
        await h.client.new_session("/work")
        inside(h.client).crash(Boom("unexpected"))  # one of the link's own tasks dies of it
        await h.clock.settle()
        assert h.client.state.state is State.FAILED
        assert isinstance(inside(h.client).supervisor.failure, Boom)
