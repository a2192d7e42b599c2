"""Helpers of the checker's tests: run the checker against an in-process reference server, or a stdio one."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

from acp_client.check import Report, Settings, Target, run_checks, select
from acp_client.testing import ReferenceAgent, ReferenceServer
from acp_client.testing.reference_agent import SessionStore

__all__ = ["ALL_IDS", "reference_stdio", "run_on_server", "serving", "statuses"]

#: Every check id, in order.
ALL_IDS = [check.id for check in select()]
#: The reference agent's prompt whose turn lasts until cancelled.
SLOW = "/slow"


def reference_stdio(store: Path, *faults: str) -> str:
    """The ``stdio:`` target of a reference agent process keeping its sessions in ``store``."""
    argv = [sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio", "--store", str(store)]
    for fault in faults:
        argv += ["--fault", fault]
    return "stdio:" + shlex.join(argv)


@contextlib.asynccontextmanager
async def serving(faults: Iterable[str] = (), *, store: Path | None = None) -> AsyncIterator[ReferenceServer]:
    """An in-process reference server (WebSocket + Streamable HTTP) with ``faults``."""
    agent = ReferenceAgent(faults=faults, store=SessionStore(store) if store is not None else None)
    async with ReferenceServer(agent) as server:
        yield server


async def run_on_server(
    server: ReferenceServer,
    kind: str,
    tmp_path: Path,
    *,
    version: int = 1,
    timeout: float = 3.0,
    only: Iterable[str] = (),
) -> Report:
    """The checker against ``server`` over ``kind`` (``ws`` or ``http``), restarting it in process."""
    url = server.ws_url if kind == "ws" else server.http_url
    settings = Settings(
        Target(url, restart=server.restart),
        protocol_version=version,
        cwd=str(tmp_path),
        timeout=timeout,
        cancel_prompt=SLOW,
    )
    return await run_checks(settings, select(only))


def statuses(report: Report) -> dict[str, str]:
    """``{check id: status}``."""
    return {check.id: check.status for check in report.checks}
