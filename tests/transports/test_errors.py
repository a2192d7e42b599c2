"""The one map from third-party failures and HTTP statuses to the error tree."""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidHandshake, InvalidURI

from acp_client import AcpClient
from acp_client.exceptions import (
    AuthenticationFailed,
    BatchNotSupported,
    ConfigurationError,
    ConnectError,
    ConnectTimeout,
    HttpStatusError,
    MissingHeader,
    NotAcceptable,
    ServiceUnavailable,
    TlsVerificationError,
    TransportClosed,
    TransportError,
    UnknownConnection,
    UnknownSession,
    UnsafeRedirect,
    UnsupportedMediaType,
)
from acp_client.transports._errors import open_error, plain_server_hint, request_error, status_error
from tests._support import within


@pytest.mark.parametrize(
    ("status", "streamable", "expected"),
    [
        (400, True, MissingHeader),
        (400, False, HttpStatusError),
        (401, True, AuthenticationFailed),
        (403, False, AuthenticationFailed),
        (404, True, UnknownConnection),
        (404, False, HttpStatusError),
        (406, True, NotAcceptable),
        (415, True, UnsupportedMediaType),
        (501, True, BatchNotSupported),
        (503, False, ServiceUnavailable),
        (429, True, ServiceUnavailable),
        (302, True, UnsafeRedirect),
        (302, False, HttpStatusError),
        (418, True, HttpStatusError),
    ],
)
def test_statuses(status: int, streamable: bool, expected: type[Exception]) -> None:
    error = status_error(status, "m", streamable=streamable)
    assert type(error) is expected


def test_status_details() -> None:
    assert type(status_error(404, "m", streamable=True, unknown_session=True)) is UnknownSession
    assert type(status_error(400, "m", body="batch refused", streamable=True, batch=True)) is BatchNotSupported
    busy = status_error(503, "m", retry_after="7", streamable=True)
    assert isinstance(busy, ServiceUnavailable) and busy.retry_after == 7.0 and busy.maybe_delivered is False
    # A refusal comes before the agent saw the message; an unexpected 5xx may come after it.
    assert status_error(418, "m", streamable=True).maybe_delivered is False
    assert status_error(500, "m", streamable=True).maybe_delivered is True


def test_open_failures() -> None:
    url = "wss://example.test/acp?token=secret"
    verify = ssl.SSLCertVerificationError("certificate verify failed")
    assert type(open_error(verify, url, 1.0)) is TlsVerificationError
    assert type(open_error(ssl.SSLError("bad"), url, 1.0)) is ConnectError
    timeout = open_error(TimeoutError(), url, 2.5)
    assert type(timeout) is ConnectTimeout and "2.5s" in str(timeout)  # a ConnectError too
    assert type(open_error(ConnectionRefusedError(), url, 1.0)) is ConnectError
    assert type(open_error(InvalidURI(url, "bad"), url, 1.0)) is ConfigurationError
    assert type(open_error(InvalidHandshake("bad"), url, 1.0)) is ConnectError
    assert open_error(ValueError("a bug"), url, 1.0) is None
    assert all("secret" not in str(open_error(exc, url, 1.0)) for exc in (verify, TimeoutError(), OSError("x")))


def test_request_failures() -> None:
    refused = httpx.ConnectError("refused")
    first = request_error(refused, what="POST", target="t", idle=1, sent=False, connecting=True)
    assert type(first) is ConnectError and first.maybe_delivered is False
    later = request_error(refused, what="POST", target="t", idle=1, sent=False, connecting=False)
    assert type(later) is TransportClosed and later.maybe_delivered is False
    read = request_error(httpx.ReadTimeout("slow"), what="POST", target="t", idle=3, sent=True, connecting=False)
    assert type(read) is TransportClosed and read.maybe_delivered is True and "3s" in str(read)
    stream = request_error(httpx.ReadError("reset"), what="GET", target="t", idle=1, sent=False, connecting=False)
    assert type(stream) is TransportError
    wrapped = httpx.ConnectError("x")
    wrapped.__cause__ = ssl.SSLCertVerificationError("certificate verify failed")
    tls = request_error(wrapped, what="GET", target="t", idle=1, sent=False, connecting=False)
    assert type(tls) is TlsVerificationError


@pytest.mark.parametrize("scheme", ["https", "wss"])
async def test_tls_to_a_plain_server_says_so_and_names_the_plain_url(scheme: str, reference_server: Any) -> None:
    """``https://`` or ``wss://`` to a server that speaks no TLS: the error names the likely mistake, not only
    OpenSSL's ``WRONG_VERSION_NUMBER``."""
    plain = reference_server.ws_url if scheme == "wss" else reference_server.http_url
    url = f"{scheme}://{plain.partition('://')[2]}"
    client = AcpClient(url, retry=None)
    with pytest.raises(ConnectError) as refused:
        await within(client.connect())
    await client.aclose()
    assert f"the server does not speak TLS: is it {plain}?" in str(refused.value)


def test_the_plain_server_hint_is_only_for_a_tls_url_answered_in_plain() -> None:
    wrong = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)")
    assert plain_server_hint(wrong, "https://h:1/acp") == " (the server does not speak TLS: is it http://h:1/acp?)"
    assert plain_server_hint(httpx.ConnectError("x"), "https://h:1/acp") == ""
    assert plain_server_hint(wrong, "ws://h:1/acp") == ""
