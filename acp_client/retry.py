"""The reconnect retry policy: plain knobs outside, tenacity inside.

:class:`RetryPolicy` is a frozen value the app configures; :func:`reconnect_attempts` runs it as a
``tenacity.AsyncRetrying`` loop on the client's clock (so a fake clock drives the delays in tests)
and an interruptible sleep (``notify_network_available()`` skips the wait). No tenacity type
leaves this module.

Delays use exponential backoff with *full jitter*: attempt ``n`` waits a uniformly random time in
``[0, min(max_delay, initial_delay * multiplier ** (n - 2))]`` (or exactly that ceiling when
``jitter`` is off; attempt 1 goes at once, or after ``first_attempt_delay``). A server's
``Retry-After`` (429/503) raises the wait to at least what it asked, capped by ``max_retry_after``.
Past ``suspend_after`` the ceiling is ``suspended_delay``. ``RetryPolicy.delay`` / ``gives_up``
evaluate the loop's own strategies, so the documented delays and the loop cannot drift apart.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import tenacity

from ._util._checks import check_count, check_flag, check_number, check_seconds, field_check
from .clock import Clock
from .exceptions import (
    AuthenticationFailed,
    ConfigurationError,
    ConnectError,
    HttpStatusError,
    IncompatibleProtocolVersion,
    NotAcceptable,
    RequestTimeout,
    RpcError,
    ServiceUnavailable,
    TlsVerificationError,
    TransportError,
    UnsupportedProtocolVersion,
)

__all__ = ["Attempt", "RetryPolicy", "is_fatal", "is_retryable", "reconnect_attempts"]


_seconds = field_check(check_seconds, zero=True)
_optional_seconds = field_check(check_seconds, zero=True, optional=True)


@attrs.frozen
class RetryPolicy:
    """How the client reconnects after a drop.

    Attributes:
        initial_delay: The backoff ceiling of the second attempt, in seconds (the first
            attempt after a drop is immediate unless ``first_attempt_delay`` is set).
        max_delay: The largest backoff ceiling.
        multiplier: Growth of the ceiling per attempt.
        jitter: Full jitter (a uniformly random wait up to the ceiling). Off: wait the ceiling.
        first_attempt_delay: Wait before the first attempt after a drop.
        max_attempts: Give up after this many failed attempts in one outage (``None``: never).
            Every outage counts from 1 (``ConnectionState.attempt``), whatever backoff
            ``reset_after`` carried over.
        max_elapsed: Give up after this long down, in seconds (``None``: never).
        reset_after: How long a connection must stay up for the next outage's backoff to start
            over; after a shorter-lived one the delays go on where the last outage's ended.
        suspend_after: After this long down the client goes ``suspended``: queued and new
            requests fail with :class:`~acp_client.exceptions.ClientSuspended`, and retries
            continue every ``suspended_delay`` seconds (``None``: never suspend).
        suspended_delay: The backoff ceiling while suspended.
        max_retry_after: The most a server's ``Retry-After`` may stretch one wait.

    Raises:
        ConfigurationError: An option of the wrong type, negative, infinite or NaN, a
            ``multiplier`` below 1, a ``max_attempts`` that is not a positive integer, or an
            ``initial_delay`` above ``max_delay``. The message names the option.
    """

    initial_delay: float = attrs.field(default=0.5, validator=_seconds)
    max_delay: float = attrs.field(default=30.0, validator=_seconds)
    # At least 1: a shrinking backoff would hammer a struggling server ever faster.
    multiplier: float = attrs.field(default=2.0, validator=field_check(check_number, minimum=1))
    jitter: bool = attrs.field(default=True, validator=field_check(check_flag))
    first_attempt_delay: float = attrs.field(default=0.0, validator=_seconds)
    max_attempts: int | None = attrs.field(default=None, validator=field_check(check_count, optional=True))
    max_elapsed: float | None = attrs.field(default=None, validator=_optional_seconds)
    reset_after: float = attrs.field(default=10.0, validator=_seconds)
    suspend_after: float | None = attrs.field(default=120.0, validator=_optional_seconds)
    suspended_delay: float = attrs.field(default=60.0, validator=_seconds)
    max_retry_after: float = attrs.field(default=300.0, validator=_seconds)

    def __attrs_post_init__(self) -> None:
        if self.initial_delay > self.max_delay:
            raise ConfigurationError(
                f"RetryPolicy.initial_delay ({self.initial_delay!r}) must not exceed max_delay ({self.max_delay!r})"
            )

    def ceiling(self, attempt: int) -> float:
        """The backoff ceiling before ``attempt`` (1-based; attempt 1 is the first after a drop)."""
        if attempt <= 1:
            return self.first_attempt_delay
        return float(_exponential(self, 0)(_after_failures(attempt - 1)))

    def delay(
        self,
        attempt: int,
        *,
        elapsed: float = 0.0,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """The wait before ``attempt`` (1-based, in backoff steps), in seconds, as the loop computes it.

        Args:
            elapsed: Seconds since the outage began (selects the suspended cadence).
            retry_after: The server's ``Retry-After`` from the last failure, if any.
            rng: The random source for jitter (a seeded one makes tests repeatable).
        """
        if attempt <= 1:
            return float(_at_least_asked(self.first_attempt_delay, retry_after, self.max_retry_after))
        wait = _backoff(self, steps_before=0, elapsed=lambda: elapsed, rng=rng, asked=lambda _: retry_after)
        return float(wait(_after_failures(attempt - 1)))

    def gives_up(self, failed_attempts: int, elapsed: float) -> bool:
        """Whether the policy is exhausted after ``failed_attempts`` failures, ``elapsed`` s down."""
        return bool(_stop(self, attempts_before=0, elapsed=lambda: elapsed)(_after_failures(failed_attempts)))


def is_fatal(error: BaseException) -> bool:
    """Errors that no amount of reconnecting fixes: stop at once."""
    return isinstance(
        error,
        TlsVerificationError | IncompatibleProtocolVersion | UnsupportedProtocolVersion | ConfigurationError,
    )


def is_retryable(error: BaseException) -> bool:
    """The explicit list of errors worth another attempt (never cancellation, never a bug)."""
    if is_fatal(error) or isinstance(error, AuthenticationFailed):
        return False
    if isinstance(error, HttpStatusError):
        if error.status == 406 and not isinstance(error, NotAcceptable):
            # A WebSocket upgrade answered 406 reached a plain HTTP route, not a WebSocket endpoint (yet):
            # a server still mounting its routes after a restart (Qwen Code's daemon). Retried as a 404 is.
            return True
        return error.status >= 500 or error.status in (404, 408, 425, 429)
    return isinstance(error, ConnectError | TransportError | RequestTimeout | RpcError)


@attrs.define
class Attempt:
    """One reconnect attempt handed out by :func:`reconnect_attempts`."""

    number: int
    delay: float
    last_error: BaseException | None


# tenacity computes the exponential ceiling, counts the attempts and runs the loop; the strategies
# below add what it has no knob for. Each reads time from the client's clock (tenacity's own timing
# is the real clock), so a fake clock runs an outage in milliseconds.

_RANDOM = random.Random()
_EVALUATE = tenacity.Retrying()  # only the owner of the call states RetryPolicy.delay evaluates


def _after_failures(count: int) -> tenacity.RetryCallState:
    """A tenacity call state after ``count`` attempts (what the strategies read)."""
    state = tenacity.RetryCallState(_EVALUATE, None, (), {})
    state.attempt_number = count
    return state


def _exponential(policy: RetryPolicy, steps_before: int) -> tenacity.wait_exponential:
    """tenacity's exponential ceiling, ``steps_before`` failures further along (folded into the
    multiplier: ``initial * m ** (steps + k - 1)`` is ``(initial * m ** steps) * m ** (k - 1)``)."""
    try:
        start = policy.initial_delay * policy.multiplier**steps_before
    except OverflowError:
        start = policy.max_delay
    return tenacity.wait_exponential(
        multiplier=min(start, policy.max_delay), exp_base=policy.multiplier, max=policy.max_delay
    )


def _at_least_asked(wait: float, asked: float | None, cap: float) -> float:
    """``wait``, raised to what the server's ``Retry-After`` asked for (at most ``cap``)."""
    return min(asked, cap) if asked is not None and asked > wait else wait


