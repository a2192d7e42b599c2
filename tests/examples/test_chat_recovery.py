"""The chat client at the edges of recovery: a read-only request made right at a drop, and a session
the client gave up on (never reported as "recovered")."""

from __future__ import annotations

import asyncio
import io
import sys
from typing import Any

import chat_ui
from chat import Chat

from acp_client import State
from acp_client.testing import ReferenceAgent
from tests._support import FAST_RETRY
from tests.examples._chat_support import DEADLINE, EXAMPLES, _env, named, parse_events

# -- a client bug the chat's /status and /sessions can hit --------------------------------------------

_REQUEST_AT_A_DROP = """
import asyncio, io, sys
sys.path.insert(0, sys.argv[1])
from chat import Chat, Output
from acp_client import RetryPolicy
from acp_client.testing import MemoryConnector, ReferenceAgent

async def main():
    connector = MemoryConnector(ReferenceAgent())
    chat = Chat(connector, output=Output(json_mode=True, stream=io.StringIO()), retry=RetryPolicy(initial_delay=0.01))
    await chat.start()
    connector.drop()  # the network fails; the app asks something before the client noticed
    page = await chat.client.list_sessions()  # /sessions (session/status, /status, behaves the same)
    print("listed", len(page.sessions), chat.client.state.state.value)
    await chat.close()

asyncio.run(main())
"""


async def test_a_read_only_request_made_right_at_a_drop_is_retried_after_recovery() -> None:
    # session/list and session/status are retried transparently across a drop. When the request
    # is sent after the transport failed but before the connection noticed (the send raises at
    # once, the reader has not run yet), Supervisor.call retries on the same dead connection in a
    # loop that never yields: the event loop starves, the drop is never noticed, the app hangs at
    # 100 % CPU. Expected: the request waits for recovery and succeeds.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _REQUEST_AT_A_DROP,
        str(EXAMPLES),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 15.0)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError("list_sessions() issued right at a drop never returned (busy retry loop)") from None
    assert process.returncode == 0, err.decode()
    assert out.decode().strip() == "listed 1 connected"


# -- the --json contract: a session the client gave up on is not "recovered" -------------------------------


async def test_json_reports_an_abandoned_session_as_an_error_not_a_recovery() -> None:
    # the README's JSON event table: `recovered {path, ...}` has path resume | replay | new_session. When every
    # recovery step fails the session is abandoned; that must not read as a recovery.
    from acp_client.testing import MemoryConnector, SessionStore

    class FailingStore(SessionStore):
        broken = False

        def save(self, record: Any) -> None:
            if self.broken:
                raise OSError("disk full")
            super().save(record)

    store = FailingStore()
    agent = ReferenceAgent(store=store)
    connector = MemoryConnector(agent)
    stream = io.StringIO()
    chat = Chat(connector, output=chat_ui.JsonView(stream), retry=FAST_RETRY)
    changed = asyncio.Event()
    chat.state_listeners.append(lambda _state: changed.set())
    try:
        await chat.start()
        assert chat.handle is not None
        session_id = chat.handle.session_id
        agent.evict(session_id)  # -32002 -> new session ...
        store.broken = True  # ... which the agent cannot create: every step fails
        connector.drop()

        async def recovered() -> None:
            while not (chat.client.recovery_outcomes and chat.client.state.state is State.CONNECTED):
                changed.clear()
                await changed.wait()

        await asyncio.wait_for(recovered(), DEADLINE)
    finally:
        await chat.close()
    assert [outcome.path.value for outcome in chat.client.recovery_outcomes] == ["abandon"]
    events = parse_events(stream.getvalue())
    assert all(event["path"] in ("resume", "replay", "new_session") for event in named(events, "recovered"))
    errors = [event["message"] for event in named(events, "error")]
    assert any(session_id in message for message in errors), errors
