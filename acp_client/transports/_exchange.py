"""The HTTP requests of one Streamable HTTP link: headers, cookies, redirects, bodies, failures.

:class:`HttpExchange` knows nothing about JSON-RPC or sessions: it sends one request through a
:class:`~._wire.Wire` and returns the answer, every failure and unexpected status mapped to the
error tree (:mod:`._errors`), under the safety rules of :mod:`.http` (redirects, secret headers,
cookies, bounded bodies: :mod:`._body`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final
from urllib.parse import urljoin

import attrs
import httpx

from .._codec._jsonrpc import Message, decode_frame, excerpt
from .._util._logging import get_logger
from ..exceptions import (
    AcpError,
    HttpStatusError,
    MalformedFrame,
    MessageTooLarge,
    ProtocolError,
    TlsVerificationError,
    TransportClosed,
    TransportError,
    UnsafeRedirect,
)
from ._body import Inflater, read_body
from ._cookies import CookieStore, with_cookie
from ._errors import MAX_REDIRECTS, REDIRECT_STATUSES, REQUEST_NOT_SENT, request_error, status_error
from ._routing import is_session_404
from ._security import origin_of, redirect_allowed, safe_url
from ._wire import HeaderView, Reply, Wire
from .base import Limits

logger = get_logger(__name__)

CONNECTION_ID_HEADER: Final = "Acp-Connection-Id"
SESSION_ID_HEADER: Final = "Acp-Session-Id"
_JSON: Final = "application/json"
_EVENT_STREAM: Final = "text/event-stream"
#: Statuses of an ``initialize`` POST that mean "a web server, but no ACP endpoint at this URL":
#: not found, method not allowed (a static page), not implemented.
_NO_ENDPOINT: Final = frozenset({404, 405, 501})
#: How much of an error answer's body is kept for diagnostics.
_ERROR_BODY_BYTES: Final = 4096


@attrs.frozen
class LinkSettings:
    """What an HTTP connector gives each of its links (checked by the connector; see its arguments)."""

    url: str
    headers: list[tuple[str, str]]
    secret_headers: frozenset[str]
    cookies: CookieStore
    limits: Limits
    connect_timeout: float
    sse_idle_timeout: float
    session_stream_retries: int
    max_session_streams: int = 64
    reattach_timeout: float = 0.0


@attrs.frozen(slots=True)
class Answer:
    """A fully read answer to one POST (``body_error``: why a 2xx body could not be read; it is empty)."""

    status: int
    headers: HeaderView
    body: bytes
    http_version: str
    body_error: AcpError | None = None


def _media_type(headers: HeaderView) -> str:
    """The media type of an answer, lowercased, without parameters."""
    value: str = headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower()


def _is_json(media_type: str) -> bool:
    return media_type == _JSON or (media_type.startswith("application/") and media_type.endswith("+json"))


def check_acp_endpoint(answer: Answer, target: str) -> Message | None:
    """The message in the answer to the ``initialize`` POST (``None``: a status but 200); raises when
    it shows there is no ACP endpoint at ``target`` (404 / 405 / 501, or 200 with a body not JSON)."""
    if answer.status in _NO_ENDPOINT:
        message = f"no ACP endpoint at {target} (HTTP {answer.status})"
        raise HttpStatusError(message, status=answer.status, body=excerpt(answer.body), maybe_delivered=False)
    if answer.status != 200:
        return None
    decoded = post_body(answer)
    if isinstance(decoded, MalformedFrame):
        message = f"{target} is not an ACP endpoint: its answer to initialize is not JSON ({decoded})"
        raise MalformedFrame(message, excerpt=excerpt(answer.body)) from decoded
    return decoded


def post_body(answer: Answer) -> Message | MalformedFrame:
    """The JSON-RPC message in a POST's 200 body, or why it is not one."""
    media_type = _media_type(answer.headers)
    if not _is_json(media_type):
        return MalformedFrame(
            f"a POST was answered 200 with Content-Type {media_type or 'none'!r}", excerpt=excerpt(answer.body)
        )
    try:
        return decode_frame(answer.body)
    except MalformedFrame as exc:
        return exc


