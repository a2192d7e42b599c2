"""The Streamable HTTP transport's protections: body caps after decompression, redirects, cookies,
header hygiene and secrets."""

from __future__ import annotations

import gzip
import json
import logging
from typing import Any

import pytest

from acp_client._codec._jsonrpc import request_message
from acp_client.exceptions import (
    AuthenticationFailed,
    ConfigurationError,
    MessageTooLarge,
    TransportClosed,
    UnsafeRedirect,
)
from acp_client.transports import CookieStore, TlsConfig
from acp_client.transports.base import Limits
from acp_client.transports.http import HttpConnector, HttpTransport
from tests.transports._http_support import (
    SECRET,
    SECRET_API_KEY,
    Link,
    Serve,
    collect_until_response,
    hook_once,
    init,
    is_rpc,
    json_reply,
    new_session,
    recv,
)

from ._http_servers import END, FakeAcpServer, Hypercorn, Reply

# --------------------------------------------------------------------------------------------
# body caps and compression


async def test_initialize_body_over_the_cap(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    huge = {"jsonrpc": "2.0", "id": 0, "result": {"blob": "x" * 5000}}
    app.hook = hook_once(is_rpc("initialize"), json_reply(200, huge, [("acp-connection-id", "c1")]))
    transport = await link(server.url, initialize=False, limits=Limits(max_http_body_bytes=4096))
    with pytest.raises(MessageTooLarge) as caught:
        await init(transport)
    assert caught.value.limit == 4096


async def test_compressed_bodies_are_capped_after_decompression(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    bomb = gzip.compress(b'{"jsonrpc":"2.0","id":0,"result":{"x":"' + b"0" * 10_000_000 + b'"}}')
    assert len(bomb) < 20_000
    headers = [("content-type", "application/json"), ("content-encoding", "gzip"), ("acp-connection-id", "c1")]
    app.hook = hook_once(is_rpc("initialize"), Reply(200, headers, bomb))
    transport = await link(server.url, initialize=False, limits=Limits(max_http_body_bytes=1 << 20))
    with pytest.raises(MessageTooLarge):
        await init(transport)

    # A compressed answer within the cap is decoded.
    transport = await link(server.url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"zipped": True}}).encode()
    app.hook = hook_once(is_rpc("x/zip"), Reply(200, headers[:2], gzip.compress(body)))
    await transport.send(request_message(1, "x/zip", {}))
    assert (await recv(transport))["result"] == {"zipped": True}
    assert app.requests[-1].headers["accept-encoding"] == "gzip, deflate"


# --------------------------------------------------------------------------------------------
# redirects and credentials


