"""The one exception tree of ``acp_client``.

Every error the SDK raises is an :class:`AcpError`. Third-party errors (``websockets``, ``httpx``,
``OSError`` from a subprocess) are mapped at the transport boundary with ``raise ... from exc``, so
callers never need to import those libraries to handle a failure.

::

    AcpError
    ├── ConfigurationError (also ValueError)  an app-supplied value is unsafe or invalid
    ├── TransportError                        the link to the agent failed or misbehaved
    │   ├── ConnectError                      could not establish a link (refused, DNS, handshake)
    │   │   ├── TlsVerificationError          the peer's certificate did not verify (fatal)
    │   │   └── ConnectTimeout                took longer than ``Timeouts.connect`` to open (also a RequestTimeout)
    │   ├── HttpStatusError                   an HTTP answer with an unexpected status
    │   │   ├── MissingHeader                 400: a required Acp-* header was absent
    │   │   ├── AuthenticationFailed          401 / 403
    │   │   ├── UnknownConnection             404 for the connection id (the connection is gone)
    │   │   ├── UnknownSession                404 for the session id on a live connection
    │   │   ├── NotAcceptable                 406: bad Accept header
    │   │   ├── UnsupportedMediaType          415: bad Content-Type
    │   │   ├── BatchNotSupported             501: the server refused a JSON-RPC batch
    │   │   └── ServiceUnavailable            429 / 503, with ``retry_after``
    │   ├── MessageTooLarge                   an inbound message exceeded its size cap
    │   ├── UnsafeRedirect                    a redirect the client refused to follow
    │   └── TransportClosed                   the link ended (a drop, a close, an exit)
    │       └── AgentExited                   a stdio agent process exited (``exit_code``)
    ├── ProtocolError                         the peer broke JSON-RPC / ACP framing
    │   ├── MalformedFrame                    invalid JSON, a non-object, wrong ``jsonrpc``...
    │   ├── UnexpectedResponse                a response to an id nobody is waiting for
    │   ├── IncompatibleProtocolVersion       the agent answered a version we cannot speak (fatal)
    │   └── InvalidMessage                    a well-formed message whose payload cannot be decoded
    ├── RpcError                              the agent answered a request with a JSON-RPC error
    │   ├── ParseError (-32700) · InvalidRequest (-32600) · MethodNotFound (-32601)
    │   ├── InvalidParams (-32602) · InternalError (-32603) · RequestCancelled (-32800)
    │   ├── AuthRequired (-32000) · SessionNotFound (-32002)
    │   └── UnsupportedProtocolVersion (-32022)
    ├── RequestTimeout (also TimeoutError)    no answer within the request's timeout
    ├── ConnectionLost                        the link died with the request pending
    ├── CapabilityNotSupported                the agent did not advertise what the call needs
    ├── ClientClosed                          the client was closed (by the app) or has failed
    ├── ClientSuspended                       down for too long: queued work was failed
    ├── QueueFull                             the reconnect queue is at its size limit
    ├── LoopThreadError (also RuntimeError)   a blocking sync call made on the event-loop thread
    ├── TurnInProgress                        a prompt while the session's turn is still running
    ├── SessionNotTracked                     this client does not track that session (no request sent)
    │   └── SessionOwnershipLost              its lease was taken over or ran out (no request sent)
    ├── RecoveryFailed                        a session could not be recovered on any path
    └── SessionStoreError                     the session store cannot be used (``path``)
        ├── SessionStoreCorrupt               not a store database, or a damaged one (never written)
        ├── SessionStoreForeign               a database (or schema) of another application (never written)
        ├── SessionStoreTooNew                written by a newer acp_client (schema version)
        ├── SessionStoreReadOnly              the store cannot be written by this process (refused at open)
        ├── SessionStoreBusy                  another process held the lock past the busy timeout
        ├── SessionStoreFenced                a stale owner's write: another client holds the lease (nothing written)
        ├── SessionStoreUnavailable           the database server cannot be reached (a write was not made)
        └── SessionStoreDriverMissing         the store's database driver is not installed (an extra)

``RpcError.from_error`` picks the subclass for a wire error code, so ``except SessionNotFound`` works
for a -32002 from any method.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

__all__ = [
    "AcpError",
    "AgentExited",
    "AuthRequired",
    "AuthenticationFailed",
    "BatchNotSupported",
    "CapabilityNotSupported",
    "ClientClosed",
    "ClientSuspended",
    "ConfigurationError",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionLost",
    "HttpStatusError",
    "IncompatibleProtocolVersion",
    "InternalError",
    "InvalidMessage",
    "InvalidParams",
    "InvalidRequest",
    "LoopThreadError",
    "MalformedFrame",
    "MessageTooLarge",
    "MethodNotFound",
    "MissingHeader",
    "NotAcceptable",
    "ParseError",
    "ProtocolError",
    "QueueFull",
    "RecoveryFailed",
    "RequestCancelled",
    "RequestTimeout",
    "RpcError",
    "ServiceUnavailable",
    "SessionNotFound",
    "SessionNotTracked",
    "SessionOwnershipLost",
    "SessionStoreBusy",
    "SessionStoreCorrupt",
    "SessionStoreDriverMissing",
    "SessionStoreError",
    "SessionStoreFenced",
    "SessionStoreForeign",
    "SessionStoreReadOnly",
    "SessionStoreTooNew",
    "SessionStoreUnavailable",
    "TlsVerificationError",
    "TransportClosed",
    "TransportError",
    "TurnInProgress",
    "UnexpectedResponse",
    "UnknownConnection",
    "UnknownSession",
    "UnsafeRedirect",
    "UnsupportedMediaType",
    "UnsupportedProtocolVersion",
]


class AcpError(Exception):
    """The root of every error raised by ``acp_client``."""


class ConfigurationError(AcpError, ValueError):
    """An app-supplied value is unsafe or invalid (a header with CR/LF/NUL, a relative file-system
    root, an unsupported URL scheme); raised before anything touches the wire."""


class TransportError(AcpError):
    """The link to the agent failed or misbehaved.

    Attributes:
        maybe_delivered: For an error raised while sending: whether the message may have reached
            the agent. ``False`` only when the transport knows it never left this process.
    """

    maybe_delivered: bool = True

    def __init__(self, message: str, *, maybe_delivered: bool | None = None) -> None:
        super().__init__(message)
        if maybe_delivered is not None:
            self.maybe_delivered = maybe_delivered


class ConnectError(TransportError):
    """The link could not be established: refused, unreachable, DNS, failed handshake."""

    maybe_delivered = False


class TlsVerificationError(ConnectError):
    """The agent's TLS certificate did not verify. Fatal: reconnecting will not help."""


class HttpStatusError(TransportError):
    """An HTTP answer carried a status the protocol step did not expect.

    Attributes:
        status: The HTTP status code.
        body: The start of the response body (decoded leniently), for diagnostics.
        retry_after: Seconds from a ``Retry-After`` header, when the server sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: str = "",
        retry_after: float | None = None,
        maybe_delivered: bool | None = None,
    ) -> None:
        super().__init__(message, maybe_delivered=maybe_delivered)
        self.status = status
        self.body = body
        self.retry_after = retry_after


class MissingHeader(HttpStatusError):
    """HTTP 400: the server wanted an ``Acp-*`` header that was not sent."""


class AuthenticationFailed(HttpStatusError):
    """HTTP 401 or 403: the credentials were refused."""


class UnknownConnection(HttpStatusError):
    """HTTP 404 for the ``Acp-Connection-Id``: the server no longer knows this connection."""


class UnknownSession(HttpStatusError):
    """HTTP 404 for the ``Acp-Session-Id`` on a connection the server still knows."""


class NotAcceptable(HttpStatusError):
    """HTTP 406: the server refused the ``Accept`` header."""


class UnsupportedMediaType(HttpStatusError):
    """HTTP 415: the server refused the ``Content-Type``."""


class BatchNotSupported(HttpStatusError):
    """HTTP 501: the server does not accept JSON-RPC batches."""


class ServiceUnavailable(HttpStatusError):
    """HTTP 429 or 503: the server asks the client to come back later (see ``retry_after``)."""


class MessageTooLarge(TransportError):
    """An inbound message exceeded its size cap of ``limit`` bytes (measured after decompression)."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class UnsafeRedirect(TransportError):
    """A redirect the client will not follow: another origin, https → http, or any redirect of a JSON-RPC POST."""

    maybe_delivered = False


