"""The interactive chat in a real terminal (tmux) shows the user's conversation exactly once,
whatever sequence of runs, drops and agent restarts comes: restored from the store (the agent kept
it: resumed), replayed (the agent was restarted), lost (the agent forgot it: the earlier history
above a divider); "connected to" comes before the recovery banners; a drop is said in plain words;
the status row counts down to the next attempt, ``/reconnect`` skips the wait; and a terminal
resize leaves the prompt, what the user was typing, and the status row intact."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from acp_client.testing import ReferenceAgent, ReferenceServer
from tests._support import eventually
from tests.examples._chat_support import CHAT, DEADLINE, Tmux, only_session
from tests.peers.reference import FaultProxyFactory


async def _run(tmux: Tmux, url: str, store: Path) -> None:
    """A (new) run of the interactive chat on ``store``."""
    if tmux.started:  # a second session keeps the server up while the first one is replaced
        if "keep" not in await tmux.tmux("list-sessions", "-F", "#{session_name}"):
            await tmux.tmux("new-session", "-d", "-s", "keep", "cat")
        await tmux.tmux("kill-session", "-t", "chat")
    await tmux.start([sys.executable, str(CHAT), url, "--store", str(store)])
    await tmux.wait_for(r"● connected to ws://")


async def _prompt(tmux: Tmux, text: str) -> None:
    mark = await tmux.mark()
    await tmux.type(text)
    await tmux.wait_for(rf"echo: {re.escape(text)}\n\s+\(end_turn\)", after=mark)


async def _quit(tmux: Tmux) -> None:
    await tmux.wait_for(r"you> $")
    await tmux.type("/quit")
    assert await tmux.exit_status() == 0


async def _resized(tmux: Tmux, columns: int, height: int) -> list[str]:
    """The visible rows once the terminal is ``columns`` x ``height`` and the chat has redrawn its
    status row on the new last row, as wide as the terminal allows."""
    rows: list[str] = []

    async def redrawn() -> list[str] | None:
        nonlocal rows
        rows = (await tmux.tmux("capture-pane", "-p", "-t", "chat")).rstrip("\n").split("\n")
        last = rows[-1].rstrip()
        fits = len(last) == columns - 1 or (len(last) < columns - 1 and not last.endswith("…"))
        return rows if len(rows) == height and last.startswith("● connected · ws://") and fits else None

    return list(await eventually(redrawn, DEADLINE, every=0.05, what=lambda: f"the status row redrawn: {rows}"))


def _index(lines: list[str], pattern: str) -> int:
    found = [i for i, line in enumerate(lines) if re.search(pattern, line)]
    assert len(found) == 1, f"{pattern!r} on {len(found)} lines, not one:\n" + "\n".join(lines)
    return found[0]


def _once_each(lines: list[str], texts: list[str]) -> None:
    """Every message of the conversation is on the screen exactly once, in order."""
    where = [_index(lines, rf"^(you|agent)> {re.escape(text)}$") for text in texts]
    assert where == sorted(where), "\n".join(lines)


async def test_the_conversation_is_shown_once_across_runs_and_agent_restarts(
    reference_agent: ReferenceAgent, reference_server: ReferenceServer, tmux: Tmux, tmp_path: Path
) -> None:
    url, store = reference_server.ws_url, tmp_path / "chat.db"
    one = ["turn one", "echo: turn one", "turn two", "echo: turn two"]

    # The first run: two turns, then /quit.
    await _run(tmux, url, store)
    await _prompt(tmux, "turn one")
    await _prompt(tmux, "turn two")
    await _quit(tmux)

    # The agent kept the session: the conversation is shown once, between "connected to" and the
    # banner that says the session was resumed.
    await _run(tmux, url, store)
    await tmux.wait_for(r"─+ ✓ resumed the session ─+")
    lines = await tmux.lines()
    connected = _index(lines, r"● connected to ws://")
    shown = _index(lines, r"the conversation so far \(4 messages, restored from the store\)")
    resumed = _index(lines, r"✓ resumed the session")
    assert connected < shown < resumed, "\n".join(lines)
    _once_each(lines, one)
    assert resumed > _index(lines, r"^agent> echo: turn two$")
    await _prompt(tmux, "turn three")
    await _quit(tmux)

    # The agent was restarted (its memory gone, its store kept): the session is replayed; the six
    # messages are on the screen once (the replay is not printed again).
    reference_agent.lose_memory()
    await _run(tmux, url, store)
    await tmux.wait_for(r"✓ replayed 6 messages \(\d+ updates\) — the conversation is intact")
    lines = await tmux.lines()
    assert (
        _index(lines, r"● connected to")
        < _index(lines, r"conversation so far \(6 messages")
        < _index(lines, r"✓ replayed 6 messages")
    )
    _once_each(lines, [*one, "turn three", "echo: turn three"])
    await _quit(tmux)

    # The agent lost the session: a new one starts; the earlier conversation is shown once, above
    # the divider; a new turn follows it.
    reference_agent.evict(only_session(reference_agent))
    await _run(tmux, url, store)
    await tmux.wait_for(r"⚠ agent lost the session — started a new one \(sess_\w+\)")
    await _prompt(tmux, "a fresh start")
    lines = await tmux.lines()
    divider = _index(lines, r"^--- the agent lost the conversation above \(3 turn\(s\)\); it starts afresh below ---$")
    _once_each(lines, [*one, "turn three", "echo: turn three"])
    assert _index(lines, r"^agent> echo: turn three$") < divider < _index(lines, r"agent lost the session")
    await _quit(tmux)

    # And once more, the agent kept the new session: the lost part above its divider, then the new
    # part, each message once.
    await _run(tmux, url, store)
    await tmux.wait_for(r"✓ resumed the session")
    lines = await tmux.lines()
    divider = _index(lines, r"^--- the agent lost the conversation above")
    _once_each(lines, [*one, "turn three", "echo: turn three", "a fresh start", "echo: a fresh start"])
    assert _index(lines, r"^agent> echo: turn three$") < divider < _index(lines, r"^you> a fresh start$")
    await _quit(tmux)
    assert "Traceback" not in await tmux.screen()


async def test_a_drop_counts_down_reconnect_skips_the_wait_and_a_resize_keeps_the_screen(
    reference_server: ReferenceServer, fault_proxy: FaultProxyFactory, tmux: Tmux
) -> None:
    proxy = await fault_proxy(reference_server)
    await tmux.start([sys.executable, str(CHAT), proxy.url(reference_server.ws_url)])
    await tmux.wait_for(r"● connected to ws://")
    await _prompt(tmux, "before the drop")

    # The agent is unreachable for a while: the drop is one plain line; the status row counts down
    # to each attempt (the backoff grows to seconds) and offers /reconnect.
    mark = await tmux.mark()
    await proxy.refuse(600.0)
    await proxy.cut()
    await tmux.wait_for(r"⚠ connection lost: the connection dropped", after=mark)
    row = await tmux.wait_last_row(r"◌ reconnecting in [3-5]\.\ds \(attempt \d+\) · /reconnect to try now")
    seconds, attempt = re.search(r"in (\d\.\d)s \(attempt (\d+)\)", row).groups()  # type: ignore[union-attr]
    later = await tmux.wait_last_row(rf"◌ reconnecting in (?!{re.escape(seconds)}s)\d\.\ds \(attempt {attempt}\)")
    assert float(later.split("in ")[1].split("s")[0]) < float(seconds)  # a live countdown, same attempt
    screen = "\n".join((await tmux.lines())[mark:])
    assert not re.search(r"Error|1006|Traceback|unexpected end", screen), screen

    # The agent is back: /reconnect tries now, not when the countdown ends.
    await proxy.refuse(0.0)
    await tmux.type("/reconnect")
    await tmux.wait_for(r"reconnecting now…", after=mark)
    await tmux.wait_for(r"✓ resumed the session", after=mark, deadline=3.0)
    await tmux.wait_last_row(r"● connected · ws://")
    lines = (await tmux.lines())[mark:]
    assert len([line for line in lines if "connection lost" in line]) == 1  # one banner for one drop

    # A resize while the user is typing: the prompt and the typed text stay, the status row moves
    # to the new last row, no stale copy of it is left on the screen.
    await tmux.wait_for(r"you> $")
    await tmux.tmux("send-keys", "-t", "chat", "-l", "typed before")
    await tmux.wait_for(r"you> typed before$")
    await tmux.tmux("resize-window", "-t", "chat", "-x", "70", "-y", "18")
    rows = await _resized(tmux, 70, 18)
    assert [row for row in rows[:-1] if "● connected ·" in row] == [], rows
    assert rows[_index(rows, r"you> typed before")].rstrip() == "you> typed before", rows
    await tmux.tmux("send-keys", "-t", "chat", "-l", " and after")
    await tmux.key("Enter")
    await tmux.wait_for(r"echo: typed before and after\n\s+\(end_turn\)")
    await tmux.tmux("resize-window", "-t", "chat", "-x", "110", "-y", "30")
    rows = await _resized(tmux, 110, 30)
    assert [row for row in rows[:-1] if "● connected ·" in row] == [], rows
    await _quit(tmux)
    assert "Traceback" not in await tmux.screen()


def test_a_drop_is_said_in_plain_words() -> None:
    from chat import plain_reason

    said = {
        "connection dropped (1006): EOFError: unexpected end of stream": "the connection dropped",
        "connection dropped (simulated)": "the connection dropped",
        "closed by agent 1001 (going away) restarting": "the agent closed the connection",
        "agent was killed by SIGKILL (exit code -9)": "the agent process ended",
        "agent exited with code 1": "the agent process ended",
        "could not connect to ws://127.0.0.1:1/acp: [Errno 111] Connection refused": "the agent refused the connection",
        "keepalive ping timeout": "the agent stopped answering",
        None: "the connection dropped",
    }
    for reason, words in said.items():
        assert plain_reason(reason) == words, reason
