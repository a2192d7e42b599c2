"""What an editor plugin's type checker sees on the sync path (issue 20): the events are a typed
union (one class per kind), one public ``PermissionOutcome`` annotates a handler, ``stop_reason``
is typed, and a mistyped ``SyncAcpClient`` keyword fails ``mypy --strict``.

Each snippet is checked by a real ``mypy --strict`` run (one run for all of them: mypy is slow to
start), against this checkout's ``acp_client``.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acp_client import AcpClient, PromptResult
from acp_client.config import ClientOptions
from acp_client.sync import EventKind, SyncAcpClient, SyncClientOptions
from acp_client.sync._events import EVENT_CLASSES
from acp_client.types import StopReason
from tests.peers.typescript_sdk import cache_root

ROOT = Path(__file__).resolve().parents[2]

#: Must type-check cleanly.
CLEAN = """
from acp_client import ClientHandlers, PromptResult
from acp_client.state import ConnectionState, RecoveryOutcome, UpdateEvent
from acp_client.sync import (
    EventKind, NotificationEvent, PermissionEvent, ReplayEvent, ResumeEvent, SessionUpdateEvent, StateEvent,
    SyncAcpClient, SyncEvent,
)
from acp_client.types import PermissionOutcome, RequestPermissionRequest, SelectedPermissionOutcome, StopReason


def allow_first(request: RequestPermissionRequest) -> PermissionOutcome:
    return SelectedPermissionOutcome(option_id=request.options[0].option_id)


ClientHandlers(permission=allow_first)


def render(event: SyncEvent) -> str:
    if isinstance(event, StateEvent):
        state: ConnectionState = event.payload
        return str(state)
    if isinstance(event, SessionUpdateEvent):
        update: UpdateEvent = event.payload
        return update.text or ""
    if isinstance(event, ResumeEvent | ReplayEvent):
        outcome: RecoveryOutcome = event.payload
        return outcome.session_id or ""
    if isinstance(event, PermissionEvent):
        event.payload.allow()
    if isinstance(event, NotificationEvent):
        return event.method
    kind: EventKind = event.kind
    return kind.name


def ended(result: PromptResult) -> bool:
    return result.stop_reason is StopReason.END_TURN


SyncAcpClient("ws://127.0.0.1:1/acp", retry=None, protocol_version=2)
"""

#: Each must fail, with an error matching the pattern.
FAILING = {
    "keyword_typo": ('SyncAcpClient("ws://127.0.0.1:1/acp", retry_policy=None)', r'"retry_policy"'),
    "async_keyword_typo": ('AcpClient("ws://127.0.0.1:1/acp", retry_policy=None)', r'"retry_policy"'),
    "keyword_type": ('SyncAcpClient("ws://127.0.0.1:1/acp", protocol_version="2")', r'"protocol_version"'),
    "payload_checked": (
        "def f(event: SyncEvent) -> None:\n    if isinstance(event, StateEvent):\n        event.payload.allow()\n",
        r'"ConnectionState" has no attribute "allow"',
    ),
}
_FAILING_HEADER = (
    "from acp_client import AcpClient\nfrom acp_client.sync import StateEvent, SyncAcpClient, SyncEvent\n\n"
)


#: mypy's cache, shared by the runs of the suite (the standard library and the dependencies are checked
#: once, not by every run; mypy checks again whatever changed).
MYPY_CACHE = cache_root() / "mypy"


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``mypy --strict`` on every snippet in one run: the errors of each file, by snippet name."""
    folder = tmp_path_factory.mktemp("typing")
    (folder / "clean.py").write_text(textwrap.dedent(CLEAN), encoding="utf-8")
    for name, (body, _) in FAILING.items():
        (folder / f"{name}.py").write_text(_FAILING_HEADER + body, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(MYPY_CACHE), "--python-version", "3.10", "."],
        check=False,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors: dict[str, str] = {}
    for line in run.stdout.splitlines():
        match = re.match(r"(\w+)\.py:\d+: error: (.*)", line)
        if match:
            errors[match[1]] = errors.get(match[1], "") + match[2] + "\n"
    assert run.returncode in (0, 1) and "error:" not in run.stderr, run.stdout + run.stderr
    return errors


def test_the_editor_path_type_checks(mypy_errors: dict[str, str]) -> None:
    assert "clean" not in mypy_errors, mypy_errors["clean"]


@pytest.mark.parametrize("name", sorted(FAILING))
def test_mistakes_fail_the_type_check(mypy_errors: dict[str, str], name: str) -> None:
    assert re.search(FAILING[name][1], mypy_errors.get(name, "")), mypy_errors


def test_one_event_class_per_kind() -> None:
    assert set(EVENT_CLASSES) == set(EventKind)
    assert len(set(EVENT_CLASSES.values())) == len(EventKind)
    for kind, cls in EVENT_CLASSES.items():
        assert cls.kind is kind and cls.__name__.endswith("Event")


def test_stop_reason_is_typed_and_unknown_values_are_kept() -> None:
    assert PromptResult("end_turn").stop_reason is StopReason.END_TURN
    assert PromptResult("end_turn").stop_reason == "end_turn"
    kept = PromptResult("paused_for_coffee").stop_reason
    assert kept == "paused_for_coffee" and not isinstance(kept, StopReason)
    assert PromptResult(None).stop_reason is None
    assert {reason.value for reason in StopReason} == {
        "end_turn",
        "max_tokens",
        "max_turn_requests",
        "refusal",
        "cancelled",
    }


def test_the_options_are_declared_once_for_both_clients() -> None:
    """Both clients take ``**options`` typed by one declaration (the facade's adds its own keys)."""
    for cls, declared in ((AcpClient, ClientOptions), (SyncAcpClient, SyncClientOptions)):
        parameters = list(inspect.signature(cls).parameters.values())
        assert [p.name for p in parameters] == ["endpoint", "options"]
        assert parameters[1].kind is inspect.Parameter.VAR_KEYWORD
        assert f"Unpack[{declared.__name__}]" in str(parameters[1].annotation)
    assert set(ClientOptions.__annotations__) < set(SyncClientOptions.__annotations__)
