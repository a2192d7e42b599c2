"""Recovery against the official ACP Python SDK's server (0.12.1): an agent WITHOUT session/status.

The peer (``tests/peers/python_sdk.py``) advertises ``loadSession`` and ``session/resume`` but
not ``session/status``, and keeps sessions in memory only. So the client must never probe; after
a network cut it resumes (the agent still has the session); after the agent process is killed
and restarted on the same ports, the resume answers -32002 and the client starts a new session.
What the client sent is recorded at the connector (the peer runs in another process).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_client import AcpClient, RecoveryPath
from acp_client.state import Probe
from acp_client.testing import FaultProxy, RecordingConnector
from acp_client.transports import connector_for
from tests._support import FAST_RETRY, eventually
from tests.e2e._support import Recorder
from tests.peers.python_sdk import PythonSdkPeer
from tests.peers.reference import FaultProxyFactory

ENDPOINTS: dict[str, tuple[str, dict[str, Any]]] = {
    "ws": ("ws", {}),
    "http1": ("http", {"http2": False}),
    "h2c": ("http", {"http2": True}),
}


def _client(url: str, options: dict[str, Any], recorder: Recorder) -> tuple[AcpClient, RecordingConnector]:
    wire = RecordingConnector(connector_for(url, **options))
    return AcpClient(wire, protocol_version=1, retry=FAST_RETRY, callbacks=recorder.callbacks()), wire


@pytest.mark.parametrize("transport", list(ENDPOINTS))
async def test_agent_restart_resume_not_found_then_new_session(python_sdk_peer: PythonSdkPeer, transport: str) -> None:
    scheme, options = ENDPOINTS[transport]
    url = python_sdk_peer.ws_url if scheme == "ws" else python_sdk_peer.http_url
    recorder = Recorder()
    client, wire = _client(url, options, recorder)
    async with client:
        assert not client.agent_capabilities.supports("session/status")
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        assert (await handle.prompt("hello")).stop_reason == "end_turn"

        await asyncio.to_thread(python_sdk_peer.restart)  # SIGKILL, then a new process on the same ports
        outcome = await recorder.outcome()

        assert outcome.probe is Probe.NOT_PROBED
        assert outcome.planned is RecoveryPath.RESUME
        assert outcome.path is RecoveryPath.NEW_SESSION
        assert outcome.steps == (("session/resume", "not_found"), ("session/new", "ok"))
        assert any("status not advertised" in note for note in outcome.notes)
        assert recorder.by_callback["new_session"] == [outcome]
        assert handle.session_id == outcome.session_id != session.session_id
        # No probe, ever; on the link that recovered: initialize, the resume attempt, the new session.
        assert len(wire.messages("session/status")) == 0
        recovered_link = len(wire.transports) - 1
        assert wire.sent_methods(recovered_link) == ["initialize", "session/resume", "session/new"]
        assert wire.messages("session/new")[-1]["params"]["cwd"] == "/work/project"
        assert (await handle.prompt("again")).stop_reason == "end_turn"
        assert handle.transcript.segments[-1].text() == "user: again\nagent: echo: again"  # what the agent holds
        assert wire.messages("session/prompt")[-1]["params"]["sessionId"] == outcome.session_id


@pytest.mark.parametrize("transport", ["ws", "h2c"])
async def test_network_cut_resumes_without_probe(
    python_sdk_peer: PythonSdkPeer, fault_proxy: FaultProxyFactory, transport: str
) -> None:
    scheme, options = ENDPOINTS[transport]
    proxy: FaultProxy = await fault_proxy(python_sdk_peer.http_port)
    url = proxy.url(python_sdk_peer.ws_url if scheme == "ws" else python_sdk_peer.http_url)
    recorder = Recorder()
    client, wire = _client(url, options, recorder)
    async with client:
        session = (await client.new_session("/work/project")).record
        handle = client.session(session.session_id)
        await handle.prompt("hello")

        await proxy.cut()
        outcome = await recorder.outcome()

        assert outcome.probe is Probe.NOT_PROBED
        assert outcome.path is RecoveryPath.RESUME
        assert outcome.steps == (("session/resume", "ok"),)
        assert outcome.session_id == session.session_id
        assert recorder.by_callback["resume"] == [outcome]
        assert len(wire.messages("session/status")) == 0
        assert wire.sent_methods(len(wire.transports) - 1) == ["initialize", "session/resume"]
        assert (await handle.prompt("again")).stop_reason == "end_turn"
        await eventually(
            lambda: handle.transcript.text() == "user: hello\nagent: echo: hello\nuser: again\nagent: echo: again",
            what="the transcript of both turns",
        )
