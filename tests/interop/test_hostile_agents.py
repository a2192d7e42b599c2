"""Bad input at the client level: :class:`~acp_client.AcpClient` against hostile agents on loopback,
the same bad frames on every transport (the peers: ``tests/interop/_hostile.py``).

The client must never crash, hang or silently corrupt: each bad message is reported to
``on_protocol_error`` (typed) while the connection is kept where the protocol allows, a request fails
with a clear typed error where it cannot be answered, and the next good answer still resolves its
request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_client import AcpError, Callbacks, ConnectionLost, RequestTimeout, State, UpdateEvent
from acp_client.exceptions import InvalidMessage, MalformedFrame, UnexpectedResponse
from acp_client.transports import Limits, MessageTooLarge
from acp_client.types import UnknownSessionUpdate
from tests._support import FAST_RETRY, eventually, within
from tests.interop._hostile import Peer

# --------------------------------------------------------------------------------------------------
# Bad frames on every transport

DEEP = 400  # deep, yet well within what the JSON decoder accepts from any task
BAD_FRAMES = [
    pytest.param('{"jsonrpc": "2.0", "id": $ID, "result": {"echo": "WRONG"', MalformedFrame, 1, id="truncated-json"),
    pytest.param("hello, I am not JSON", MalformedFrame, 1, id="not-json"),
    pytest.param('"just a string"', MalformedFrame, 1, id="json-string"),
    pytest.param("42", MalformedFrame, 1, id="bare-number"),
    pytest.param("null", MalformedFrame, 1, id="json-null"),
    pytest.param("[]", MalformedFrame, 1, id="empty-batch"),
    pytest.param("[1, 2]", MalformedFrame, 2, id="batch-of-garbage"),
    pytest.param('{"jsonrpc": "1.0", "id": $ID, "result": {"echo": "WRONG"}}', MalformedFrame, 1, id="jsonrpc-1.0"),
    pytest.param('{"id": $ID, "result": {"echo": "WRONG"}}', MalformedFrame, 1, id="jsonrpc-missing"),
    pytest.param(
        '{"jsonrpc": "2.0", "id": $ID, "result": {"echo": "WRONG"}, "error": {"code": 1, "message": "x"}}',
        MalformedFrame,
        1,
        id="result-and-error",
    ),
    pytest.param('{"jsonrpc": "2.0", "id": $ID}', MalformedFrame, 1, id="neither-result-nor-error"),
    pytest.param('{"jsonrpc": "2.0", "id": $ID, "error": "nope"}', MalformedFrame, 1, id="error-not-an-object"),
    pytest.param('{"jsonrpc": "2.0", "id": [$ID], "result": {"echo": "WRONG"}}', MalformedFrame, 1, id="id-is-a-list"),
    pytest.param('{"jsonrpc": "2.0", "method": 7, "params": {}}', MalformedFrame, 1, id="method-not-a-string"),
    pytest.param('{"jsonrpc": "2.0", "method": "session/update", "params": 5}', MalformedFrame, 1, id="params-number"),
    pytest.param('{"jsonrpc": "2.0", "id": 987654, "result": {}}', UnexpectedResponse, 1, id="unknown-id"),
    pytest.param(
        '{"jsonrpc": "2.0", "id": "nobody", "error": {"code": -32603, "message": "x"}}',
        UnexpectedResponse,
        1,
        id="error-for-unknown-id",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}',
        UnexpectedResponse,
        1,
        id="error-without-id",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": 12}}',
        InvalidMessage,
        1,
        id="undecodable-session-update",
    ),
    pytest.param("[" * 5000 + "]" * 5000, MalformedFrame, 1, id="nested-5000-list"),
    pytest.param('{"a":' * 5000 + "1" + "}" * 5000, MalformedFrame, 1, id="nested-5000-object"),
    pytest.param(
        '{"jsonrpc": "2.0", "id": $ID, "result": {"n": ' + "7" * 5000 + "}}", MalformedFrame, 1, id="5000-digit-number"
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "x/n", "params": {"n": -' + "1" * 5000 + "}}",
        MalformedFrame,
        1,
        id="5000-digit-negative-in-notification",
    ),
    pytest.param(
        '{"jsonrpc": "1.0", "x": ' + "[" * DEEP + "]" * DEEP + "}",
        MalformedFrame,
        1,
        id="deep-list-in-malformed-message",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "id": "nobody", "result": ' + "[" * DEEP + "]" * DEEP + "}",
        UnexpectedResponse,
        1,
        id="deep-result-for-unknown-id",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": '
        + "[" * DEEP
        + "]" * DEEP
        + "}}",
        InvalidMessage,
        1,
        id="deep-session-update",
    ),
]
#: Frames that are legal JSON-RPC the client must simply cope with (nothing to report).
ODD_BUT_LEGAL = [
    pytest.param(
        '{"jsonrpc": "2.0", "method": "x/unknown_notification", "params": {"a": [1, {"b": null}]}}',
        id="unknown-notification",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "nobody", '
        '"update": {"sessionUpdate": "brand_new_kind", "x": 1}}}',
        id="unknown-update-kind",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "not-running"}}',
        id="cancel-of-nothing",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "x/n", "params": {"text": "\\ud800 lone surrogate \\u0000"}}',
        id="lone-surrogate-in-notification",
    ),
    pytest.param('{"jsonrpc": "2.0", "method": "x/n", "params": {"n": 1e999, "m": -1e999}}', id="infinite-floats"),
    pytest.param('{"jsonrpc": "2.0", "method": "x/n", "params": {"n": ' + "9" * 4000 + "}}", id="4000-digits"),
]


@pytest.mark.parametrize(("frame", "reported", "per_frame"), BAD_FRAMES)
async def test_a_bad_frame_is_reported_and_the_answer_still_resolves(
    peer: Peer, frame: str, reported: type[AcpError], per_frame: int
) -> None:
    errors: list[AcpError] = []
    async with peer.client(callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        result = await within(client.request("_hostile", {"before": [frame, frame], "tag": "first"}))
        assert result == {"echo": "first"}  # never the WRONG answer a broken frame carried
        assert [type(error) for error in errors] == [reported] * (2 * per_frame), errors
        if isinstance(errors[0], MalformedFrame):
            assert errors[0].excerpt  # the report shows the start of the frame
        # The next good answer resolves its request too, on the same connection.
        assert await within(client.request("_hostile", {"tag": "second"})) == {"echo": "second"}
        assert client.state.state is State.CONNECTED
        assert len(errors) == 2 * per_frame


@pytest.mark.parametrize("frame", ODD_BUT_LEGAL)
async def test_odd_but_legal_frames_are_taken_in_stride(peer: Peer, frame: str) -> None:
    errors: list[AcpError] = []
    notifications: list[tuple[str, Any]] = []
    updates: list[UpdateEvent] = []

    def on_notification(method: str, params: Any) -> None:
        notifications.append((method, params))

    async with peer.client(
        callbacks=Callbacks(on_protocol_error=errors.append, on_notification=on_notification, on_update=updates.append)
    ) as client:
        result = await within(client.request("_hostile", {"before": [frame], "tag": "first"}))
        assert result == {"echo": "first"}
        assert errors == []
        message = json.loads(frame)
        if message["method"] == "session/update":  # an unknown variant is kept, not rejected
            assert [(e.session_id, e.update.kind) for e in updates] == [("nobody", "brand_new_kind")]
            assert isinstance(updates[0].update, UnknownSessionUpdate)
            assert updates[0].update.raw == message["params"]["update"]
        elif message["method"] == "$/cancel_request":
            assert notifications == []  # the connection handles it
        else:
            assert notifications == [(message["method"], message["params"])]
        assert await within(client.request("_hostile", {"tag": "second"})) == {"echo": "second"}
        assert client.state.state is State.CONNECTED


async def test_broken_requests_are_answered_invalid_request(peer: Peer) -> None:
    """A request the client cannot read is answered ``Invalid Request`` (id null, as JSON-RPC says)."""
    errors: list[AcpError] = []
    async with peer.client(callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        frames = ['{"jsonrpc": "2.0", "id": {"x": 1}, "method": "fs/read_text_file"}', "[]"]
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        await eventually(lambda: len(peer.replies()) >= 2, what="two error replies")
        for reply in peer.replies():
            assert reply["id"] is None
            assert reply["error"]["code"] == -32600
        assert [type(e) for e in errors] == [MalformedFrame, MalformedFrame]


async def test_agent_requests_for_unknown_methods_get_method_not_found(peer: Peer) -> None:
    async with peer.client() as client:
        frames = [
            '{"jsonrpc": "2.0", "id": "agent-1", "method": "x/unknown", "params": {}}',
            '{"jsonrpc": "2.0", "id": "agent-2", "method": "fs/read_text_file", "params": {"sessionId": "s", '
            '"path": "/etc/passwd"}}',
            '{"jsonrpc": "2.0", "id": "agent-3", "method": "terminal/create", "params": {"sessionId": "s", '
            '"command": "rm"}}',
        ]
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        await eventually(lambda: len(peer.replies()) >= 3, what="three replies")
        replies = {reply["id"]: reply for reply in peer.replies()}
        assert {key: reply["error"]["code"] for key, reply in replies.items()} == {
            "agent-1": -32601,
            "agent-2": -32601,  # no file-system policy: not offered
            "agent-3": -32601,  # no terminal handler: not offered
        }
        assert await within(client.request("_hostile", {"tag": "again"})) == {"echo": "again"}


async def test_a_reply_echoing_a_lone_surrogate_id_is_sent_escaped(peer: Peer) -> None:
    """An agent request whose id holds a lone surrogate (legal as a JSON escape, not as UTF-8): the
    client's reply carries it back escaped, and neither the client nor its link breaks."""
    async with peer.client() as client:
        frame = '{"jsonrpc": "2.0", "id": "\\udcff", "method": "x/unknown", "params": {}}'
        assert await within(client.request("_hostile", {"before": [frame], "tag": "t"})) == {"echo": "t"}
        await eventually(lambda: len(peer.replies()) >= 1, what="the reply")
        assert [(r["id"], r["error"]["code"]) for r in peer.replies()] == [("\udcff", -32601)]
        assert await within(client.request("_hostile", {"tag": "after"})) == {"echo": "after"}
        assert client.state.state is State.CONNECTED


