"""Request and handler spans over real transports, and the trace context the agent receives.

The client sends a CLIENT span per request (named by its method, ended when it resolves) and puts
its ``traceparent`` in ``params._meta``; the reference agent records what it got, and the requests
it sends back on a prompt's behalf carry that trace on, so the client's SERVER span for the app's
handler continues it.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from acp_client import AcpClient, ClientHandlers, RpcError
from acp_client.exceptions import MethodNotFound
from acp_client.testing import ReferenceServer
from acp_client.types import SelectedPermissionOutcome
from tests._support import FAST_RETRY
from tests.telemetry._otel import Otel


def _allow(request: Any) -> SelectedPermissionOutcome:
    return SelectedPermissionOutcome(option_id=request.options[0].option_id)


def _url(server: ReferenceServer, transport: str) -> str:
    return server.ws_url if transport == "ws" else server.http_url


def _traceparent(span: Any) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


@pytest.mark.parametrize("transport", ["ws", "http"])
async def test_each_request_has_a_client_span_and_carries_its_trace(
    otel: Otel, reference_server: ReferenceServer, transport: str
) -> None:
    agent = reference_server.agent
    handlers = ClientHandlers(permission=_allow)
    url = _url(reference_server, transport)
    async with AcpClient(url, telemetry=otel.telemetry, handlers=handlers, retry=FAST_RETRY) as client:
        handle = await client.new_session(os.getcwd())
        assert (await handle.prompt("/permission")).stop_reason == "end_turn"
        with pytest.raises(MethodNotFound):
            await client.request("_nobody/knows", {"x": 1})

    spans = [span for span in otel.spans() if span.kind is SpanKind.CLIENT]
    assert [span.name for span in spans] == ["initialize", "session/new", "session/prompt", "_nobody/knows"]
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    for span in spans:
        attributes = dict(span.attributes or {})
        assert attributes["rpc.system.name"] == attributes["rpc.system"] == "jsonrpc"
        assert attributes["rpc.method"] == span.name
        assert attributes["jsonrpc.protocol.version"] == "2.0"
        assert attributes["jsonrpc.request.id"].isdigit()
        assert attributes["acp.protocol.version"] == 1
        assert attributes["acp.transport"] == ("websocket" if transport == "ws" else "http")
        assert attributes["server.address"] == "127.0.0.1"
        assert attributes["server.port"] == port
    prompt = spans[2]
    assert dict(prompt.attributes or {})["acp.session.id"] == handle.session_id
    assert prompt.status.status_code is StatusCode.UNSET
    failed = dict(spans[3].attributes or {})
    assert failed["error.type"] == failed["rpc.response.status_code"] == "-32601"
    assert spans[3].status.status_code is StatusCode.ERROR

    # The agent received each span's traceparent, in order.
    received = [(r.method, (r.meta or {}).get("traceparent")) for r in agent.meta_log.received]
    assert received == [(span.name, _traceparent(span)) for span in spans]

    # Its permission request continued the prompt's trace; the handler's SERVER span is its child.
    [server_span] = [span for span in otel.spans() if span.kind is SpanKind.SERVER]
    [sent] = agent.meta_log.sent
    assert server_span.name == sent.method == "session/request_permission"
    assert sent.meta is not None
    assert server_span.parent is not None and server_span.parent.is_remote
    assert f"{server_span.parent.span_id:016x}" == sent.meta["traceparent"].split("-")[2]
    assert server_span.context.trace_id == prompt.context.trace_id
    assert dict(server_span.attributes or {})["rpc.method"] == "session/request_permission"


async def test_the_apps_meta_is_merged_never_overwritten(otel: Otel, reference_server: ReferenceServer) -> None:
    agent = reference_server.agent
    mine = {"_meta": {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "app": {"k": 1}}}
    other = {"_meta": {"app": "only"}}
    async with AcpClient(reference_server.ws_url, telemetry=otel.telemetry, retry=FAST_RETRY) as client:
        for params in (mine, other):
            with pytest.raises(RpcError):
                await client.request("_app/echo", params)
    assert mine == {"_meta": {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "app": {"k": 1}}}
    assert other == {"_meta": {"app": "only"}}
    first, second = agent.meta_log.received[-2:]
    assert first.meta == mine["_meta"]  # the app's traceparent wins
    assert second.meta is not None and second.meta["app"] == "only"
    assert second.meta["traceparent"] == _traceparent(otel.spans("_app/echo")[-1])


async def test_disabled_telemetry_makes_no_span_and_adds_no_meta(otel: Otel, reference_server: ReferenceServer) -> None:
    disabled = type(otel.telemetry)(tracer_provider=otel.tracer_provider, enabled=False)
    async with AcpClient(reference_server.ws_url, telemetry=disabled, retry=FAST_RETRY) as client:
        handle = await client.new_session(os.getcwd())
        await handle.prompt("hello")
    assert otel.spans() == []
    assert all(record.meta is None for record in reference_server.agent.meta_log.received)


async def test_over_stdio_the_agent_receives_the_trace(otel: Otel, tmp_path: Path) -> None:
    record = tmp_path / "meta.jsonl"
    command = ["-m", "acp_client.testing.reference_agent", "--stdio", "--record-meta", str(record)]
    url = "stdio:" + shlex.join([sys.executable, *command])
    handlers = ClientHandlers(permission=_allow)
    async with AcpClient(url, telemetry=otel.telemetry, handlers=handlers, retry=FAST_RETRY) as client:
        handle = await client.new_session(os.getcwd())
        await handle.prompt("/permission")
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    received = [(line["method"], line["meta"]["traceparent"]) for line in lines if line["direction"] == "received"]
    clients = [span for span in otel.spans() if span.kind is SpanKind.CLIENT]
    assert received == [(span.name, _traceparent(span)) for span in clients]
    assert all("server.address" not in (span.attributes or {}) for span in clients)
    assert {dict(span.attributes or {})["acp.transport"] for span in clients} == {"stdio"}
    [sent] = [line for line in lines if line["direction"] == "sent"]
    [server_span] = [span for span in otel.spans() if span.kind is SpanKind.SERVER]
    assert server_span.parent is not None
    assert f"{server_span.parent.span_id:016x}" == sent["meta"]["traceparent"].split("-")[2]