class HttpExchange:
    """Sends the requests of one link (see the module docstring).

    Args:
        client: The main wire (POSTs, DELETE; the SSE streams too when neither of the next two is given).
        stream_client_factory: Makes a dedicated wire per SSE stream (HTTP/2).
        stream_client: The wire every SSE stream shares (HTTP/1.1), when there is no factory.
        on_fatal: Called with a reason when a failure ends the link (a POST's network failure, a
            certificate that did not verify).
        closed_reason: Why the link is closed, for requests attempted after it.
    """

    def __init__(
        self,
        settings: LinkSettings,
        *,
        client: Wire,
        stream_client_factory: Callable[[], Wire] | None,
        stream_client: Wire | None,
        on_fatal: Callable[[str], None],
        closed_reason: Callable[[], str],
    ) -> None:
        self.url = url = settings.url
        self.target = safe_url(url)
        self._origin = origin_of(url)
        self._client = client
        self._stream_client_factory = stream_client_factory
        self._shared_stream_client = stream_client
        #: The dedicated client of each open SSE response, by ``id(response)``.
        self._stream_clients: dict[int, Wire] = {}
        self._settings = settings
        self._cookies = settings.cookies
        self._idle = settings.sse_idle_timeout
        self._post_extra: tuple[str | None, list[tuple[str, str]]] = (None, [])
        self._on_fatal = on_fatal
        self._closed_reason = closed_reason
        #: Set once ``initialize`` is answered; sent on every later request.
        self.connection_id: str | None = None

    async def post(self, body: bytes, session_id: str | None, *, initialize: bool = False) -> Answer:
        """POST one encoded message; returns the read answer (any status but a redirect, which is
        ``UnsafeRedirect``). A network failure is ``TransportClosed`` (``ConnectError`` for
        ``initialize``), a certificate that did not verify ``TlsVerificationError``; only
        ``initialize``'s answer body raises when it is too large or unreadable."""
        headers = self._post_headers(initialize)
        if session_id is not None:
            headers = [*headers, (SESSION_ID_HEADER, session_id)]
        response = await self._send("POST", self.url, headers, body, connecting=initialize)
        try:
            self._capture_cookies(self.url, response)
            status = response.status_code
            if status in REDIRECT_STATUSES:
                raise UnsafeRedirect(
                    f"the server redirected a JSON-RPC POST (HTTP {status}); POSTs never follow redirects"
                )
            body_error: AcpError | None = None
            if not 200 <= status < 300:
                data = await self.read_error_body(response)
            elif response.headers.get("content-length") == "0":
                # The usual 202. Reading its (empty) end is what lets httpx reuse the connection.
                await response.aread()
                data = b""
            else:
                try:
                    data = await self._read_body(response)
                except (MessageTooLarge, ProtocolError) as exc:
                    if initialize:
                        raise
                    # The server accepted the message; only its unexpected answer body is lost.
                    body_error, data = exc, b""
            return Answer(status, response.headers, data, response.http_version, body_error)
        except httpx.HTTPError as exc:
            raise self._failure(exc, "POST", connecting=initialize, sent=True) from exc
        finally:
            await response.aclose()

    def _post_headers(self, initialize: bool) -> list[tuple[str, str]]:
        """The headers of a POST but ``Acp-Session-Id``: built once per connection id (and cookie)."""
        cookie = self._cookies.header_for(self.url)
        key = None if initialize else f"{self.connection_id}\n{cookie}"
        cached_key, cached = self._post_extra
        if key is not None and key == cached_key:
            return cached
        extra = [("Content-Type", _JSON), ("Accept", f"{_JSON}, {_EVENT_STREAM}"), ("Accept-Encoding", "gzip, deflate")]
        if not initialize:
            assert self.connection_id is not None
            extra.append((CONNECTION_ID_HEADER, self.connection_id))
        headers = self._headers_for(self.url, extra, cookie=cookie)
        if key is not None:
            self._post_extra = (key, headers)
        return headers

    async def open_sse(self, session_id: str | None, resume: list[tuple[str, str]] | None = None) -> Reply:
        """GET a stream; returns the open ``200 text/event-stream`` response (close it with
        :meth:`close_sse`). ``resume``: the headers that reopen it where it broke (:mod:`._reattach`).
        Else raises a mapped status or network error, ``UnsafeRedirect`` (another origin, or too many
        redirects) or ``ProtocolError`` (not an event stream, or an encoding the client cannot read)."""
        assert self.connection_id is not None
        extra = [
            ("Accept", _EVENT_STREAM),
            ("Accept-Encoding", "identity"),
            ("Cache-Control", "no-cache"),
            (CONNECTION_ID_HEADER, self.connection_id),
        ]
        if session_id is not None:
            extra.append((SESSION_ID_HEADER, session_id))
        if resume:
            extra.extend(resume)
        client = self._stream_client_factory() if self._stream_client_factory is not None else None
        try:
            response = await self._request_following("GET", extra, client=client or self._shared_stream_client)
        except BaseException:
            if client is not None:
                await client.aclose()
            raise
        if client is not None:
            self._stream_clients[id(response)] = client
        try:
            if response.status_code != 200:
                body = await self.read_error_body(response)
                answer = Answer(response.status_code, response.headers, body, response.http_version)
                what = "session stream" if session_id is not None else "connection stream"
                raise self.status_error(answer, what=what, session_header=session_id is not None)
            kind = _media_type(response.headers)
            if kind != _EVENT_STREAM:
                raise ProtocolError(f"the SSE GET was answered with Content-Type {kind or 'none'!r}")
            Inflater(response.headers.get("content-encoding", ""))  # refuse an encoding we cannot read
        except BaseException:
            await self.close_sse(response)
            raise
        return response

    async def close_sse(self, response: Reply) -> None:
        """Close an SSE response, and the dedicated client it came on, if any."""
        try:
            await response.aclose()
        finally:
            client = self._stream_clients.pop(id(response), None)
            if client is not None:
                await client.aclose()

    async def delete(self, connection_id: str | None = None) -> int:
        """``DELETE`` the connection (this one, or an earlier one by its id); returns the status."""
        connection_id = connection_id or self.connection_id
        assert connection_id is not None
        response = await self._request_following("DELETE", [(CONNECTION_ID_HEADER, connection_id)], client=None)
        await response.aclose()
        return response.status_code

    async def close_streams(self) -> None:
        """Close the wires of the SSE streams (every open stream ends); the main wire stays."""
        for stream_client in list(self._stream_clients.values()):
            await stream_client.aclose()
        self._stream_clients.clear()
        if self._shared_stream_client is not None:
            await self._shared_stream_client.aclose()

    async def aclose(self) -> None:
        """Release every wire (open streams end)."""
        try:
            await self.close_streams()
        finally:
            await self._client.aclose()

    def status_error(self, answer: Answer, *, what: str, session_header: bool, batch: bool = False) -> TransportError:
        """The error for an answer with an unexpected status."""
        text = answer.body.decode("utf-8", "replace")
        detail = f": {excerpt(text)}" if text else ""
        return status_error(
            answer.status,
            f"{what} to {self.target} answered HTTP {answer.status}{detail}",
            body=text,
            retry_after=answer.headers.get("retry-after"),
            streamable=True,
            unknown_session=answer.status == 404 and is_session_404(answer.body, session_header),
            batch=batch,
        )

    async def read_error_body(self, response: Reply) -> bytes:
        """The start of an error answer's body, for diagnostics (empty if unreadable)."""
        try:
            return await self._read_body(response, _ERROR_BODY_BYTES, truncate=True)
        except ProtocolError:
            return b""

    async def _read_body(self, response: Reply, cap: int | None = None, *, truncate: bool = False) -> bytes:
        return await read_body(
            response.aiter_raw(),
            content_encoding=response.headers.get("content-encoding", ""),
            content_length=response.headers.get("content-length", ""),
            cap=self._settings.limits.max_http_body_bytes if cap is None else cap,
            truncate=truncate,
        )

    async def _request_following(self, method: str, extra: list[tuple[str, str]], *, client: Wire | None) -> Reply:
        """Send a GET or DELETE, following same-origin redirects only; returns the open response."""
        url = self.url
        for _ in range(MAX_REDIRECTS + 1):
            response = await self._send(method, url, self._headers_for(url, extra), None, client=client)
            self._capture_cookies(url, response)
            if response.status_code not in REDIRECT_STATUSES:
                return response
            await response.aclose()
            location = response.headers.get("location")
            target = urljoin(url, location) if location else ""
            if not location or not redirect_allowed(url, target):
                raise UnsafeRedirect(
                    f"refused a redirect of {method} from {safe_url(url)} to "
                    f"{safe_url(target) if target else 'nowhere'}: only same-origin redirects are followed"
                )
            logger.debug("following a same-origin redirect of %s to %s", method, safe_url(target))
            url = target
        raise UnsafeRedirect(f"more than {MAX_REDIRECTS} redirects for {method} {self.target}")

    async def _send(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        *,
        connecting: bool = False,
        client: Wire | None = None,
    ) -> Reply:
        """Send one request, streaming its answer; failures are mapped to the error tree."""
        client = client if client is not None else self._client
        if client.is_closed or self._client.is_closed:
            raise TransportClosed(self._closed_reason(), maybe_delivered=False)
        try:
            try:
                return await client.send(method, url, headers, body, self._idle)
            except httpx.WriteError as exc:
                if method != "POST" or connecting or client.is_closed:
                    raise
                # The request could not be written whole, so no server can have acted on it: a
                # pooled connection that died while idle (a reset under HTTP/2 is only seen when
                # written to). Once more, on a fresh connection.
                logger.debug("POST could not be written (%s); once more on a fresh connection", exc)
                return await client.send(method, url, headers, body, self._idle)
        except httpx.HTTPError as exc:
            if client.is_closed:
                # Closed on this side while the request was under way (the link is being released
                # after a drop): it may have executed unless it failed before a byte of it left.
                delivered = not isinstance(exc, REQUEST_NOT_SENT)
                raise TransportClosed(self._closed_reason(), maybe_delivered=delivered) from exc
            raise self._failure(exc, method, connecting=connecting) from exc

    def _failure(self, exc: httpx.HTTPError, what: str, *, connecting: bool, sent: bool = False) -> TransportError:
        error = request_error(exc, what=what, target=self.target, idle=self._idle, sent=sent, connecting=connecting)
        if isinstance(error, TlsVerificationError):
            self._on_fatal(f"TLS verification failed for {what}")
        elif what == "POST":
            self._on_fatal(str(error) if not isinstance(error, TransportClosed) else error.reason)
        return error

    def _headers_for(
        self, url: str, extra: Iterable[tuple[str, str]], *, cookie: str | None = None
    ) -> list[tuple[str, str]]:
        same_origin = origin_of(url) == self._origin
        secret = self._settings.secret_headers
        headers = [(name, value) for name, value in self._settings.headers if same_origin or name.lower() not in secret]
        headers = with_cookie(headers, self._cookies.header_for(url) if cookie is None else cookie)
        headers.extend(extra)
        return headers

    def _capture_cookies(self, url: str, response: Reply) -> None:
        values = response.headers.get_list("set-cookie")
        if values:
            self._cookies.capture(url, values)
