"""The mode, model and config options the app set are restored after a recovery that rebuilt the
session (issue 8 item 3)."""

from __future__ import annotations

from typing import Any

import pytest

from acp_client import CapabilityNotSupported, RecoveryPath
from acp_client.testing import inside

from ._harness import OFFER, SETTERS, Harness, SettingsAgent


def setters_sent(h: Harness, after: int = 0) -> list[tuple[str, Any]]:
    sent = [m for m in h.connector.sent() if m.get("method") in SETTERS][after:]
    return [(m["method"], {k: v for k, v in m["params"].items() if k != "sessionId"}) for m in sent]


async def set_everything(h: Harness) -> Any:
    session = await h.client.new_session("/a")
    await session.set_mode("code")
    await session.set_model("m2")
    options = await session.set_config_option("effort", "high")
    assert [option.id for option in options] == ["effort"]
    return session


async def relink(h: Harness) -> None:
    h.connector.drop()
    await h.clock.settle()
    await h.until_connected()


RESTORED = [
    ("session/set_mode", {"modeId": "code"}),
    ("session/set_model", {"modelId": "m2"}),
    ("session/set_config_option", {"configId": "effort", "value": "high"}),
]


@pytest.mark.parametrize("how", ["replay", "new_session"])
async def test_settings_are_restored_after_a_replay_or_a_new_session(how: str) -> None:
    async with Harness() as h:
        SettingsAgent(h)
        await relink(h)  # the next links offer settings
        session = await set_everything(h)
        before = len(setters_sent(h))
        if how == "replay":
            h.agent.lose_memory()
        else:
            h.agent.evict(session.session_id)
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath(how)
        assert setters_sent(h, before) == RESTORED
        assert "restored mode 'code', model 'm2', config option 'effort' = 'high'" in outcome.notes


async def test_a_resume_restores_nothing() -> None:
    async with Harness() as h:
        SettingsAgent(h)
        await relink(h)
        await set_everything(h)
        before = len(setters_sent(h))
        outcome = await h.drop_and_recover()
        assert outcome.path is RecoveryPath.RESUME and setters_sent(h, before) == []


async def test_what_the_agent_no_longer_offers_is_reported() -> None:
    async with Harness() as h:
        agent = SettingsAgent(h)
        await relink(h)
        session = await set_everything(h)
        before = len(setters_sent(h))
        agent.offer = {"modes": OFFER["modes"]}
        h.agent.evict(session.session_id)
        outcome = await h.drop_and_recover()
        assert setters_sent(h, before) == RESTORED[:1]
        assert "could not restore model 'm2': the agent does not offer it now" in outcome.notes
        assert "could not restore config option 'effort' = 'high': the agent does not offer it now" in outcome.notes


async def test_a_drop_while_restoring_keeps_the_outcome_and_restores_next_time() -> None:
    async with Harness() as h:
        agent = SettingsAgent(h)
        await relink(h)
        session = await set_everything(h)
        before = len(setters_sent(h))
        agent.swallow = "session/set_model"
        h.agent.lose_memory()
        h.connector.drop()
        await h.clock.settle()
        await h.clock.run(agent.swallowed.wait(), limit=60.0)
        agent.swallow = None
        h.connector.drop()
        await h.until_connected()
        replay, resume = [o for o in h.outcomes if o.previous_session_id == session.session_id][-2:]
        assert replay.path is RecoveryPath.REPLAY
        assert any("was cut off by a drop" in note for note in replay.notes)
        assert resume.path is RecoveryPath.RESUME
        assert "restored mode 'code', model 'm2', config option 'effort' = 'high'" in resume.notes
        assert setters_sent(h, before) == [*RESTORED[:2], *RESTORED]
        assert not inside(h.client).table.require(session.session_id).settings.pending


async def test_set_model_and_config_need_a_session_that_offers_them() -> None:
    async with Harness() as h:
        session = await h.client.new_session("/a")
        with pytest.raises(CapabilityNotSupported, match="models"):
            await session.set_model("m2")
        with pytest.raises(CapabilityNotSupported, match="config_options"):
            await session.set_config_option("effort", "high")
        assert setters_sent(h) == []
