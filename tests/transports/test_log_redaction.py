"""Secrets stay out of the logs of httpx, httpcore, hpack, h2 and websockets, at DEBUG, on real
loopback traffic; the records themselves are kept (redacted, never silenced)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from h2.events import ResponseReceived

from acp_client.transports._log_redaction import THIRD_PARTY_LOGGERS, install_log_redaction
from acp_client.transports.http import HttpConnector
from acp_client.transports.websocket import WebSocketConnector

from ._http_servers import Hypercorn
from ._ws_servers import RawServer, http_response, switching_protocols

QUERY_TOKEN = "QUERYSECRET1"
API_KEY = "APIKEYSECRET2"
BEARER = "BEARERSECRET3"
COOKIE = "COOKIESECRET4"
SECRETS = (QUERY_TOKEN, API_KEY, BEARER, COOKIE)


class Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, prefix: str) -> list[str]:
        return [r.getMessage() for r in self.records if r.name == prefix or r.name.startswith(prefix + ".")]

    def leaks(self) -> list[str]:
        return [f"{r.name}: {r.getMessage()}" for r in self.records if any(s in r.getMessage() for s in SECRETS)]


@contextlib.contextmanager
def debug_logs() -> Iterator[Collector]:
    """Every third-party logger at DEBUG, collected by a handler on the root logger."""
    collector = Collector()
    root = logging.getLogger()
    root.addHandler(collector)
    saved = {name: logging.getLogger(name).level for name in THIRD_PARTY_LOGGERS}
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield collector
    finally:
        root.removeHandler(collector)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    headers = [(b"content-type", b"application/json"), (b"set-cookie", f"sid={COOKIE}; Path=/".encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture
async def server() -> AsyncIterator[Hypercorn]:
    served = await Hypercorn(_app).start()
    yield served
    await served.stop()


def _make_http_connector(url: str) -> None:
    HttpConnector(url, headers={"X-Api-Key": API_KEY}, secret_headers=["X-Api-Key"])  # installs the filter


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
async def test_httpx_httpcore_and_hpack_logs_carry_no_secrets(server: Hypercorn, http2: bool) -> None:
    _make_http_connector(server.url)
    with debug_logs() as logs:
        async with httpx.AsyncClient(http1=not http2, http2=http2) as client:
            for _ in range(2):  # the second request reuses hpack's header table (indexed headers)
                response = await client.get(
                    f"{server.url}?token={QUERY_TOKEN}",
                    headers={"X-Api-Key": API_KEY, "Authorization": f"Bearer {BEARER}"},
                )
                assert response.status_code == 200
                assert response.headers["set-cookie"] == f"sid={COOKIE}; Path=/"
    assert logs.leaks() == []
    # Not silenced: each library still logged, and the redaction is visible.
    httpx_lines = logs.messages("httpx")
    assert any("HTTP Request: GET" in m and "/acp?<redacted>" in m for m in httpx_lines), httpx_lines
    httpcore_lines = logs.messages("httpcore")
    assert any("receive_response_headers.complete" in m and "<redacted>" in m for m in httpcore_lines)
    if http2:
        hpack_lines = logs.messages("hpack")
        assert any("b'set-cookie'" in m and "<redacted>" in m for m in hpack_lines), hpack_lines
        assert any("b'x-api-key'" in m and "<redacted>" in m for m in hpack_lines), hpack_lines
        assert any("b':path'" in m and "?<redacted>" in m for m in hpack_lines), hpack_lines


async def test_h2_event_records_carry_no_secrets() -> None:
    # h2 logs through the logger given in its configuration (httpcore gives none); its events print
    # their headers like this. A child logger made before the next connector is covered as well.
    child = logging.getLogger("h2.connection")
    _make_http_connector("http://127.0.0.1:9/acp")
    event = ResponseReceived(
        stream_id=1,
        headers=[(b":status", b"200"), (b"set-cookie", f"sid={COOKIE}".encode()), (b"x-api-key", API_KEY.encode())],
    )
    with debug_logs() as logs:
        logging.getLogger("h2").debug("Received %s", event)
        child.debug("Process input %s with headers %s", "SEND_HEADERS", [(b":path", f"/acp?token={QUERY_TOKEN}")])
    assert logs.leaks() == []
    assert len(logs.messages("h2")) == 2
    assert "(b'set-cookie', b'<redacted>')" in logs.messages("h2")[0]


async def test_websockets_redirect_logs_carry_no_secrets() -> None:
    async def redirect_then_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        if head.split(b" ")[1] == b"/acp":
            redirect = [("Location", f"/acp2?token={QUERY_TOKEN}"), ("Set-Cookie", f"sid={COOKIE}; Path=/")]
            writer.write(http_response(302, "Found", redirect))
        else:
            writer.write(switching_protocols(head, [("Set-Cookie", f"next={COOKIE}; Path=/")]))
        await writer.drain()
        await reader.read(1)

    raw = await RawServer(redirect_then_accept).start()
    try:
        connector = WebSocketConnector(
            raw.url,
            headers={"X-Api-Key": API_KEY, "Authorization": f"Bearer {BEARER}"},
            secret_headers=["x-api-key"],
            compression=False,
            close_timeout=0.5,
        )
        with debug_logs() as logs:
            transport = await asyncio.wait_for(connector.connect(), 5)
            await transport.aclose()
    finally:
        await raw.stop()
    assert logs.leaks() == []
    lines = logs.messages("websockets")
    assert any(m.startswith("< Location: /acp2?<redacted>") for m in lines), lines
    assert any(m.startswith("> GET /acp2?<redacted>") for m in lines), lines


def test_installing_twice_adds_one_filter_and_accumulates_names() -> None:
    first = install_log_redaction(["X-First"])
    later = logging.getLogger("httpcore.made_later")  # a child created after the first install
    assert first not in later.filters
    second = install_log_redaction(["x-second"])
    assert first is second
    for name in (*THIRD_PARTY_LOGGERS, "httpcore.made_later"):
        assert logging.getLogger(name).filters.count(first) == 1
    assert first.redact("> X-First: a\n< X-SECOND: b") == "> X-First: <redacted>\n< X-SECOND: <redacted>"
    assert first.redact("> Authorization: a\n> Cookie: b\n< Set-Cookie: c") == (
        "> Authorization: <redacted>\n> Cookie: <redacted>\n< Set-Cookie: <redacted>"
    )
