"""Pure unit tests of the cookie store: scoping, path, Secure, expiry, bounds, malformed input."""

from __future__ import annotations

import calendar
import logging

import pytest

from acp_client.exceptions import ConfigurationError
from acp_client.transports._cookies import MAX_COOKIE_BYTES, CookieStore, _parse_date


class FakeNow:
    def __init__(self, value: float = 1_700_000_000.0) -> None:
        self.value = value

    def __call__(self) -> float:
        return self.value


@pytest.fixture
def now() -> FakeNow:
    return FakeNow()


@pytest.fixture
def store(now: FakeNow) -> CookieStore:
    return CookieStore(now=now)


# -- origin scoping -----------------------------------------------------------------------------


def test_cookie_is_sent_back_to_the_origin_that_set_it(store: CookieStore) -> None:
    store.capture("http://agent.example:8000/acp", ["route=b1; Path=/"])
    assert store.header_for("http://agent.example:8000/acp") == "route=b1"
    assert len(store) == 1


def test_ws_and_http_share_an_origin(store: CookieStore) -> None:
    store.capture("ws://agent.example:8000/acp", ["a=1; Path=/"])
    store.capture("https://secure.example/acp", ["b=2; Path=/"])
    assert store.header_for("http://agent.example:8000/other") == "a=1"
    assert store.header_for("wss://secure.example:443/acp") == "b=2"


def test_default_ports_are_the_same_origin(store: CookieStore) -> None:
    store.capture("http://agent.example/acp", ["a=1; Path=/"])
    assert store.header_for("ws://agent.example:80/acp") == "a=1"


@pytest.mark.parametrize(
    "other",
    [
        "http://agent.example:8001/acp",  # another port
        "http://other.example:8000/acp",  # another host
        "http://sub.agent.example:8000/acp",  # a subdomain
        "https://agent.example:8000/acp",  # another scheme
    ],
)
def test_cookie_never_goes_to_another_origin(store: CookieStore, other: str) -> None:
    store.capture("http://agent.example:8000/acp", ["route=b1; Path=/"])
    assert store.header_for(other) is None


def test_domain_attribute_never_widens_the_scope(store: CookieStore) -> None:
    store.capture("http://api.agent.example/acp", ["wide=1; Domain=agent.example; Path=/"])
    assert store.header_for("http://api.agent.example/acp") == "wide=1"
    assert store.header_for("http://other.agent.example/acp") is None
    assert store.header_for("http://agent.example/acp") is None


def test_domain_attribute_that_does_not_cover_the_host_rejects_the_cookie(store: CookieStore) -> None:
    store.capture("http://agent.example/acp", ["evil=1; Domain=attacker.example"])
    assert len(store) == 0


def test_host_is_case_insensitive(store: CookieStore) -> None:
    store.capture("http://Agent.Example/acp", ["a=1; Path=/"])
    assert store.header_for("http://agent.example/acp") == "a=1"


# -- path ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("set_url", "request_path", "sent"),
    [
        ("http://h/acp", "/acp", True),  # default-path of /acp is /
        ("http://h/acp", "/anything", True),
        ("http://h/api/v1/acp", "/api/v1/acp", True),  # default-path /api/v1
        ("http://h/api/v1/acp", "/api/v1", True),
        ("http://h/api/v1/acp", "/api/v1x", False),
        ("http://h/api/v1/acp", "/api", False),
        ("http://h", "/", True),  # empty path
    ],
)
def test_default_path(store: CookieStore, set_url: str, request_path: str, sent: bool) -> None:
    store.capture(set_url, ["c=1"])
    assert (store.header_for(f"http://h{request_path}") == "c=1") is sent


