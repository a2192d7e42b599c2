"""``examples/chat.py URL --store PATH`` in script mode, in two processes: the first keeps its
sessions in the store and exits; the second recovers them (a ``recovered`` event for each, as
after a drop), continues the most recently used one, lists them (``/sessions``) and switches
(``/switch``)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_client.store import SqliteSessionStore, endpoint_key
from acp_client.testing import ReferenceAgent, ReferenceServer
from tests.examples._chat_support import CHAT, _env, named, parse_events, run_process


async def _chat(tmp_path: Path, url: str, store: Path, lines: list[str], name: str) -> list[dict[str, Any]]:
    script = tmp_path / f"{name}.txt"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = [sys.executable, str(CHAT), url, "--script", str(script), "--json", "--store", str(store)]
    code, out, err = await run_process(*argv, env=_env())
    assert code == 0, err
    return parse_events(out)


@pytest.mark.parametrize("restart", [False, True], ids=["agent-kept-them", "agent-restarted"])
async def test_a_second_run_continues_the_stored_sessions(tmp_path: Path, restart: bool) -> None:
    agent = ReferenceAgent()
    store = tmp_path / "chat.db"
    async with ReferenceServer(agent) as server:
        url = server.ws_url
        first = await _chat(tmp_path, url, store, ["hello", "/new", "second one"], "first")
        old, latest = (event["sessionId"] for event in named(first, "session"))
        if restart:
            agent.lose_memory()

        lines = ["/sessions", "after the restart", f"/switch {old[:12]}", "back to the first"]
        second = await _chat(tmp_path, url, store, lines, "second")

    # A recovered event for each stored session, once the run said where it is connected, which
    # session continues and what that conversation holds (what the banners talk about).
    recovered = named(second, "recovered")
    assert {event["previousSessionId"] for event in recovered} == {old, latest}
    assert {event["path"] for event in recovered} == {"replay" if restart else "resume"}
    if restart:
        assert all(event["replayed"] > 0 for event in recovered)
    names = [event["event"] for event in second if event["event"] != "update" or not event["replay"]]
    assert names[:5] == ["connected", "session", "history", "recovered", "recovered"], names
    # No new session: the most recently used one continues.
    sessions = named(second, "session")
    assert sessions[0] == {**sessions[0], "sessionId": latest, "restored": True}
    (listing,) = named(second, "sessions")
    assert [row["sessionId"] for row in listing["sessions"]] == [latest, old]
    assert [row["current"] for row in listing["sessions"]] == [True, False]
    assert sessions[1] == {**sessions[1], "sessionId": old, "switched": True}
    ends = named(second, "turn_end")
    assert [event["sessionId"] for event in ends] == [latest, old]
    texts = [event["text"] for event in named(second, "update") if not event["replay"]]
    assert "echo: after the restart" in "".join(texts) and "echo: back to the first" in "".join(texts)
    assert not named(second, "error")
    with SqliteSessionStore(store) as opened:
        assert [record.session_id for record in opened.load(endpoint_key(url))] == [old, latest]


async def test_continuity_is_shown_as_the_evidence_has_it(tmp_path: Path) -> None:
    """The agent kept running (a network link): the stored session resumes, the agent says it holds
    it in memory: ``kept``. A stdio agent is spawned anew by each run; it claims the stored session
    is active (``status-active-after-restart``), and the client resumes it, but a process started
    after the session was last attached cannot have it in memory: ``unverified``, and why."""
    from chat import Output  # the terminal form of the same events

    agent = ReferenceAgent()
    async with ReferenceServer(agent) as server:
        await _chat(tmp_path, server.ws_url, tmp_path / "ws.db", ["hello"], "ws-first")
        second = await _chat(tmp_path, server.ws_url, tmp_path / "ws.db", [], "ws-second")
    (kept,) = named(second, "recovered")
    assert kept["path"] == "resume" and kept["continuity"] == "kept" and "continuityNote" not in kept
    assert Output.describe("recovered", kept) == "✓ resumed the session — the conversation is intact"

    agent_store = tmp_path / "agent-store"
    command = [sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio", "--store", str(agent_store)]
    url = "stdio:" + " ".join([*command, "--fault", "status-active-after-restart"])
    await _chat(tmp_path, url, tmp_path / "stdio.db", ["hello"], "stdio-first")
    second = await _chat(tmp_path, url, tmp_path / "stdio.db", ["again"], "stdio-second")
    (unverified,) = named(second, "recovered")
    assert unverified["path"] == "resume" and unverified["continuity"] == "unverified"
    assert "the agent process was restarted" in unverified["continuityNote"]
    assert Output.describe("recovered", unverified) == (
        "✓ resumed the session — continuity unverified: the agent was restarted and could not show it kept the "
        "conversation"
    )


async def test_a_lost_session_is_renamed_in_the_store(tmp_path: Path) -> None:
    agent = ReferenceAgent()
    store = tmp_path / "chat.db"
    async with ReferenceServer(agent) as server:
        url = server.ws_url
        first = await _chat(tmp_path, url, store, ["hello"], "first")
        (old,) = (event["sessionId"] for event in named(first, "session"))
        agent.evict(old)
        second = await _chat(tmp_path, url, store, ["again", "/sessions"], "second")

    (recovered,) = named(second, "recovered")
    assert recovered["path"] == "new_session" and recovered["previousSessionId"] == old
    new_id = recovered["sessionId"]
    assert named(second, "session")[0]["sessionId"] == new_id
    assert [event["sessionId"] for event in named(second, "turn_end")] == [new_id]
    (listing,) = named(second, "sessions")
    assert [row["sessionId"] for row in listing["sessions"]] == [new_id]
    with SqliteSessionStore(store) as opened:
        (record,) = opened.load(endpoint_key(url))
        assert record.session_id == new_id and record.previous_session_ids == (old,)


async def test_switch_to_an_unknown_session_is_an_error_event(tmp_path: Path) -> None:
    agent = ReferenceAgent()
    async with ReferenceServer(agent) as server:
        events = await _chat(tmp_path, server.ws_url, tmp_path / "s.db", ["/switch nope", "hi"], "run")
    (error,) = named(events, "error")
    assert "no such session" in error["message"]
    assert len(named(events, "turn_end")) == 1


@pytest.mark.parametrize("restart", [False, True], ids=["agent-kept-it", "agent-restarted"])
async def test_a_second_run_shows_the_restored_conversation_first(tmp_path: Path, restart: bool) -> None:
    """Issue 17: ``chat.py --store`` shows the restored history on start, and new turns follow it."""
    agent = ReferenceAgent()
    store = tmp_path / "chat.db"
    async with ReferenceServer(agent) as server:
        url = server.ws_url
        await _chat(tmp_path, url, store, ["turn one", "turn two"], "first")
        if restart:
            agent.lose_memory()
        second = await _chat(tmp_path, url, store, ["turn three"], "second")
        third = await _chat(tmp_path, url, store, [], "third")
    (history,) = named(second, "history")
    (segment,) = history["segments"]
    assert [(m["role"], m["text"]) for m in segment["messages"]] == [
        ("user", "turn one"),
        ("agent", "echo: turn one"),
        ("user", "turn two"),
        ("agent", "echo: turn two"),
    ]
    assert [m.get("status") for m in segment["messages"] if m["role"] == "user"] == ["complete", "complete"]
    names = [event["event"] for event in second]
    assert names.index("history") < names.index("turn_end")
    (later,) = named(third, "history")
    assert [m["text"] for m in later["segments"][-1]["messages"]][-2:] == ["turn three", "echo: turn three"]
    assert len(later["segments"][-1]["messages"]) == 6  # appended, not replaced


async def test_a_lost_conversation_is_shown_above_a_divider(tmp_path: Path) -> None:
    agent = ReferenceAgent()
    store = tmp_path / "chat.db"
    async with ReferenceServer(agent) as server:
        url = server.ws_url
        first = await _chat(tmp_path, url, store, ["hello"], "first")
        (old,) = (event["sessionId"] for event in named(first, "session"))
        agent.evict(old)
        second = await _chat(tmp_path, url, store, ["again"], "second")
    (recovered,) = named(second, "recovered")
    assert recovered["path"] == "new_session" and recovered["lostTurns"] == 1 and recovered["continuity"] == "lost"
    (history,) = named(second, "history")
    lost, current = history["segments"]
    assert lost["lost"] and [m["text"] for m in lost["messages"]] == ["hello", "echo: hello"]
    assert current["messages"] == []
    from chat import Output  # the terminal form of the same events

    lines = Output.describe("history", history)
    assert lines is not None and "--- the agent lost the conversation above (1 turn(s))" in lines


def test_text_the_agent_put_in_its_replay_is_shown_as_the_agents() -> None:
    """claude-agent-acp replays ``[Request interrupted by user]`` among the user's prompts: the
    history event marks it ``inserted`` and the terminal shows it as the agent's, never as "you"."""
    from types import SimpleNamespace

    from chat import Output, history_messages

    from acp_client import Transcript, TurnStatus
    from acp_client._codec import decode_session_update
    from acp_client.types import TextContent

    transcript = Transcript("s")
    transcript.begin_turn([TextContent(text="next question")], record=True)
    transcript.finish_turn(TurnStatus.COMPLETE)
    transcript.begin_replay()
    for text in ("[Request interrupted by user]", "next question"):
        chunk = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}
        transcript.apply(decode_session_update(chunk, protocol_version=1))
    transcript.end_replay()
    history = history_messages(SimpleNamespace(session_id="s", transcript=transcript))  # type: ignore[arg-type]
    (segment,) = history["segments"]
    assert segment["messages"] == [
        {"role": "user", "text": "[Request interrupted by user]", "inserted": True},
        {"role": "user", "text": "next question", "status": "complete"},
    ]
    lines = Output.describe("history", history)
    assert lines is not None
    assert lines.splitlines()[1:] == [
        "  agent (put in its replay): [Request interrupted by user]",
        "  you: next question",
    ]


