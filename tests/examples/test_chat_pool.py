"""``python examples/chat.py URL URL ...``: several instances used as one pool (issue 11 item 5).

Two reference agents sharing one store, each on its own server; ``chat.py --script --json`` is
given both URLs. Its ``session`` and ``recovered`` events name the URL the session lives on; when
that instance dies, the session is replayed on the other and the script goes on there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from acp_client.testing import ReferenceAgent, ReferenceServer, SessionStore
from tests.examples._chat_support import ChatProcess, named

StartChat = Callable[..., Awaitable[ChatProcess]]


async def test_two_urls_are_one_pool_and_a_dead_instance_hands_over(tmp_path: Path, chat_script: StartChat) -> None:
    store = SessionStore(tmp_path / "shared")
    a_agent, b_agent = ReferenceAgent(name="agent-a", store=store), ReferenceAgent(name="agent-b", store=store)
    async with ReferenceServer(a_agent) as a, ReferenceServer(b_agent) as b:
        urls = [a.ws_url, b.http_url]  # one pool may mix transports
        chat = await chat_script(urls, ["hello", "/wait-recovery", "after the move"], "--failover-delay", "0.5")
        session = await chat.next_event("session")
        assert session["endpoint"] == a.ws_url  # round robin: the first instance first
        await chat.next_event("turn_end")
        assert a_agent.sessions[session["sessionId"]].in_memory
        await a.aclose()  # the instance holding the session dies
        recovered = await chat.next_event("recovered")
        assert recovered["path"] == "replay" and recovered["endpoint"] == b.http_url
        assert recovered["sessionId"] == recovered["previousSessionId"] == session["sessionId"]
        status, events, err = await chat.finish()
    assert status == 0, err
    turns = named(events, "turn_end")
    assert len(turns) == 2 and turns[-1]["sessionId"] == session["sessionId"]
    assert b_agent.sessions[session["sessionId"]].history_length >= 4  # both turns, the second on b


async def test_one_url_has_no_endpoint_field(chat_script: StartChat) -> None:
    async with ReferenceServer(ReferenceAgent()) as server:
        chat = await chat_script([server.ws_url], ["hello"])
        status, events, err = await chat.finish()
    assert status == 0, err
    assert [set(e) >= {"endpoint"} for e in named(events, "session")] == [False]


async def test_a_pool_with_a_store_continues_where_the_session_is(tmp_path: Path, chat_script: StartChat) -> None:
    """Two runs of ``chat.py URL URL --store PATH``: the second finds the stored session on the
    instance that has it (one fan-out) and continues it there."""
    shared = SessionStore(tmp_path / "shared")
    a_agent, b_agent = ReferenceAgent(name="agent-a", store=shared), ReferenceAgent(name="agent-b", store=shared)
    store = str(tmp_path / "chat.db")
    async with ReferenceServer(a_agent) as a, ReferenceServer(b_agent) as b:
        urls = [a.ws_url, b.ws_url]
        first = await chat_script(urls, ["/new", "hello"], "--store", store)
        status, events, err = await first.finish()
        assert status == 0, err
        latest = named(events, "session")[-1]
        assert latest["endpoint"] == b.ws_url  # round robin: the second session went to b
        second = await chat_script(list(reversed(urls)), ["again"], "--store", store)
        status, events, err = await second.finish()
    assert status == 0, err
    session = named(events, "session")[0]
    assert session == {**session, "sessionId": latest["sessionId"], "restored": True, "endpoint": urls[1]}
    recovered = [e for e in named(events, "recovered") if e["sessionId"] == latest["sessionId"]]
    assert [(e["path"], e["endpoint"]) for e in recovered] == [("resume", urls[1])]
    assert b_agent.sessions[latest["sessionId"]].history_length >= 4  # both turns, on b
    # A clean start with a store is connecting -> recovering -> connected: no "connection lost" at launch.
    assert named(events, "disconnected") == [] and named(events, "reconnect_attempt") == []
