"""Every code block in README.md and docs/*.md is run or checked by a test.

Each block is found by its file and first line, and must have exactly one check registered below
(:func:`test_every_block_has_a_check` fails for a new block without one, and for a check whose
block is gone):

* Python blocks run: whole programs in a subprocess against a live reference agent (the URL in the
  block is replaced by the agent's), fragments inside an ``async def`` with the names they assume,
  tests as tests. A block some other test already runs names that test (``covered_by``).
* Shell blocks are checked command by command: ``pip install`` extras exist in ``pyproject.toml``;
  ``python examples/X.py ...`` and ``python -m acp_client.testing.reference_agent ...`` arguments
  are accepted by that program's own parser; anything unknown fails.
* Configuration blocks (TOML, HAProxy) match what the repository really uses.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import importlib
import inspect
import io
import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomllib

from acp_client.testing import ReferenceAgent, ReferenceServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
TIMEOUT = 60.0


@attrs.frozen
class Block:
    path: str
    line: int
    lang: str
    body: str

    @property
    def key(self) -> tuple[str, str]:
        """The file and the first line that is not an import (blocks often begin alike)."""
        lines = [line.strip() for line in self.body.splitlines() if line.strip()]
        first = next((line for line in lines if not line.startswith(("import ", "from "))), lines[0] if lines else "")
        return self.path, first


def all_blocks() -> list[Block]:
    found = []
    for file in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = file.read_text(encoding="utf-8")
        for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            line = text[: match.start()].count("\n") + 1
            found.append(Block(str(file.relative_to(ROOT)), line, match.group(1), match.group(2)))
    return found


Check = Callable[[Block, Path], Awaitable[None]]
CHECKS: dict[tuple[str, str], Check] = {}


def check(path: str, first_line: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        assert (path, first_line) not in CHECKS, f"two checks for {path}: {first_line}"
        CHECKS[(path, first_line)] = fn
        return fn

    return register


def block_for(key: tuple[str, str]) -> Block:
    matches = [block for block in all_blocks() if block.key == key]
    assert len(matches) == 1, f"{key}: {len(matches)} blocks"
    return matches[0]


def test_every_block_has_a_check() -> None:
    blocks = all_blocks()
    missing = [f"{b.path}:{b.line} [{b.lang}] {b.key[1]!r}" for b in blocks if b.key not in CHECKS]
    assert not missing, "blocks no test runs or checks (register one in tests/test_doc_blocks.py):\n" + "\n".join(
        missing
    )
    unlabeled = [f"{b.path}:{b.line}" for b in blocks if not b.lang]
    assert not unlabeled, f"code blocks without a language: {unlabeled}"
    stale = sorted(set(CHECKS) - {block.key for block in blocks})
    assert not stale, f"checks whose block is gone: {stale}"


def _public_names() -> set[str]:
    """Every name the package's public modules export (what a block must import to use)."""
    names: set[str] = set()
    for module_name in (
        "acp_client",
        "acp_client.sync",
        "acp_client.types",
        "acp_client.testing",
        "acp_client.store",
        "acp_client.transports",
        "acp_client.config",
        "acp_client.state",
        "acp_client.handlers",
    ):
        module = importlib.import_module(module_name)
        names.update(getattr(module, "__all__", ()))
    return names


def free_names(source: str) -> set[str]:
    """The names a block reads but never binds (imports, assignments, definitions, parameters),
    builtins excepted: what it assumes from around it."""
    tree = ast.parse(source)
    bound: set[str] = set(dir(builtins))
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read - bound


def test_every_python_block_imports_what_it_uses() -> None:
    """A block that uses one of our names, or a standard-library module, imports it: a reader
    copies the block, not the test's namespace (docs/reconnect-flows.md used ``Callbacks``
    without importing it, and the test that ran it supplied the name)."""
    ours = _public_names()
    stdlib = set(sys.stdlib_module_names)
    missing = []
    for block in all_blocks():
        if block.lang != "python":
            continue
        unimported = sorted(name for name in free_names(block.body) if name in ours or name in stdlib)
        if unimported:
            missing.append(f"{block.path}:{block.line} uses {', '.join(unimported)} without importing it")
    assert not missing, "\n".join(missing)


# -- every Python block passes mypy --strict ------------------------------------------------------------------

