"""Running the checks: a preflight ``initialize``, then each check on its own, bounded in time.

The preflight's agent is kept as the run's shared link (:mod:`._shared`): the checks that need no
isolation run on it one after the other, and the checks that do (a second instance, a link closed
as after a drop, a restart) open fresh links of their own. Each check has its own wire log, so its
evidence shows only its own traffic. An agent that hangs, floods, sends garbage or exits during a
check fails that check, with the wire excerpt as evidence, and the shared link is retired: the
next check starts from a fresh agent. A check is bounded by :func:`check_budget`; whatever it
started is ended when it ends, however it ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from .._util._logging import get_logger
from ._context import CheckContext, Settings, Skip, Verdict
from ._link import CheckFailed
from ._protocol import Handshake
from ._registry import CHECKS, Check
from ._report import CheckResult, Report
from ._shared import Inconclusive, RunState
from ._target import AgentHost, TargetError

logger = get_logger(__name__)

#: How long ending a check's agents may take (the stdio transport's TERM-then-KILL included).
_CLOSE_LIMIT = 15.0


def check_budget(settings: Settings) -> float:
    """The most one check may take: a few answers, a couple of turns, a restart."""
    return settings.timeout * 8 + 10.0


def select(only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[Check]:
    """The checks to run, in their order.

    Raises:
        TargetError: An id that is not a check's.
    """
    known = {check.id for check in CHECKS}
    only, skip = list(only), list(skip)
    unknown = [name for name in (*only, *skip) if name not in known]
    if unknown:
        raise TargetError(
            f"unknown check id {', '.join(map(repr, unknown))}; the checks are: {', '.join(sorted(known))}"
        )
    return [check for check in CHECKS if (not only or check.id in only) and check.id not in skip]


async def _start(settings: Settings) -> tuple[RunState, Handshake]:
    settings.target.validate()
    run = RunState(settings.target, timeout=settings.timeout, proposed=settings.protocol_version)
    try:
        return run, await run.start()
    except CheckFailed as exc:
        lines = "\n".join("  " + line for line in run.preflight_log.excerpt(head=3, tail=3))
        await run.aclose()
        finding = exc.finding.removeprefix("cannot check: ")
        raise TargetError(f"{settings.target.spec}: {finding}" + (f"\n{lines}" if lines else "")) from None
    except BaseException:
        await run.aclose()
        raise


async def preflight(settings: Settings) -> Handshake:
    """Reach the agent and initialize once: what every check starts from.

    Raises:
        TargetError: The target is malformed, unreachable, or does not initialize.
    """
    run, handshake = await _start(settings)
    await run.aclose()
    return handshake


async def run_check(
    settings: Settings, handshake: Handshake, check: Check, *, run: RunState | None = None
) -> CheckResult:
    """Run one check in isolation; never raises (a checker bug becomes a ``fail`` that says so).

    Args:
        handshake: What the preflight found.
        run: What the run's checks share (its shared link, its scenarios); ``None``: the check gets
            its own, ended with it.
    """
    own = run is None
    state = run if run is not None else RunState(settings.target, timeout=settings.timeout, proposed=handshake.version)
    ctx = CheckContext(settings, handshake, state)
    began = time.monotonic()
    budget = check_budget(settings)
    inconclusive = False
    try:
        verdict = await asyncio.wait_for(check.run(ctx), budget)
    except Skip as exc:
        verdict = Verdict("skip", str(exc))
    except Inconclusive as exc:
        verdict = Verdict("skip", exc.finding, tuple(ctx.log.excerpt()))
        inconclusive = True
    except CheckFailed as exc:
        verdict = Verdict("fail", exc.finding, tuple(ctx.log.excerpt()))
    except asyncio.TimeoutError:
        verdict = Verdict("fail", f"the check did not finish within {budget:g} s", tuple(ctx.log.excerpt()))
    except Exception as exc:
        logger.debug("check %s raised", check.id, exc_info=True)
        verdict = Verdict("fail", f"the check could not run: {type(exc).__name__}: {exc}", tuple(ctx.log.excerpt()))
    finally:
        await _close(ctx.host)
    if own:
        await state.aclose()
    elif ctx.used_shared and (inconclusive or verdict.status == "fail"):
        # Whatever went wrong may still be going on (a turn that ignores its cancel, a flood): the
        # next check gets a fresh agent.
        await state.retire()
    if not settings.verbose and verdict.status == "pass":
        verdict = Verdict(verdict.status, verdict.finding, verdict.lines[:8])
    return CheckResult(check.id, verdict.status, check.rule, check.source, verdict.evidence, time.monotonic() - began)


async def run_checks(
    settings: Settings, checks: Iterable[Check] | None = None, *, on_result: Callable[[CheckResult], None] | None = None
) -> Report:
    """Run ``checks`` (default: all) against ``settings.target``.

    Raises:
        TargetError: The target could not be reached or initialized.
    """
    began = time.monotonic()
    run, handshake = await _start(settings)
    results: list[CheckResult] = []
    try:
        for check in CHECKS if checks is None else checks:
            result = await run_check(settings, handshake, check, run=run)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        await run.aclose()
    return Report(
        settings.target.spec,
        handshake.version,
        handshake.agent,
        handshake.capabilities,
        tuple(results),
        seconds=time.monotonic() - began,
    )


async def _close(host: AgentHost) -> None:
    try:
        await asyncio.wait_for(host.aclose(), _CLOSE_LIMIT)
    except asyncio.TimeoutError:
        logger.warning("ending the agent of a check took longer than %g s: killing it", _CLOSE_LIMIT)
        host.kill()
