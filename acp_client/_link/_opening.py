"""Opening one link (the supervisor's, and the short ones of :func:`opener`): connect the
transport, then ``initialize``, all within one deadline.

``Timeouts.connect`` bounds the whole opening (TCP, TLS, the WebSocket handshake, the HTTP
``initialize`` POST, the answer to ``initialize``); running out of it raises
:class:`~acp_client.exceptions.ConnectTimeout`, whatever the transport or the phase. A WebSocket
peer that answers ``initialize`` with something that is not JSON-RPC (an HTML page, a greeting) is
not an ACP endpoint: the opening fails at once with a :class:`~acp_client.exceptions.MalformedFrame`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from .._rpc._connection import Connection
from .._rpc._handshake import initialize as handshake
from .._rpc._observe import CallObserver
from .._rpc._wire_log import WireLog
from ..clock import Clock, move_on_after, move_on_at
from ..exceptions import AcpError, ConnectionLost, ConnectTimeout, MalformedFrame, RequestTimeout, TransportClosed
from ..transports.base import Connector, Reattaching, StreamResumed, Transport
from ..types import ClientCapabilities, Implementation, InitializeResponse

#: Builds the connection over a fresh transport (called with it and ``on_protocol_error=``).
ConnectionFactory = Callable[..., Connection]
Initializer = Callable[[Connection, float | None], Awaitable[Any]]


async def open_link(
    connector: Connector,
    *,
    connection: ConnectionFactory,
    initialize: Initializer,
    timeout: float | None,
    clock: Clock,
    on_protocol_error: Callable[[AcpError], None] | None = None,
    on_stream_resumed: Callable[[StreamResumed], None] | None = None,
) -> tuple[Connection, Any]:
    """Open a link and initialize it within ``timeout`` seconds on ``clock`` (``None``: no bound),
    its frames logged on ``acp_client.wire``; a transport that reattaches broken streams
    (:class:`~.transports.base.Reattaching`) tells ``on_stream_resumed`` each time.

    Raises:
        ConnectTimeout: The opening did not finish in time (the link is closed).
        MalformedFrame: The peer answered ``initialize`` with something that is not JSON-RPC.
        TransportClosed: The link died under ``initialize`` (worth another attempt).
        AcpError: What the connector or ``initialize`` raised otherwise.
    """
    try:
        with move_on_after(clock, timeout) as opening:
            transport = await connector.connect()
    except TimeoutError as exc:
        if isinstance(exc, AcpError):  # the connector's own (shorter) bound: already ours
            raise
        raise ConnectTimeout(f"timed out opening {connector.target}: {exc}", timeout=timeout) from exc
    if opening.expired:
        raise ConnectTimeout(f"timed out after {timeout:g}s opening {connector.target}", timeout=timeout)
    if on_stream_resumed is not None and isinstance(transport, Reattaching):
        transport.watch_resumes(on_stream_resumed)
    not_acp: asyncio.Future[MalformedFrame] = asyncio.get_running_loop().create_future()
    framed = transport.info.kind == "websocket"

    def protocol_error(error: AcpError) -> None:
        # Before initialize is answered, an unreadable WebSocket message means the peer does not
        # speak ACP. (A stdio agent may print a banner on stdout first: that is only reported.
        # Streamable HTTP answers initialize in the POST's body, checked by the transport.)
        if framed and isinstance(error, MalformedFrame) and not not_acp.done():
            not_acp.set_result(error)
        if on_protocol_error is not None:
            on_protocol_error(error)

    conn = connection(WireLog(transport), on_protocol_error=protocol_error)
    conn.start()
    initializing = asyncio.ensure_future(initialize(conn, opening.remaining()))
    try:
        with move_on_at(clock, opening.deadline) as answering:
            await asyncio.wait({initializing, not_acp}, return_when=asyncio.FIRST_COMPLETED)
        if answering.expired:
            raise RequestTimeout("initialize", timeout or 0.0)
        if not initializing.done():
            initializing.cancel()
            bad = not_acp.result()
            detail = f": {bad.excerpt!r}" if bad.excerpt else ""
            raise MalformedFrame(
                f"{connector.target} is not an ACP endpoint: it answered initialize with something that is not "
                f"JSON-RPC ({bad}){detail}",
                excerpt=bad.excerpt,
            )
        init = initializing.result()
    except BaseException as exc:
        if not initializing.done():
            initializing.cancel()
        await conn.aclose()
        if isinstance(exc, RequestTimeout) and not isinstance(exc, ConnectTimeout):
            raise ConnectTimeout(
                f"timed out after {timeout:g}s opening {connector.target} (no answer to initialize)"
                if timeout is not None
                else f"{connector.target} did not answer initialize in time",
                timeout=timeout,
                phase="initialize",
            ) from exc
        if isinstance(exc, ConnectionLost):
            # The link died under initialize (e.g. the network reset the HTTP POST): a failed
            # attempt to connect, worth another try, not a lost request of the app.
            raise TransportClosed(f"the link failed during initialize: {exc.cause or exc}") from exc
        raise
    finally:
        if not not_acp.done():
            not_acp.cancel()  # from now on protocol errors are the app's business only
        if initializing.done() and not initializing.cancelled():
            initializing.exception()  # retrieved: never "exception was never retrieved"
    return conn, init


def opener(
    *,
    proposed: Callable[[], int],
    client_info: Implementation,
    capabilities: ClientCapabilities,
    clock: Clock,
    timeout: float | None,
    observer: Callable[[Transport], CallObserver] | None = None,
) -> Callable[[Connector], Awaitable[tuple[Connection, InitializeResponse]]]:
    """How a short link (a locate's, a copy's close) is opened: :func:`open_link` with this identity
    and these capabilities, proposing ``proposed()`` (its protocol errors are only logged)."""

    async def open_one(connector: Connector) -> tuple[Connection, InitializeResponse]:
        async def initialize(conn: Connection, limit: float | None) -> InitializeResponse:
            return await handshake(
                conn, proposed=proposed(), client_info=client_info, capabilities=capabilities, timeout=limit
            )

        connection = functools.partial(Connection, clock=clock, observer=observer)
        return await open_link(connector, connection=connection, initialize=initialize, timeout=timeout, clock=clock)

    return open_one