@attrs.define
class _StopAfterElapsed(tenacity.stop.stop_base):
    """Stop once the outage is ``limit`` seconds old on the clock."""

    limit: float
    elapsed: Callable[[], float]

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self.elapsed() >= self.limit


def _backoff(
    policy: RetryPolicy,
    *,
    steps_before: int,
    elapsed: Callable[[], float],
    rng: random.Random | None,
    asked: Callable[[tenacity.RetryCallState], float | None],
) -> Callable[[tenacity.RetryCallState], float]:
    """The wait strategy: tenacity's exponential ceiling (``suspended_delay`` once the outage is
    ``suspend_after`` old on the clock), full jitter from ``rng``, then ``Retry-After``."""
    exponential = _exponential(policy, steps_before)
    source = rng or _RANDOM

    def wait(retry_state: tenacity.RetryCallState) -> float:
        suspended = policy.suspend_after is not None and elapsed() >= policy.suspend_after
        ceiling = float(policy.suspended_delay) if suspended else exponential(retry_state)
        delay = source.uniform(0.0, ceiling) if policy.jitter else ceiling
        return _at_least_asked(delay, asked(retry_state), policy.max_retry_after)

    return wait


def _stop(policy: RetryPolicy, *, attempts_before: int, elapsed: Callable[[], float]) -> tenacity.stop.stop_base:
    stops: list[tenacity.stop.stop_base] = []
    if policy.max_attempts is not None:
        stops.append(tenacity.stop_after_attempt(max(1, policy.max_attempts - attempts_before)))
    if policy.max_elapsed is not None:
        stops.append(_StopAfterElapsed(policy.max_elapsed, elapsed))
    return tenacity.stop_any(*stops) if stops else tenacity.stop_never


