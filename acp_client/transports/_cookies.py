"""The client's cookie store: what a load balancer sets, sent back on every later request.

A load balancer may pin a client to one backend with a cookie set on the WebSocket handshake or an
HTTP answer; the client sends it back, across reconnects too. Stricter than a browser: a cookie
is scoped to the **exact origin** that set it (``ws`` counts as ``http``, ``wss`` as ``https``;
``Domain`` never widens it, and one that does not cover the host is invalid); ``Path`` follows
RFC 6265 5.1.4; ``Secure`` cookies come only from and go only to secure origins, and the
``__Secure-`` / ``__Host-`` prefixes are enforced; ``Max-Age`` (winning over ``Expires``) and
``Expires`` are honoured, a past expiry deletes; names and values must be ASCII; at most
``max_cookies_per_origin`` per origin (oldest evicted) and 4096 bytes per cookie. Malformed values
are ignored with a debug log; cookie values never appear in logs or ``repr``.

Not :mod:`http.cookiejar`: it scopes by host and domain (a cookie from ``http://127.0.0.1:8000``
goes to port 9000 and to ``https://``, ``Domain=example.com`` spreads to sibling hosts), accepts
``Secure`` over ``http``, checks none of the prefix, ASCII, size or per-origin rules, and reads
``time.time()`` itself. One jar per origin plus all those checks would be more code, not less.
"""

from __future__ import annotations

import calendar
import math
import re
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import attrs

from .._util._checks import check_count
from .._util._logging import get_logger
from ._security import Origin, origin_of

logger = get_logger(__name__)

#: Maximum size of one cookie's name plus value, in bytes (the RFC 6265 minimum browsers support).
MAX_COOKIE_BYTES = 4096
#: URLs whose ``Cookie`` header value is remembered (a link asks for one or two).
_MAX_ANSWERS = 64

_FORBIDDEN_IN_VALUE = frozenset(chr(code) for code in range(0x20) if code != 0x09) | {"\x7f", ";"}
_FORBIDDEN_IN_NAME = _FORBIDDEN_IN_VALUE | frozenset(' \t"(),/:<=>?@[\\]{}')


@attrs.frozen
class _Cookie:
    name: str
    value: str = attrs.field(repr=False)
    path: str
    secure: bool
    expires: float | None  # seconds since the epoch (the store's ``now`` clock); None: no expiry

    def expired(self, now: float) -> bool:
        return self.expires is not None and self.expires <= now


class _Rejected(ValueError):
    """Internal: a ``Set-Cookie`` value to ignore (the message is safe to log)."""


_DATE_DELIMITERS = re.compile(r"[\x09\x20-\x2f\x3b-\x40\x5b-\x60\x7b-\x7e]+")
_TIME = re.compile(r"(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\D|$)")
_DAY = re.compile(r"(\d{1,2})(?:\D|$)")
_YEAR = re.compile(r"(\d{2,4})(?:\D|$)")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _parse_date(text: str) -> float | None:
    """RFC 6265 section 5.1.1 cookie-date parsing (lenient about the format); ``None`` if invalid."""
    hms: tuple[int, int, int] | None = None
    day = month = year = None
    for token in _DATE_DELIMITERS.split(text):
        if not token:
            continue
        if hms is None and (match := _TIME.match(token)):
            hms = (int(match[1]), int(match[2]), int(match[3]))
        elif day is None and (match := _DAY.match(token)):
            day = int(match[1])
        elif month is None and token[:3].lower() in _MONTHS:
            month = _MONTHS.index(token[:3].lower()) + 1
        elif year is None and (match := _YEAR.match(token)):
            year = int(match[1])
    if hms is None or day is None or month is None or year is None:
        return None
    if 70 <= year <= 99:
        year += 1900
    elif 0 <= year <= 69:
        year += 2000
    hour, minute, second = hms
    if year < 1601 or hour > 23 or minute > 59 or second > 59:
        return None
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))


def _default_path(url_path: str) -> str:
    """RFC 6265 section 5.1.4: the directory of the request path."""
    directory = url_path[: url_path.rfind("/")] if url_path.startswith("/") else ""
    return directory or "/"


