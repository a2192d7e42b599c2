"""The public surface is deliberate: pin it (like httpx's tests/test_exported_members.py)."""

from __future__ import annotations

import importlib
import inspect

import acp_client
import acp_client.exceptions
import acp_client.pool
import acp_client.store
import acp_client.sync
import acp_client.testing
import acp_client.transports
import acp_client.types


def _isort_order(names: list[str]) -> list[str]:
    def key(name: str) -> tuple[int, str]:
        if name.isupper():
            return (0, name)
        if name[:1].isupper():
            return (1, name)
        return (2, name)

    return sorted(names, key=key)


#: What ``acp_client`` exports: the client, its configuration, what it reports, the errors an app
#: catches. Room is left under :data:`MAX_TOP_LEVEL` for a few more, never for a subject's detail.
TOP_LEVEL = {
    "AcpClient", "SessionHandle", "ClientOptions", "Callbacks", "ClientHandlers", "Timeouts", "QueueOptions",
    "RetryPolicy", "TlsConfig", "Telemetry",
    "ConnectionState", "State", "PromptResult", "RecoveryContext", "RecoveryOutcome", "RecoveryPath",
    "TurnInterrupted", "StreamResumed", "UpdateEvent", "OwnershipLost", "Transcript", "TranscriptMessage", "TurnStatus",
    "AcpError", "ConfigurationError", "TransportError", "ConnectError", "ConnectionLost", "RequestTimeout",
    "RpcError", "SessionNotFound", "AuthRequired", "ProtocolError", "ClientClosed", "ClientSuspended", "QueueFull",
    "RecoveryFailed", "CapabilityNotSupported", "TurnInProgress", "SessionNotTracked", "SessionOwnershipLost",
    "SessionStoreError",
    "__version__", "printable",
}  # fmt: skip
MAX_TOP_LEVEL = 60
MAX_TOP_LEVEL_EXCEPTIONS = 20

#: Where each exception that is not at the top level lives (besides the tree, ``acp_client.exceptions``).
EXCEPTION_HOMES = {
    "acp_client.transports": {
        "HttpStatusError", "MissingHeader", "AuthenticationFailed", "UnknownConnection", "UnknownSession",
        "NotAcceptable", "UnsupportedMediaType", "BatchNotSupported", "ServiceUnavailable", "MessageTooLarge",
        "UnsafeRedirect", "TlsVerificationError", "TransportClosed", "AgentExited", "ConnectTimeout",
    },
    "acp_client.store": {
        "SessionStoreCorrupt", "SessionStoreForeign", "SessionStoreTooNew", "SessionStoreReadOnly",
        "SessionStoreBusy", "SessionStoreFenced", "SessionStoreUnavailable", "SessionStoreDriverMissing",
    },
    "acp_client.sync": {"LoopThreadError"},
    # The peer broke JSON-RPC (caught as ProtocolError) or answered with a code (caught as RpcError).
    "acp_client.exceptions": {
        "MalformedFrame", "UnexpectedResponse", "IncompatibleProtocolVersion", "InvalidMessage", "ParseError",
        "InvalidRequest", "MethodNotFound", "InvalidParams", "InternalError", "RequestCancelled",
        "UnsupportedProtocolVersion",
    },
}  # fmt: skip


def test_top_level_exports_are_pinned_and_sorted() -> None:
    assert acp_client.__all__ == _isort_order(list(acp_client.__all__))
    assert len(acp_client.__all__) <= MAX_TOP_LEVEL
    assert set(acp_client.__all__) == TOP_LEVEL
    for name in acp_client.__all__:
        assert hasattr(acp_client, name), name
    exceptions = [name for name in acp_client.__all__ if name in acp_client.exceptions.__all__]
    assert len(exceptions) <= MAX_TOP_LEVEL_EXCEPTIONS


def test_every_exception_is_in_the_one_tree_and_has_one_home() -> None:
    homes = {name: module for module, names in EXCEPTION_HOMES.items() for name in names}
    for name in acp_client.exceptions.__all__:
        cls = getattr(acp_client.exceptions, name)
        assert issubclass(cls, acp_client.exceptions.AcpError), name
        assert name in acp_client.exceptions.__doc__, f"{name} is missing from the drawn tree"
        if name in acp_client.__all__:
            assert name not in homes, f"{name} is both at the top level and in {homes[name]}"
            continue
        module = importlib.import_module(homes[name])
        assert name in module.__all__ and getattr(module, name) is cls, (name, homes[name])


def test_moved_errors_sit_under_a_base_class_the_app_catches() -> None:
    caught = (acp_client.TransportError, acp_client.SessionStoreError)
    for name in EXCEPTION_HOMES["acp_client.transports"]:
        assert issubclass(getattr(acp_client.transports, name), acp_client.TransportError), name
    for name in EXCEPTION_HOMES["acp_client.store"]:
        assert issubclass(getattr(acp_client.store, name), acp_client.SessionStoreError), name
    for name in EXCEPTION_HOMES["acp_client.exceptions"]:
        assert issubclass(getattr(acp_client.exceptions, name), acp_client.ProtocolError | acp_client.RpcError), name
    assert not issubclass(acp_client.RpcError, caught)


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
        if module is None or not isinstance(obj, type | type(acp_client.transports.connector_for)):
            continue
        assert module.startswith("acp_client"), name
        private = [part for part in module.split(".") if part.startswith("_")]
        if name == "TlsConfig":
            # Defined beside the transport code that uses it; its public home is the transports package.
            assert getattr(importlib.import_module("acp_client.transports"), name) is obj
        else:
            assert not private, f"{name} is defined in the private module {module}"
    assert acp_client.clock.Clock.__module__ == "acp_client.clock"
    assert acp_client.transports.connector_for.__module__ == "acp_client.transports.endpoint"
    assert acp_client.Callbacks.__module__ == "acp_client.config"


def test_the_version_is_read_from_one_place() -> None:
    from importlib import metadata

    from acp_client import pool
    from acp_client._engine import _engine

    assert acp_client.__version__ == metadata.version("acp-reconnect")
    assert _engine.CLIENT_INFO.version == acp_client.__version__
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
        "assert acp_client.transports.HttpConnector.__name__ == 'HttpConnector' and 'httpx' in sys.modules\n"
        "assert 'WebSocketConnector' in dir(acp_client.transports)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
