"""A recovery conformance checker for ACP agent authors: ``acp-reconnect check TARGET``.

Recovery is only as good as the agent's side of the contract. The checker drives an agent with the
client's own transports and codec (never through the recovery layer, which would hide what the
agent answers) and checks, one isolated and time-bounded check at a time, what recovery depends
on: advertised capabilities that work, fresh session ids, ``session/status`` (unknown ids, no side
effects, cheap, after a restart), ``session/load`` / ``session/resume`` (unknown ids, a replay
exactly once with stable message ids, no replay on a plain resume), cancel, unanswered
notifications, timestamps with a zone, the ``Session`` object's shape, and the Streamable HTTP
session header. See ``docs/conformance.md``.

From Python::

    from acp_client.check import Settings, Target, run_checks

    report = asyncio.run(run_checks(Settings(Target("stdio:my-agent --acp"), cwd="/tmp/x")))
    print(report.dumps())

The pytest plugin (:mod:`acp_client.check.pytest_plugin`) runs the same checks as test items.
"""

from ._context import Settings, Status
from ._registry import CHECKS, Check, check_ids
from ._report import CheckResult, Report
from ._runner import preflight, run_check, run_checks, select
from ._target import Target, TargetError

__all__ = [
    "CHECKS",
    "Check",
    "CheckResult",
    "Report",
    "Settings",
    "Status",
    "Target",
    "TargetError",
    "check_ids",
    "preflight",
    "run_check",
    "run_checks",
    "select",
]