def _path_matches(request_path: str, cookie_path: str) -> bool:
    """RFC 6265 section 5.1.4 path-match."""
    if request_path == cookie_path:
        return True
    return request_path.startswith(cookie_path) and (cookie_path.endswith("/") or request_path[len(cookie_path)] == "/")


def _domain_covers(domain: str, host: str) -> bool:
    domain = domain.lstrip(".").lower()
    if not domain:
        return True  # an empty Domain attribute is ignored (RFC 6265 section 5.2.3)
    return host == domain or host.endswith("." + domain)


def _parse(raw: str, origin: Origin, url_path: str, now: float) -> _Cookie:
    """Parse one ``Set-Cookie`` value per RFC 6265 section 5.2 (``_Rejected``: malformed, too large,
    or not acceptable from ``origin``)."""
    pair, _, attributes = raw.partition(";")
    if "=" not in pair:
        raise _Rejected("no '=' in the name-value pair")
    name, _, value = pair.partition("=")
    name, value = name.strip(" \t"), value.strip(" \t")
    if not name:
        raise _Rejected("empty cookie name")
    if any(ch in _FORBIDDEN_IN_NAME for ch in name) or not name.isascii():
        raise _Rejected("invalid character in the cookie name")
    if any(ch in _FORBIDDEN_IN_VALUE for ch in value):
        raise _Rejected("control character in the cookie value")
    if not value.isascii():  # RFC 6265 cookie-octets are ASCII; httpx could not send it back
        raise _Rejected("non-ASCII character in the cookie value")
    if len(name.encode()) + len(value.encode()) > MAX_COOKIE_BYTES:
        raise _Rejected(f"cookie larger than {MAX_COOKIE_BYTES} bytes")

    path: str | None = None
    secure = False
    domain: str | None = None
    max_age: float | None = None
    expires: float | None = None
    for attribute in attributes.split(";"):
        key, _, attr_value = attribute.partition("=")
        key, attr_value = key.strip(" \t").lower(), attr_value.strip(" \t")
        if key == "max-age":
            digits = attr_value[1:] if attr_value.startswith("-") else attr_value
            if digits.isdigit() and digits.isascii():
                seconds = int(attr_value)
                # Clamp: a huge Max-Age must not overflow the float clock arithmetic.
                max_age = now + min(seconds, 400 * 86400) if seconds > 0 else float("-inf")
        elif key == "expires":
            parsed = _parse_date(attr_value)
            if parsed is not None:
                expires = parsed
        elif key == "path":
            path = attr_value if attr_value.startswith("/") else None
        elif key == "secure":
            secure = True
        elif key == "domain":
            domain = attr_value
    if domain is not None and not _domain_covers(domain, origin.host):
        raise _Rejected("Domain attribute does not cover the setting host")
    if secure and not origin.secure:
        raise _Rejected("Secure cookie from an insecure origin")
    if path is None:
        path = _default_path(url_path)
    if name.startswith("__Secure-") and not secure:
        raise _Rejected("__Secure- cookie without the Secure attribute")
    if name.startswith("__Host-") and (not secure or path != "/" or domain):
        raise _Rejected("__Host- cookie needs Secure, Path=/ and no Domain")
    return _Cookie(name, value, path, secure, max_age if max_age is not None else expires)


def with_cookie(headers: list[tuple[str, str]], cookie: str | None) -> list[tuple[str, str]]:
    """``headers`` with the store's ``cookie`` joined to the app's own ``Cookie`` header, if any."""
    if not cookie:
        return headers
    mine = [value for name, value in headers if name.lower() == "cookie"]
    return [*(pair for pair in headers if pair[0].lower() != "cookie"), ("Cookie", "; ".join([*mine, cookie]))]