@pytest.mark.parametrize(
    ("cookie_path", "request_path", "sent"),
    [
        ("/acp", "/acp", True),
        ("/acp", "/acp/stream", True),
        ("/acp", "/acpx", False),
        ("/acp/", "/acp/stream", True),
        ("/acp/", "/acp", False),
        ("/", "/whatever", True),
    ],
)
def test_path_attribute(store: CookieStore, cookie_path: str, request_path: str, sent: bool) -> None:
    store.capture("http://h/acp/x", [f"c=1; Path={cookie_path}"])
    assert (store.header_for(f"http://h{request_path}") == "c=1") is sent


def test_relative_path_attribute_falls_back_to_the_default_path(store: CookieStore) -> None:
    store.capture("http://h/api/acp", ["c=1; Path=relative"])
    assert store.header_for("http://h/api/x") == "c=1"
    assert store.header_for("http://h/other") is None


def test_longer_paths_come_first_then_older_cookies(store: CookieStore) -> None:
    store.capture("http://h/", ["a=1; Path=/", "b=2; Path=/acp", "c=3; Path=/"])
    assert store.header_for("http://h/acp") == "b=2; a=1; c=3"


def test_same_name_different_paths_are_distinct(store: CookieStore) -> None:
    store.capture("http://h/", ["a=root; Path=/", "a=deep; Path=/acp"])
    assert store.header_for("http://h/acp") == "a=deep; a=root"
    assert store.header_for("http://h/") == "a=root"


def test_same_name_and_path_replaces(store: CookieStore) -> None:
    store.capture("http://h/", ["a=1; Path=/"])
    store.capture("http://h/", ["a=2; Path=/"])
    assert store.header_for("http://h/") == "a=2"
    assert len(store) == 1


def test_query_string_is_not_part_of_the_path(store: CookieStore) -> None:
    store.capture("http://h/acp?token=x", ["a=1; Path=/acp"])
    assert store.header_for("http://h/acp?x=1") == "a=1"


# -- Secure ---------------------------------------------------------------------------------------


def test_secure_cookie_is_only_sent_over_tls(store: CookieStore) -> None:
    store.capture("https://h/acp", ["s=1; Secure; Path=/", "p=2; Path=/"])
    assert store.header_for("wss://h/acp") == "s=1; p=2"
    assert store.header_for("https://h/acp") == "s=1; p=2"


def test_secure_cookie_is_not_sent_over_plain_ws_even_on_the_same_host_and_port(store: CookieStore) -> None:
    # Scheme is part of the origin, so an https cookie never reaches http anyway; the Secure flag is
    # checked as well on the sending side.
    store.capture("https://h:8443/acp", ["s=1; Secure; Path=/"])
    assert store.header_for("ws://h:8443/acp") is None


def test_secure_cookie_from_an_insecure_origin_is_rejected(store: CookieStore) -> None:
    store.capture("ws://h/acp", ["s=1; Secure; Path=/", "p=2; Path=/"])
    assert store.header_for("ws://h/acp") == "p=2"
    assert len(store) == 1


def test_secure_and_host_prefixes(store: CookieStore) -> None:
    store.capture(
        "https://h/api/acp",
        [
            "__Secure-a=1; Path=/",  # missing Secure
            "__Secure-b=2; Secure; Path=/",
            "__Host-c=3; Secure",  # default path /api is not /
            "__Host-d=4; Secure; Path=/; Domain=h",  # has Domain
            "__Host-e=5; Secure; Path=/",
        ],
    )
    assert store.header_for("https://h/") == "__Secure-b=2; __Host-e=5"


# -- expiry -----------------------------------------------------------------------------------------


def test_max_age_expires_with_the_clock(store: CookieStore, now: FakeNow) -> None:
    store.capture("http://h/", ["a=1; Max-Age=60"])
    now.value += 59
    assert store.header_for("http://h/") == "a=1"
    now.value += 1
    assert store.header_for("http://h/") is None
    assert len(store) == 0