def _retry_after(retry_state: tenacity.RetryCallState) -> float | None:
    error = retry_state.outcome.exception() if retry_state.outcome is not None else None
    return error.retry_after if isinstance(error, ServiceUnavailable) else None


async def _told(on_wait: OnWait | None, number: int, delay: float, error: BaseException | None) -> None:
    result = on_wait(number, delay, error) if on_wait is not None else None
    if result is not None:
        await result


OnWait = Callable[[int, float, BaseException | None], Awaitable[None] | None]


async def reconnect_attempts(
    policy: RetryPolicy,
    *,
    clock: Clock,
    sleep: Callable[[float], Awaitable[None]],
    started_at: float,
    attempts_before: int = 0,
    backoff_from: int = 0,
    rng: random.Random | None = None,
    on_wait: OnWait | None = None,
    attempt_fn: Callable[[Attempt], Awaitable[Any]],
) -> Any:
    """Run ``attempt_fn`` until it succeeds under ``policy``, and return what it returned.

    Args:
        clock: Measures how long the outage has lasted (``max_elapsed``, ``suspend_after``).
        sleep: Waits between attempts (the supervisor's, interruptible by the app).
        started_at: ``clock.monotonic()`` when the outage began.
        attempts_before: Attempts this outage already made (a link that dropped again during its
            recovery): the numbering (1, 2, ... within the outage) and ``max_attempts`` go on.
        backoff_from: Backoff steps carried over from a connection that lived shorter than
            ``policy.reset_after``: the delays go on from there (the numbering does not).
        on_wait: Called before each wait with ``(attempt, delay, last_error)``.

    Raises:
        BaseException: The last error when it is not worth retrying or the policy is exhausted.
    """

    def elapsed() -> float:
        return clock.monotonic() - started_at

    steps = backoff_from + attempts_before
    last: list[BaseException | None] = [None]

    async def before_sleep(retry_state: tenacity.RetryCallState) -> None:
        last[0] = retry_state.outcome.exception() if retry_state.outcome is not None else None
        await _told(on_wait, attempts_before + retry_state.attempt_number + 1, retry_state.upcoming_sleep, last[0])

    retrying = tenacity.AsyncRetrying(
        sleep=sleep,
        retry=tenacity.retry_if_exception(is_retryable),
        wait=_backoff(policy, steps_before=steps, elapsed=elapsed, rng=rng, asked=_retry_after),
        stop=_stop(policy, attempts_before=attempts_before, elapsed=elapsed),
        before_sleep=before_sleep,
        reraise=True,
    )
    # The first attempt goes at once (or after first_attempt_delay), unless the backoff is further along.
    first = policy.delay(steps + 1, elapsed=elapsed(), rng=rng)
    await _told(on_wait, attempts_before + 1, first, None)
    if first > 0:
        await sleep(first)
    async for attempt in retrying:
        with attempt:
            number = attempts_before + attempt.retry_state.attempt_number
            return await attempt_fn(Attempt(number, attempt.retry_state.upcoming_sleep, last[0]))
    raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover
