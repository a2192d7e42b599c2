"""The blocking facade has a twin of everything the async client offers (or a stated reason it does
not), and the twins forward: the model and config setters, the session listings, the session store,
the instances and ``locate``.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_client import AcpClient
from acp_client.client import SessionHandle
from acp_client.pool import Pool, Probe
from acp_client.store import SqliteSessionStore, pool_key
from acp_client.sync import EventLoopThread, SyncAcpClient, SyncSessionHandle
from acp_client.testing import ReferenceAgent, ReferenceServer, SessionStore
from tests._harness import SETTERS, HarnessConnector, SettingsAgent
from tests.sync._support import DEADLINE

#: Async names without a sync twin of the same name, and why.
NOT_MIRRORED = {
    "aclose": "close() is the blocking twin",
    "add_update_listener": "updates reach a sync app as events (events(), on_event)",
    "callbacks": "configuration: read it on .client",
    "connector": "configuration: read it on .client",
    "timeouts": "configuration: read it on .client",
}
HANDLE_NOT_MIRRORED = {"updates": "updates reach a sync app as events (events(), on_event)"}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_every_async_name_has_a_sync_twin() -> None:
    assert public(AcpClient) - public(SyncAcpClient) == set(NOT_MIRRORED)
    assert public(SessionHandle) - public(SyncSessionHandle) == set(HANDLE_NOT_MIRRORED)


#: The session operations: one name each, on the clients (with the session id) and on the handles.
SESSION_OPERATIONS = (
    "prompt", "cancel", "set_mode", "set_model", "set_config_option", "session_status", "close_session",
    "forget_session",
)  # fmt: skip


@pytest.mark.parametrize("cls", [AcpClient, SessionHandle, SyncAcpClient, SyncSessionHandle])
def test_every_session_operation_has_one_name_everywhere(cls: type) -> None:
    assert set(SESSION_OPERATIONS) <= public(cls)
    assert not {"status", "close"} & public(cls) or cls is SyncAcpClient  # SyncAcpClient.close() closes the client


def test_setters_listings_and_locate_forward() -> None:
    agent = ReferenceAgent()
    connector = HarnessConnector(agent)
    SettingsAgent(types.SimpleNamespace(connector=connector))  # type: ignore[arg-type]
    with SyncAcpClient(connector, retry=None, default_timeout=DEADLINE) as client:
        session = client.new_session("/work")
        session.set_model("m2")
        options = session.set_config_option("effort", "high")
        client.set_model(session.session_id, "m1")
        client.set_config_option(session.session_id, "effort", "low", type="select")
        sent = [(m["method"], m["params"]) for m in connector.sent() if m.get("method") in SETTERS]
        assert [(method, {k: v for k, v in p.items() if k != "sessionId"}) for method, p in sent] == [
            ("session/set_model", {"modelId": "m2"}),
            ("session/set_config_option", {"configId": "effort", "value": "high"}),
            ("session/set_model", {"modelId": "m1"}),
            ("session/set_config_option", {"configId": "effort", "value": "low", "type": "select"}),
        ]
        assert [option.id for option in options] == ["effort"]
        assert [handle.session_id for handle in client.sessions] == [session.session_id]
        assert (session.cwd, session.endpoint) == ("/work", None)
        assert session.session_id in [listed.session_id for listed in client.iter_sessions()]
        location = client.locate(session.session_id)
        assert [answer.probe for answer in location.answers] == [Probe.ACTIVE]
        assert (client.endpoints, client.session_store_key, client.stored_sessions()) == ((), None, [])


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[list[ReferenceServer]]:
    loop = EventLoopThread(name="agents")
    loop.start()
    shared = SessionStore(tmp_path / "shared")
    servers = [ReferenceServer(ReferenceAgent(name=f"agent-{n}", store=shared)) for n in "ab"]

    async def start() -> None:
        for server in servers:
            await server.start()

    async def stop() -> None:
        for server in servers:
            await server.aclose()

    loop.run(start(), timeout=DEADLINE)
    try:
        yield servers
    finally:
        loop.run(stop(), timeout=DEADLINE)
        loop.close()


def test_a_pool_with_a_store_from_a_plain_thread(two_servers: list[ReferenceServer], tmp_path: Path) -> None:
    urls = [server.ws_url for server in two_servers]
    with SqliteSessionStore(tmp_path / "sessions.db") as store:
        with SyncAcpClient(Pool(urls), session_store=store, default_timeout=DEADLINE) as first:
            assert [e.url for e in first.endpoints] == urls
            assert first.session_store_key == pool_key(urls)
            handles = [first.new_session("/work") for _ in range(2)]
            assert [h.endpoint for h in handles] == urls  # round robin
            handles[1].prompt("hello")
            stored = [r.session_id for r in first.stored_sessions()]
            assert stored == [handles[1].session_id, handles[0].session_id]  # the one used last first
        with SyncAcpClient(Pool(list(reversed(urls))), session_store=store, default_timeout=DEADLINE) as second:
            found = {h.session_id: h.endpoint for h in second.sessions}
            assert found == {h.session_id: url for h, url in zip(handles, urls, strict=True)}
            location = second.locate(handles[1].session_id)
            assert [a.probe for a in location.answers] == [Probe.ACTIVE, Probe.INACTIVE]
