"""Cancel means cancel in the sync facade too (issue 17 item 7): the same rule as ``AcpClient``
(one implementation): a prompt timeout sends ``session/cancel``; the next prompt is not sent while
the agent may still run the old turn."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from acp_client import RequestTimeout, Timeouts, TurnInProgress
from acp_client.sync import SyncAcpClient
from tests._support import eventually_blocking
from tests.sync._support import AgentSide


def test_the_next_prompt_is_refused_while_an_agent_ignores_the_cancel(
    side: AgentSide, make_client: Callable[..., SyncAcpClient]
) -> None:
    side.agent.faults = side.agent.faults | {"ignore-cancel"}
    client = make_client(timeouts=Timeouts(cancel_grace=0.3))
    session = client.new_session("/tmp")
    handle = client.session(session.session_id)
    with pytest.raises(RequestTimeout):
        handle.prompt("/slow", timeout=0.3)
    assert handle.turn_running  # session/cancel was ignored: the agent still runs the turn
    with pytest.raises(TurnInProgress, match="has not ended the cancelled turn"):
        handle.prompt("next")
    side.agent.faults = side.agent.faults - {"ignore-cancel"}
    client.cancel(session.session_id)  # now the agent listens: the old turn ends, the session is free
    eventually_blocking(lambda: not handle.turn_running, what="the old turn to end")
    assert handle.prompt("next").stop_reason == "end_turn"