async def test_an_agent_that_never_answers_times_out_and_is_told(peer: Peer) -> None:
    async with peer.client() as client:
        with pytest.raises(RequestTimeout) as caught:
            await within(client.request("_hostile", {"answer": False, "tag": "lost"}, timeout=0.3))
        assert caught.value.method == "_hostile"
        sent = [m for m in peer.received() if isinstance(m, dict) and m.get("method") == "_hostile"]
        await eventually(
            lambda: any(isinstance(m, dict) and m.get("method") == "$/cancel_request" for m in peer.received()),
            what="$/cancel_request",
        )
        cancel = next(m for m in peer.received() if isinstance(m, dict) and m.get("method") == "$/cancel_request")
        assert cancel["params"] == {"requestId": sent[0]["id"]}
        assert "id" not in cancel  # a notification
        assert await within(client.request("_hostile", {"tag": "fine"})) == {"echo": "fine"}


async def test_a_late_answer_after_the_timeout_is_ignored_not_misdelivered(peer: Peer) -> None:
    """The first request times out; its answer then arrives, before the second request's answer. The
    client gave up on it itself, so it is no protocol error of the agent (logged at DEBUG only)."""
    errors: list[AcpError] = []
    async with peer.client(callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        with pytest.raises(RequestTimeout):
            await within(client.request("_hostile", {"answer": False}, timeout=0.2))
        first_id = next(m["id"] for m in peer.received() if isinstance(m, dict) and m.get("method") == "_hostile")
        late = json.dumps({"jsonrpc": "2.0", "id": first_id, "result": {"echo": "LATE"}})
        assert await within(client.request("_hostile", {"before": [late], "tag": "second"})) == {"echo": "second"}
        assert errors == []


async def test_an_oversized_message_is_a_clear_error(peer: Peer) -> None:
    """Over ``limits.max_message_bytes``: reported as :class:`MessageTooLarge`. Over stdio and HTTP the
    link survives (the message is skipped); a WebSocket is closed with 1009, the pending request fails
    with ``ConnectionLost``, and the client reconnects."""
    errors: list[AcpError] = []
    big = json.dumps({"jsonrpc": "2.0", "method": "x/big", "params": {"blob": "x" * 6000}})
    retry = FAST_RETRY if peer.kind == "ws" else None
    async with peer.client(
        callbacks=Callbacks(on_protocol_error=errors.append), limits=Limits(max_message_bytes=4096), retry=retry
    ) as client:
        if peer.kind == "ws":
            with pytest.raises(ConnectionLost) as lost:
                await within(client.request("_hostile", {"before": [big], "tag": "big"}))
            assert lost.value.may_have_executed is True
        else:
            assert await within(client.request("_hostile", {"before": [big], "tag": "big"})) == {"echo": "big"}
        assert [type(e) for e in errors] == [MessageTooLarge]
        assert errors[0].limit == 4096  # type: ignore[attr-defined]
        # Either way the next request is answered (after a reconnect for the WebSocket).
        assert await within(client.request("_hostile", {"tag": "small"})) == {"echo": "small"}
        assert client.state.state is State.CONNECTED


async def test_a_flood_of_garbage_does_not_starve_the_answer(peer: Peer) -> None:
    errors: list[AcpError] = []
    frames = [f"garbage {i} {{" for i in range(300)]
    async with peer.client(callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        assert len(errors) == 300
        assert all(isinstance(e, MalformedFrame) for e in errors)
