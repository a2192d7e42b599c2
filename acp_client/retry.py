"""The reconnect retry policy: plain knobs outside, tenacity inside.

:class:`RetryPolicy` is a frozen value the app configures. The supervisor turns it into a
``tenacity.AsyncRetrying`` controller with :func:`reconnect_attempts`, giving it the client's clock
(so a fake clock drives the delays in tests) and an interruptible sleep (so
``notify_network_available()`` can skip the current wait). No tenacity type leaves this module.

Delays use exponential backoff with *full jitter*: attempt ``n`` waits a uniformly random time in
``[0, min(max_delay, initial_delay * multiplier ** (n - 1))]`` (or exactly that ceiling when
``jitter`` is off). A server's ``Retry-After`` (429/503) raises the wait to at least what it asked,
capped by ``max_retry_after``.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import tenacity

from ._checks import check_count, check_flag, check_number, check_seconds, field_check
from .clock import Clock
from .exceptions import (
    AuthenticationFailed,
    ConfigurationError,
    ConnectError,
    HttpStatusError,
    IncompatibleProtocolVersion,
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
        max_elapsed: Give up after this long down, in seconds (``None``: never).
        reset_after: A connection must stay up this long before the next outage starts its
            backoff from the beginning again; a shorter-lived one continues the old backoff.
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
        try:
            ceiling = self.initial_delay * self.multiplier ** (attempt - 2)
        except OverflowError:
            return self.max_delay
        return min(self.max_delay, ceiling)

    def delay(
        self,
        attempt: int,
        *,
        elapsed: float = 0.0,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """The wait before ``attempt``, in seconds.

        Args:
            attempt: 1-based attempt number within the outage (including carried-over backoff).
            elapsed: Seconds since the outage began (selects the suspended cadence).
            retry_after: The server's ``Retry-After`` from the last failure, if any.
            rng: The random source for jitter (a seeded one makes tests repeatable).
        """
        if self.suspend_after is not None and elapsed >= self.suspend_after and attempt > 1:
            ceiling = self.suspended_delay
        else:
            ceiling = self.ceiling(attempt)
        wait = (rng or random).uniform(0.0, ceiling) if self.jitter and attempt > 1 else ceiling
        if retry_after is not None and retry_after > wait:
            wait = min(retry_after, self.max_retry_after)
        return wait

    def gives_up(self, failed_attempts: int, elapsed: float) -> bool:
        """Whether the policy is exhausted after ``failed_attempts`` failures, ``elapsed`` s down."""
        if self.max_attempts is not None and failed_attempts >= self.max_attempts:
            return True
        return self.max_elapsed is not None and elapsed >= self.max_elapsed


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
        return error.status >= 500 or error.status in (404, 408, 425, 429)
    return isinstance(error, ConnectError | TransportError | RequestTimeout | RpcError)


@attrs.define
class Attempt:
    """One reconnect attempt handed out by :func:`reconnect_attempts`."""

    number: int
    delay: float
    last_error: BaseException | None


async def reconnect_attempts(
    policy: RetryPolicy,
    *,
    clock: Clock,
    sleep: Callable[[float], Awaitable[None]],
    started_at: float,
    carried_attempts: int = 0,
    rng: random.Random | None = None,
    on_wait: Callable[[int, float, BaseException | None], Awaitable[None] | None] | None = None,
    attempt_fn: Callable[[Attempt], Awaitable[Any]],
) -> Any:
    """Run ``attempt_fn`` until it succeeds, under ``policy``, driven by tenacity.

    Args:
        policy: The knobs.
        clock: Measures elapsed time (tenacity's own timing reads the real clock, so it is
            never used for stop decisions here).
        sleep: Waits between attempts (interruptible by the supervisor).
        started_at: ``clock.monotonic()`` when the outage began.
        carried_attempts: Backoff carried over from a connection that did not stay up for
            ``policy.reset_after``.
        rng: Random source for jitter.
        on_wait: Called before each wait with ``(attempt, delay, last_error)``.
        attempt_fn: Makes one attempt; raise to fail it.

    Returns:
        What the successful ``attempt_fn`` returned.

    Raises:
        BaseException: The last error when it is fatal or the policy is exhausted.
    """
    state: dict[str, BaseException | None] = {"last": None}

    def wait(retry_state: tenacity.RetryCallState) -> float:
        error = retry_state.outcome.exception() if retry_state.outcome is not None else None
        retry_after = error.retry_after if isinstance(error, ServiceUnavailable) else None
        number = retry_state.attempt_number + 1 + carried_attempts
        return policy.delay(number, elapsed=clock.monotonic() - started_at, retry_after=retry_after, rng=rng)

    def stop(retry_state: tenacity.RetryCallState) -> bool:
        return policy.gives_up(retry_state.attempt_number + carried_attempts, clock.monotonic() - started_at)

    async def before_sleep(retry_state: tenacity.RetryCallState) -> None:
        error = retry_state.outcome.exception() if retry_state.outcome is not None else None
        state["last"] = error
        if on_wait is not None:
            result = on_wait(retry_state.attempt_number + 1 + carried_attempts, retry_state.upcoming_sleep, error)
            if result is not None:
                await result

    retrying = tenacity.AsyncRetrying(
        sleep=sleep,
        wait=wait,
        stop=stop,
        retry=tenacity.retry_if_exception(is_retryable),
        before_sleep=before_sleep,
        reraise=True,
    )
    first_delay = policy.delay(1 + carried_attempts, elapsed=0.0, rng=rng) if carried_attempts else policy.delay(1)
    if on_wait is not None:
        result = on_wait(1 + carried_attempts, first_delay, None)
        if result is not None:
            await result
    if first_delay > 0:
        await sleep(first_delay)
    async for attempt in retrying:
        with attempt:
            number = attempt.retry_state.attempt_number + carried_attempts
            return await attempt_fn(Attempt(number, attempt.retry_state.upcoming_sleep, state["last"]))
    raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover
