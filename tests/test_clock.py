"""The deadline primitive (``acp_client.clock``): expiry, cancellation from outside versus the
deadline, nesting, moving the deadline, zero and negative limits — on the fake clock (no real
waiting), and once on the real one. Plus the rule that keeps every wait of the core on it."""

from __future__ import annotations

import ast
import asyncio
import pathlib

import pytest

from acp_client.clock import Deadline, SystemClock, fail_after, fail_at, move_on_after, move_on_at
from acp_client.testing import FakeClock
from tests._support import within


async def _forever() -> None:
    await asyncio.get_running_loop().create_future()


async def test_move_on_after_cancels_the_body_when_the_fake_time_passes() -> None:
    clock = FakeClock()
    reached: list[str] = []

    async def body() -> bool:
        with move_on_after(clock, 5.0) as scope:
            try:
                await _forever()
            finally:
                reached.append("finally")
        reached.append("after")
        return scope.expired

    task = asyncio.ensure_future(body())
    await clock.advance(4.9)
    assert not task.done() and reached == []
    await clock.advance(0.1)
    assert await within(task) is True
    assert reached == ["finally", "after"]
    assert clock.pending_timers == 0


async def test_a_body_that_finishes_in_time_is_left_alone() -> None:
    clock = FakeClock()
    with move_on_after(clock, 5.0) as scope:
        await clock.sleep(0)
    assert not scope.expired
    assert clock.pending_timers == 0  # the timer went with the scope
    assert scope.remaining() == 5.0


async def test_fail_after_raises_timeout_error_chained_to_the_cancellation() -> None:
    clock = FakeClock()

    async def body() -> None:
        with fail_after(clock, 1.0):
            await _forever()

    with pytest.raises(TimeoutError) as caught:
        await clock.run(body())
    assert isinstance(caught.value.__cause__, asyncio.CancelledError)
    assert clock.monotonic() == 1.0


async def test_fail_after_raises_the_error_it_was_given() -> None:
    clock = FakeClock()

    class Late(Exception):
        pass

    async def body() -> None:
        with fail_after(clock, 1.0, error=lambda: Late("too slow")):
            await _forever()

    with pytest.raises(Late, match="too slow"):
        await clock.run(body())


async def test_a_cancellation_from_outside_is_never_taken_for_the_deadline() -> None:
    clock = FakeClock()
    scopes: list[Deadline] = []

    async def body() -> None:
        with move_on_after(clock, 10.0) as scope:
            scopes.append(scope)
            await _forever()

    task = asyncio.ensure_future(body())
    await clock.advance(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not scopes[0].expired
    assert clock.pending_timers == 0


async def test_an_outside_cancellation_at_the_moment_of_expiry_still_propagates() -> None:
    clock = FakeClock()
    scopes: list[Deadline] = []

    async def body() -> None:
        with move_on_after(clock, 10.0) as scope:
            scopes.append(scope)
            await _forever()

    task = asyncio.ensure_future(body())
    await clock.settle()
    scopes[0].deadline = clock.monotonic()  # due now: expires before the task runs again
    task.cancel()  # ... and the app cancels it in the same moment
    with pytest.raises(asyncio.CancelledError):
        await task
    assert scopes[0].expired


async def test_the_body_keeps_running_cleanup_after_expiry() -> None:
    clock = FakeClock()
    cleaned: list[float] = []

    async def body() -> None:
        with move_on_after(clock, 1.0):
            try:
                await _forever()
            finally:
                await asyncio.sleep(0)  # cleanup may still await
                cleaned.append(clock.monotonic())

    await clock.run(body())
    assert cleaned == [1.0]


async def test_nested_scopes_the_inner_expires_first() -> None:
    clock = FakeClock()

    async def body() -> tuple[bool, bool, float]:
        with move_on_after(clock, 10.0) as outer:
            with move_on_after(clock, 1.0) as inner:
                await _forever()
            at = clock.monotonic()
        return inner.expired, outer.expired, at

    assert await clock.run(body()) == (True, False, 1.0)


async def test_nested_scopes_the_outer_expires_first_and_catches() -> None:
    clock = FakeClock()
    inner_scope: list[Deadline] = []

    async def body() -> bool:
        with move_on_after(clock, 1.0) as outer:
            with move_on_after(clock, 10.0) as inner:
                inner_scope.append(inner)
                await _forever()
            raise AssertionError("the outer scope's cancellation went through the inner one")
        return outer.expired

    assert await clock.run(body()) is True
    assert not inner_scope[0].expired


async def test_nested_scopes_expiring_together_the_outer_one_catches() -> None:
    clock = FakeClock()
    scopes: list[Deadline] = []

    async def body() -> None:
        with move_on_after(clock, 10.0) as outer:
            with move_on_after(clock, 10.0) as inner:
                scopes.extend((outer, inner))
                await _forever()
            raise AssertionError("reached past the inner scope")

    task = asyncio.ensure_future(body())
    await clock.settle()
    for scope in reversed(scopes):  # both due in the same moment, the inner one first
        scope.deadline = clock.monotonic()
    await within(task)
    assert [scope.expired for scope in scopes] == [True, True]


@pytest.mark.parametrize("seconds", [0, 0.0, -1.0, -1e9])
async def test_a_deadline_already_passed_cancels_at_the_first_wait(seconds: float) -> None:
    clock = FakeClock()
    with move_on_after(clock, seconds) as scope:
        await _forever()  # no fake time moves: the scope does not wait for a timer
    assert scope.expired
    assert scope.remaining() == 0.0


async def test_a_body_that_does_not_wait_is_not_cancelled_by_a_passed_deadline() -> None:
    clock = FakeClock()
    with move_on_after(clock, 0) as scope:
        value = 42
    assert value == 42 and not scope.expired
    await asyncio.sleep(0)  # the scheduled expiry went with the scope: nothing is cancelled now


@pytest.mark.parametrize("seconds", [None, float("inf")])
async def test_no_deadline_never_expires(seconds: float | None) -> None:
    clock = FakeClock()
    with move_on_after(clock, seconds) as scope:
        await asyncio.sleep(0)
        assert clock.pending_timers == 0
    assert scope.remaining() is None and not scope.expired


@pytest.mark.parametrize("bad", [float("nan"), True, "5"])
def test_a_deadline_that_is_not_a_number_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="deadline"):
        move_on_after(FakeClock(), bad)  # type: ignore[arg-type]


async def test_the_deadline_can_be_moved_later_and_earlier() -> None:
    clock = FakeClock()
    seen: list[float] = []

    async def body() -> None:
        with move_on_after(clock, 1.0) as scope:
            await clock.sleep(0.5)
            scope.deadline = clock.monotonic() + 5.0  # later
            await clock.sleep(2.0)
            seen.append(clock.monotonic())
            scope.deadline = clock.monotonic() + 0.25  # earlier
            await _forever()
        seen.append(clock.monotonic())

    await clock.run(body())
    assert seen == [2.5, 2.75]
    assert clock.pending_timers == 0


async def test_an_expired_deadline_cannot_be_moved() -> None:
    clock = FakeClock()

    async def body() -> Deadline:
        with move_on_after(clock, 1.0) as inner:
            await _forever()
        return inner

    inner = await clock.run(body())
    with pytest.raises(RuntimeError, match="expired"):
        inner.deadline = 100.0


async def test_move_on_at_and_fail_at_take_a_point_on_the_clock() -> None:
    clock = FakeClock(start=100.0)

    async def moves_on() -> float:
        with move_on_at(clock, 103.0):
            await _forever()
        return clock.monotonic()

    assert await clock.run(moves_on()) == 103.0
    with pytest.raises(TimeoutError):
        await clock.run(_fails_at(clock, 104.0))


async def _fails_at(clock: FakeClock, when: float) -> None:
    with fail_at(clock, when):
        await _forever()


