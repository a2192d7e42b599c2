"""A pool member speaks only for the sessions it hosts, and conflicting claims close no copy.

Three reference agents over memory connectors (``tests/_farm.py``), a fake clock. The hostile
member is a reference agent told ``/as SESSION_ID PATH`` (it then sends an update into that
session's transcript, a permission request and a file read in its name) or given the
``status-always-active`` fault (it claims every session is active in its memory).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from acp_client import AcpClient, ClientHandlers, RecoveryPath
from acp_client.handlers import FileSystemPolicy
from acp_client.pool import Pool
from acp_client.store import SqliteSessionStore
from acp_client.testing import inside
from tests._farm import Farm, Recorder, pooled
from tests._harness import FAST_RETRY
from tests._support import eventually


async def test_a_member_cannot_act_for_a_session_another_member_hosts(
    farm: Farm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="acp_client.reconnect")
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    home_a.mkdir()
    home_b.mkdir()
    secret = home_a / "secret.txt"
    secret.write_text("the other session's secret", encoding="utf-8")
    asked: list[Any] = []

    def permission(request: Any) -> Any:
        asked.append(request)
        return None

    handlers = ClientHandlers(permission=permission, file_system=FileSystemPolicy(read=True))
    recorder = Recorder()
    client = pooled(farm, recorder, handlers=handlers)
    async with client:
        victim = await client.new_session(str(home_a))
        hostile = await client.new_session(str(home_b))
        assert (victim.endpoint, hostile.endpoint) == ("a", "b")
        await farm.clock.run(hostile.prompt(f"/as {victim.session_id} {secret}"))
        reply = hostile.transcript.messages[-1].text
        assert "session/request_permission: refused -32002" in reply, reply
        assert "fs/read_text_file: refused -32002" in reply, reply
        assert "secret" not in reply.replace("secret.txt", "")
        assert asked == []
        assert "injected" not in victim.transcript.text()
        links = inside(client).links.links  # type: ignore[attr-defined]
        assert [link.authority.refused if link.authority else 0 for link in links] == [0, 3, 0]
        # The victim's own instance still speaks for it.
        await farm.clock.run(victim.prompt("hello"))
        assert victim.transcript.messages[-1].text == "echo: hello"
    refusals = [r.getMessage() for r in caplog.records if "lives on another instance" in r.getMessage()]
    assert len(refusals) == 3 and all(victim.session_id in line for line in refusals)


async def test_conflicting_active_claims_close_no_copy_and_are_reported(farm: Farm) -> None:
    recorder = Recorder()
    client = pooled(farm, recorder, failover_delay=5.0)
    async with client:
        handle = await client.new_session("/tmp")
        assert handle.endpoint == "a"
        await farm.clock.run(handle.prompt("hello"))
        farm.agents["b"].faults = frozenset({"status-always-active"})  # the liar
        farm.agents["a"].lose_memory()  # the home lost its memory: the session must find where it is
        farm.share(handle.session_id, "c")
        farm.agents["c"].faults = frozenset({"status-active-after-restart"})  # c wrongly claims active too
        farm.connectors["a"].drop()
        await farm.clock.settle()
        await eventually(lambda: recorder.outcomes, clock=farm.clock)
    closes = [m for c in farm.connectors.values() for m in c.sent if m["method"] == "session/close"]
    assert closes == [], closes
    [outcome] = recorder.outcomes
    assert any("conflicting claims" in note for note in outcome.notes), outcome.notes
    assert recorder.contexts and recorder.contexts[-1].also_active != ()


async def test_on_restore_conflicting_claims_elsewhere_close_no_copy_and_are_reported(
    farm: Farm, tmp_path: Path
) -> None:
    """The recorded home lost the session from memory, so the others are asked: two of them claim
    it active (a liar, and one that wrongly says ``active`` after a restart). Nothing is closed,
    the conflict is in the outcome, and ``decide_recovery`` sees it."""
    with SqliteSessionStore(tmp_path / "sessions.db") as store:

        def client(recorder: Recorder) -> AcpClient:
            return AcpClient(
                Pool(farm.endpoints, failover_delay=5.0),
                retry=FAST_RETRY,
                clock=farm.clock,
                callbacks=recorder.callbacks(),
                session_store=store,
                session_store_key="pool:liar",
            )

        async with client(Recorder()) as first:
            handles = [await first.new_session("/tmp") for _ in range(2)]  # on a, then b
            for handle in handles:
                await farm.clock.run(handle.prompt("hello"))
            persistence = inside(first).engine.persistence
            assert persistence is not None
            await persistence.bridge.flush()
        on_b = handles[1].session_id
        farm.agents["b"].lose_memory()  # the recorded home has it in its store, not in memory
        farm.agents["a"].faults = frozenset({"status-always-active"})  # the first instance lies
        farm.share(on_b, "c")
        farm.agents["c"].faults = frozenset({"status-active-after-restart"})  # c wrongly claims active too
        recorder = Recorder()
        async with client(recorder):
            pass
        closes = [
            (n, m["params"]["sessionId"])
            for n, c in farm.connectors.items()
            for m in c.sent
            if m["method"] == "session/close"
        ]
        assert closes == [], closes
        restored = {o.previous_session_id: o for o in recorder.outcomes}
        assert any("conflicting claims" in note for note in restored[on_b].notes), restored[on_b].notes
        assert restored[on_b].path in (RecoveryPath.RESUME, RecoveryPath.NEW_SESSION, RecoveryPath.REPLAY)
        assert any(c.session_id == on_b and c.also_active != () for c in recorder.contexts), recorder.contexts
