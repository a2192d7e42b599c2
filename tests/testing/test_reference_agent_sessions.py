"""The reference agent's sessions, over an in-memory transport: load and resume, list / close / fork /
stall, and the store."""

from __future__ import annotations

import asyncio
from typing import Any

from acp_client.testing.reference_agent import ReferenceAgent, SessionStore
from tests._support import eventually

from ._raw import MemoryPeer, is_response, since, updates

# -- load / resume ----------------------------------------------------------------------------------


async def test_v1_load_replays_history_before_answering(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session("/home/user/project")
    await peer.prompt(session_id, "hello there")
    await peer.prompt(session_id, "second")
    reference_agent.lose_memory()
    fresh = await connect(1)
    start = len(fresh.messages)
    response = await fresh.request(
        "session/load", {"sessionId": session_id, "cwd": "/home/user/project", "mcpServers": []}
    )
    assert response["result"] == {"sessionId": session_id}
    after = since(fresh, start)
    assert after[-1] is response
    replay = updates(after)
    assert [(u["sessionUpdate"], u["content"]["text"]) for u in replay] == [
        ("user_message_chunk", "hello there"),
        ("agent_message_chunk", "echo: hello there"),
        ("user_message_chunk", "second"),
        ("agent_message_chunk", "echo: second"),
    ]
    assert (await fresh.result("session/status", {"sessionId": session_id}))["status"] == "active"
    assert (await fresh.prompt(session_id, "again"))["result"]["stopReason"] == "end_turn"
    unknown = await fresh.request("session/load", {"sessionId": "sess_nope", "cwd": "/x", "mcpServers": []})
    assert unknown["error"]["code"] == -32002 and unknown["error"]["data"] == {"sessionId": "sess_nope"}


async def test_v1_resume_attaches_without_replay(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    await peer.prompt(session_id, "hello")
    other = await connect(1)
    start = len(other.messages)
    result = await other.result("session/resume", {"sessionId": session_id, "cwd": "/work/project", "mcpServers": []})
    assert result == {"sessionId": session_id}
    assert updates(since(other, start)) == []
    assert (await other.prompt(session_id, "x"))["result"]["stopReason"] == "end_turn"
    assert reference_agent.sessions[session_id].attached_connections == 2
    reference_agent.evict(session_id)
    gone = await other.request("session/resume", {"sessionId": session_id, "cwd": "/w", "mcpServers": []})
    assert gone["error"]["code"] == -32002


async def test_v2_resume_with_replay_from_start(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(2)
    session_id = await peer.new_session()
    start = len(peer.messages)
    user_id = (await peer.prompt(session_id, "hello there"))["result"]["messageId"]
    await peer.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("state") == "idle", start=start
    )
    agent_id = next(u["messageId"] for u in updates(since(peer, start)) if u["sessionUpdate"] == "agent_message_chunk")
    reference_agent.lose_memory()
    fresh = await connect(2)
    assert (await fresh.result("session/status", {"sessionId": session_id})) == {"status": "inactive"}
    start = len(fresh.messages)
    response = await fresh.request(
        "session/resume",
        {"sessionId": session_id, "cwd": "/work/project", "mcpServers": [], "replayFrom": {"type": "start"}},
    )
    assert response["result"] == {"sessionId": session_id}
    after = since(fresh, start)
    assert after[-1] is response
    assert updates(after) == [
        {"sessionUpdate": "user_message", "messageId": user_id, "content": [{"type": "text", "text": "hello there"}]},
        {
            "sessionUpdate": "agent_message",
            "messageId": agent_id,
            "content": [{"type": "text", "text": "echo: hello there"}],
        },
        {"sessionUpdate": "state_update", "state": "idle"},
    ]
    # without replayFrom: only the state snapshot
    other = await connect(2)
    start = len(other.messages)
    await other.result("session/resume", {"sessionId": session_id, "cwd": "/work/project", "mcpServers": []})
    assert updates(since(other, start)) == [{"sessionUpdate": "state_update", "state": "idle"}]
    bad = await other.request(
        "session/resume", {"sessionId": session_id, "cwd": "/w", "replayFrom": {"type": "message", "messageId": "x"}}
    )
    assert bad["error"]["code"] == -32602
    assert (await other.request("session/load", {"sessionId": session_id, "cwd": "/w"}))["error"]["code"] == -32601


# -- list / close / fork / stall --------------------------------------------------------------------


async def test_list_filters_and_paginates(reference_agent: ReferenceAgent, connect: Any) -> None:
    reference_agent.list_page_size = 2
    peer = await connect(1)
    ids = [await peer.new_session("/a") for _ in range(3)]
    other = await peer.new_session("/b")
    await peer.prompt(ids[0], "titled session")
    first = await peer.result("session/list", {"cwd": "/a"})
    assert [s["sessionId"] for s in first["sessions"]] == ids[:2]
    assert first["sessions"][0]["title"] == "titled session"
    assert all(s["cwd"] == "/a" and "updatedAt" in s for s in first["sessions"])
    second = await peer.result("session/list", {"cwd": "/a", "cursor": first["nextCursor"]})
    assert [s["sessionId"] for s in second["sessions"]] == ids[2:]
    assert "nextCursor" not in second
    everything: list[str] = []
    cursor = None
    while True:
        page = await peer.result("session/list", {"cursor": cursor} if cursor else {})
        everything += [s["sessionId"] for s in page["sessions"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert everything == [*ids, other]
    bad = await peer.request("session/list", {"cursor": "garbage"})
    assert bad["error"]["code"] == -32602


async def test_close_keeps_the_session_stored(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    start = len(peer.messages)
    request_id = peer.next_id()
    await peer.send_request(
        request_id, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/slow"}]}
    )
    await eventually(lambda: len(updates(since(peer, start))) >= 1)
    assert await peer.result("session/close", {"sessionId": session_id}) == {}
    prompt_answer = await peer.wait_for(lambda m: is_response(m, request_id), start=start)
    assert prompt_answer["result"]["stopReason"] == "cancelled"
    assert (await peer.result("session/status", {"sessionId": session_id}))["status"] == "inactive"
    assert (await peer.request("session/close", {"sessionId": "sess_nope"}))["error"]["code"] == -32002


async def test_fork_copies_history(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    source = await peer.new_session("/src")
    await peer.prompt(source, "hello")
    forked = (await peer.result("session/fork", {"sessionId": source, "cwd": "/fork", "mcpServers": []}))["sessionId"]
    assert forked != source
    snapshot = reference_agent.sessions[forked]
    assert snapshot.cwd == "/fork" and snapshot.history_length == 2 and snapshot.attached_connections == 1
    assert (await peer.prompt(forked, "x"))["result"]["stopReason"] == "end_turn"
    assert reference_agent.sessions[source].history_length == 2
    assert (await peer.request("session/fork", {"sessionId": "sess_nope", "cwd": "/"}))["error"]["code"] == -32002


async def test_stall_reads_requests_but_never_answers(reference_agent: ReferenceAgent, connect: Any) -> None:
    peer = await connect(1)
    session_id = await peer.new_session()
    reference_agent.stall()
    request_id = peer.next_id()
    await peer.send_request(request_id, "session/status", {"sessionId": session_id})
    await eventually(lambda: reference_agent.stalled_requests == 1)
    await asyncio.sleep(0)
    assert not any(is_response(m, request_id) for m in peer.messages)
    reference_agent.stall(False)
    assert reference_agent.stalled is False
    assert (await peer.result("session/status", {"sessionId": session_id}))["status"] == "active"
    assert not any(is_response(m, request_id) for m in peer.messages)


# -- store ------------------------------------------------------------------------------------------


async def test_directory_store_survives_a_new_agent(tmp_path: Any, peers: list[MemoryPeer]) -> None:
    first_agent = ReferenceAgent(store=SessionStore(tmp_path / "store"))
    peer = MemoryPeer(first_agent)
    peers.append(peer)
    await peer.initialize(1)
    session_id = await peer.new_session("/proj")
    await peer.prompt(session_id, "remember me")
    second_agent = ReferenceAgent(store=SessionStore(tmp_path / "store"))
    fresh = MemoryPeer(second_agent)
    peers.append(fresh)
    await fresh.initialize(1)
    assert (await fresh.result("session/status", {"sessionId": session_id}))["status"] == "inactive"
    start = len(fresh.messages)
    await fresh.result("session/load", {"sessionId": session_id, "cwd": "/proj", "mcpServers": []})
    assert [u["content"]["text"] for u in updates(since(fresh, start))] == ["remember me", "echo: remember me"]


def test_store_rejects_unsafe_ids_and_ignores_corrupt_files(tmp_path: Any) -> None:
    store = SessionStore(tmp_path)
    assert store.load("../etc/passwd") is None
    assert "../x" not in store
    (tmp_path / "sess_broken.json").write_text("{not json")
    assert store.load("sess_broken") is None
    assert store.list() == []
    assert store.delete("../x") is False


async def test_closing_a_stale_copy_keeps_the_longer_history_another_instance_stored(
    tmp_path: Any, peers: list[MemoryPeer]
) -> None:
    store = SessionStore(tmp_path / "store")
    old_home, new_home = ReferenceAgent(name="a", store=store), ReferenceAgent(name="b", store=store)
    stale, moved = MemoryPeer(old_home), MemoryPeer(new_home)
    peers.extend([stale, moved])
    await stale.initialize(1)
    await moved.initialize(1)
    session_id = await stale.new_session("/proj")
    await stale.prompt(session_id, "one")
    # The session moved on (its first home was given up, with the session still in its memory).
    await moved.result("session/load", {"sessionId": session_id, "cwd": "/proj", "mcpServers": []})
    await moved.prompt(session_id, "two")
    assert await stale.result("session/close", {"sessionId": session_id}) == {}
    texts = [entry.text for entry in store.load(session_id).history]  # type: ignore[union-attr]
    assert texts == ["one", "echo: one", "two", "echo: two"]  # the stale copy did not overwrite it
    await moved.prompt(session_id, "three")
    assert await moved.result("session/close", {"sessionId": session_id}) == {}  # the newer copy saves
    assert [entry.text for entry in store.load(session_id).history][-2:] == ["three", "echo: three"]  # type: ignore[union-attr]