class TransportClosed(TransportError):
    """The link ended: the peer closed it, the network dropped it, or the app closed it.

    Attributes:
        reason: A short human-readable cause ("websocket closed 1006", "ping timeout", ...).
    """

    def __init__(self, reason: str, *, maybe_delivered: bool | None = None) -> None:
        super().__init__(reason, maybe_delivered=maybe_delivered)
        self.reason = reason


class AgentExited(TransportClosed):
    """The stdio agent process exited with ``exit_code`` (negative: killed by that signal)."""

    def __init__(self, reason: str, *, exit_code: int | None) -> None:
        super().__init__(reason)
        self.exit_code = exit_code


class ProtocolError(AcpError):
    """The peer sent something that is not valid JSON-RPC 2.0 / ACP."""


class MalformedFrame(ProtocolError):
    """A frame could not be read as a JSON-RPC message; ``excerpt`` is its start (at most 200
    characters), for diagnostics."""

    def __init__(self, message: str, *, excerpt: str = "") -> None:
        super().__init__(message)
        self.excerpt = excerpt


class UnexpectedResponse(ProtocolError):
    """A response arrived for a request id nobody is waiting for."""


class IncompatibleProtocolVersion(ProtocolError):
    """The agent negotiated a protocol version this client cannot speak. Fatal."""

    def __init__(self, message: str, *, requested: int, answered: Any) -> None:
        super().__init__(message)
        self.requested = requested
        self.answered = answered


class InvalidMessage(ProtocolError):
    """A well-formed JSON-RPC message whose ACP payload could not be decoded."""


#: The most characters of a peer's input (a method name, ...) an error answer echoes back.
_MAX_ECHOED_CHARS: Final = 128


