"""``PermissionRequest`` answers (``acp_client.sync._events``): which option each answer picks."""

from __future__ import annotations

import concurrent.futures
import typing
from pathlib import Path
from typing import Any

from acp_client.sync import PermissionRequest, SyncEvent
from acp_client.types import CancelledPermissionOutcome, RequestPermissionRequest, SelectedPermissionOutcome

# -- PermissionRequest answers ------------------------------------------------------------------------


def _permission(*kinds: str) -> tuple[PermissionRequest, concurrent.futures.Future[Any]]:
    from acp_client.types import PermissionOption

    options = tuple(PermissionOption(option_id=f"opt-{kind}", name=kind, kind=kind) for kind in kinds)
    answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
    return PermissionRequest(RequestPermissionRequest(session_id="s", options=options), answer), answer


def test_allow_picks_allow_once_even_when_allow_always_is_listed_first() -> None:
    request, answer = _permission("allow_always", "reject_once", "allow_once")
    assert request.allow()
    assert answer.result() == SelectedPermissionOutcome(option_id="opt-allow_once")


def test_allow_never_escalates_to_allow_always() -> None:
    request, answer = _permission("allow_always", "reject_once")
    assert request.allow()
    assert answer.result() == CancelledPermissionOutcome()


def test_allow_always_is_a_separate_choice() -> None:
    request, answer = _permission("allow_once", "allow_always")
    assert request.allow_always()
    assert answer.result() == SelectedPermissionOutcome(option_id="opt-allow_always")
    assert not request.allow()  # answered once only
    missing, cancelled = _permission("allow_once")
    assert missing.allow_always() and cancelled.result() == CancelledPermissionOutcome()


def test_reject_prefers_reject_once() -> None:
    request, answer = _permission("reject_always", "reject_once", "allow_once")
    assert request.reject()
    assert answer.result() == SelectedPermissionOutcome(option_id="opt-reject_once")


def test_permission_outcome_is_one_public_type() -> None:
    import acp_client.handlers
    import acp_client.sync._events
    import acp_client.types

    assert acp_client.sync._events.PermissionOutcome is acp_client.types.PermissionOutcome
    assert not hasattr(acp_client.handlers, "PermissionOutcome") or (
        acp_client.handlers.PermissionOutcome is acp_client.types.PermissionOutcome
    )
    assert set(acp_client.types.PermissionOutcome.__args__) == {SelectedPermissionOutcome, CancelledPermissionOutcome}


def test_the_editor_guide_tables_every_event_class() -> None:
    guide = Path(__file__).parents[2] / "docs" / "editor-plugin.md"
    table = [line for line in guide.read_text().splitlines() if line.startswith("| `")]
    for event_class in typing.get_args(SyncEvent):
        assert any(f"`{event_class.__name__}`" in row for row in table), event_class.__name__
