"""One map from third-party failures and HTTP statuses to the error tree, for HTTP and WebSocket.

The transports ``raise ... from exc`` what they get back here, so no ``httpx``, ``httpcore``,
``websockets``, ``ssl`` or ``OSError`` escapes them. Statuses with an ACP meaning of their own
(400, 404, 406, 415, 501) apply to Streamable HTTP only: a WebSocket handshake
answered 404 is a plain ``HttpStatusError``. A certificate that does not verify is always
:class:`~acp_client.exceptions.TlsVerificationError`, however deep the library wrapped it.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from typing import Final, TypeAlias

import httpx
from websockets.exceptions import InvalidHandshake, InvalidURI, WebSocketException

from ..exceptions import (
    AcpError,
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
from ._security import parse_retry_after, safe_url

#: Answers that are redirects. JSON-RPC POSTs never follow one; GET, DELETE and the WebSocket
#: handshake follow same-origin ones only.
REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
#: How many redirects one request (or one WebSocket opening) follows before giving up.
MAX_REDIRECTS: Final = 5

#: Statuses with one meaning on both transports.
_STATUS_ERRORS: Final[dict[int, type[HttpStatusError]]] = {
    401: AuthenticationFailed,
    403: AuthenticationFailed,
    429: ServiceUnavailable,
    503: ServiceUnavailable,
}
#: Statuses the Streamable HTTP transport gives an ACP meaning (404 is decided by its body).
_STREAMABLE_STATUS_ERRORS: Final[dict[int, type[HttpStatusError]]] = {
    400: MissingHeader,
    406: NotAcceptable,
    415: UnsupportedMediaType,
    501: BatchNotSupported,
}


def status_error(
    status: int,
    message: str,
    *,
    body: str = "",
    retry_after: str | None = None,
    streamable: bool = False,
    unknown_session: bool = False,
    batch: bool = False,
) -> TransportError:
    """The error for an answer with an unexpected HTTP status.

    Args:
        streamable: A Streamable HTTP request (``maybe_delivered`` is set, ACP statuses apply);
            ``False`` for a WebSocket handshake.
        unknown_session: For a 404: the server does not know the session (else the connection).
        batch: The request carried a JSON-RPC batch (a 400 naming batches is then a refusal of it).
    """
    if streamable and status in REDIRECT_STATUSES:  # (a handshake follows the redirects it can)
        return UnsafeRedirect(f"{message} (a redirect, not followed)")
    kind = _STATUS_ERRORS.get(status)
    if streamable and kind is None:
        if batch and status == 400 and "batch" in body.lower():
            kind = BatchNotSupported
        elif status == 404:
            kind = UnknownSession if unknown_session else UnknownConnection
        else:
            kind = _STREAMABLE_STATUS_ERRORS.get(status)
    # A refusal the protocol names comes before the agent saw the message; an unexpected 5xx may
    # come after it.
    delivered = (kind is None and status >= 500) if streamable else None
    if kind is ServiceUnavailable:
        retry = parse_retry_after(retry_after)
        return ServiceUnavailable(message, status=status, body=body, retry_after=retry, maybe_delivered=delivered)
    return (kind or HttpStatusError)(message, status=status, body=body, maybe_delivered=delivered)


def describe_error(exc: BaseException) -> str:
    """``"TypeName: message"`` (or just the type when the message is empty)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_tls_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or anything in its cause chain) is a failed certificate verification."""
    return any(
        isinstance(link, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(link)
        for link in _chain(exc)
    )


_OpenMapper: TypeAlias = Callable[[BaseException, str, float], AcpError]

#: What OpenSSL says when the answer to its hello is not TLS at all (a plain HTTP server's reply).
_NOT_TLS: Final = ("WRONG_VERSION_NUMBER", "wrong version number", "RECORD_LAYER_FAILURE", "HTTP_REQUEST")


def plain_server_hint(exc: BaseException, url: str) -> str:
    """A hint for a TLS handshake a plain (non-TLS) server answered, naming the plain URL; ``""``
    for any other failure."""
    scheme, _, rest = url.partition("://")
    plain = {"https": "http", "wss": "ws"}.get(scheme.lower())
    if plain is None or not any(sign in str(link) for link in _chain(exc) for sign in _NOT_TLS):
        return ""
    return f" (the server does not speak TLS: is it {safe_url(f'{plain}://{rest}')}?)"


def _tls_refused(exc: BaseException, url: str, timeout: float) -> AcpError:
    detail = getattr(exc, "verify_message", None)
    return TlsVerificationError(f"TLS certificate of {safe_url(url)} did not verify: {detail or exc}")


#: Failures while opening a link (TCP, TLS, the WebSocket handshake), most specific first.
_OPEN_ERRORS: Final[tuple[tuple[type[BaseException], _OpenMapper], ...]] = (
    (ssl.SSLCertVerificationError, _tls_refused),
    (
        ssl.SSLError,
        lambda exc, url, t: ConnectError(
            f"TLS handshake with {safe_url(url)} failed: {exc}{plain_server_hint(exc, url)}"
        ),
    ),
    (TimeoutError, lambda exc, url, t: ConnectTimeout(f"timed out after {t:g}s opening {safe_url(url)}", timeout=t)),
    (OSError, lambda exc, url, t: ConnectError(f"cannot connect to {safe_url(url)}: {exc}")),
    # A SOCKS proxy from the environment without python-socks.
    (ImportError, lambda exc, url, t: ConnectError(f"cannot open a link to {safe_url(url)}: {exc}")),
    (InvalidURI, lambda exc, url, t: ConfigurationError(f"invalid WebSocket URL {safe_url(url)!r}")),
    (InvalidHandshake, lambda exc, url, t: ConnectError(f"WebSocket handshake with {safe_url(url)} failed: {exc}")),
    (WebSocketException, lambda exc, url, t: ConnectError(f"cannot open a WebSocket to {safe_url(url)}: {exc}")),
)


def open_error(exc: BaseException, url: str, timeout: float) -> AcpError | None:
    """Map a failure to open a link to ``url``; ``None`` when it is not a known network failure."""
    for kind, mapper in _OPEN_ERRORS:
        if isinstance(exc, kind):
            return mapper(exc, url, timeout)
    return None


#: ``httpx`` failures of a request that never left this process.
REQUEST_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


def request_error(
    exc: httpx.HTTPError, *, what: str, target: str, idle: float, sent: bool, connecting: bool
) -> TransportError:
    """Map a network failure of one Streamable HTTP request (``what``: ``"POST"``, ``"GET"``...).

    ``sent``: its answer was being read. ``connecting``: the ``initialize`` POST, whose failure to
    reach the server is a ``ConnectError``. A POST's other failures close the link
    (``TransportClosed``); other requests get a plain ``TransportError`` the stream logic judges.
    """
    maybe_delivered = sent or not isinstance(exc, REQUEST_NOT_SENT)
    if isinstance(exc, httpx.TimeoutException):
        cause = f"{type(exc).__name__} after {idle:g}s" if maybe_delivered else type(exc).__name__
    else:
        cause = describe_error(exc)
    if _is_tls_failure(exc):
        return TlsVerificationError(f"the certificate of {target} did not verify: {exc}")
    cause += plain_server_hint(exc, target)
    reason = f"{what} to {target} failed: {cause}"
    if what != "POST":
        return TransportError(reason, maybe_delivered=maybe_delivered)
    if connecting and isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return ConnectTimeout(f"timed out connecting to {target}: {cause}")
    if connecting and not maybe_delivered:
        return ConnectError(f"could not connect to {target}: {cause}")
    return TransportClosed(reason, maybe_delivered=maybe_delivered)