class RpcError(AcpError):
    """The agent answered with a JSON-RPC error object (:meth:`from_error` picks the subclass
    declared with that ``code=``).

    Attributes:
        code: The JSON-RPC error code.
        message: The error's message.
        data: The error's ``data`` member, or ``None``.
    """

    code: int = -32603
    default_message: ClassVar[str] = "Internal error"
    _by_code: ClassVar[dict[int, type[RpcError]]] = {}

    def __init__(self, message: str | None = None, data: Any = None, *, code: int | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message if message is not None else self.default_message
        self.data = data
        super().__init__(f"{self.message} (code {self.code})")

    def __init_subclass__(cls, *, code: int | None = None, message: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if message is not None:
            cls.default_message = message
        if code is not None:
            cls.code = code
        if "code" in cls.__dict__:  # declared as a keyword or, as before, a class attribute
            RpcError._by_code[cls.code] = cls

    @classmethod
    def from_error(cls, code: int, message: str | None = None, data: Any = None) -> RpcError:
        """Build the subclass that matches ``code`` (plain ``RpcError`` for an unlisted code)."""
        subclass = cls._by_code.get(code)
        if subclass is None:
            return RpcError(message, data, code=code)
        return subclass(message, data)

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC error object for this error (``data`` omitted when ``None``)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    # Named constructors for the codes an app handler most often answers with.

    @classmethod
    def method_not_found(cls, method: str) -> RpcError:
        """``Method not found``, echoing at most the first 128 characters of ``method`` (a peer
        must not turn a huge method name into a huge answer)."""
        shown = method
        if len(method) > _MAX_ECHOED_CHARS:
            shown = f"{method[:_MAX_ECHOED_CHARS]}... ({len(method)} characters)"
        return MethodNotFound(f"Method not found: {shown}", {"method": shown})

    @classmethod
    def invalid_params(cls, detail: str) -> RpcError:
        return InvalidParams(f"Invalid params: {detail}")

    @classmethod
    def session_not_found(cls, session_id: str) -> RpcError:
        return SessionNotFound("Resource not found", {"sessionId": session_id})


class ParseError(RpcError, code=-32700, message="Parse error"): ...


class InvalidRequest(RpcError, code=-32600, message="Invalid request"): ...


class MethodNotFound(RpcError, code=-32601, message="Method not found"): ...


class InvalidParams(RpcError, code=-32602, message="Invalid params"): ...


class InternalError(RpcError, code=-32603, message="Internal error"): ...


class RequestCancelled(RpcError, code=-32800, message="Request cancelled"): ...


class AuthRequired(RpcError, code=-32000, message="Authentication required"): ...


class SessionNotFound(RpcError, code=-32002, message="Resource not found"):
    """-32002: the agent does not know the session (``data.sessionId`` names it)."""

    @property
    def session_id(self) -> str | None:
        """The session id from ``data.sessionId``, when the agent supplied it."""
        value = self.data.get("sessionId") if isinstance(self.data, dict) else None
        return value if isinstance(value, str) else None


class UnsupportedProtocolVersion(RpcError, code=-32022, message="Unsupported protocol version"):
    """-32022 (newer v2): the agent does not support the requested protocol version."""


class RequestTimeout(AcpError, TimeoutError):
    """No answer arrived within the request's timeout; a ``$/cancel_request`` was sent.

    Attributes:
        method: The request's method.
        timeout: The timeout that expired, in seconds.
    """

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"{method} got no answer within {timeout:g}s")
        self.method = method
        self.timeout = timeout


class ConnectTimeout(ConnectError, RequestTimeout):
    """Opening a link (TCP, TLS, the WebSocket handshake or ``initialize``) took longer than
    ``Timeouts.connect``: nothing was established (reconnecting may help); ``method`` is ``"initialize"``.

    Attributes:
        timeout: The connect timeout that expired, in seconds (``None`` when not known).
        phase: ``"open"`` (TCP, TLS, handshake) or ``"initialize"``.
    """

    maybe_delivered = False

    def __init__(self, message: str, *, timeout: float | None = None, phase: str = "open") -> None:
        AcpError.__init__(self, message)  # not RequestTimeout's (method, timeout) constructor
        self.method = "initialize"
        self.timeout = timeout  # type: ignore[assignment]
        self.phase = phase


class ConnectionLost(AcpError):
    """The connection died while the request was pending.

    Attributes:
        method: The request's method.
        may_have_executed: ``False`` only when the request certainly never reached the agent
            (it was still queued, or the send failed before any byte left). ``True`` means the
            agent may have acted on it: re-sending a non-idempotent request is the app's call.
        cause: The transport error that ended the connection, when known.
    """

    def __init__(self, method: str, *, may_have_executed: bool, cause: BaseException | None = None) -> None:
        detail = "may have executed" if may_have_executed else "was not sent"
        reason = f": {cause}" if cause is not None else ""
        super().__init__(f"connection lost while {method} was pending ({detail}){reason}")
        self.method = method
        self.may_have_executed = may_have_executed
        self.cause = cause


class CapabilityNotSupported(AcpError):
    """The agent did not advertise ``capability`` (a dotted path), which ``method`` needs; nothing was sent."""

    def __init__(self, method: str, capability: str) -> None:
        super().__init__(f"the agent does not advertise {capability}, required by {method}")
        self.method = method
        self.capability = capability


class ClientClosed(AcpError):
    """The client was closed by the app, or has failed for good; no more requests are accepted."""


class ClientSuspended(AcpError):
    """The client has been down longer than its suspend threshold; queued work was failed."""


class QueueFull(AcpError):
    """A request made while reconnecting did not fit in the bounded outage queue."""


class LoopThreadError(AcpError, RuntimeError):
    """A blocking method was called on the event-loop thread it would have to wait for.

    It would deadlock, so nothing was done. Call it from another thread, or ``await`` the
    :class:`~acp_client.AcpClient` (:attr:`SyncAcpClient.client`) when already on the loop.
    """


class TurnInProgress(AcpError):
    """A prompt was sent while the session's previous turn is still running."""


class SessionNotTracked(AcpError):
    """This client does not track ``session_id`` (never opened, closed, forgotten, or abandoned by recovery). Raised
    before anything is sent: unlike :class:`SessionNotFound`, the agent was not asked."""

    def __init__(self, session_id: str, message: str | None = None) -> None:
        super().__init__(message or f"this client does not track session {session_id!r}")
        self.session_id = session_id


class SessionOwnershipLost(SessionNotTracked):
    """Another client took this one's lease on the stored session, or it ran out before renewal.

    Nothing was sent; a turn running then fails with it and is never reported as ended.
    ``Callbacks.on_ownership_lost`` was told.

    Attributes:
        owner: This client's owner name.
        holder: The owner that holds it now, when known.
    """

    def __init__(self, session_id: str, message: str, *, owner: str = "", holder: str | None = None) -> None:
        super().__init__(session_id, message)
        self.owner = owner
        self.holder = holder


class RecoveryFailed(AcpError):
    """``session_id`` could not be recovered on any path; ``cause`` is the last error seen while
    recovering it, if any."""

    def __init__(self, session_id: str, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(f"session {session_id}: {message}")
        self.session_id = session_id
        self.cause = cause


class SessionStoreError(AcpError):
    """The session store cannot be used.

    Attributes:
        path: Where the store is: its file (``":memory:"`` for an in-memory one), or for a
            database server its DSN with any password masked (and the schema).
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class SessionStoreCorrupt(SessionStoreError):
    """Not a store database, or a damaged one (not SQLite; our identity without our tables; an
    undecodable record). Never written to."""


class SessionStoreForeign(SessionStoreError):
    """Another application's database, or a PostgreSQL schema with tables not ours. Never written to."""


class SessionStoreTooNew(SessionStoreError):
    """Written by a newer acp_client: schema ``version``, where this one knows up to ``supported``."""

    def __init__(self, message: str, *, path: str, version: int, supported: int) -> None:
        super().__init__(message, path=path)
        self.version = version
        self.supported = supported


class SessionStoreReadOnly(SessionStoreError):
    """``path`` (the store file, or its directory, where SQLite keeps ``-wal`` and ``-shm``) cannot
    be written by this process; refused when the store is opened, so no save fails later."""


class SessionStoreBusy(SessionStoreError):
    """Another process held the store's write lock longer than the busy timeout."""


class SessionStoreFenced(SessionStoreError):
    """A write's fence (owner and fencing token) no longer holds the session: another client took
    it over (or deleted it), so this writer is stale and nothing was written.

    Attributes:
        session_id: The session.
        owner: The owner the write was made for.
        token: The fencing token the write carried.
        holder: Who holds the session now (``None``: nobody, or it is not stored).
        holder_token: The session's token now (``None``: not stored).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        session_id: str,
        owner: str,
        token: int | None,
        holder: str | None,
        holder_token: int | None,
    ) -> None:
        super().__init__(message, path=path)
        self.session_id = session_id
        self.owner = owner
        self.token = token
        self.holder = holder
        self.holder_token = holder_token

    @classmethod
    def refused(
        cls, path: str, session_id: str, *, owner: str, token: int | None, holder: str | None, holder_token: int | None
    ) -> SessionStoreFenced:
        """The error for a write the session's lease refused, worded the same by every store."""
        now = f"held by {holder!r} (token {holder_token})" if holder is not None else "not held by it any more"
        return cls(
            f"session store {path}: session {session_id!r} is {now}: {owner!r} (token {token}) was refused",
            path=path,
            session_id=session_id,
            owner=owner,
            token=token,
            holder=holder,
            holder_token=holder_token,
        )


class SessionStoreUnavailable(SessionStoreError):
    """The database server cannot be reached (refused, down, or lost past the store's reconnect
    timeout). The call was not made, or the message says its outcome is unknown."""


class SessionStoreDriverMissing(SessionStoreError):
    """The store needs a database driver that is not installed; the message names the extra."""