def test_asking_again_sees_every_change_and_expiry(store: CookieStore, now: FakeNow) -> None:
    """Every request of a link asks for the same URL's header: the remembered answer never outlives a change."""
    url = "http://h/acp"
    assert store.header_for(url) is None
    store.capture(url, ["a=1"])
    assert store.header_for(url) == store.header_for(url) == "a=1"
    store.capture(url, ["b=2; Max-Age=10"])
    assert store.header_for(url) == "a=1; b=2"
    store.capture("http://other/", ["c=3"])  # another origin's cookie changes nothing here
    assert store.header_for(url) == "a=1; b=2"
    now.value += 10
    assert store.header_for(url) == "a=1"  # b expired, without any capture in between
    store.capture(url, ["a=9"])
    assert store.header_for(url) == "a=9"
    store.clear()
    assert store.header_for(url) is None


@pytest.mark.parametrize("max_age", ["0", "-1", "-0"])
def test_max_age_zero_or_negative_deletes(store: CookieStore, max_age: str) -> None:
    store.capture("http://h/", ["a=1", "b=2"])
    store.capture("http://h/", [f"a=gone; Max-Age={max_age}"])
    assert store.header_for("http://h/") == "b=2"
    assert len(store) == 1


def test_expires_in_the_past_deletes(store: CookieStore) -> None:
    store.capture("http://h/", ["a=1"])
    store.capture("http://h/", ["a=; Expires=Thu, 01 Jan 1970 00:00:00 GMT"])
    assert store.header_for("http://h/") is None


def test_expires_in_the_future(store: CookieStore, now: FakeNow) -> None:
    now.value = 1_445_412_000.0  # 2015-10-21 07:20:00 UTC
    store.capture("http://h/", ["a=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT"])
    assert store.header_for("http://h/") == "a=1"
    now.value = 1_445_412_480.0  # exactly the expiry
    assert store.header_for("http://h/") is None


def test_max_age_wins_over_expires(store: CookieStore, now: FakeNow) -> None:
    store.capture("http://h/", ["a=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=100"])
    assert store.header_for("http://h/") == "a=1"
    now.value += 100
    assert store.header_for("http://h/") is None


def test_invalid_max_age_and_expires_are_ignored(store: CookieStore, now: FakeNow) -> None:
    store.capture("http://h/", ["a=1; Max-Age=soon; Expires=never"])
    now.value += 10 * 365 * 86400
    assert store.header_for("http://h/") == "a=1"


def test_huge_max_age_is_clamped_not_an_overflow(store: CookieStore) -> None:
    store.capture("http://h/", ["a=1; Max-Age=" + "9" * 400])
    assert store.header_for("http://h/") == "a=1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Wed, 21 Oct 2015 07:28:00 GMT", 1_445_412_480.0),  # IMF-fixdate
        ("Wednesday, 21-Oct-15 07:28:00 GMT", 1_445_412_480.0),  # RFC 850
        ("Wed Oct 21 07:28:00 2015", 1_445_412_480.0),  # asctime
        ("21 Oct 1969 07:28:00", float(calendar.timegm((1969, 10, 21, 7, 28, 0)))),  # before the epoch
        ("Tue, 21-Oct-69 07:28:00 GMT", float(calendar.timegm((2069, 10, 21, 7, 28, 0)))),  # 00-69 -> 20xx
        ("Mon, 21-Oct-70 07:28:00 GMT", float(calendar.timegm((1970, 10, 21, 7, 28, 0)))),  # 70-99 -> 19xx
    ],
)
def test_parse_date_formats(text: str, expected: float) -> None:
    assert _parse_date(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "garbage", "Wed, 30 Feb 2015 07:28:00 GMT", "Wed, 21 Oct 1500 07:28:00 GMT", "Wed, 21 Oct 2015 25:00:00"],
)
def test_parse_date_rejects(text: str) -> None:
    assert _parse_date(text) is None


# -- bounds -------------------------------------------------------------------------------------------


def test_per_origin_count_is_bounded_oldest_evicted(now: FakeNow) -> None:
    store = CookieStore(now=now, max_cookies_per_origin=3)
    store.capture("http://h/", [f"c{i}={i}" for i in range(5)])
    assert len(store) == 3
    assert store.header_for("http://h/") == "c2=2; c3=3; c4=4"
    # Another origin has its own budget.
    store.capture("http://other/", ["x=1"])
    assert len(store) == 4


def test_expired_cookies_are_purged_before_evicting(now: FakeNow) -> None:
    store = CookieStore(now=now, max_cookies_per_origin=2)
    store.capture("http://h/", ["old=1; Max-Age=1", "keep=2"])
    now.value += 5
    store.capture("http://h/", ["new=3"])
    assert store.header_for("http://h/") == "keep=2; new=3"


def test_oversized_cookie_is_ignored(store: CookieStore) -> None:
    store.capture("http://h/", ["big=" + "x" * MAX_COOKIE_BYTES, "ok=" + "y" * (MAX_COOKIE_BYTES - 5)])
    assert len(store) == 1
    header = store.header_for("http://h/")
    assert header is not None and header.startswith("ok=")


def test_max_cookies_per_origin_must_be_positive() -> None:
    with pytest.raises(ValueError):
        CookieStore(max_cookies_per_origin=0)


# -- malformed input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "novalue",
        "=value",
        " ; Path=/",
        "bad name=1",
        "a\x00b=1",
        "a=1\r\nInjected: yes",
        "a=b\x00c",
        "a=b\x7f",
        "ünïcode=1",
        "a(b)=1",
        "a=caf\xe9",  # a non-ASCII octet (as httpx decodes it): no HTTP client could send it back
        "a=caf\udce9",  # the same octet as websockets decodes it (surrogateescape)
    ],
)
def test_malformed_set_cookie_is_ignored(store: CookieStore, raw: str) -> None:
    store.capture("http://h/", [raw, "good=1"])
    assert store.header_for("http://h/") == "good=1"


def test_non_string_values_are_ignored(store: CookieStore) -> None:
    store.capture("http://h/", [b"a=1", None, "good=1"])  # type: ignore[list-item]
    assert store.header_for("http://h/") == "good=1"


def test_whitespace_and_quotes_and_empty_values(store: CookieStore) -> None:
    store.capture("http://h/", ['  q = "quoted value"  ; path=/ ', "empty="])
    assert store.header_for("http://h/") == 'q="quoted value"; empty='


def test_attributes_are_case_insensitive_and_unknown_ones_ignored(store: CookieStore, now: FakeNow) -> None:
    store.capture("https://h/", ["a=1; SECURE; PATH=/x; MAX-AGE=10; HttpOnly; SameSite=Strict; Priority=High"])
    assert store.header_for("https://h/x") == "a=1"
    assert store.header_for("https://h/") is None
    now.value += 10
    assert store.header_for("https://h/x") is None


@pytest.mark.parametrize("url", ["ftp://h/", "http:///nohost", "not a url"])
def test_bad_urls_raise_configuration_error(store: CookieStore, url: str) -> None:
    with pytest.raises(ConfigurationError):
        store.header_for(url)
    with pytest.raises(ConfigurationError):
        store.capture(url, ["a=1"])


# -- privacy ---------------------------------------------------------------------------------------------


def test_values_never_appear_in_repr_or_logs(store: CookieStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store.capture(
        "http://h/",
        [
            "session=SECRET-1; Path=/",
            "bad=SECRET-2; Domain=elsewhere.example",
            "gone=SECRET-3; Max-Age=0",
            "s=SECRET-4; Secure",
        ],
    )
    store.header_for("http://h/")
    assert "SECRET" not in repr(store)
    assert "SECRET" not in caplog.text
    assert caplog.records, "rejections are logged at debug level"


def test_clear(store: CookieStore) -> None:
    store.capture("http://h/", ["a=1"])
    store.capture("http://other/", ["b=1"])
    store.clear()
    assert len(store) == 0
    assert store.header_for("http://h/") is None