async def test_a_scope_is_entered_once() -> None:
    clock = FakeClock()
    scope = move_on_after(clock, 1.0)
    with scope:
        pass
    with pytest.raises(RuntimeError, match="once"), scope:
        pass


async def test_a_body_that_swallows_the_cancellation_keeps_its_result() -> None:
    clock = FakeClock()

    async def body() -> str:
        with move_on_after(clock, 1.0) as scope:
            try:
                await _forever()
            except asyncio.CancelledError:
                result = "kept"
        assert scope.expired
        await asyncio.sleep(0)  # no cancellation is left pending on the task
        return result

    assert await clock.run(body()) == "kept"


async def test_on_the_real_clock_the_scope_expires_in_real_time() -> None:
    clock = SystemClock()
    started = clock.monotonic()
    with move_on_after(clock, 0.05) as scope:
        await _forever()
    assert scope.expired and clock.monotonic() - started >= 0.04


# -- the rule: every wait of the core goes through the clock -------------------------------------------------

_PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "acp_client"
#: Transports keep what their library needs; the testing kit and the conformance checker (a tool on
#: top of the client that bounds each check against a real agent in real time) are not the core.
_NOT_CORE = ("transports", "testing", "check")


#: The one place that reads the real time: the system clock itself.
_THE_CLOCK = "clock.py"
#: The session stores are blocking code on worker threads (a database's busy timeout, a lost
#: PostgreSQL connection retried): no event loop, so no asyncio clock to take time from.
_BLOCKING = ("store",)


def _core_modules() -> list[pathlib.Path]:
    return sorted(
        path
        for path in _PACKAGE.rglob("*.py")
        if path.relative_to(_PACKAGE).parts[0] not in (*_NOT_CORE, *_BLOCKING)
        and path.relative_to(_PACKAGE).as_posix() != _THE_CLOCK
    )


def _is_asyncio(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and getattr(node.value, "id", None) == "asyncio"


def _real_time_waits(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_asyncio(node, "wait_for"):
            found.append(f"line {node.lineno}: asyncio.wait_for")
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "time":
            target = node.func.value
            if isinstance(target, ast.Call):  # asyncio.get_running_loop().time()
                target = target.func
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
            if "loop" in name:
                found.append(f"line {node.lineno}: {name}.time()")
        if _is_asyncio(node.func, "wait") and any(keyword.arg == "timeout" for keyword in node.keywords):
            found.append(f"line {node.lineno}: asyncio.wait(timeout=...)")
        for name in ("timeout", "timeout_at"):
            if _is_asyncio(node.func, name):
                found.append(f"line {node.lineno}: asyncio.{name}()")
        if _is_asyncio(node.func, "sleep") and not (
            node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0
        ):  # asyncio.sleep(0) yields to the loop; any other sleep is a wait
            found.append(f"line {node.lineno}: asyncio.sleep()")
        if getattr(node.func.value, "id", None) == "time" and node.func.attr in ("monotonic", "time", "sleep"):
            found.append(f"line {node.lineno}: time.{node.func.attr}()")
    return found


def test_no_core_module_waits_on_the_real_clock() -> None:
    modules = _core_modules()
    assert len(modules) > 20  # the walk found the package
    offenders = {
        str(path.relative_to(_PACKAGE)): hits for path in modules if (hits := _real_time_waits(path.read_text()))
    }
    assert offenders == {}, f"use acp_client.clock's deadlines (the Clock seam) instead: {offenders}"


def test_the_rule_catches_each_spelling() -> None:
    source = (
        "import asyncio\n"
        "async def f(loop, x):\n"
        "    await asyncio.wait_for(x, 1)\n"
        "    loop.time()\n"
        "    asyncio.get_running_loop().time()\n"
        "    self._loop.time()\n"
        "    await asyncio.wait({x}, timeout=1)\n"
        "    async with asyncio.timeout(1): pass\n"
        "    await asyncio.sleep(0.5)\n"
        "    await asyncio.sleep(0)\n"
        "    time.monotonic()\n"
        "    time.sleep(1)\n"
    )
    assert len(_real_time_waits(source)) == 9