#: What the fragments assume from the app around them, typed: every name a Python block reads without binding it
#: must be here (so a block's own code is checked as strictly as a program).
ASSUMED = {
    "session": "SessionHandle",
    "url": "str",
    "scratch_sessions": "set[str]",
    "view_is_stale": "bool",
    "interrupted": "list[TurnInterrupted]",
    "ask_user": "Callable[[str], Awaitable[bool]]",
    "redraw": "Callable[[list[TranscriptMessage]], None]",
    "render": "Callable[[UpdateEvent], None]",
    "status_bar": "Callable[[str], None]",
    "banner": "Callable[[EventKind, RecoveryOutcome], None]",
    "ask_user_then": "Callable[[Callable[[], object], Callable[[], object]], None]",
    "show_result": "Callable[[str | None], None]",
}
_ASSUMED_IMPORTS = (
    "from collections.abc import Awaitable, Callable\n"
    "from acp_client import RecoveryOutcome, SessionHandle, TranscriptMessage, TurnInterrupted, UpdateEvent\n"
    "from acp_client.sync import EventKind\n"
)


def _awaits_at_top_level(source: str) -> bool:
    """Whether the block is a fragment of an ``async def`` (an ``await`` outside any function)."""
    tree = ast.parse(source)
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if any(isinstance(node, ast.Await | ast.AsyncWith | ast.AsyncFor) for node in ast.walk(statement)):
            return True
    return False


def typed_module(block: Block) -> tuple[str, int]:
    """The block as a module mypy can check, and how many lines were put before the block's first: the names it
    assumes declared with their types, a fragment that awaits wrapped in an ``async def``."""
    free = sorted(free_names(block.body))
    unknown = [name for name in free if name not in ASSUMED]
    assert not unknown, f"{block.path}:{block.line} assumes {unknown}: declare their types in ASSUMED"
    head = (_ASSUMED_IMPORTS + "".join(f"{name}: {ASSUMED[name]}\n" for name in free)) if free else ""
    body = block.body
    if _awaits_at_top_level(body):
        head += "\n\nasync def _fragment() -> None:\n"
        body = textwrap.indent(body, "    ")
    return head + body, head.count("\n")


def test_every_python_block_passes_mypy_strict(tmp_path: Path) -> None:
    """``mypy --strict`` on every Python block of the README and the guides, as a reader would check a copy (one
    run for all: mypy is slow to start; its cache is the suite's)."""
    from tests.peers.typescript_sdk import cache_root

    offsets: dict[str, tuple[Block, int]] = {}
    for index, block in enumerate(b for b in all_blocks() if b.lang == "python"):
        name = f"block_{index}_" + Path(block.path).stem.replace("-", "_")
        source, offset = typed_module(block)
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
        offsets[name] = (block, offset)
    assert len(offsets) >= 20
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.10", "--cache-dir",
         str(cache_root() / "mypy"), "."],
        cwd=tmp_path, env={**os.environ, "MYPYPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert "error:" not in run.stderr, run.stderr
    errors = []
    for line in run.stdout.splitlines():
        match = re.match(r"(\w+)\.py:(\d+): error: (.*)", line)
        if match:
            block, offset = offsets[match[1]]
            errors.append(f"{block.path}:{block.line + int(match[2]) - offset}: {match[3]}")
    assert run.returncode == 0 and not errors, "\n".join(errors) or run.stdout


def test_a_mistake_in_a_block_fails_the_type_check(tmp_path: Path) -> None:
    """The check above can fail: a block that passes a misspelt option to the client is refused."""
    block = Block(
        "README.md", 1, "python", 'from acp_client import AcpClient\n\nAcpClient("ws://h/acp", retry_policy=None)\n'
    )
    source, _ = typed_module(block)
    (tmp_path / "typo.py").write_text(source, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "typo.py"],
        cwd=tmp_path, env={**os.environ, "MYPYPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert 'Unexpected keyword argument "retry_policy"' in run.stdout, run.stdout


# -- how blocks are run -----------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


async def run_python(source: str, tmp_path: Path, *, cwd: Path | None = None) -> str:
    """Run ``source`` as a script in a subprocess; its stdout (the exit status must be 0)."""
    script = tmp_path / f"block_{abs(hash(source))}.py"
    script.write_text(source, encoding="utf-8")
    return await run_command([sys.executable, str(script)], cwd=cwd or tmp_path)


async def run_command(argv: list[str], *, cwd: Path, expect: int = 0) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode == expect, f"{argv}: exit {process.returncode}\n{out.decode()}\n{err.decode()}"
    return out.decode()


async def run_fragment(body: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run a fragment that uses ``await`` at its top level, inside an ``async def``; its locals."""
    source = "async def __block__():\n" + textwrap.indent(body, "    ") + "\n    return locals()\n"
    exec(compile(source, "<doc block>", "exec"), namespace)
    result: dict[str, Any] = await asyncio.wait_for(namespace["__block__"](), TIMEOUT)
    return result


def covered_by(test: str) -> Check:
    """A block another test runs: that test must exist and read the block's file."""

    async def verify(block: Block, tmp_path: Path) -> None:
        module_path, _, name = test.partition("::")
        module = importlib.import_module(module_path.removesuffix(".py").replace("/", "."))
        function = getattr(module, name)
        assert Path(block.path).name in inspect.getsource(module), f"{test} does not read {block.path}"
        assert callable(function)

    return verify


# -- shell blocks -----------------------------------------------------------------------------------------

_SKIPPED_TOOLS = frozenset({"printf", "jq", "."})  # shell built-ins and filters: nothing of ours to check
_PIP_PACKAGES = frozenset({"pip", "pytest", "pytest-asyncio"})


def _example_parser(script: str) -> Callable[[list[str]], Any]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        module = importlib.import_module(Path(script).stem)
    finally:
        sys.path.remove(str(EXAMPLES))
    parse: Callable[[list[str]], Any] = module.parse_args
    return parse


def _reference_agent_parser(argv: list[str]) -> Any:
    from acp_client.testing.reference_agent.__main__ import _parser

    return _parser().parse_args(argv)


def _acp_reconnect_parser(argv: list[str]) -> Any:
    from acp_client.check._cli import parser

    return parser().parse_args(argv)


def _check_pytest_plugin_flags(args: list[str], command: str) -> None:
    """``pytest --acp-...``: every ``--acp-*`` flag is one the conformance plugin registers."""
    from acp_client.check import pytest_plugin

    source = inspect.getsource(pytest_plugin.pytest_addoption)
    for flag in (arg for arg in args if arg.startswith("--")):
        assert flag.startswith("--acp-") and f'"{flag}"' in source, f"{command}: {flag} is not a plugin option"


def _check_args(parse: Callable[[list[str]], Any], args: list[str], command: str) -> None:
    synopsis = " ".join(args)
    if "[" in synopsis:  # a usage line: every flag it shows must be in the program's help
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
            parse(["--help"])
        for flag in re.findall(r"--[a-z][a-z-]*", synopsis):
            assert re.search(rf"{flag}\b", shown.getvalue()), f"{command}: {flag} is not an option"
        return
    try:
        parse(args)
    except SystemExit as exc:  # argparse refused the arguments
        raise AssertionError(f"{command}: the program refuses {args}") from exc


def _check_pip(args: list[str], command: str) -> None:
    assert args[:1] == ["install"], command
    rest = args[1:]
    while rest:
        token = rest.pop(0)
        if token in ("-e", "--upgrade"):
            continue
        if token == "--config-settings":
            assert rest.pop(0) in ("editable_mode=compat", "editable_mode=strict"), command
            continue
        extras = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", token)
        if extras is not None:
            wanted = set(extras.group(1).split(",")) if extras.group(1) else set()
            assert wanted <= EXTRAS, f"{command}: no extra {wanted - EXTRAS} in pyproject.toml"
            continue
        assert token in _PIP_PACKAGES, f"{command}: unexpected {token!r}"


def check_shell_command(command: str) -> None:
    tokens = shlex.split(command, comments=True)
    tokens = [token for token in tokens if not token.startswith(">") and token != "&"]  # redirects, background
    if not tokens or tokens[0] in _SKIPPED_TOOLS:
        return
    if tokens[0] == "acp-reconnect":
        _check_args(_acp_reconnect_parser, tokens[1:], command)
        return
    if tokens[0] == "pytest":
        _check_pytest_plugin_flags(tokens[1:], command)
        return
    assert tokens[0] == "python", f"unknown command in a doc block: {command!r} (add a check for it)"
    if tokens[1:3] == ["-m", "pip"]:
        _check_pip(tokens[3:], command)
    elif tokens[1:3] == ["-m", "venv"]:
        assert len(tokens) == 4, command
    elif tokens[1:3] == ["-m", "pytest"]:
        assert "pytest" in " ".join(PYPROJECT["project"]["optional-dependencies"]["dev"])
    elif tokens[1:3] == ["-m", "mypy"]:
        assert any(dep.startswith("mypy") for dep in PYPROJECT["project"]["optional-dependencies"]["dev"])
    elif tokens[1:3] == ["-m", "acp_client.check"]:
        from acp_client.check._cli import _parser as check_parser

        _check_args(check_parser("python -m acp_client.check").parse_args, tokens[3:], command)
    elif tokens[1:3] == ["-m", "acp_client.testing.reference_agent"]:
        _check_args(_reference_agent_parser, tokens[3:], command)
    elif len(tokens) > 1 and tokens[1].startswith("examples/"):
        assert (ROOT / tokens[1]).is_file(), f"{command}: no {tokens[1]}"
        _check_args(_example_parser(tokens[1]), tokens[2:], command)
    else:
        raise AssertionError(f"unknown command in a doc block: {command!r} (add a check for it)")


async def shell(block: Block, tmp_path: Path) -> None:
    for line in block.body.replace("\\\n", " ").splitlines():
        for command in re.split(r"&&|\|", line):
            if command.strip():
                check_shell_command(command.strip())


# -- README.md --------------------------------------------------------------------------------------------

check("README.md", 'python -m pip install -e ".[testing]" && python examples/chat.py --demo')(shell)
check("README.md", 'python -m pip install -e ".[dev]" && python -m pytest')(shell)
_ROUTER_AGENT = (
    "python -m acp_client.testing.reference_agent --serve --port 9001 --store /tmp/acp-shared --name agent-a &"
)
check("README.md", _ROUTER_AGENT)(shell)
check("README.md", "async def main() -> None:")(
    covered_by("tests/docs/test_readme.py::test_readme_recovery_example_runs")
)
check(
    "README.md", 'acp-reconnect check "stdio:my-agent --acp"            # spawns, kills and respawns the agent itself'
)(shell)

# -- docs/conformance.md ------------------------------------------------------------------------------------

check("docs/conformance.md", 'acp-reconnect check "stdio:my-agent --acp"')(shell)
check(
    "docs/conformance.md",
    "python -m acp_client.testing.reference_agent --serve --port 8011 --fault load-unknown-ok --fault ignore-cancel &",
)(shell)
check(
    "docs/conformance.md",
    'acp-reconnect check "stdio:python -m my_agent --acp" --timeout 30 --junit conformance.xml',
)(shell)
check(
    "docs/conformance.md",
    'pytest --acp-agent "stdio:python -m my_agent --acp" --acp-timeout 30 --acp-cancel-prompt "slow: count to 100"',
)(shell)


@check("docs/conformance.md", "{")
async def _conformance_json(block: Block, tmp_path: Path) -> None:
    """The report shown has the shape the checker prints, with real ids, statuses and sources."""
    import json

    from acp_client.check import CHECKS

    shown = json.loads(block.body.replace("{...}", "..."))
    assert list(shown) == ["target", "protocolVersion", "agent", "capabilities", "checks", "summary", "seconds"]
    assert set(shown["agent"]) == {"name", "version"} and set(shown["summary"]) == {"pass", "fail", "warn", "skip"}
    by_id = {check.id: check for check in CHECKS}
    for item in shown["checks"]:
        assert list(item) == ["id", "status", "rule", "source", "evidence", "seconds"]
        assert item["rule"] == by_id[item["id"]].rule and item["source"] == by_id[item["id"]].source


@check("docs/conformance.md", 'report = asyncio.run(run_checks(Settings(Target("stdio:my-agent --acp"), cwd="/tmp")))')
async def _conformance_python(block: Block, tmp_path: Path) -> None:
    agent = shlex.join([sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio"])
    source = block.body.replace("stdio:my-agent --acp", f"stdio:{agent}")
    source = source.replace('cwd="/tmp")))', f'cwd={str(tmp_path)!r}), select(["new.fresh-id"])))')
    source = source.replace(
        "from acp_client.check import Settings, Target, run_checks",
        "from acp_client.check import Settings, Target, run_checks, select",
    )
    out = await run_python(source, tmp_path)
    assert out.strip() == "{'pass': 1, 'fail': 0, 'warn': 0, 'skip': 0} 0", out


@check("README.md", "def allow_once(request: RequestPermissionRequest) -> PermissionOutcome:")
async def _readme_quickstart(block: Block, tmp_path: Path) -> None:
    async with ReferenceServer(ReferenceAgent()) as server:
        out = await run_python(block.body.replace("ws://127.0.0.1:8000/acp", server.ws_url), tmp_path)
    assert "agent_message_chunk" in out and "end_turn" in out and "echo: Summarize the README" in out


# -- docs/first-integration.md ----------------------------------------------------------------------------

check("docs/first-integration.md", "python -m venv .venv")(shell)
check("docs/first-integration.md", 'python -m pip install -e ".[testing]"')(shell)
check("docs/first-integration.md", "python -m pip install pytest pytest-asyncio")(shell)
check("docs/first-integration.md", "python -m pip install -e . --config-settings editable_mode=compat")(shell)


@check("docs/first-integration.md", "python -m acp_client.testing.reference_agent --serve --port 8000")
async def _start_the_agent_then_connect(block: Block, tmp_path: Path) -> None:
    """Start the agent as the page says (on a free port), then run the page's client against it."""
    await shell(block, tmp_path)
    argv = shlex.split(block.body.strip())
    argv[0] = sys.executable
    argv[argv.index("--port") + 1] = "0"
    process = await asyncio.create_subprocess_exec(*argv, env=_env(), stdout=asyncio.subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), TIMEOUT)).decode()
        assert line.startswith("ws:"), line
        url = line.split()[1]
        client = next(
            b for b in all_blocks() if b.path == block.path and "AcpClient(" in b.body and "UpdateEvent" in b.body
        )
        out = await run_python(client.body.replace("ws://127.0.0.1:8000/acp", url), tmp_path)
    finally:
        process.terminate()
        await process.wait()
    assert out.startswith("echo: Hello, agent\n[end_turn]\n"), out
    assert "user: Hello, agent\nagent: echo: Hello, agent" in out


@check("docs/first-integration.md", "def show(event: UpdateEvent) -> None:")
async def _client_example(block: Block, tmp_path: Path) -> None:
    assert "ws://127.0.0.1:8000/acp" in block.body  # run against the CLI agent by the check above


@check("docs/first-integration.md", "logging.basicConfig(level=logging.INFO)")
async def _wire_logging(block: Block, tmp_path: Path) -> None:
    source = block.body + "\nimport acp_client._rpc._wire_log as w\nassert w.logger.isEnabledFor(logging.DEBUG)\n"
    await run_python(source, tmp_path)


@check("docs/first-integration.md", "[tool.pytest.ini_options]")
async def _asyncio_mode(block: Block, tmp_path: Path) -> None:
    shown = tomllib.loads(block.body)["tool"]["pytest"]["ini_options"]
    ours = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert shown.items() <= ours.items()


@check("docs/first-integration.md", "async def test_my_app_survives_a_drop() -> None:")
async def _the_first_test(block: Block, tmp_path: Path) -> None:
    """The page's test passes with the page's configuration, and is not run without it (the trap)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_first.py").write_text(block.body, encoding="utf-8")
    config = next(b for b in all_blocks() if b.path == block.path and b.lang == "toml").body
    (project / "pyproject.toml").write_text(config, encoding="utf-8")
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "default"]
    assert "1 passed" in await run_command(pytest_argv, cwd=project)
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\n", encoding="utf-8")
    without = await run_command(pytest_argv, cwd=project, expect=1)  # pytest-asyncio's default: strict mode
    assert "async def functions are not natively supported" in without, without


# -- docs/editor-plugin.md --------------------------------------------------------------------------------

check("docs/editor-plugin.md", "python examples/editor_plugin.py                 # bundled agent, drop mid-turn")(shell)


@check("docs/editor-plugin.md", "examples/nvim/")
async def _nvim_plugin_layout(block: Block, tmp_path: Path) -> None:
    lines = block.body.splitlines()
    files = [line.split()[0] for line in lines[1:] if line.strip()]
    assert files, block.body
    for name in files:
        assert (ROOT / "examples" / "nvim" / name).is_file(), f"docs/editor-plugin.md names {name}: no such file"


@check("docs/editor-plugin.md", "vim.opt.runtimepath:append('/path/to/acp-reconnect/examples/nvim')")
async def _nvim_plugin_settings(block: Block, tmp_path: Path) -> None:
    """Every setting the page shows is one the plugin reads (the plugin runs in tests/examples/test_nvim_plugin.py)."""
    front_end = (ROOT / "examples" / "nvim" / "lua" / "acp" / "init.lua").read_text(encoding="utf-8")
    commands = (ROOT / "examples" / "nvim" / "plugin" / "acp.lua").read_text(encoding="utf-8")
    settings = re.findall(r"vim\.g\.(acp_\w+)", block.body)
    assert settings
    for name in settings:
        assert f"vim.g.{name}" in front_end + commands, f"the plugin does not read g:{name}"
    assert "require('acp').add_to_statusline()" in block.body and "function M.add_to_statusline()" in front_end


@check(
    "docs/editor-plugin.md",
    "events: queue.Queue[SyncEvent] = queue.Queue()          # unbounded: a full queue drops (and logs) events",
)
async def _editor_plugin(block: Block, tmp_path: Path) -> None:
    stubs = "render = status_bar = banner = show_result = print\nask_user_then = lambda allow, reject: allow()\n"
    async with ReferenceServer(ReferenceAgent()) as server:
        body = block.body.replace("ws://127.0.0.1:8000/acp", server.ws_url)
        # The editor's timer fires while the turn runs and after it ends; then the plugin unloads.
        body = body.replace("# on plugin unload:", "on_editor_timer()\nturn.result(timeout=10)\non_editor_timer()\n")
        out = await run_python(stubs + body, tmp_path)
    assert "end_turn" in out and "connected" in out


# -- docs/many-instances.md -------------------------------------------------------------------------------

check("docs/many-instances.md", "global")(
    covered_by("tests/docs/test_guides.py::test_many_instances_guide_shows_the_haproxy_config_the_tests_use")
)
check("docs/many-instances.md", "async def test_the_fan_out_finds_the_session_where_it_lives() -> None:")(
    covered_by("tests/docs/test_guides.py::test_many_instances_guide_pool_example_runs")
)


@check(
    "docs/many-instances.md",
    'async with AcpClient("ws://balancer.example:8000/acp") as client:      # or http://... (Streamable HTTP)',
)
async def _balancer(block: Block, tmp_path: Path) -> None:
    async with ReferenceServer(ReferenceAgent()) as server:
        body = block.body.replace("ws://balancer.example:8000/acp", server.ws_url)
        found = await run_fragment(body, {})
    assert found["session"].session_id


async def _with_agents(names: list[str], run: Callable[[dict[str, str]], Awaitable[None]]) -> None:
    servers = [ReferenceServer(ReferenceAgent(name=name)) for name in names]
    for server in servers:
        await server.start()
    try:
        await run({name: server.ws_url for name, server in zip(names, servers, strict=True)})
    finally:
        for server in servers:
            await server.aclose()


def _swap_urls(body: str, urls: dict[str, str]) -> str:
    for name, url in urls.items():
        body = body.replace(f"ws://{name}:8000/acp", url)
    return body


@check(
    "docs/many-instances.md",
    'location = await locate("sess_abc123", ["ws://agent-1:8000/acp", "ws://agent-2:8000/acp", "ws://agent-3:8000/acp"],',
)
async def _locate(block: Block, tmp_path: Path) -> None:
    async def run(urls: dict[str, str]) -> None:
        found = await run_fragment(_swap_urls(block.body, urls), {"print": lambda *a: None})
        assert [answer.probe.value for answer in found["location"].answers] == ["unknown"] * 3
        assert found["route"].kind.value == "new_session"

    await _with_agents(["agent-1", "agent-2", "agent-3"], run)


@check("docs/many-instances.md", 'urls = ["ws://agent-1:8000/acp", "ws://agent-2:8000/acp", "ws://agent-3:8000/acp"]')
async def _several_endpoints(block: Block, tmp_path: Path) -> None:
    async def run(urls: dict[str, str]) -> None:
        found = await run_fragment(_swap_urls(block.body, urls), {"print": lambda *a: None})
        assert found["session"].endpoint in urls.values()

    await _with_agents(["agent-1", "agent-2", "agent-3"], run)


# -- docs/reconnect-flows.md ------------------------------------------------------------------------------

check("docs/reconnect-flows.md", "printf 'hello\\n/sleep 20\\n/status\\nare you still there?\\n' > flow.txt")(shell)
check(
    "docs/reconnect-flows.md", "printf 'hello\\n' > first.txt && printf '/sessions\\nwhere were we?\\n' > second.txt"
)(shell)
check(
    "docs/reconnect-flows.md",
    "python examples/reconnect_flows.py [--protocol-version {1,2}] [--transport {ws,http}]",
)(shell)


@check(
    "docs/reconnect-flows.md", "def decide(context: RecoveryContext) -> RecoveryPath | None:   # after the status probe"
)
async def _decision_hook(block: Block, tmp_path: Path) -> None:
    from acp_client import RecoveryContext, RecoveryPath
    from acp_client.state import Probe

    namespace: dict[str, Any] = {  # what the app around the block has (the block imports the rest)
        "scratch_sessions": {"scratch"},
        "view_is_stale": True,
        "redraw": lambda messages: None,
        "interrupted": [],
        "ask_user": None,
        "url": "ws://127.0.0.1:9/acp",
    }
    exec(compile(block.body, block.path, "exec"), namespace)
    decide = namespace["decide"]

    def context(session_id: str, probe: Probe) -> RecoveryContext:
        return RecoveryContext(session_id, probe, None, None, RecoveryPath.RESUME, 1, {})

    assert decide(context("scratch", Probe.ACTIVE)) is RecoveryPath.ABANDON
    assert decide(context("work", Probe.ACTIVE)) is RecoveryPath.REPLAY
    assert decide(context("work", Probe.INACTIVE)) is None
    assert namespace["client"].callbacks.decide_recovery is decide


# -- docs/security.md, docs/session-store.md, docs/testing.md -----------------------------------------------


@check(
    "docs/security.md",
    'policy = FileSystemPolicy(write=True, protected_paths=(*DEFAULT_PROTECTED_PATHS, "deploy/**", "*.pem"))',
)
async def _protected_paths(block: Block, tmp_path: Path) -> None:
    from acp_client.handlers import FileSystemPolicy

    namespace: dict[str, Any] = {}
    exec(compile(block.body, block.path, "exec"), namespace)  # the block imports what it uses
    policy = namespace["policy"]
    assert isinstance(policy, FileSystemPolicy) and "*.pem" in policy.protected_paths


check("docs/session-store.md", 'path = Path(tempfile.mkdtemp()) / "sessions.db"')(
    covered_by("tests/store/test_docs_example.py::test_the_store_example_runs")
)
check("docs/session-store.md", 'store_path = Path(tempfile.mkdtemp()) / "sessions.db"')(
    covered_by("tests/store/test_client_guide_example.py::test_the_client_example_runs")
)


@check("docs/session-store.md", "store = PostgresSessionStore(")
async def _postgres_store(block: Block, tmp_path: Path) -> None:
    """Run against a throwaway PostgreSQL server in place of the example's host (the store is
    opened for real: the schema is created; the client is made, not connected)."""
    from acp_client.testing.postgres import TemporaryPostgres

    example = "postgresql://acp@db.internal:5432/app"
    assert example in block.body
    with TemporaryPostgres() as server:
        source = block.body.replace(example, server.url()) + (
            "\nassert store.schema == 'acp_client' and store.schema_version >= 1\nstore.close()\n"
        )
        await run_python(source, tmp_path)


check("docs/testing.md", "async def test_my_app_rebuilds_its_view_after_a_restart() -> None:")(
    covered_by("tests/docs/test_guides.py::test_testing_guide_example_runs")
)


check("docs/testing.md", "async def test_a_drop_is_followed_by_a_probe_and_a_resume() -> None:")(
    covered_by("tests/docs/test_guides.py::test_testing_guide_recording_example_runs")
)


@check("docs/testing.md", "async def test_half_open_link_is_detected() -> None:")
async def _half_open(block: Block, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(block.body, block.path, "exec"), namespace)
    await asyncio.wait_for(namespace["test_half_open_link_is_detected"](), TIMEOUT)


@check("docs/testing.md", "async def first_update(session: SessionHandle, clock: Clock) -> UpdateEvent | None:")
async def _deadline_scope(block: Block, tmp_path: Path) -> None:
    from acp_client.testing import FakeClock

    namespace: dict[str, Any] = {}
    exec(compile(block.body, block.path, "exec"), namespace)

    class Silent:
        async def updates(self) -> Any:
            await asyncio.get_running_loop().create_future()  # never an update
            yield None

    clock = FakeClock()
    assert await clock.run(namespace["first_update"](Silent(), clock)) is None
    assert clock.monotonic() == 5.0


# -- the test of each block (after every check is registered) ----------------------------------------


# -- docs/telemetry.md -----------------------------------------------------------------------------------

check("docs/telemetry.md", 'python -m pip install -e ".[otel]"')(shell)


@check("docs/telemetry.md", "tracing = TracerProvider()")
async def _console_export(block: Block, tmp_path: Path) -> None:
    assert len([line for line in block.body.splitlines() if line.strip()]) == 10  # "ten lines", as the page says
    async with ReferenceServer(ReferenceAgent()) as server:
        out = await run_python(block.body.replace("ws://127.0.0.1:8000/acp", server.ws_url), tmp_path)
    for method in ("initialize", "session/new", "session/prompt"):
        assert f'"name": "{method}"' in out, out
    assert '"kind": "SpanKind.CLIENT"' in out and '"rpc.system.name": "jsonrpc"' in out


_TRACE_SHAPE = (
    'acp.recovery                       acp.disconnect.cause="connection reset", acp.recovery.result=connected'
)


@check("docs/telemetry.md", _TRACE_SHAPE)
async def _recovery_trace_shape(block: Block, tmp_path: Path) -> None:
    """Every span, event and attribute name the drawing shows is one the client uses."""
    from acp_client._telemetry import _names

    used = {value for value in vars(_names).values() if isinstance(value, str)} | {"acp.recovering"}
    shown = set(re.findall(r"\bacp\.[a-z_.]+[a-z]", block.body))
    assert shown <= used, shown - used
    assert {_names.RECOVERY_SPAN, _names.RECOVERY_SESSION_SPAN, _names.RECONNECT_EVENT} <= shown


_SEGMENTS_LOOP = "for segment in session.transcript.segments:          # oldest first; the last one is current"


@check("docs/conversation.md", _SEGMENTS_LOOP)
async def _show_segments(block: Block, tmp_path: Path) -> None:
    """The page's loop over segments, on a conversation the agent lost half of."""
    from types import SimpleNamespace

    from acp_client import Transcript, TurnStatus
    from acp_client.transcript import SegmentStart
    from acp_client.types import TextContent

    transcript = Transcript("old")
    transcript.begin_turn([TextContent(text="hello")], record=True)
    transcript.finish_turn(TurnStatus.INTERRUPTED)
    transcript.start_segment("new", SegmentStart.NEW_AFTER_LOSS, lost=True)
    printed: list[str] = []
    namespace = {"session": SimpleNamespace(transcript=transcript), "TurnStatus": TurnStatus, "print": printed.append}
    await run_fragment(block.body, namespace)
    assert printed == ["--- the agent lost this part of the conversation ---", "user: hello [interrupted]"]


@pytest.mark.parametrize("key", sorted(CHECKS), ids=lambda key: f"{key[0]}:{key[1][:40]}")
async def test_block(key: tuple[str, str], tmp_path: Path) -> None:
    await CHECKS[key](block_for(key), tmp_path)


# -- what the chat usage must say -----------------------------------------------------------------------------


def test_the_chat_usage_names_retry_max_elapsed_and_insecure() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    usage = readme[readme.index("## The example chat client") :]
    usage = usage[: usage.index("\n## ")]
    for word in ("/retry", "--max-elapsed", "--insecure", "--store", "/sessions", "/switch"):
        assert word in usage, word
    parse = _example_parser("examples/chat.py")
    args = parse(["ws://h/acp", "--max-elapsed", "5", "--insecure", "--store", "x.db"])
    assert (args.max_elapsed, args.insecure, str(args.store)) == (5.0, True, "x.db")
    sys.path.insert(0, str(EXAMPLES))
    try:
        import chat_ui

        assert "/retry" in chat_ui.HELP and "/switch" in chat_ui.HELP
    finally:
        sys.path.remove(str(EXAMPLES))


def test_the_json_event_table_has_recovered_replayed() -> None:
    text = (ROOT / "docs" / "reconnect-flows.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `recovered` |"))
    assert "`replayed`" in row