class CookieStore:
    """One per client, shared by the HTTP and WebSocket paths.

    Args:
        now: The wall clock, in seconds since the epoch (``Expires`` dates are absolute).
        max_cookies_per_origin: The most cookies kept for one origin; the oldest are evicted first.
    """

    def __init__(self, *, now: Callable[[], float] = time.time, max_cookies_per_origin: int = 50) -> None:
        check_count("max_cookies_per_origin", max_cookies_per_origin)
        self._now = now
        self._max_per_origin = max_cookies_per_origin
        # origin -> {(name, path): cookie}, in creation order (dicts keep insertion order).
        self._jar: dict[Origin, dict[tuple[str, str], _Cookie]] = {}
        # The last answer of header_for() per URL (every request asks): (jar version, valid until,
        # value); it holds until the jar changes or a cookie in it expires.
        self._version = 0
        self._answers: dict[str, tuple[int, float, str | None]] = {}

    def header_for(self, url: str) -> str | None:
        """The value for a ``Cookie:`` request header to ``url`` (``None``: none applies), longer
        paths first (RFC 6265 section 5.4).

        Raises:
            ConfigurationError: ``url`` is not an http(s)/ws(s) URL with a host.
        """
        now = self._now()
        known = self._answers.get(url)
        if known is not None and known[0] == self._version and now < known[1]:
            return known[2]
        origin = origin_of(url)
        self._purge(origin, now)
        path = urlsplit(url).path
        path = path if path.startswith("/") else "/"
        cookies = self._jar.get(origin, {}).values()
        chosen = sorted(
            (cookie for cookie in cookies if (origin.secure or not cookie.secure) and _path_matches(path, cookie.path)),
            key=lambda cookie: len(cookie.path),
            reverse=True,  # stable: then oldest first
        )
        expiries = [cookie.expires for cookie in cookies if cookie.expires is not None]
        value = "; ".join(f"{cookie.name}={cookie.value}" for cookie in chosen) or None
        if len(self._answers) >= _MAX_ANSWERS:
            self._answers.clear()
        self._answers[url] = (self._version, min(expiries, default=math.inf), value)
        return value

    def capture(self, url: str, set_cookie_values: Iterable[str]) -> None:
        """Store the cookies of a response from ``url`` given its ``Set-Cookie`` values (malformed or
        unacceptable ones skipped).

        Raises:
            ConfigurationError: ``url`` is not an http(s)/ws(s) URL with a host.
        """
        origin = origin_of(url)
        url_path = urlsplit(url).path
        now = self._now()
        for raw in set_cookie_values:
            try:
                if not isinstance(raw, str):
                    raise _Rejected(f"not a string: {type(raw).__name__}")
                cookie = _parse(raw, origin, url_path, now)
            except _Rejected as exc:
                logger.debug("ignoring a Set-Cookie from %s://%s:%s: %s", origin.scheme, origin.host, origin.port, exc)
                continue
            self._store(origin, cookie, now)

    def clear(self) -> None:
        """Forget every cookie."""
        self._jar.clear()
        self._version += 1

    def __len__(self) -> int:
        now = self._now()
        return sum(1 for cookies in self._jar.values() for cookie in cookies.values() if not cookie.expired(now))

    def __repr__(self) -> str:
        return f"<CookieStore cookies={len(self)} origins={len(self._jar)}>"

    def _store(self, origin: Origin, cookie: _Cookie, now: float) -> None:
        key = (cookie.name, cookie.path)
        self._version += 1
        cookies = self._jar.setdefault(origin, {})
        cookies.pop(key, None)
        if cookie.expired(now):
            # An expiry in the past is how a server deletes a cookie.
            logger.debug("cookie %r deleted by %s://%s:%s", cookie.name, origin.scheme, origin.host, origin.port)
        else:
            cookies[key] = cookie
            self._purge(origin, now)
            while len(cookies) > self._max_per_origin:
                evicted = next(iter(cookies))
                del cookies[evicted]
                logger.debug("cookie %r evicted: more than %d for one origin", evicted[0], self._max_per_origin)
        if not cookies:
            del self._jar[origin]

    def _purge(self, origin: Origin, now: float) -> None:
        cookies = self._jar.get(origin)
        if cookies is None:
            return
        for key in [key for key, cookie in cookies.items() if cookie.expired(now)]:
            del cookies[key]
            self._version += 1
        if not cookies:
            del self._jar[origin]
