"""From an endpoint string to its connector: :func:`connector_for`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..exceptions import ConfigurationError
from ._cookies import CookieStore
from ._security import TlsConfig
from .base import Connector, Limits

__all__ = ["connector_for"]


def connector_for(
    endpoint: str,
    *,
    headers: Mapping[str, str] | None = None,
    secret_headers: Collection[str] = (),
    tls: TlsConfig | None = None,
    cookies: CookieStore | None = None,
    limits: Limits | None = None,
    **options: Any,
) -> Connector:
    """Build the connector for an endpoint string.

    ``ws://``/``wss://`` → WebSocket, ``http://``/``https://`` → Streamable HTTP, and
    ``stdio:COMMAND ARGS...`` → spawn the agent (split like a shell would, but run without one).
    Extra ``options`` go to that connector's constructor (e.g. ``http2=True``,
    ``ping_interval=5``, ``env={...}``).

    Raises:
        ConfigurationError: An unknown scheme, a malformed URL (no host, a port that is not a
            number from 1 to 65535, unbalanced IPv6 brackets, spaces or control characters), or
            an unsafe header.
    """
    limits = limits or Limits()
    network: Callable[..., Connector] | None = None  # imported on first use: import acp_client stays light
    if endpoint.startswith(("ws://", "wss://")):
        from .websocket import WebSocketConnector

        network = WebSocketConnector
    elif endpoint.startswith(("http://", "https://")):
        from .http import HttpConnector

        network = HttpConnector
    if network is not None:
        check_url(endpoint)
        tls = tls or TlsConfig()
        return network(
            endpoint, headers=headers, secret_headers=secret_headers, tls=tls, cookies=cookies, limits=limits, **options
        )
    if endpoint.startswith("stdio:"):
        from .stdio import StdioConnector

        try:
            command = shlex.split(endpoint[len("stdio:") :])
        except ValueError as exc:  # an unclosed quote
            raise ConfigurationError(f"cannot split the stdio: command: {exc}") from None
        if not command:
            raise ConfigurationError("stdio: endpoint needs a command")
        return StdioConnector(command, limits=limits, **options)
    raise ConfigurationError(_url_hint(endpoint) or _unsupported(endpoint))


def check_url(url: str) -> None:
    """Check a ``ws(s)://`` or ``http(s)://`` URL's form before anything parses it further.

    Raises:
        ConfigurationError: One line naming what is wrong: spaces or control characters,
            unbalanced brackets around an IPv6 address, no host, or a port that is not a number
            from 1 to 65535. The message never repeats credentials or a query string.
    """
    shown = _shown(url)
    if any(char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        raise ConfigurationError(f"malformed URL {shown!r}: it contains spaces or control characters")
    authority = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    host_port = authority.rpartition("@")[2]
    brackets = "[" in host_port or "]" in host_port
    if brackets and (not host_port.startswith("[") or host_port.count("[") != 1 or host_port.count("]") != 1):
        raise ConfigurationError(
            f"malformed URL {shown!r}: an IPv6 address goes in brackets, as in ws://[::1]:8000/acp"
        )
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracketed host that is not an IPv6 address
        inside = host_port[1:].partition("]")[0]
        raise ConfigurationError(f"malformed URL {shown!r}: {inside!r} is not an IPv6 address") from None
    if not parts.hostname:
        raise ConfigurationError(f"URL has no host: {shown!r}")
    port = host_port.rpartition("]")[2] if host_port.startswith("[") else host_port
    if brackets and port and not port.startswith(":"):
        raise ConfigurationError(f"malformed URL {shown!r}: after an IPv6 address's ']' comes ':PORT' or '/'")
    if ":" in port:
        text = port.partition(":")[2]
        if not text:
            raise ConfigurationError(f"malformed URL {shown!r}: nothing after the ':' where the port goes")
        if not text.isascii() or not text.isdigit():
            raise ConfigurationError(f"malformed URL {shown!r}: the port {text!r} is not a number")
        if not 1 <= int(text) <= 65535:
            raise ConfigurationError(f"malformed URL {shown!r}: the port {int(text)} is out of range (1-65535)")


def _shown(url: str) -> str:
    """``url`` as an error message may repeat it: without user info or query string."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url.split("?", 1)[0]
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path.split('?', 1)[0].split('#', 1)[0]}"


#: The endpoint forms, for error messages.
ENDPOINT_FORMS = "ws://HOST:PORT/PATH, wss://..., http://HOST:PORT/PATH, https://... or stdio:COMMAND [ARGS...]"

_HOST_PORT = re.compile(r"^(?P<host>[\w.-]+|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})(?P<path>/.*)?$")


def _unsupported(endpoint: str) -> str:
    """The message for an endpoint of no known form; for ``HOST:PORT`` (no scheme), a guess."""
    host_port = _HOST_PORT.match(endpoint.rpartition("@")[2])  # never echo credentials
    if host_port is not None:
        path = host_port["path"] or "/acp"
        guess = f"ws://{host_port['host']}:{host_port['port']}{path}"
        return f"{endpoint!r} has no scheme: did you mean {guess!r}? An endpoint is one of {ENDPOINT_FORMS}"
    return f"unsupported endpoint {endpoint.split(':', 1)[0]!r}: an endpoint is one of {ENDPOINT_FORMS}"


_SCHEME_TYPO = re.compile(r"^(wss?|https?)(?=[:/])[:/]*", re.IGNORECASE)


def _url_hint(endpoint: str) -> str | None:
    """The message for a URL whose scheme is mistyped (``ws:/host``, ``ws//host``, ``WS://host``...),
    showing the correct form; ``None`` when it does not look like one of our URLs."""
    match = _SCHEME_TYPO.match(endpoint)
    if match is None:
        return None
    scheme = match.group(1).lower()
    rest = endpoint[match.end() :]
    host_part, _, path = rest.partition("/")
    host_part = host_part.rpartition("@")[2]  # never echo credentials
    fixed = f"{scheme}://{host_part}/{path}"
    return (
        f"malformed {scheme} URL: did you mean {fixed!r}? The form is {scheme}://HOST[:PORT]/PATH "
        f"(two slashes after '{scheme}:')"
    )
