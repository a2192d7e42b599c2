"""Checks shared by the network transports: header hygiene, origins, redirects, TLS (pure)."""

from __future__ import annotations

import datetime
import functools
import re
import ssl
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit

import attrs

from .._util._checks import DEFAULT_PORTS
from ..exceptions import ConfigurationError

#: Header names whose values never appear in logs and never go to another origin.
DEFAULT_SECRET_HEADERS: frozenset[str] = frozenset({"authorization", "proxy-authorization", "cookie"})

_FORBIDDEN = ("\r", "\n", "\x00")


def check_header_value(name: str, value: str) -> None:
    """Reject (``ConfigurationError``) an empty header name or one outside RFC 9110 ``token``, or a
    value with CR, LF or NUL: what could split or truncate a request."""
    if not name or any(ch in name for ch in '\r\n\x00 \t:()<>@,;\\"/[]?={}'):
        raise ConfigurationError(f"invalid header name {name!r}")
    if any(ch in value for ch in _FORBIDDEN):
        # Never echo the value: it may be a credential.
        raise ConfigurationError(f"header {name!r} contains CR, LF or NUL")


def check_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> list[tuple[str, str]]:
    """Validate app-supplied headers (see :func:`check_header_value`); returns them as pairs."""
    if headers is None:
        return []
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    for name, value in pairs:
        check_header_value(name, value)
    return pairs


def check_session_id(session_id: str) -> str:
    """Reject (``ConfigurationError``) a session id that cannot travel safely in an ``Acp-Session-Id``
    header: empty, or with CR, LF or NUL."""
    if (
        not isinstance(session_id, str)
        or not session_id
        or "\r" in session_id
        or "\n" in session_id
        or "\x00" in session_id  # _FORBIDDEN, spelt out: every POST of a session asks
    ):
        raise ConfigurationError(f"invalid session id {session_id!r}")
    return session_id


def redact_headers(headers: Iterable[tuple[str, str]], secret: Collection[str]) -> list[tuple[str, str]]:
    """A copy of ``headers`` safe to log: the values of the ``secret`` (lowercase) names become ``"<redacted>"``."""
    return [(name, "<redacted>" if name.lower() in secret else value) for name, value in headers]


@attrs.frozen
class Origin:
    """A URL's origin: scheme, host (lowercased) and port (defaulted by scheme)."""

    scheme: str
    host: str
    port: int

    @property
    def secure(self) -> bool:
        return self.scheme in ("https", "wss")


@functools.lru_cache(maxsize=256)
def origin_of(url: str) -> Origin:
    """The origin of ``url`` (``ws``/``wss`` count as ``http``/``https``); cached: every request asks.
    A URL with no host, or a scheme other than http(s)/ws(s), is a ``ConfigurationError``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ConfigurationError(f"unsupported URL scheme in {safe_url(url)!r}")
    if not parts.hostname:
        raise ConfigurationError(f"URL has no host: {safe_url(url)!r}")
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError as exc:
        raise ConfigurationError(f"bad port in {safe_url(url)!r}") from exc
    normalized = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    return Origin(normalized, parts.hostname.lower(), port)


def safe_url(url: str) -> str:
    """``url`` without user info or query string (safe to log)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


# Query keys whose values are secrets more often than not (matched anywhere in the key, any case).
_SECRET_KEY: Final = re.compile(r"(?i)token|key|secret|pass|pwd|auth|sig|cred|session|cookie|jwt|bearer|code|otp")
_NETWORK_SCHEMES: Final = ("ws", "wss", "http", "https")


def redact_url(url: str) -> str:
    """``url`` as it may be shown (logs, outcomes, reprs, span attributes, exceptions): user-info and
    the values of query parameters whose key looks secret become ``***``; the rest stays, so
    instances can be told apart. A string that is not a network URL is returned as it is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unparsable URL>"
    if parts.scheme.lower() not in _NETWORK_SCHEMES:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = []
        for pair in query.split("&"):
            key, sep, _ = pair.partition("=")
            pairs.append(f"{key}=***" if sep and _SECRET_KEY.search(key) else pair)
        query = "&".join(pairs)
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    return f"{shown}?{query}" if query else shown


def redirect_allowed(from_url: str, to_url: str) -> bool:
    """Whether a (non-POST) request may follow a redirect: same origin only (so never to http)."""
    try:
        source, target = origin_of(from_url), origin_of(to_url)
    except ConfigurationError:
        return False
    return source == target


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or an HTTP-date), if valid."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if 0 <= seconds < float("inf") else None
    try:
        import email.utils  # only for a Retry-After date: most answers never carry one

        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


@attrs.frozen
class TlsConfig:
    """TLS settings for ``wss://`` and ``https://``. Verification is on by default; each connector
    builds its own :class:`ssl.SSLContext`, so turning it off for one client never weakens another.

    Attributes:
        verify: Verify the server's certificate chain and host name. ``False`` is for tests only.
        ca_file: A PEM bundle of trusted CAs to use instead of the system store.
        ca_data: PEM text of trusted CAs (added to ``ca_file`` or the system store).
        client_cert: A PEM file with a client certificate (and its key, unless ``client_key``).
        client_key: The client certificate's key file.
    """

    verify: bool = True
    ca_file: str | None = None
    ca_data: str | None = None
    client_cert: str | None = None
    client_key: str | None = None

    def build_context(self) -> ssl.SSLContext:
        """A new SSL context for one connector (never a shared, mutated one)."""
        if self.verify:
            context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.client_cert is not None:
            context.load_cert_chain(self.client_cert, self.client_key)
        return context
