"""One vocabulary for a probe answer (issue 16 item 4): ``Probe`` is what ``session/status`` says, in a
session record, in the client's own probe, a fan-out's answers, the recovery context and outcome."""

from __future__ import annotations

import pytest

import acp_client
import acp_client.state
import acp_client.types
from acp_client import Callbacks, ConfigurationError, RecoveryContext, RecoveryPath
from acp_client.location import Endpoint
from acp_client.pool import locate
from acp_client.state import Probe
from acp_client.testing import MemoryConnector, ReferenceAgent, SessionStore
from acp_client.types import Session, SessionStatusResponse, normalize_status
from tests._harness import Harness


def test_there_is_one_enum_for_a_probe_answer() -> None:
    assert acp_client.state.Probe is acp_client.state.Probe is acp_client.types.Probe
    for module in (acp_client, acp_client.types, acp_client.state):
        assert not hasattr(module, "SessionStatus"), module.__name__
    assert SessionStatusResponse.from_raw("open").status is Probe.ACTIVE
    assert normalize_status("saved") is Probe.INACTIVE


def test_a_session_record_holds_only_an_answer() -> None:
    """``unreachable`` and ``not_probed`` say the instance gave no answer: never a record's status."""
    for answer in (Probe.ACTIVE, Probe.INACTIVE, Probe.UNKNOWN):
        assert Session("sess_1", status=answer).status is answer
    for silence in (Probe.UNREACHABLE, Probe.NOT_PROBED):
        with pytest.raises(ConfigurationError, match="a status is an answer"):
            Session("sess_1", status=silence)


async def test_the_record_the_probe_the_fan_out_and_the_outcome_speak_alike() -> None:
    contexts: list[RecoveryContext] = []
    async with Harness(client_kwargs={"callbacks": Callbacks(decide_recovery=contexts.append)}) as h:
        session = await h.client.new_session("/a")
        status = await h.clock.run(session.session_status())
        assert status.status is Probe.ACTIVE
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME
        assert outcome.probe is contexts[-1].probe is Probe.ACTIVE
        located = await h.clock.run(h.client.locate(session.session_id))
        assert [answer.probe for answer in located.answers] == [Probe.ACTIVE]
        assert (await h.clock.run(h.client.session_status("sess_nope"))).status is Probe.UNKNOWN


async def test_a_fan_out_answers_in_the_same_vocabulary() -> None:
    store = SessionStore()
    agents = [ReferenceAgent(name=f"agent-{n}", store=store) for n in "ab"]
    endpoints = [Endpoint(n, connector=MemoryConnector(a, name=n)) for n, a in zip("ab", agents, strict=True)]
    async with acp_client.AcpClient(MemoryConnector(agents[0]), retry=None) as client:
        handle = await client.new_session("/p")
        located = await locate(handle.session_id, endpoints, timeout=5.0)
        record = await handle.session_status()
    assert [answer.probe for answer in located.answers] == [Probe.ACTIVE, Probe.INACTIVE]
    assert record.status is located.answers[0].probe