async def test_post_never_follows_a_redirect(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    transport = await link(server.url)
    app.hook = hook_once(is_rpc("session/new"), Reply(307, [("location", server.url_for("/elsewhere"))]))
    with pytest.raises(UnsafeRedirect) as caught:
        await transport.send(request_message(1, "session/new", {"cwd": "/", "mcpServers": []}))
    assert caught.value.maybe_delivered is False
    assert not [r for r in app.requests if r.path == "/elsewhere"]
    assert not transport.closed


async def test_get_follows_a_same_origin_redirect(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    app.hook = hook_once(lambda r: r.method == "GET", Reply(307, [("location", "/acp/events")]))
    transport = await link(server.url, headers={"Authorization": SECRET})
    sid = await new_session(transport)
    assert sid
    gets = app.of("GET")
    assert [g.path for g in gets[:2]] == ["/acp", "/acp/events"]
    assert gets[1].headers["authorization"] == SECRET  # same origin: credentials may go


@pytest.mark.parametrize("target", ["other-port", "other-host"])
async def test_get_refuses_a_cross_origin_redirect(serve: Serve, link: Link, target: str) -> None:
    app, other_app = FakeAcpServer("python"), FakeAcpServer("python")
    server, other = await serve(app), await serve(other_app)
    location = other.url if target == "other-port" else server.url_for("/acp", host="localhost")
    app.hook = hook_once(lambda r: r.method == "GET", Reply(302, [("location", location)]))
    transport = await link(server.url, initialize=False, headers={"Authorization": SECRET, "X-Api-Key": SECRET_API_KEY})
    with pytest.raises(UnsafeRedirect):
        await init(transport)
    assert other_app.requests == []  # nothing, credentials included, went to the other origin
    assert [r.method for r in app.requests] == ["POST", "GET"]


async def test_get_refuses_https_to_http(serve: Serve, link: Link, certfile: str, trusted: TlsConfig) -> None:
    app, plain_app = FakeAcpServer("python"), FakeAcpServer("python")
    server = await serve(app, certfile=certfile)
    plain = await serve(plain_app)
    app.hook = hook_once(lambda r: r.method == "GET", Reply(301, [("location", plain.url)]))
    transport = await link(server.url, initialize=False, tls=trusted, headers={"Authorization": SECRET})
    with pytest.raises(UnsafeRedirect):
        await init(transport)
    assert plain_app.requests == []


def test_secret_headers_are_dropped_for_another_origin() -> None:
    connector = HttpConnector(
        "http://127.0.0.1:1/acp",
        headers={"Authorization": SECRET, "X-Api-Key": SECRET_API_KEY, "X-Trace": "t"},
        secret_headers=["x-api-key"],
    )
    transport = HttpTransport(connector._settings, client=None)  # type: ignore[arg-type]  # not used by _headers_for
    same = dict(transport._http._headers_for("http://127.0.0.1:1/other", []))
    assert same["Authorization"] == SECRET and same["X-Api-Key"] == SECRET_API_KEY
    foreign = dict(transport._http._headers_for("http://127.0.0.2:1/acp", []))
    assert foreign == {"X-Trace": "t"}


# --------------------------------------------------------------------------------------------
# cookies


async def test_cookies_are_captured_and_sent_back_across_reconnects(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    store = CookieStore()
    store.capture("http://127.0.0.2:9/acp", ["other=must-not-leak"])
    app.set_cookies = ["affinity=backend-7; Path=/"]
    connector = HttpConnector(server.url, cookies=store, headers={"Cookie": "app=1"})
    transport = await link(connector)
    await new_session(transport)
    await transport.aclose()
    assert app.requests[0].headers["cookie"] == "app=1"  # nothing stored yet
    assert all(r.headers["cookie"] == "app=1; affinity=backend-7" for r in app.requests[1:])
    assert {r.method for r in app.requests[1:]} == {"GET", "POST", "DELETE"}

    before = len(app.requests)
    await link(connector)  # a reconnect: the affinity cookie goes on the very first request
    assert app.requests[before].headers["cookie"] == "app=1; affinity=backend-7"
    assert all("must-not-leak" not in r.headers.get("cookie", "") for r in app.requests)


async def test_a_non_ascii_cookie_from_the_server_does_not_break_later_requests(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    app.set_cookies = ["lb=caf\xe9", "ok=1"]  # sent as one latin-1 octet
    connector = HttpConnector(server.url)
    transport = await link(connector)
    await new_session(transport)  # later requests carry the valid cookie, not a UnicodeEncodeError
    assert app.requests[-1].headers["cookie"] == "ok=1"


async def test_a_private_cookie_store_by_default(fake: tuple[FakeAcpServer, Hypercorn], link: Link) -> None:
    app, server = fake
    app.set_cookies = ["lb=1"]
    connector = HttpConnector(server.url)
    await link(connector)
    assert len(connector.cookies) == 1
    assert len(HttpConnector(server.url).cookies) == 0


# --------------------------------------------------------------------------------------------
# header hygiene and secrets


@pytest.mark.parametrize(
    "kwargs",
    [
        {"headers": {"Authorization": "Bearer a\r\nX-Evil: 1"}},
        {"headers": {"X-Ok": "a\nb"}},
        {"headers": {"X-Ok": "a\x00b"}},
        {"headers": {"Bad Name": "v"}},
        {"headers": {"Acp-Session-Id": "s"}},
        {"headers": {"Content-Type": "text/plain"}},
        {"headers": {"Authorization": "Bearer t\u00f6ken"}},  # httpx sends ASCII only: no UnicodeEncodeError later
        {"connect_timeout": 0},
    ],
)
def test_unsafe_configuration_is_refused_before_connecting(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        HttpConnector("http://127.0.0.1:1/acp", **kwargs)


@pytest.mark.parametrize(
    "url", ["ws://127.0.0.1/acp", "ftp://x/acp", "http:///acp", "http://user:pw@127.0.0.1/acp", "http://h/a\r\nb"]
)
def test_unsupported_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        HttpConnector(url)


async def test_session_id_with_crlf_is_refused_before_sending(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    app, server = fake
    transport = await link(server.url)
    before = len(app.requests)
    for bad in ("s\r\nX-Evil: 1", "s\n", "s\x00"):
        with pytest.raises(ConfigurationError):
            await transport.send(request_message(1, "session/prompt", {"sessionId": bad, "prompt": []}))
        with pytest.raises(ConfigurationError):
            await transport.send(request_message(2, "session/status", {"sessionId": bad}))
    assert len(app.requests) == before
    assert not transport.closed


async def test_a_non_ascii_session_id_is_a_typed_error_not_a_crash(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link
) -> None:
    # It cannot travel in an Acp-Session-Id header (httpx sends ASCII only).
    app, server = fake
    transport = await link(server.url)
    before = len(app.requests)
    with pytest.raises(ConfigurationError):
        await transport.send(request_message(1, "session/prompt", {"sessionId": "s\u00e9", "prompt": []}))
    assert len(app.requests) == before
    # An agent that names a session so: no stream for it, and the link lives on.
    transport._ensure_session_stream("s\u00e9", established=True)
    assert "s\u00e9" not in transport._sessions
    assert not transport.closed
    await new_session(transport, request_id=2)


async def test_secrets_are_never_logged(
    fake: tuple[FakeAcpServer, Hypercorn], link: Link, caplog: pytest.LogCaptureFixture
) -> None:
    app, server = fake
    app.set_cookies = ["sid=cookie-secret-value"]
    caplog.set_level(logging.DEBUG, logger="acp_client")
    transport = await link(
        server.url, headers={"Authorization": SECRET, "X-Api-Key": SECRET_API_KEY}, secret_headers=["X-Api-Key"]
    )
    sid = await new_session(transport)
    app.hook = hook_once(is_rpc("x/fail"), Reply(401, [], b"denied"))
    with pytest.raises(AuthenticationFailed) as caught:
        await transport.send(request_message(2, "x/fail", {"sessionId": sid}))
    await transport.send(request_message(3, "session/close", {"sessionId": sid}))
    await collect_until_response(transport, 3)
    app.connection.stream.push(END)
    with pytest.raises(TransportClosed):
        await recv(transport)
    await transport.aclose()
    logged = "\n".join(record.getMessage() for record in caplog.records) + str(caught.value)
    assert "POST" in logged  # the transport did log at debug level
    for secret in (SECRET, "s3cr3t", SECRET_API_KEY, "cookie-secret-value"):
        assert secret not in logged
