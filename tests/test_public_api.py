"""The public surface is deliberate: pin it (like httpx's tests/test_exported_members.py)."""

from __future__ import annotations

import importlib
import inspect

import acp_client
import acp_client.exceptions
import acp_client.store
import acp_client.testing
import acp_client.types


def _isort_order(names: list[str]) -> list[str]:
    def key(name: str) -> tuple[int, str]:
        if name.isupper():
            return (0, name)
        if name[:1].isupper():
            return (1, name)
        return (2, name)

    return sorted(names, key=key)


def test_top_level_exports_are_pinned_and_sorted() -> None:
    assert acp_client.__all__ == _isort_order(list(acp_client.__all__))
    assert set(acp_client.__all__) == {
        "AcpClient",
        "SessionNotTracked",
        "Timeouts",
        "USE_CLIENT_DEFAULT",
        "UseClientDefault",
        "QueueOptions",
        "Callbacks",
        "AcpError",
        "AgentExited",
        "AuthRequired",
        "AuthenticationFailed",
        "BatchNotSupported",
        "CapabilityNotSupported",
        "ClientClosed",
        "ClientHandlers",
        "ClientSuspended",
        "Clock",
        "ConfigurationError",
        "ConnectError",
        "ConnectTimeout",
        "ConnectionLost",
        "ConnectionState",
        "Connector",
        "Continuity",
        "CookieStore",
        "EndpointGroup",
        "DEFAULT_INHERITED_ENV",
        "FileSystemPolicy",
        "HttpConnector",
        "HttpStatusError",
        "IncompatibleProtocolVersion",
        "InternalError",
        "InvalidMessage",
        "InvalidParams",
        "InvalidRequest",
        "Limits",
        "LoopThreadError",
        "MalformedFrame",
        "MessageTooLarge",
        "MethodNotFound",
        "MissingHeader",
        "NotAcceptable",
        "OwnershipLost",
        "ParseError",
        "PostgresSessionStore",
        "Probe",
        "PromptResult",
        "ProtocolError",
        "QueueFull",
        "RecoveryContext",
        "RecoveryFailed",
        "RecoveryOutcome",
        "RecoveryPath",
        "ReplayReport",
        "RequestCancelled",
        "RequestTimeout",
        "RetryPolicy",
        "RpcError",
        "SUPPORTED_PROTOCOL_VERSIONS",
        "SegmentStart",
        "ServiceUnavailable",
        "Session",
        "SessionHandle",
        "SessionNotFound",
        "SessionPage",
        "SessionStore",
        "SessionStoreBusy",
        "SessionStoreCorrupt",
        "SessionStoreDriverMissing",
        "SessionStoreError",
        "SessionStoreFenced",
        "SessionStoreForeign",
        "SessionStoreReadOnly",
        "SessionStoreTooNew",
        "SessionStoreUnavailable",
        "SqliteSessionStore",
        "StoredSession",
        "State",
        "StdioConnector",
        "StreamResumed",
        "SystemClock",
        "Telemetry",
        "TerminalHandler",
        "TlsConfig",
        "TlsVerificationError",
        "ToolCallView",
        "Transcript",
        "TranscriptMessage",
        "TranscriptSegment",
        "Transport",
        "TransportClosed",
        "TransportError",
        "TransportInfo",
        "TurnInProgress",
        "TurnInterrupted",
        "TurnStatus",
        "UnexpectedResponse",
        "UnknownConnection",
        "UnknownSession",
        "UnsafeRedirect",
        "UnsupportedMediaType",
        "UnsupportedProtocolVersion",
        "UpdateEvent",
        "WebSocketConnector",
        "__version__",
        "connector_for",
        "endpoint_key",
        "printable",
        "session_from_json",
        "session_to_json",
    }
    for name in acp_client.__all__:
        assert hasattr(acp_client, name), name


def test_every_exception_is_in_the_one_tree() -> None:
    for name in acp_client.exceptions.__all__:
        cls = getattr(acp_client.exceptions, name)
        assert issubclass(cls, acp_client.exceptions.AcpError), name
        assert name in acp_client.__all__, f"{name} is not re-exported"
        assert name in acp_client.exceptions.__doc__, f"{name} is missing from the drawn tree"


def test_no_third_party_types_in_public_signatures() -> None:
    forbidden = ("websockets", "httpx", "tenacity", "cattrs", "hypercorn", "h2", "h11")
    for module in (acp_client, acp_client.testing):
        for name in module.__all__:
            obj = getattr(module, name)
            targets = [obj]
            if inspect.isclass(obj):
                targets += [
                    m for _, m in inspect.getmembers(obj) if inspect.isfunction(m) and not m.__name__.startswith("_")
                ]
                targets.append(obj.__init__)
            for target in targets:
                if not callable(target):
                    continue
                try:
                    signature = str(inspect.signature(target))
                except (TypeError, ValueError):
                    continue
                for library in forbidden:
                    assert f"{library}." not in signature, f"{name}: {signature}"


def test_testing_and_types_exports_are_sorted() -> None:
    for module in (acp_client.testing, acp_client.types, acp_client.store):
        assert module.__all__ == _isort_order(list(module.__all__)), module.__name__


def test_public_types_live_in_public_modules() -> None:
    for name in acp_client.__all__:
        obj = getattr(acp_client, name)
        module = getattr(obj, "__module__", None)
        if module is None or not isinstance(obj, type | type(acp_client.connector_for)):
            continue
        assert module.startswith("acp_client"), name
        private = [part for part in module.split(".") if part.startswith("_")]
        if name in ("CookieStore", "TlsConfig"):
            # Defined beside the transport code that uses them; their public home is the transports package.
            assert getattr(importlib.import_module("acp_client.transports"), name) is obj
        elif name in ("session_from_json", "session_to_json"):
            # Thin entry points into the private codec (which owns every wire shape).
            assert module == "acp_client._codec._api"
        else:
            assert not private, f"{name} is defined in the private module {module}"
    assert acp_client.Clock.__module__ == "acp_client.clock"
    assert acp_client.connector_for.__module__ == "acp_client.transports.endpoint"
    assert acp_client.Callbacks.__module__ == "acp_client.config"


def test_the_version_is_read_from_one_place() -> None:
    from importlib import metadata

    from acp_client import _options, pool

    assert acp_client.__version__ == metadata.version("acp-reconnect")
    assert _options.CLIENT_INFO.version == acp_client.__version__
    assert pool._PROBE_CLIENT_INFO.version == acp_client.__version__


def test_the_v2_default_client_info_uses_the_same_version() -> None:
    from acp_client._codec import _shapes

    assert _shapes.DEFAULT_CLIENT_INFO.version == acp_client.__version__


def test_importing_the_package_loads_no_transport_library() -> None:
    """``import acp_client`` stays cheap (issue 7: under half the official SDK's import time):
    httpx and websockets load with the first connector that needs them."""
    import subprocess
    import sys

    code = (
        "import sys, acp_client\n"
        "assert 'httpx' not in sys.modules and 'websockets' not in sys.modules, 'eager transport import'\n"
        "assert acp_client.HttpConnector.__name__ == 'HttpConnector' and 'httpx' in sys.modules\n"
        "assert 'WebSocketConnector' in dir(acp_client)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
