"""The pytest plugin: ``pytest --acp-agent TARGET`` runs the conformance checks as test items.

Installed with the package (entry point ``pytest11``) and inert unless ``--acp-agent`` is given.
Then one item per check (``acp-check::<id>``) is added to the session: a ``fail`` fails the item
with the rule and the wire excerpt, a ``skip`` skips it with the reason, a ``warn`` passes with a
warning. The usual selection works (``-k status``, ``--deselect``). Options mirror the CLI:
``--acp-protocol-version``, ``--acp-restart-cmd``, ``--acp-timeout``, ``--acp-cancel-prompt``,
``--acp-prompt``, ``--acp-tool-prompt``. An agent author's CI needs one line::

    pytest -p acp_client.check.pytest_plugin --acp-agent "stdio:my-agent --acp"

(``-p`` is only needed where plugin autoloading is off). A target that cannot be reached or
initialized fails every item with that one message.
"""

from __future__ import annotations

import asyncio
import tempfile
import warnings
from typing import Any

import pytest

__all__ = ["AcpCheckItem", "AcpCheckWarning"]


class AcpCheckWarning(UserWarning):
    """A conformance check ended with ``warn``."""


class AcpCheckFailure(Exception):
    """A conformance check ended with ``fail``."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("acp-check", "ACP recovery conformance checks (acp-reconnect check)")
    group.addoption("--acp-agent", metavar="TARGET", help="run the conformance checks against TARGET")
    group.addoption("--acp-protocol-version", type=int, choices=(1, 2), default=1, help="version to propose")
    group.addoption("--acp-restart-cmd", metavar="CMD", help="network targets: a command that restarts the agent")
    group.addoption("--acp-timeout", type=float, default=10.0, metavar="S", help="seconds per answer or turn")
    group.addoption("--acp-prompt", default="hello", metavar="TEXT", help="the prompt of an ordinary turn")
    group.addoption("--acp-cancel-prompt", default=None, metavar="TEXT", help="a prompt long enough to cancel")
    group.addoption("--acp-tool-prompt", default=None, metavar="TEXT", help="a prompt that makes the agent call a tool")


class _State:
    """The run's settings and the preflight handshake (done once, on the first item)."""

    def __init__(self, config: pytest.Config) -> None:
        from . import Settings, Target

        cancel = config.getoption("acp_cancel_prompt")
        self.cwd = tempfile.TemporaryDirectory(prefix="acp-check-")
        extra: dict[str, Any] = {"cancel_prompt": cancel} if cancel else {}
        self.settings = Settings(
            Target(config.getoption("acp_agent"), restart_cmd=config.getoption("acp_restart_cmd")),
            protocol_version=config.getoption("acp_protocol_version"),
            cwd=self.cwd.name,
            timeout=config.getoption("acp_timeout"),
            prompt=config.getoption("acp_prompt"),
            tool_prompt=config.getoption("acp_tool_prompt"),
            **extra,
        )
        self.handshake: Any = None
        self.error: str | None = None

    def handshake_or_fail(self) -> Any:
        from . import TargetError, preflight

        if self.handshake is None and self.error is None:
            try:
                self.handshake = asyncio.run(preflight(self.settings))
            except TargetError as exc:
                self.error = f"cannot check {exc}"
        if self.error is not None:
            raise AcpCheckFailure(self.error)
        return self.handshake


_STATE_KEY = pytest.StashKey[_State]()


class _AcpChecks(pytest.Collector):
    """The parent of the check items (their node ids are ``acp-check::<id>``)."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        return []


class AcpCheckItem(pytest.Item):
    """One conformance check as a test item."""

    def __init__(self, *, check: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        from . import run_check

        state = self.config.stash[_STATE_KEY]
        handshake = state.handshake_or_fail()
        result = asyncio.run(run_check(state.settings, handshake, self.check))
        self.user_properties.append(("evidence", result.evidence))
        if result.status == "fail":
            raise AcpCheckFailure(
                f"{result.id}: {result.finding}\nrule ({result.source}): {result.rule}\n{result.evidence}"
            )
        if result.status == "skip":
            pytest.skip(result.finding)
        if result.status == "warn":
            warnings.warn(AcpCheckWarning(f"{result.id}: {result.finding}"), stacklevel=1)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, AcpCheckFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "acp-check", None, f"ACP conformance check {self.name}"


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("acp_agent", default=None):
        config.stash[_STATE_KEY] = _State(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE_KEY, None)
    if state is not None:
        state.cwd.cleanup()


@pytest.hookimpl(tryfirst=True)  # before pytest's own -k / -m / --deselect filtering, which then applies to ours
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if _STATE_KEY not in config.stash:
        return
    from . import CHECKS

    group = _AcpChecks.from_parent(session, name="acp-check", nodeid="acp-check")
    items.extend(
        AcpCheckItem.from_parent(group, name=check.id, nodeid=f"acp-check::{check.id}", check=check) for check in CHECKS
    )
