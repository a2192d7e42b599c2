"""One rule for every number an option takes (``acp_client._util._checks``): a number of seconds or a
count is a finite ``int``/``float``, never a ``bool``, NaN or an infinity; "no limit" is ``None``
where the option allows it. Each option of the package is listed here once, with its kind, and
every bad value of that kind is refused with a ``ConfigurationError`` naming the option."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from acp_client import AcpClient, ConfigurationError, QueueOptions, RetryPolicy, Timeouts
from acp_client.pool import Pool, locate
from acp_client.sync import SyncAcpClient
from acp_client.telemetry import Telemetry
from acp_client.testing import MemoryConnector, ReferenceAgent
from acp_client.transports import CookieStore, HttpConnector, Limits, StdioConnector, WebSocketConnector

URL = "ws://127.0.0.1:9/acp"  # never connected to

#: What each kind of option refuses (all of them refuse NaN, infinities and booleans).
_NOT_NUMBERS = [math.nan, math.inf, -math.inf, True, False, "1", b"1", 1j, [1]]
BAD: dict[str, list[Any]] = {
    "seconds": [*_NOT_NUMBERS, None, -1, -0.001, 0, 0.0],
    "seconds or zero": [*_NOT_NUMBERS, None, -1, -0.001],
    "seconds or None": [*_NOT_NUMBERS, -1, 0],
    "seconds, zero or None": [*_NOT_NUMBERS, -1],
    "count": [*_NOT_NUMBERS, None, 0, -1, 1.0, 2.5],
    "count or zero": [*_NOT_NUMBERS, None, -1, 1.0],
    "count or None": [*_NOT_NUMBERS, 0, -1, 2.5],
    "at least 1": [*_NOT_NUMBERS, None, 0.5, 0, -2],
    "flag": [1, 0, "yes", None, 1.0],
}
GOOD: dict[str, list[Any]] = {
    "seconds": [0.5, 3, 1e6],
    "seconds or zero": [0, 0.5, 3],
    "seconds or None": [None, 0.5, 3],
    "seconds, zero or None": [None, 0, 2.5],
    "count": [1, 7],
    "count or zero": [0, 3],
    "count or None": [None, 1, 9],
    "at least 1": [1, 1.5, 3],
    "flag": [True, False],
}


def _client(**options: Any) -> Any:
    return AcpClient(URL, **options)


def _sync(**options: Any) -> Any:
    return SyncAcpClient(URL, **options)


def _retry(**options: Any) -> Any:
    return RetryPolicy(**options)


def _run(coroutine_fn: Callable[[], Any]) -> Any:
    async def main() -> Any:
        return await coroutine_fn()

    return asyncio.run(main())


def _call_timeout(method: str) -> Callable[..., Any]:
    """A call's ``timeout=`` on a client that is never connected: checked before anything else."""

    def build(timeout: Any) -> Any:
        client = AcpClient(MemoryConnector(ReferenceAgent()))
        call = {
            "request": lambda: client.request("x", timeout=timeout),
            "prompt": lambda: client.prompt("sess_1", "hi", timeout=timeout),
            "locate": lambda: client.locate("sess_1", timeout=timeout),
        }[method]
        try:
            return _run(call)
        except ConfigurationError:
            raise
        except Exception:  # anything but a configuration error: the value itself was accepted
            return None

    return build


#: (the option's name as the error says it, how to build something with a value, the kind).
OPTIONS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("Timeouts.request", lambda v: Timeouts(request=v), "seconds or None"),
    ("Timeouts.connect", lambda v: Timeouts(connect=v), "seconds"),
    ("Timeouts.probe", lambda v: Timeouts(probe=v), "seconds"),
    ("Timeouts.cancel_grace", lambda v: Timeouts(cancel_grace=v), "seconds"),
    ("QueueOptions.enabled", lambda v: QueueOptions(enabled=v), "flag"),
    ("Telemetry.enabled", lambda v: Telemetry(enabled=v), "flag"),
    ("QueueOptions.max_size", lambda v: QueueOptions(max_size=v), "count"),
    ("QueueOptions.max_age", lambda v: QueueOptions(max_age=v), "seconds"),
    ("RetryPolicy.initial_delay", lambda v: _retry(initial_delay=v), "seconds or zero"),
    ("RetryPolicy.max_delay", lambda v: RetryPolicy(initial_delay=0, max_delay=v), "seconds or zero"),
    ("RetryPolicy.multiplier", lambda v: _retry(multiplier=v), "at least 1"),
    ("RetryPolicy.jitter", lambda v: _retry(jitter=v), "flag"),
    ("RetryPolicy.first_attempt_delay", lambda v: _retry(first_attempt_delay=v), "seconds or zero"),
    ("RetryPolicy.max_attempts", lambda v: _retry(max_attempts=v), "count or None"),
    ("RetryPolicy.max_elapsed", lambda v: _retry(max_elapsed=v), "seconds, zero or None"),
    ("RetryPolicy.reset_after", lambda v: _retry(reset_after=v), "seconds or zero"),
    ("RetryPolicy.suspend_after", lambda v: _retry(suspend_after=v), "seconds, zero or None"),
    ("RetryPolicy.suspended_delay", lambda v: _retry(suspended_delay=v), "seconds or zero"),
    ("RetryPolicy.max_retry_after", lambda v: _retry(max_retry_after=v), "seconds or zero"),
    ("Limits.max_message_bytes", lambda v: Limits(max_message_bytes=v), "count"),
    ("Limits.max_sse_line_bytes", lambda v: Limits(max_sse_line_bytes=v), "count"),
    ("Limits.max_http_body_bytes", lambda v: Limits(max_http_body_bytes=v), "count"),
    ("Limits.max_stderr_bytes", lambda v: Limits(max_stderr_bytes=v), "count or zero"),
    ("recovery_concurrency", lambda v: _client(recovery_concurrency=v), "count"),
    ("max_incoming_requests", lambda v: _client(max_incoming_requests=v), "count"),
    ("Pool.failover_delay", lambda v: Pool([URL], failover_delay=v), "seconds"),
    ("keep_transcripts", lambda v: _client(keep_transcripts=v), "flag"),
    ("retry_unsent_prompts", lambda v: _client(retry_unsent_prompts=v), "flag"),
    ("default_timeout", lambda v: _sync(default_timeout=v), "seconds or None"),
    ("answer_timeout", lambda v: _sync(answer_timeout=v), "seconds or None"),
    ("connect_timeout", lambda v: HttpConnector("http://127.0.0.1:9/acp", connect_timeout=v), "seconds"),
    ("sse_idle_timeout", lambda v: HttpConnector("http://127.0.0.1:9/acp", sse_idle_timeout=v), "seconds"),
    (
        "session_stream_retries",
        lambda v: HttpConnector("http://127.0.0.1:9/acp", session_stream_retries=v),
        "count or zero",
    ),
    ("max_session_streams", lambda v: HttpConnector("http://127.0.0.1:9/acp", max_session_streams=v), "count"),
    ("ping_interval", lambda v: WebSocketConnector(URL, ping_interval=v), "seconds or None"),
    ("ping_timeout", lambda v: WebSocketConnector(URL, ping_timeout=v), "seconds or None"),
    ("open_timeout", lambda v: WebSocketConnector(URL, open_timeout=v), "seconds"),
    ("close_timeout", lambda v: WebSocketConnector(URL, close_timeout=v), "seconds"),
    ("terminate_timeout", lambda v: StdioConnector(["agent"], terminate_timeout=v), "seconds or zero"),
    ("max_cookies_per_origin", lambda v: CookieStore(max_cookies_per_origin=v), "count"),
    ("timeout", lambda v: _run(lambda: locate("sess_1", ["ws://127.0.0.1:9/acp"], timeout=v)), "seconds or None"),
    ("timeout", _call_timeout("request"), "seconds or None"),
    ("timeout", _call_timeout("prompt"), "seconds or None"),
    ("timeout", _call_timeout("locate"), "seconds or None"),
]

_BAD_CASES = [
    pytest.param(name, build, value, id=f"{name}[{i}]-{kind}-{value!r}")
    for i, (name, build, kind) in enumerate(OPTIONS)
    for value in BAD[kind]
]
_GOOD_CASES = [
    pytest.param(build, value, id=f"{name}[{i}]-{value!r}")
    for i, (name, build, kind) in enumerate(OPTIONS)
    for value in GOOD[kind]
    if build.__name__ != "build"  # a call's good timeout is exercised by the tests of that call
]


@pytest.mark.parametrize(("name", "build", "value"), _BAD_CASES)
def test_a_bad_number_is_refused_naming_the_option(name: str, build: Callable[[Any], Any], value: Any) -> None:
    with pytest.raises(ConfigurationError, match=name.replace(".", r"\.")):
        build(value)


@pytest.mark.parametrize(("build", "value"), _GOOD_CASES)
def test_a_good_number_is_accepted(build: Callable[[Any], Any], value: Any) -> None:
    build(value)


def test_infinity_is_never_no_limit_and_the_message_says_what_is() -> None:
    with pytest.raises(ConfigurationError, match="use None for no limit"):
        Timeouts(request=math.inf)


def test_every_numeric_field_of_the_option_values_is_listed() -> None:
    listed = {name for name, _, _ in OPTIONS}
    for value_type in (Timeouts, QueueOptions, RetryPolicy, Limits):
        for field in attrs.fields(value_type):
            assert f"{value_type.__name__}.{field.name}" in listed
