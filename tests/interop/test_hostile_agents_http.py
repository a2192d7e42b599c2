"""Hostile agents over Streamable HTTP: SSE garbage, error statuses, unexpected bodies, initialize
failures, POSTs never answered."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from acp_client import (
    AcpClient,
    AcpError,
    Callbacks,
    ClientClosed,
    ConnectionLost,
    ProtocolError,
    RequestTimeout,
    State,
    Timeouts,
)
from acp_client.exceptions import MalformedFrame
from acp_client.transports import (
    AuthenticationFailed,
    HttpStatusError,
    Limits,
    MessageTooLarge,
    MissingHeader,
    NotAcceptable,
    ServiceUnavailable,
    TransportClosed,
    UnknownConnection,
    UnsupportedMediaType,
)
from tests._support import FAST_RETRY, eventually, within
from tests.interop._hostile import HostileHttpAgent, bounded
from tests.transports._http_servers import Hypercorn

# --------------------------------------------------------------------------------------------------
# Streamable HTTP specifics

SSE_CASES = [
    pytest.param([{"sse": "data: not json\n\n"}], [MalformedFrame], id="data-not-json"),
    pytest.param([{"sse": "data: [1\r\n\r\n"}], [MalformedFrame], id="crlf-data-not-json"),
    pytest.param([{"sse": "this line has no colon\n\n"}], [], id="line-without-colon"),
    pytest.param([{"sse": ": a comment\n\n:\n\n"}], [], id="comments"),
    pytest.param([{"sse": "event: ping\ndata: {}\n\n"}], [], id="other-event-type"),
    pytest.param([{"sse": "retry: soon\nid: \x01\nevent\n\n"}], [], id="odd-fields-no-data"),
    pytest.param([{"sse": "data\n\n"}], [], id="empty-data"),
    pytest.param(
        [{"sse": 'data: {"jsonrpc": "2.0",\ndata:  "method": "x/n", "params": {}}\n\n'}], [], id="multi-line-data"
    ),
    pytest.param([{"sse": "da"}, {"sse": "ta: nope"}, {"sse": "\n"}, {"sse": "\n"}], [MalformedFrame], id="split-bad"),
    pytest.param(
        [{"sse_b64": base64.b64encode(b"data: \xff\xfe\xfd\n\n").decode()}], [MalformedFrame], id="invalid-utf8"
    ),
    # Only a BOM at the very start of a stream is stripped; later, "\ufeffdata" is an unknown field.
    pytest.param([{"sse": "\ufeffdata: 1\n\n"}], [], id="bom-mid-stream"),
]


@pytest.mark.parametrize(("frames", "reported"), SSE_CASES)
async def test_sse_garbage_is_reported_or_ignored_and_the_stream_goes_on(
    http_agent: tuple[HostileHttpAgent, Hypercorn], frames: list[Any], reported: list[type[AcpError]]
) -> None:
    _app, server = http_agent
    errors: list[AcpError] = []
    async with AcpClient(server.url, retry=None, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        assert [type(e) for e in errors] == reported
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}
        assert client.state.state is State.CONNECTED


async def test_sse_oversized_line_is_skipped(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    _app, server = http_agent
    errors: list[AcpError] = []
    limits = Limits(max_message_bytes=4096, max_sse_line_bytes=4096)
    async with AcpClient(
        server.url, retry=None, limits=limits, callbacks=Callbacks(on_protocol_error=errors.append)
    ) as client:
        frames = [{"sse": "data: " + "y" * 10000 + "\n\n"}, {"sse": ": " + "z" * 10000 + "\n\n"}]
        assert await within(client.request("_hostile", {"before": frames, "tag": "t"})) == {"echo": "t"}
        assert errors and all(isinstance(e, MessageTooLarge) for e in errors)
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


async def test_sse_event_truncated_by_the_end_of_the_stream(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    """The connection stream ends inside an event: the partial event is reported, the pending request
    fails with ``ConnectionLost`` (the link is gone) and, with a retry policy, the client reconnects."""
    app, server = http_agent
    errors: list[AcpError] = []
    async with AcpClient(server.url, retry=FAST_RETRY, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        frames = [{"sse": 'data: {"jsonrpc": "2.0", "id": 0, "res'}, {"end": True}]
        with pytest.raises(ConnectionLost) as caught:
            await within(client.request("_hostile", {"before": frames, "answer": False}))
        assert caught.value.may_have_executed is True
        assert [type(e) for e in errors] == [MalformedFrame]
        assert "inside an event" in str(errors[0])
        assert await within(client.request("_hostile", {"tag": "after"})) == {"echo": "after"}
        assert len(app.streams) >= 1
        assert client.state.state is State.CONNECTED


HTTP_POST_STATUSES = [
    pytest.param(400, "missing header", MissingHeader, id="400"),
    pytest.param(401, "who are you", AuthenticationFailed, id="401"),
    pytest.param(403, "go away", AuthenticationFailed, id="403"),
    pytest.param(406, "no", NotAcceptable, id="406"),
    pytest.param(415, "wrong media", UnsupportedMediaType, id="415"),
    pytest.param(418, "teapot", HttpStatusError, id="418"),
    pytest.param(429, "slow down", ServiceUnavailable, id="429"),
    pytest.param(500, "<html>boom</html>", HttpStatusError, id="500"),
    pytest.param(502, "bad gateway", HttpStatusError, id="502"),
    pytest.param(503, "later", ServiceUnavailable, id="503"),
]


@pytest.mark.parametrize(("status", "body", "error"), HTTP_POST_STATUSES)
async def test_http_error_status_for_a_post_fails_that_request_only(
    http_agent: tuple[HostileHttpAgent, Hypercorn], status: int, body: str, error: type[AcpError]
) -> None:
    _app, server = http_agent
    async with AcpClient(server.url, retry=None) as client:
        params = {"status": status, "body": body, "content_type": "text/html", "retry_after": 7}
        with pytest.raises(error) as caught:
            await within(client.request("_hostile", params))
        assert caught.value.status == status  # type: ignore[attr-defined]
        assert body[:20] in caught.value.body  # type: ignore[attr-defined]
        assert caught.value.maybe_delivered is (status >= 500 and error is HttpStatusError)  # type: ignore[attr-defined]
        if error is ServiceUnavailable:
            assert caught.value.retry_after == 7  # type: ignore[attr-defined]
        # The connection is kept: the next request is answered.
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}
        assert client.state.state is State.CONNECTED


async def test_http_404_for_the_connection_ends_the_link(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    _app, server = http_agent
    async with AcpClient(server.url, retry=None) as client:
        with pytest.raises(UnknownConnection):
            await within(client.request("_hostile", {"status": 404, "body": '{"error": "Unknown connection id"}'}))
        await eventually(lambda: client.state.state is State.FAILED, what="the failed state")
        with pytest.raises(ClientClosed):
            await within(client.request("_hostile", {"tag": "after"}))


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        pytest.param("text/html", "<html>hello</html>", id="html"),
        pytest.param("application/json", "{not json", id="json-garbage"),
        pytest.param("application/json", "17", id="json-number"),
    ],
)
async def test_http_200_with_an_unexpected_body_is_reported(
    http_agent: tuple[HostileHttpAgent, Hypercorn], content_type: str, body: str
) -> None:
    """A POST answered 200 with a body that is not a JSON-RPC message: reported; the real answer then
    comes on the stream and resolves the request."""
    _app, server = http_agent
    errors: list[AcpError] = []
    async with AcpClient(server.url, retry=None, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        params = {"status": 200, "content_type": content_type, "body": body, "then_answer_on_stream": True, "tag": "t"}
        assert await within(client.request("_hostile", params)) == {"echo": "t"}
        assert [type(e) for e in errors] == [MalformedFrame]
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


async def test_http_answer_in_the_post_body_resolves(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    _app, server = http_agent
    async with AcpClient(server.url, retry=None) as client:
        params = {"status": 200, "content_type": "application/json", "body": "$ANSWER", "tag": "inline"}
        assert await within(client.request("_hostile", params)) == {"echo": "inline"}


INIT_FAILURES = [
    pytest.param({"init_status": 500, "init_body": b"oops"}, HttpStatusError, id="500"),
    pytest.param({"init_status": 401, "init_body": b"no"}, AuthenticationFailed, id="401"),
    pytest.param({"init_status": 503, "init_body": b"later"}, ServiceUnavailable, id="503"),
    pytest.param({"init_status": 404, "init_body": b"nothing here"}, HttpStatusError, id="404"),  # no ACP endpoint
    pytest.param({"init_content_type": "text/html", "init_body": b"<html></html>"}, MalformedFrame, id="html"),
    pytest.param({"init_body": b"{broken"}, MalformedFrame, id="broken-json"),
    pytest.param({"init_body": b"[]"}, ProtocolError, id="empty-batch"),
    pytest.param({"init_body": b'{"jsonrpc": "2.0", "id": 999, "result": {}}'}, ProtocolError, id="wrong-id"),
    pytest.param({"init_body": b'{"jsonrpc": "2.0", "method": "x/n"}'}, ProtocolError, id="a-notification"),
    pytest.param({"no_connection_id": True}, ProtocolError, id="no-connection-id"),
    pytest.param({"get_content_type": "text/plain"}, ProtocolError, id="stream-wrong-content-type"),
    pytest.param({"get_status": 500}, HttpStatusError, id="stream-500"),
]


@pytest.mark.parametrize(("knobs", "error"), INIT_FAILURES)
async def test_http_connect_failures_are_typed(
    http_agent: tuple[HostileHttpAgent, Hypercorn], knobs: dict[str, Any], error: type[AcpError]
) -> None:
    app, server = http_agent
    for name, value in knobs.items():
        setattr(app, name, value)
    client = AcpClient(server.url, retry=None, timeouts=Timeouts(connect=5))
    with pytest.raises(error):
        await within(client.connect())
    assert client.state.state is State.FAILED
    await within(client.aclose())


async def test_http_initialize_that_never_answers_times_out(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    """The server takes the initialize POST and never answers it: ``connect_timeout`` bounds the wait.

    Over Streamable HTTP sending ``initialize`` is the POST that waits for the answer, so the request's
    timer must cover the send (else the client waits for the transport's 45 s SSE idle timeout).
    """
    app, server = http_agent
    app.hang_initialize = True
    client = AcpClient(server.url, retry=None, timeouts=Timeouts(connect=0.5))
    with pytest.raises((RequestTimeout, ConnectionLost, TransportClosed)):
        await bounded(client.connect(), 5, "connect() with connect_timeout=0.5")
    assert client.state.state is State.FAILED
    await within(client.aclose())


async def test_http_post_that_never_answers_times_out(http_agent: tuple[HostileHttpAgent, Hypercorn]) -> None:
    """The server takes a POST and never sends its status line: the request's own timeout fires (the
    send is abandoned), and the link stays usable."""
    app, server = http_agent
    async with AcpClient(server.url, retry=None) as client:
        with pytest.raises(RequestTimeout):
            await bounded(client.request("_hostile", {"hang": True}, timeout=0.5), 5, "a request with timeout=0.5")
        app.release_hung_posts()
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}
