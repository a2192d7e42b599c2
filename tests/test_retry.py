"""The retry policy: pure delays, and the tenacity-driven loop under a fake clock."""

from __future__ import annotations

import asyncio
import random

import pytest

from acp_client.exceptions import (
    AuthenticationFailed,
    ConfigurationError,
    ConnectError,
    HttpStatusError,
    IncompatibleProtocolVersion,
    NotAcceptable,
    ServiceUnavailable,
    TlsVerificationError,
    TransportClosed,
)
from acp_client.retry import Attempt, RetryPolicy, is_fatal, is_retryable, reconnect_attempts
from acp_client.testing.clock import FakeClock


def test_ceilings_grow_and_cap() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=10.0, multiplier=2.0, jitter=False)
    assert [policy.ceiling(n) for n in range(1, 7)] == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0]
    assert policy.ceiling(10_000) == 10.0


def test_full_jitter_stays_under_the_ceiling() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=10.0)
    rng = random.Random(7)
    for attempt in range(2, 30):
        for _ in range(20):
            assert 0.0 <= policy.delay(attempt, rng=rng) <= policy.ceiling(attempt)


def test_retry_after_raises_the_wait_but_is_capped() -> None:
    policy = RetryPolicy(initial_delay=1.0, jitter=False, max_retry_after=30.0)
    assert policy.delay(2, retry_after=5.0) == 5.0
    assert policy.delay(2, retry_after=0.5) == 1.0
    assert policy.delay(2, retry_after=10_000.0) == 30.0


def test_suspended_cadence() -> None:
    policy = RetryPolicy(initial_delay=1.0, jitter=False, suspend_after=60.0, suspended_delay=45.0)
    assert policy.delay(3, elapsed=10.0) == 2.0
    assert policy.delay(3, elapsed=61.0) == 45.0


def test_gives_up() -> None:
    policy = RetryPolicy(max_attempts=3, max_elapsed=100.0)
    assert not policy.gives_up(2, 10.0)
    assert policy.gives_up(3, 10.0)
    assert policy.gives_up(1, 100.0)
    assert not RetryPolicy().gives_up(10_000, 1e9)


def test_knobs_are_validated() -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(initial_delay=-1)


def test_error_classification() -> None:
    assert is_fatal(TlsVerificationError("x"))
    assert is_fatal(IncompatibleProtocolVersion("x", requested=1, answered=9))
    assert not is_retryable(AuthenticationFailed("x", status=401))
    assert is_retryable(ConnectError("refused"))
    assert is_retryable(TransportClosed("drop"))
    assert is_retryable(ServiceUnavailable("busy", status=503, retry_after=3))
    assert not is_retryable(asyncio.CancelledError())
    assert not is_retryable(ValueError("bug"))


def test_a_websocket_upgrade_answered_406_is_retried_a_406_to_streamable_http_is_not() -> None:
    # The upgrade reached a plain HTTP route (a server still mounting its routes): as a 404 is.
    assert is_retryable(HttpStatusError("WebSocket handshake refused: HTTP 406", status=406))
    assert is_retryable(HttpStatusError("WebSocket handshake refused: HTTP 404", status=404))
    # Streamable HTTP's 406 is the server refusing the client's Accept: no retry fixes that.
    assert not is_retryable(NotAcceptable("HTTP 406", status=406))


async def test_loop_waits_on_the_fake_clock_and_succeeds() -> None:
    clock = FakeClock()
    policy = RetryPolicy(initial_delay=1.0, max_delay=8.0, jitter=False)
    waits: list[tuple[int, float]] = []
    attempts: list[int] = []

    async def attempt(a: Attempt) -> str:
        attempts.append(a.number)
        if len(attempts) < 5:
            raise ConnectError("refused")
        return "up"

    result = await clock.run(
        reconnect_attempts(
            policy,
            clock=clock,
            sleep=clock.sleep,
            started_at=clock.monotonic(),
            on_wait=lambda n, d, e: waits.append((n, d)),
            attempt_fn=attempt,
        )
    )
    assert result == "up"
    assert attempts == [1, 2, 3, 4, 5]
    assert waits == [(1, 0.0), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0)]
    assert clock.monotonic() == 15.0


async def test_fatal_error_stops_at_once() -> None:
    clock = FakeClock()
    calls = 0

    async def attempt(a: Attempt) -> None:
        nonlocal calls
        calls += 1
        raise TlsVerificationError("bad certificate")

    with pytest.raises(TlsVerificationError):
        await clock.run(
            reconnect_attempts(RetryPolicy(), clock=clock, sleep=clock.sleep, started_at=0.0, attempt_fn=attempt)
        )
    assert calls == 1


async def test_exhaustion_reraises_the_last_error() -> None:
    clock = FakeClock()

    async def attempt(a: Attempt) -> None:
        raise ConnectError(f"refused {a.number}")

    with pytest.raises(ConnectError, match="refused 3"):
        await clock.run(
            reconnect_attempts(
                RetryPolicy(max_attempts=3, jitter=False),
                clock=clock,
                sleep=clock.sleep,
                started_at=0.0,
                attempt_fn=attempt,
            )
        )


