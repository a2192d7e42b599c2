"""A scripted outage seen through telemetry, over real transports: one ``acp.recovery`` span with a
child per session (the three paths), reconnect attempts as its events, and the metrics counted.

WebSocket and Streamable HTTP run against the reference server behind a fault proxy: a prompt is
cut mid-turn while one session was forgotten by the agent's memory (a restart, for that session)
and another evicted, and reconnects are refused for a while (a request made meanwhile waits in the
queue). Over stdio the reference agent process is killed and restarted by the client.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from acp_client import AcpClient, Callbacks, ConnectionLost, RecoveryOutcome, RetryPolicy, State
from acp_client.testing import ReferenceServer
from tests._support import FAST_RETRY, eventually, within
from tests.peers.reference import FaultProxyFactory
from tests.telemetry._otel import Otel, total

UNITS = {
    "acp.client.reconnect.attempts": "{attempt}",
    "acp.client.recoveries": "{recovery}",
    "acp.client.recovery.duration": "s",
    "acp.client.disconnected.duration": "s",
    "acp.client.prompts.interrupted": "{prompt}",
    "acp.client.requests.queued": "{request}",
    "acp.client.request.duration": "s",
    "acp.client.session.updates": "{update}",
}


def _attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _children(otel: Otel, parent: Any, name: str | None = None) -> list[Any]:
    return [
        span for span in otel.spans(name) if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]


@pytest.mark.parametrize("transport", ["ws", "http"])
async def test_an_outage_is_one_recovery_span_with_the_three_paths(
    otel: Otel, reference_server: ReferenceServer, fault_proxy: FaultProxyFactory, transport: str
) -> None:
    agent = reference_server.agent
    proxy = await fault_proxy(reference_server)
    url = proxy.url(reference_server.ws_url if transport == "ws" else reference_server.http_url)
    outcomes: list[RecoveryOutcome] = []
    callbacks = Callbacks(on_resume=outcomes.append, on_replay=outcomes.append, on_new_session=outcomes.append)
    async with AcpClient(url, telemetry=otel.telemetry, retry=FAST_RETRY, callbacks=callbacks) as client:
        kept, restarted, evicted = [await client.new_session(os.getcwd()) for _ in range(3)]
        for handle in (kept, restarted, evicted):
            await handle.prompt("hello")
        turn = asyncio.ensure_future(kept.prompt("/slow"))
        await eventually(lambda: "tick" in kept.transcript.text(), what="the slow turn streaming")
        agent.unload(restarted.session_id)  # inactive: replay
        agent.evict(evicted.session_id)  # unknown: a new session
        await proxy.refuse(60)
        await proxy.cut()  # mid-turn
        with pytest.raises(ConnectionLost) as lost:
            await within(turn)
        assert lost.value.may_have_executed
        waiting = asyncio.ensure_future(restarted.session_status())  # queued until the link is back
        await eventually(lambda: total(otel.metrics().get("acp.client.requests.queued", [])) == 1, what="queued")
        await eventually(
            lambda: total(otel.metrics().get("acp.client.reconnect.attempts", [])) >= 2, what="refused attempts"
        )
        await proxy.refuse(0)
        await eventually(lambda: len(outcomes) == 3 and client.state.state is State.CONNECTED, what="recovered")
        await within(waiting)
        assert (await evicted.prompt("still there?")).stop_reason == "end_turn"

    [recovery] = otel.spans("acp.recovery")
    sessions = _children(otel, recovery, "acp.recovery.session")
    paths = {_attributes(span)["acp.recovery.path"]: _attributes(span) for span in sessions}
    assert set(paths) == {"resume", "replay", "new_session"}
    assert paths["resume"]["acp.session.id"] == kept.session_id
    assert paths["resume"]["acp.recovery.probe"] == "active"
    assert paths["resume"]["acp.recovery.continuity"] == "kept"  # the agent said active; no process is visible
    assert paths["replay"]["acp.recovery.probe"] == "inactive"
    assert paths["replay"]["acp.recovery.planned_path"] == "replay"
    assert paths["replay"]["acp.recovery.replayed_updates"] > 0
    assert paths["new_session"]["acp.recovery.probe"] == "unknown"
    assert paths["new_session"]["acp.recovery.continuity"] == "lost"
    assert paths["new_session"]["acp.session.previous_id"] != paths["new_session"]["acp.session.id"]
    episode = _attributes(recovery)
    assert episode["acp.recovery.result"] == "connected"
    assert episode["acp.recovery.sessions"] == 3
    assert episode["acp.transport"] == ("websocket" if transport == "ws" else "http")
    [interrupted] = [event for event in recovery.events if event.name == "acp.prompt.interrupted"]
    assert dict(interrupted.attributes or {})["acp.session.id"] == kept.session_id
    attempts = [event for event in recovery.events if event.name == "acp.reconnect"]
    assert len(attempts) == episode["acp.reconnect.attempts"] >= 2
    assert [dict(event.attributes or {})["acp.reconnect.attempt"] for event in attempts] == list(
        range(1, len(attempts) + 1)
    )
    assert all(dict(event.attributes or {})["acp.reconnect.delay"] >= 0 for event in attempts)
    assert all(dict(event.attributes or {})["acp.reconnect.cause"] for event in attempts)
    # The recovery's own requests are its children: a probe per session, then each path's call.
    methods = sorted(span.name for span in _children(otel, recovery) if span.kind is SpanKind.CLIENT)
    assert methods.count("session/status") == 3
    assert {"session/resume", "session/load", "session/new"} <= set(methods)
    # The cut prompt's span records the drop.
    [cut] = [span for span in otel.spans("session/prompt") if _attributes(span).get("acp.request.outcome") != "ok"]
    assert _attributes(cut)["acp.request.outcome"] == "connection_lost"
    assert _attributes(cut)["acp.request.may_have_executed"] is True
    assert _attributes(cut)["error.type"] == "acp_client.exceptions.ConnectionLost"
    assert cut.status.status_code is StatusCode.ERROR
    assert any(event.name == "exception" for event in cut.events)

    # Every request of the outage carried its span's trace to the agent, the recovery's ones included.
    # (Over HTTP an initialize POST the proxy refused has a span and never reached the agent.)
    received = agent.meta_log.received
    assert all(record.meta and record.meta.get("traceparent") for record in received)
    got = {record.meta["traceparent"].split("-")[2] for record in received if record.meta}
    client_spans = [span for span in otel.spans() if span.kind is SpanKind.CLIENT]
    assert got <= {f"{span.context.span_id:016x}" for span in client_spans}
    answered = [span for span in client_spans if _attributes(span)["acp.request.outcome"] in ("ok", "error")]
    assert {f"{span.context.span_id:016x}" for span in answered} <= got

    metrics = otel.metrics()
    recoveries = metrics["acp.client.recoveries"]
    assert total(recoveries, **{"acp.recovery.path": "resume", "acp.recovery.continuity": "kept"}) == 1
    assert total(recoveries, **{"acp.recovery.path": "replay", "acp.recovery.continuity": "kept"}) == 1
    assert total(recoveries, **{"acp.recovery.path": "new_session", "acp.recovery.continuity": "lost"}) == 1
    assert total(metrics["acp.client.recovery.duration"]) == 3
    assert total(metrics["acp.client.disconnected.duration"]) == 1
    assert total(metrics["acp.client.prompts.interrupted"]) == 1
    assert total(metrics["acp.client.reconnect.attempts"]) == len(attempts)
    assert total(metrics["acp.client.requests.queued"]) == 0
    durations = metrics["acp.client.request.duration"]
    prompt = {"rpc.method": "session/prompt"}
    assert total(durations, **prompt, **{"acp.request.outcome": "connection_lost"}) == 1
    assert total(durations, **prompt, **{"acp.request.outcome": "ok"}) == 4
    assert total(metrics["acp.client.session.updates"], **{"acp.update.kind": "agent_message_chunk"}) > 0
    assert otel.units() == UNITS


async def test_over_stdio_an_agent_restart_is_a_recovery_span(otel: Otel, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio", "--store", str(tmp_path)]
    outcomes: list[RecoveryOutcome] = []
    callbacks = Callbacks(on_replay=outcomes.append, on_resume=outcomes.append, on_new_session=outcomes.append)
    url = "stdio:" + shlex.join(command)
    async with AcpClient(url, telemetry=otel.telemetry, retry=FAST_RETRY, callbacks=callbacks) as client:
        handle = await client.new_session(os.getcwd())
        await handle.prompt("hello")
        info = client.transport_info
        assert info is not None and info.pid is not None
        os.kill(info.pid, signal.SIGKILL)
        await eventually(lambda: outcomes and client.state.state is State.CONNECTED, what="recovered")
        await handle.prompt("again")
    [recovery] = otel.spans("acp.recovery")
    [session] = _children(otel, recovery, "acp.recovery.session")
    assert _attributes(session)["acp.recovery.path"] == "replay"
    assert _attributes(recovery)["acp.transport"] == "stdio"
    [attempt, *_] = [event for event in recovery.events if event.name == "acp.reconnect"]
    assert dict(attempt.attributes or {})["error.type"] == "AgentExited"
    metrics = otel.metrics()
    assert total(metrics["acp.client.reconnect.attempts"], **{"acp.reconnect.cause": "AgentExited"}) >= 1
    assert total(metrics["acp.client.recoveries"], **{"acp.recovery.path": "replay"}) == 1
    assert total(metrics["acp.client.disconnected.duration"]) == 1


@pytest.mark.parametrize("ending", ["failed", "closed"])
async def test_an_outage_that_never_ends_well_ends_its_span(
    otel: Otel, reference_server: ReferenceServer, fault_proxy: FaultProxyFactory, ending: str
) -> None:
    proxy = await fault_proxy(reference_server)
    retry = RetryPolicy(initial_delay=0.01, max_delay=0.02, jitter=False, max_attempts=3)
    policy = retry if ending == "failed" else FAST_RETRY
    client = AcpClient(proxy.url(reference_server.ws_url), telemetry=otel.telemetry, retry=policy)
    try:
        await client.connect()
        await client.new_session(os.getcwd())
        await proxy.refuse(60)
        await proxy.cut()
        if ending == "failed":
            await eventually(lambda: client.state.state is State.FAILED, what="failed")
        else:
            await eventually(lambda: otel.metrics().get("acp.client.reconnect.attempts"), what="an attempt")
    finally:
        await client.aclose()
    [recovery] = otel.spans("acp.recovery")
    assert _attributes(recovery)["acp.recovery.result"] == ending
    assert (recovery.status.status_code is StatusCode.ERROR) == (ending == "failed")
    assert "acp.client.disconnected.duration" not in otel.metrics()  # never connected again
