"""The rules the suite keeps about itself (``tests/README.md``), checked by reading its source, so
that they stay kept: no fixed sleep as synchronization, no test module importing another."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support import eventually

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

#: The modules whose ``sleep`` waits real time.
_SLEEPERS = {"asyncio", "time", "trio", "anyio"}

#: The real sleeps the suite keeps, each part of a scenario (``path``, the enclosing function, or
#: ``*`` for the whole module) and why. Everything else waits for an event, with ``eventually``, or
#: on a ``FakeClock``.
ALLOWED_SLEEPS = {
    ("tests/_support.py", "eventually"): "the one poll loop",
    ("tests/_support.py", "eventually_blocking"): "the one poll loop, for plain threads",
    ("tests/check/hostile_agent.py", "main"): "an agent told to be slow to start",
    ("tests/check/restart_server.py", "main"): "a script run by a checker, with no test helpers at hand",
    ("tests/e2e/_owner_process.py", "main"): "a replica's pace between its turns (it prompts in a loop until killed)",
    ("tests/e2e/test_ownership_processes.py", "test_a_killed_replicas_sessions_are_adopted_once_within_the_lease"): (
        "one more real lease in real processes: nobody adopts a session a second time"
    ),
    ("tests/e2e/_chaos_replica.py", "main"): "a replica's pace between its rounds of turns (until its stdin closes)",
    ("tests/e2e/test_ownership_chaos.py", "one_round"): "the chaos itself: a replica stopped for 2.5 real leases",
    ("tests/e2e/_soak.py", "*"): "the soak's own schedule: random gaps, fault lengths, real grace windows",
    ("tests/e2e/test_reference_faults.py", "test_sse_idle_timeout_detects_a_silent_link"): (
        "a real link stays up past its real idle timeout"
    ),
    ("tests/e2e/test_reference_faults.py", "test_callbacks_run_before_queued_requests_are_sent.on_resume"): (
        "a slow app callback"
    ),
    ("tests/interop/test_qwen_daemon.py", "test_a_stream_silent_then_reset"): (
        "a socket that stays silent for a while before it is reset: the scenario"
    ),
    ("tests/peers/deepagents_acp_agent.py", "EchoChatModel._astream"): "an agent told to stream slowly",
    ("tests/peers/_fake_model.py", "FakeModelHandler._pace"): "a model told to stream slowly",
    ("tests/peers/fast_agent_tools.py", "wait"): "a tool that waits as asked",
    ("tests/peers/pydantic_acp_agent.py", "build_model.stream_function"): "a model told to stream slowly",
    ("tests/peers/python_sdk.py", "_ServerProcess._wait_ready"): (
        "a peer server starting; fails with its log (PeerStartError)"
    ),
    ("tests/peers/python_sdk.py", "_bind_loopback"): "a port another process still holds",
    ("tests/store/_worker.py", "hold"): "another process holding the store's lock this long",
    ("tests/test_delivery.py", "test_the_dispatcher_runs_sync_inline_and_awaits_async_in_order.slow"): (
        "the first callback is the slower one: the order must hold anyway"
    ),
    ("tests/transports/stdio_agents/echo_agent.py", "*"): "an agent told to hang",
}


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _sleeps(path: Path) -> Iterator[tuple[str, int, str]]:
    """``(enclosing function, line, call)`` for every real sleep of a non-zero time in ``path``."""
    tree = _tree(path)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in _SLEEPERS
        for alias in node.names
        if alias.name == "sleep"
    }

    def visit(node: ast.AST, scope: tuple[str, ...]) -> Iterator[tuple[str, int, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from visit(child, (*scope, child.name))
                continue
            if isinstance(child, ast.Call) and _is_sleep(child.func, imported):
                arg = child.args[0] if child.args else None
                if not (isinstance(arg, ast.Constant) and arg.value == 0):  # sleep(0): one loop turn
                    yield ".".join(scope) or "<module>", child.lineno, ast.unparse(child)
            yield from visit(child, scope)

    yield from visit(tree, ())


def _is_sleep(func: ast.expr, imported: set[str]) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "sleep" and isinstance(func.value, ast.Name) and func.value.id in _SLEEPERS
    return isinstance(func, ast.Name) and func.id in imported


def _suite() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_fixed_sleep_outside_the_allowed_scenarios() -> None:
    found: list[str] = []
    used: set[tuple[str, str]] = set()
    for path in _suite():
        name = path.relative_to(ROOT).as_posix()
        for scope, line, call in _sleeps(path):
            key = next((k for k in ((name, scope), (name, "*")) if k in ALLOWED_SLEEPS), None)
            if key is None:
                found.append(f"{name}:{line} in {scope}: {call}")
            else:
                used.add(key)
    assert not found, (
        "fixed sleeps (wait for an event, use tests._support.eventually, or run a FakeClock; a sleep that is "
        "part of the scenario goes in ALLOWED_SLEEPS with why):\n" + "\n".join(found)
    )
    assert set(ALLOWED_SLEEPS) <= used, f"allowed sleeps that are gone: {sorted(set(ALLOWED_SLEEPS) - used)}"


def test_the_scan_sees_every_spelling_of_a_sleep(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "import asyncio, time\n"
        "from anyio import sleep as nap\n"
        "async def f():\n"
        "    await asyncio.sleep(0)\n"
        "    await asyncio.sleep(0.1)\n"
        "    class C:\n"
        "        def g(self):\n"
        "            time.sleep(delay)\n"
        "    await nap(1)\n",
        encoding="utf-8",
    )
    assert [(scope, line) for scope, line, _ in _sleeps(source)] == [("f", 5), ("f.C.g", 8), ("f", 9)]


def _imported_modules(path: Path) -> Iterator[str]:
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, node.module)) if node.module else ".".join(base)
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def test_no_test_module_imports_another() -> None:
    found = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in _suite()
        for module in _imported_modules(path)
        if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert not found, "shared helpers go in a tests/_*.py module:\n" + "\n".join(found)


async def test_eventually_polls_as_often_as_asked() -> None:
    calls: list[int] = []
    assert await eventually(lambda: calls.append(1) or len(calls) >= 3, every=0.001) is True
    with pytest.raises(AssertionError, match="waiting for the thing; seen 2"):
        await eventually(lambda: False, 0.01, every=0.001, what=lambda: f"the thing; seen {len(calls) - 1}")


#: A client's privates: what ``acp_client.testing.inside`` is for (and what it offers: ``crash`` for a bug).
_REACH_IN = re.compile(
    r"\bclient\._[a-z]"  # client._engine, h.client._table, ...
    r"|(?<!acp_client)(?<!pool)(?<!_engine)(?<!_sessions)(?<!_link)\._(engine|supervisor|table|links)\b"
    r"|inside\([^()]*\)(\.\w+)*\._[a-z]"  # inside(client).supervisor._crashed
)


def test_no_test_reaches_into_a_client() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _suite()
        if path.name != "test_support.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _REACH_IN.search(line)
    ]
    assert not found, "use acp_client.testing.inside(client), or give it the seam you need:\n" + "\n".join(found)