async def test_max_elapsed_uses_the_injected_clock() -> None:
    clock = FakeClock()
    count = 0

    async def attempt(a: Attempt) -> None:
        nonlocal count
        count += 1
        raise ConnectError("refused")

    with pytest.raises(ConnectError):
        await clock.run(
            reconnect_attempts(
                RetryPolicy(initial_delay=10.0, max_delay=10.0, jitter=False, max_elapsed=35.0),
                clock=clock,
                sleep=clock.sleep,
                started_at=0.0,
                attempt_fn=attempt,
            )
        )
    assert count == 5  # t=0, 10, 20, 30, 40 -> elapsed 40 >= 35 after the 5th failure
    assert clock.monotonic() == 40.0


async def test_retry_after_is_honoured_in_the_loop() -> None:
    clock = FakeClock()
    seen: list[float] = []

    async def attempt(a: Attempt) -> str:
        if a.number == 1:
            raise ServiceUnavailable("busy", status=503, retry_after=12.0)
        return "ok"

    await clock.run(
        reconnect_attempts(
            RetryPolicy(initial_delay=1.0, jitter=False),
            clock=clock,
            sleep=clock.sleep,
            started_at=0.0,
            on_wait=lambda n, d, e: seen.append(d),
            attempt_fn=attempt,
        )
    )
    assert seen == [0.0, 12.0]


async def test_carried_backoff_continues_but_the_numbering_starts_at_1() -> None:
    clock = FakeClock()
    seen: list[tuple[int, float]] = []
    numbers: list[int] = []

    async def attempt(a: Attempt) -> str:
        numbers.append(a.number)
        if a.number < 3:
            raise ConnectError("refused")
        return "ok"

    await clock.run(
        reconnect_attempts(
            RetryPolicy(initial_delay=1.0, jitter=False),
            clock=clock,
            sleep=clock.sleep,
            started_at=0.0,
            backoff_from=3,
            on_wait=lambda n, d, e: seen.append((n, d)),
            attempt_fn=attempt,
        )
    )
    assert seen == [(1, 4.0), (2, 8.0), (3, 16.0)]  # the backoff of attempts 4, 5, 6
    assert numbers == [1, 2, 3]


async def test_max_attempts_counts_the_attempts_of_this_outage_only() -> None:
    clock = FakeClock()
    numbers: list[int] = []

    async def attempt(a: Attempt) -> None:
        numbers.append(a.number)
        raise ConnectError("refused")

    with pytest.raises(ConnectError):
        await clock.run(
            reconnect_attempts(
                RetryPolicy(initial_delay=1.0, jitter=False, max_attempts=3),
                clock=clock,
                sleep=clock.sleep,
                started_at=0.0,
                backoff_from=5,
                attempt_fn=attempt,
            )
        )
    assert numbers == [1, 2, 3]


async def test_an_outage_that_goes_on_continues_its_numbering_and_its_budget() -> None:
    # A link that dropped again during its recovery: the same outage, attempts 3, 4, ... and the
    # max_attempts budget is what is left of it.
    clock = FakeClock()
    seen: list[tuple[int, float]] = []
    numbers: list[int] = []

    async def attempt(a: Attempt) -> None:
        numbers.append(a.number)
        raise ConnectError("refused")

    with pytest.raises(ConnectError):
        await clock.run(
            reconnect_attempts(
                RetryPolicy(initial_delay=1.0, jitter=False, max_attempts=4),
                clock=clock,
                sleep=clock.sleep,
                started_at=0.0,
                attempts_before=2,
                on_wait=lambda n, d, e: seen.append((n, d)),
                attempt_fn=attempt,
            )
        )
    assert numbers == [3, 4]
    assert seen == [(3, 2.0), (4, 4.0)]


@pytest.mark.parametrize("jitter", [False, True])
async def test_the_loop_waits_what_the_policy_says(jitter: bool) -> None:
    policy = RetryPolicy(initial_delay=0.5, max_delay=6.0, multiplier=3.0, jitter=jitter, first_attempt_delay=0.25)
    clock = FakeClock()
    waits: list[float] = []

    async def attempt(a: Attempt) -> str:
        if a.number < 7:
            raise ConnectError("refused")
        return "up"

    await clock.run(
        reconnect_attempts(
            policy,
            clock=clock,
            sleep=clock.sleep,
            started_at=0.0,
            rng=random.Random(3),
            on_wait=lambda n, d, e: waits.append(d),
            attempt_fn=attempt,
        )
    )
    rng = random.Random(3)
    assert waits == [policy.delay(1)] + [policy.delay(n, rng=rng) for n in range(2, 8)]
    if not jitter:
        assert waits == [0.25, 0.5, 1.5, 4.5, 6.0, 6.0, 6.0]


async def test_cancellation_is_never_retried() -> None:
    clock = FakeClock()
    calls = 0

    async def attempt(a: Attempt) -> None:
        nonlocal calls
        calls += 1
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await reconnect_attempts(RetryPolicy(), clock=clock, sleep=clock.sleep, started_at=0.0, attempt_fn=attempt)
    assert calls == 1
