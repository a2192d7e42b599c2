"""The ``Telemetry`` option: checked values, nothing imported without the extra, names that match
the installed semantic conventions, and telemetry that can never break the client."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.semconv._incubating.attributes import jsonrpc_attributes, rpc_attributes
from opentelemetry.semconv.attributes import error_attributes, server_attributes

from acp_client import AcpClient, ClientHandlers, ConfigurationError, Telemetry
from acp_client._telemetry import _names
from acp_client.testing import MemoryConnector, ReferenceAgent
from acp_client.types import SelectedPermissionOutcome
from tests.telemetry._otel import Otel


def test_the_value_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="tracer_provider must have a get_tracer"):
        Telemetry(tracer_provider=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="meter_provider must have a get_meter"):
        Telemetry(meter_provider="meters")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="enabled must be bool"):
        Telemetry(enabled=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="telemetry must be Telemetry"):
        AcpClient("ws://127.0.0.1:1/acp", telemetry=True)  # type: ignore[arg-type]
    assert Telemetry() == Telemetry(enabled=True)


def test_the_names_are_the_semantic_conventions() -> None:
    assert _names.RPC_SYSTEM_NAME == rpc_attributes.RPC_SYSTEM_NAME
    assert _names.RPC_SYSTEM == rpc_attributes.RPC_SYSTEM
    assert _names.RPC_METHOD == rpc_attributes.RPC_METHOD
    assert _names.RPC_RESPONSE_STATUS_CODE == rpc_attributes.RPC_RESPONSE_STATUS_CODE
    assert _names.JSONRPC_REQUEST_ID == jsonrpc_attributes.JSONRPC_REQUEST_ID
    assert _names.JSONRPC_PROTOCOL_VERSION == jsonrpc_attributes.JSONRPC_PROTOCOL_VERSION
    assert _names.ERROR_TYPE == error_attributes.ERROR_TYPE
    assert _names.SERVER_ADDRESS == server_attributes.SERVER_ADDRESS
    assert _names.SERVER_PORT == server_attributes.SERVER_PORT


# Runs a client against the in-process reference agent with ``opentelemetry`` unimportable (as
# when the extra is not installed), or with it importable but telemetry never asked for.
_APP = textwrap.dedent(
    """
    import asyncio, os, sys

    class NoOpenTelemetry:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(f"no module named {name!r} (blocked)")
            return None

    if sys.argv[1] == "blocked":
        sys.meta_path.insert(0, NoOpenTelemetry())

    import acp_client
    from acp_client import AcpClient
    from acp_client.testing import MemoryConnector, ReferenceAgent, inside

    imported = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
    assert not imported, imported  # import acp_client never imports it

    async def main():
        agent = ReferenceAgent()
        async with AcpClient(MemoryConnector(agent)) as client:
            handle = await client.new_session(os.getcwd())
            await handle.prompt("hello")
            on = inside(client).engine.telemetry is not None
        metas = [record.meta for record in agent.meta_log.received]
        print("telemetry", on, "meta", any(m is not None for m in metas))
        print("imported", sorted({m.split(".")[1] for m in sys.modules if m.startswith("opentelemetry.")}))

    asyncio.run(main())
    """
)


def _run(mode: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _APP, mode], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.splitlines()


def test_without_the_extra_nothing_is_imported_and_nothing_changes() -> None:
    assert _run("blocked") == ["telemetry False meta False", "imported []"]


def test_with_the_extra_and_no_sdk_it_is_on_and_sends_no_meta() -> None:
    # The global providers are no-ops until the app installs the SDK: no valid span, no _meta.
    lines = _run("installed")
    assert lines[0] == "telemetry True meta False"
    assert "sdk" not in lines[1]


class _Raising(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("the collector is down")

    def shutdown(self) -> None:
        pass


class _RaisingProcessor(SpanProcessor):
    def on_start(self, span: Span, parent_context: Any = None) -> None:
        raise RuntimeError("broken processor (start)")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("broken processor (end)")


class _RaisingMeters:
    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("broken meter provider")


@pytest.mark.parametrize("breakage", ["exporter", "processor", "meter_provider"])
async def test_broken_telemetry_never_breaks_the_client(otel: Otel, breakage: str) -> None:
    provider = TracerProvider()
    if breakage == "exporter":
        provider.add_span_processor(SimpleSpanProcessor(_Raising()))
    elif breakage == "processor":
        provider.add_span_processor(_RaisingProcessor())
    telemetry = Telemetry(tracer_provider=provider, meter_provider=otel.meter_provider)
    if breakage == "meter_provider":
        telemetry = Telemetry(tracer_provider=provider, meter_provider=_RaisingMeters())  # type: ignore[arg-type]

    def allow(request: Any) -> SelectedPermissionOutcome:
        return SelectedPermissionOutcome(option_id=request.options[0].option_id)

    agent = ReferenceAgent()
    handlers = ClientHandlers(permission=allow)
    async with AcpClient(MemoryConnector(agent), telemetry=telemetry, handlers=handlers) as client:
        handle = await client.new_session(os.getcwd())
        assert (await handle.prompt("/permission")).stop_reason == "end_turn"
        assert (await handle.prompt("hello")).stop_reason == "end_turn"
        assert "echo: hello" in handle.transcript.text()
    provider.shutdown()


# The global tracer provider can be set once per process: each case runs in a fresh interpreter.
_LATER = textwrap.dedent(
    """
    import asyncio, os
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from acp_client import AcpClient
    from acp_client.testing import MemoryConnector, ReferenceAgent

    async def main():
        agent = ReferenceAgent()
        async with AcpClient(MemoryConnector(agent)) as client:
            handle = await client.new_session(os.getcwd())
            await handle.prompt("untraced")
            trace_id, span_id = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331
            parent = trace.SpanContext(trace_id, span_id, True, trace.TraceFlags(1))
            with trace.use_span(trace.NonRecordingSpan(parent)):
                await handle.prompt("continued")
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            await handle.prompt("traced")
        for record in agent.meta_log.received:
            if record.method == "session/prompt":
                print("prompt", (record.meta or {}).get("traceparent", "-"))
        print("spans", sorted({span.name for span in exporter.get_finished_spans()}))

    asyncio.run(main())
    """
)


def test_with_no_sdk_a_span_to_continue_is_carried_and_an_sdk_installed_later_is_followed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LATER], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    prompts = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("prompt ")]
    assert prompts[0] == "-"  # no SDK, no span: nothing in _meta
    assert prompts[1] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # the app's span, carried as is
    assert prompts[2].startswith("00-") and prompts[2] != prompts[1]  # the SDK's own span from then on
    assert "session/prompt" in done.stdout.splitlines()[-1]
