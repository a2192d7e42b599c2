"""Where a stream stands (pure): its cursor, the headers that reopen it, resync signals."""

from __future__ import annotations

import httpx

from acp_client.transports._reattach import Cursor, is_resync_message


def test_a_stream_without_an_event_id_has_no_cursor() -> None:
    cursor = Cursor()
    assert not cursor.resumable and cursor.request_headers() == []
    cursor.last_event_id = "bad\u00e9id"  # cannot travel back in a header
    assert not cursor.resumable and cursor.request_headers() == []


def test_the_reopening_request_carries_the_last_id_and_the_resumption_headers() -> None:
    cursor = Cursor()
    assert cursor.take(httpx.Headers({"acp-stream-epoch": "e1", "x-other": "kept out"})) is None
    cursor.last_event_id = "42"
    assert cursor.request_headers() == [("Last-Event-ID", "42"), ("Acp-Stream-Epoch", "e1")]


def test_an_epoch_change_is_reported() -> None:
    cursor = Cursor()
    cursor.take({"X-Qwen-Event-Epoch": "7"})
    assert cursor.take({"X-Qwen-Event-Epoch": "7"}) is None
    changed = cursor.take({"X-Qwen-Event-Epoch": "8"})
    assert changed is not None and "'7'" in changed and "'8'" in changed
    assert cursor.take({"X-Qwen-Event-Epoch": "bad\nvalue"}) is None  # never echoed, never compared


def test_resync_notifications_are_recognized() -> None:
    notify = {"jsonrpc": "2.0", "method": "_qwen/notify", "params": {"kind": "state_resync_required", "data": {}}}
    assert is_resync_message(notify)
    assert not is_resync_message({"jsonrpc": "2.0", "method": "_qwen/notify", "params": {"kind": "other"}})
    assert not is_resync_message({"jsonrpc": "2.0", "method": "x", "params": ["state_resync_required"]})
    assert not is_resync_message([notify])