async def test_a_stored_session_another_process_holds_is_not_a_silent_fresh_start(tmp_path: Path) -> None:
    """A chat killed without closing still holds its stored session until its lease expires: a run
    started in that time says so in one line before its new session, and names the session."""
    agent = ReferenceAgent()
    store = tmp_path / "chat.db"
    script = tmp_path / "first.txt"
    script.write_text("hello\n/sleep 60\n", encoding="utf-8")
    async with ReferenceServer(agent) as server:
        argv = [sys.executable, str(CHAT), server.ws_url, "--script", str(script), "--json", "--store", str(store)]
        first = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=_env()
        )
        try:
            assert first.stdout is not None
            held = None
            while True:  # until the first turn ended: the session is stored and held
                line = await asyncio.wait_for(first.stdout.readline(), 30.0)
                assert line, "the first chat ended early"
                event = json.loads(line)
                held = event["sessionId"] if event["event"] == "session" else held
                if event["event"] == "turn_end":
                    break
            first.send_signal(signal.SIGKILL)  # no goodbye: its lease stays until it expires
            await first.wait()
            second = await _chat(tmp_path, server.ws_url, store, ["again"], "second")
        finally:
            if first.returncode is None:
                first.kill()
                await first.wait()
    (notice,) = named(second, "notice")
    assert f"stored session {held} is held by another process" in notice["message"]
    names = [event["event"] for event in second]
    assert names.index("notice") < names.index("session")
    (session,) = named(second, "session")
    assert session["sessionId"] != held and not session.get("restored")
