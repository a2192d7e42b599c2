"""One helper for every background task, with one crash policy (``acp_client._util._tasks``)."""

from __future__ import annotations

import asyncio

from acp_client._util._tasks import TaskSet


class Boom(Exception):
    pass


async def test_a_task_that_dies_of_a_bug_is_handed_to_the_owner() -> None:
    crashes: list[BaseException] = []
    tasks = TaskSet("a test", crashes.append)

    async def die() -> None:
        raise Boom("bug")

    await asyncio.gather(tasks.spawn(die()), return_exceptions=True)
    assert [type(error) for error in crashes] == [Boom]
    assert len(tasks._tasks) == 0  # not kept once ended


async def test_cancelling_is_not_a_crash_and_aclose_waits_for_every_task() -> None:
    crashes: list[BaseException] = []
    tasks = TaskSet("a test", crashes.append)
    never = asyncio.Event()
    waiting = [tasks.spawn(never.wait()) for _ in range(3)]
    done = tasks.spawn(asyncio.sleep(0))
    await done
    assert len(tasks._tasks) == 3
    await tasks.aclose()
    assert all(task.cancelled() for task in waiting)
    assert crashes == [] and len(tasks._tasks) == 0


async def test_aclose_from_inside_a_task_spares_that_task() -> None:
    tasks = TaskSet("a test", lambda error: None)
    other = tasks.spawn(asyncio.Event().wait())

    async def closer() -> str:
        await tasks.aclose()
        return "finished"

    assert await tasks.spawn(closer()) == "finished"
    assert other.cancelled()
