"""A coherent record (issue 17 item 8): after ``set_mode`` / ``set_model`` / ``set_config_option``,
after a restore, and after the agent reports a change, every field of the session record that names
the current mode, model or option agrees."""

from __future__ import annotations

from typing import Any

from acp_client import RecoveryPath
from acp_client._codec import from_wire
from acp_client._sessions._coherence import with_config_options, with_mode, with_model
from acp_client.testing import inside
from acp_client.types import Session, SessionConfigOption, SessionModeState

from ._harness import OFFER, Harness, SettingsAgent

MODE_OPTION: dict[str, Any] = {
    "id": "mode",
    "name": "Mode",
    "category": "mode",
    "type": "select",
    "currentValue": "ask",
    "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}],
}
MODEL_OPTION: dict[str, Any] = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "m1",
    "options": [{"value": "m1", "name": "M1"}, {"value": "m2", "name": "M2"}],
}


def option(data: dict[str, Any]) -> SessionConfigOption:
    return from_wire(SessionConfigOption, data, protocol_version=1)


def record() -> Session:
    modes = from_wire(SessionModeState, OFFER["modes"], protocol_version=1)
    return Session(
        session_id="s",
        cwd="/a",
        modes=modes,
        models=dict(OFFER["models"]),
        config_options=(option(MODE_OPTION), option(MODEL_OPTION)),
    )


def current(r: Session) -> tuple[Any, ...]:
    assert r.modes is not None and r.models is not None and r.config_options is not None
    options = {o.id: o.current_value for o in r.config_options}
    return r.modes.current_mode_id, options["mode"], r.models["currentModelId"], options["model"]


def test_each_change_updates_every_field_that_names_it() -> None:
    assert current(record()) == ("ask", "ask", "m1", "m1")
    assert current(with_mode(record(), "code")) == ("code", "code", "m1", "m1")
    assert current(with_model(record(), "m2")) == ("ask", "ask", "m2", "m2")
    options = (option({**MODE_OPTION, "currentValue": "code"}), option({**MODEL_OPTION, "currentValue": "m2"}))
    assert current(with_config_options(record(), options)) == ("code", "code", "m2", "m2")


def offering(h: Harness) -> SettingsAgent:
    agent = SettingsAgent(h)
    agent.offer = {**OFFER, "configOptions": [MODE_OPTION, MODEL_OPTION]}
    return agent


async def test_set_mode_and_set_model_keep_the_record_coherent() -> None:
    async with Harness() as h:
        offering(h)
        h.connector.drop()
        await h.clock.settle()
        await h.until_connected()  # the next links offer settings
        session = await h.client.new_session("/a")
        assert current(session.record) == ("ask", "ask", "m1", "m1")
        await session.set_mode("code")
        assert current(session.record) == ("code", "code", "m1", "m1")  # the mode option said "ask"
        await session.set_model("m2")
        assert current(session.record) == ("code", "code", "m2", "m2")


async def test_a_restore_leaves_the_record_coherent() -> None:
    async with Harness() as h:
        offering(h)
        h.connector.drop()
        await h.clock.settle()
        await h.until_connected()
        session = await h.client.new_session("/a")
        await session.set_mode("code")
        await session.set_model("m2")
        h.agent.lose_memory()
        outcome = await h.drop_and_recover()  # the replay's answer offers the defaults again
        assert outcome.path is RecoveryPath.REPLAY
        assert current(session.record) == ("code", "code", "m2", "m2")


async def test_a_mode_change_the_agent_reports_updates_the_record() -> None:
    async with Harness() as h:
        offering(h)
        h.connector.drop()
        await h.clock.settle()
        await h.until_connected()
        session = await h.client.new_session("/a")
        table = inside(h.client).table
        table.receive(
            session.session_id, from_wire_update({"sessionUpdate": "current_mode_update", "currentModeId": "code"})
        )
        assert current(session.record)[:2] == ("code", "code")


def from_wire_update(data: dict[str, Any]) -> Any:
    from acp_client._codec import decode_session_update

    return decode_session_update(data, protocol_version=1)
