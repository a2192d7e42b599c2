"""The example chat client's non-interactive modes, run as subprocesses: ``--demo`` (``chat_demo.py``)
and ``--script FILE``, in JSON and narrated text."""

from __future__ import annotations

import re
import socket
import sys
import time
from collections.abc import Awaitable, Callable

import chat_ui
import pytest

from acp_client.testing import ReferenceServer
from tests.examples._chat_support import CHAT, ChatProcess, _env, named, parse_events, run_process

from ..peers.reference import FaultProxyFactory

# -- --demo -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_demo_json_shows_all_three_recovery_paths(version: int) -> None:
    code, out, err = await run_process(
        sys.executable, str(CHAT), "--demo", "--json", "--protocol-version", str(version)
    )
    assert code == 0, err
    events = parse_events(out)
    (connected, *_) = named(events, "connected")
    assert connected["protocolVersion"] == version and connected["transport"] == "websocket"
    first = named(events, "session")[0]["sessionId"]
    recovered = named(events, "recovered")
    assert [event["path"] for event in recovered] == ["resume", "replay", "new_session"]
    resume, replay, new = recovered
    assert resume["sessionId"] == resume["previousSessionId"] == first
    assert replay["sessionId"] == replay["previousSessionId"] == first
    assert new["previousSessionId"] == first and new["sessionId"] != first
    assert any(event["replay"] for event in named(events, "update")), "the replay delivers history updates"
    (status,) = named(events, "status")
    assert status["status"] == "unknown" and status["sessionId"] == first  # probed after the eviction
    assert len(named(events, "disconnected")) == 3
    assert len(named(events, "turn_end")) == 5
    assert not named(events, "error")


async def test_demo_narrated_text() -> None:
    code, out, err = await run_process(sys.executable, str(CHAT), "--demo", env=_env(**{chat_ui.PLAIN_ENV: "1"}))
    assert code == 0, err
    assert "=== + resumed the session ===" in out
    assert re.search(r"=== \+ replayed 6 messages \(\d+ updates\)", out)
    assert re.search(r"=== ! agent lost the session - started a new one \(sess_\w+\) ===", out)
    assert "done: recovered by resume, replay, new_session" in out


# -- --script -------------------------------------------------------------------------------------------------


async def test_script_json_survives_a_drop(
    reference_server: ReferenceServer,
    fault_proxy: FaultProxyFactory,
    chat_script: Callable[..., Awaitable[ChatProcess]],
) -> None:
    proxy = await fault_proxy(reference_server)
    chat = await chat_script(proxy.url(reference_server.ws_url), ["first", "/wait-recovery", "/status", "second"])
    session = (await chat.next_event("session"))["sessionId"]
    assert (await chat.next_event("turn_end"))["stopReason"] == "end_turn"
    await proxy.cut()  # while the script waits for the recovery
    code, events, err = await chat.finish()
    assert code == 0, err
    names = [event["event"] for event in events]
    assert names[:2] == ["connected", "session"]
    assert names.index("disconnected") < names.index("reconnect_attempt") < names.index("recovered")
    (recovered,) = named(events, "recovered")
    assert recovered["path"] == "resume" and recovered["sessionId"] == recovered["previousSessionId"] == session
    assert len(named(events, "connected")) == 2
    (status,) = named(events, "status")
    assert status == {**status, "sessionId": session, "status": "active", "raw": "active", "state": None}
    texts = "".join(event["text"] for event in named(events, "update"))
    assert texts == "echo: firstecho: second"
    assert [event["stopReason"] for event in named(events, "turn_end")] == ["end_turn", "end_turn"]
    assert not named(events, "error") and not named(events, "turn_interrupted")


@pytest.mark.parametrize("pause", ["/sleep 30", "/wait-recovery 30"])
async def test_script_exits_non_zero_when_the_client_gives_up(
    reference_server: ReferenceServer,
    fault_proxy: FaultProxyFactory,
    chat_script: Callable[..., Awaitable[ChatProcess]],
    pause: str,
) -> None:
    proxy = await fault_proxy(reference_server)
    url = proxy.url(reference_server.ws_url)
    chat = await chat_script(url, ["first", pause, "never sent"], "--max-elapsed", "0.5")
    await chat.next_event("turn_end")
    started = time.monotonic()
    await proxy.aclose()  # the agent is gone for good: every reconnect is refused
    code, events, err = await chat.finish()
    assert code == 2, err
    assert time.monotonic() - started < 20, f"{pause} must end as soon as the client gives up"
    assert named(events, "disconnected") and named(events, "reconnect_attempt")
    assert any("gave up" in event["message"] for event in named(events, "error"))
    assert not named(events, "recovered")
    assert len(named(events, "turn_end")) == 1


async def test_script_exits_non_zero_when_the_agent_is_unreachable(
    chat_script: Callable[..., Awaitable[ChatProcess]],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    chat = await chat_script(f"ws://127.0.0.1:{port}/acp", ["hello"])
    code, events, err = await chat.finish()
    assert code == 2, err
    assert any("could not connect" in event["message"] for event in named(events, "error"))
    assert not named(events, "session")
