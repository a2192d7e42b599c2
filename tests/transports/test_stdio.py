"""Tests for the stdio transport, against real agent subprocesses (``stdio_agents/``)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import stat
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_client.exceptions import (
    AgentExited,
    ConfigurationError,
    ConnectError,
    MalformedFrame,
    MessageTooLarge,
    TransportClosed,
)
from acp_client.transports.base import Connector, Limits, Transport
from acp_client.transports.stdio import (
    DEFAULT_INHERITED_ENV,
    StdioConnector,
    StdioTransport,
    _LineSplitter,
    _TooLong,
)
from tests._support import eventually

AGENTS = Path(__file__).parent / "stdio_agents"
ECHO = str(AGENTS / "echo_agent.py")
SDK_AGENT = str(AGENTS / "sdk_agent.py")
HANG_GUARD = 20.0  # only against a hang; never reached when the code works

OpenAgent = Callable[..., Awaitable[StdioTransport]]


@pytest.fixture
async def open_agent() -> AsyncIterator[OpenAgent]:
    """Spawn the echo agent (with flags); every transport is closed at the end of the test."""
    opened: list[StdioTransport] = []

    async def _open(*flags: str, **kwargs: Any) -> StdioTransport:
        transport = await StdioConnector([sys.executable, ECHO, *flags], **kwargs).connect()
        opened.append(transport)
        return transport

    yield _open
    for transport in opened:
        await transport.aclose()


async def call(transport: StdioTransport, request_id: int, method: str, params: Any = None) -> Any:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    await transport.send(message)
    return await asyncio.wait_for(transport.receive(), HANG_GUARD)


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (gone, or a zombie waiting for a non-reaping init)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat_line.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def reaped(pid: int) -> bool:
    """True when ``pid`` is no longer our unreaped child (no zombie left behind by us)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


# --------------------------------------------------------------------------------------------
# Round trips and framing


async def test_round_trip_and_info(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    assert isinstance(transport, Transport)
    assert transport.info.kind == "stdio"
    assert transport.info.pid is not None and transport.info.pid > 0
    assert ECHO in transport.info.target
    assert transport.returncode is None

    answer = await call(transport, 1, "echo", {"text": "héllo ✓", "n": [1, 2, 3]})
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo ✓", "n": [1, 2, 3]}}

    # A batch travels as one line too.
    await transport.send([{"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"b": 1}}])
    assert await asyncio.wait_for(transport.receive(), HANG_GUARD) == [{"jsonrpc": "2.0", "id": 2, "result": {"b": 1}}]


async def test_many_messages_in_order(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    count = 2000

    async def sender() -> None:
        for i in range(count):
            await transport.send({"jsonrpc": "2.0", "id": i, "method": "echo", "params": {"i": i}})

    task = asyncio.create_task(sender())
    for i in range(count):
        message = await asyncio.wait_for(transport.receive(), HANG_GUARD)
        assert message == {"jsonrpc": "2.0", "id": i, "result": {"i": i}}
    await task


async def test_large_message_under_the_cap(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    payload = "z" * (5 * 1024 * 1024)
    answer = await call(transport, 7, "echo", {"blob": payload})
    assert answer["result"]["blob"] == payload


async def test_crlf_and_blank_lines_tolerated(open_agent: OpenAgent) -> None:
    transport = await open_agent("--crlf")
    for i in range(3):
        assert await call(transport, i, "echo", {"i": i}) == {"jsonrpc": "2.0", "id": i, "result": {"i": i}}


async def test_garbage_lines_raise_malformed_frame_and_the_next_line_arrives(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    lines = ["this is not json\n", "\n", "   \t\n", "[1,\n", "42\n", "\xff\xfe\n", "{}\r\n"]
    await transport.send({"jsonrpc": "2.0", "id": 5, "method": "raw", "params": {"lines": lines}})
    excerpts = []
    for _ in range(4):  # not json, truncated json, a non-object, invalid UTF-8 (blank lines skipped)
        with pytest.raises(MalformedFrame) as info:
            await asyncio.wait_for(transport.receive(), HANG_GUARD)
        excerpts.append(info.value.excerpt)
    assert excerpts[0] == "this is not json"
    # "{}" is a well-formed JSON object: framing passes it on (classify() judges it later).
    assert await asyncio.wait_for(transport.receive(), HANG_GUARD) == {}
    assert await asyncio.wait_for(transport.receive(), HANG_GUARD) == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {"done": True},
    }
    assert await call(transport, 6, "echo", {"still": "working"}) == {
        "jsonrpc": "2.0",
        "id": 6,
        "result": {"still": "working"},
    }


async def test_oversize_line_raises_once_then_the_transport_keeps_working(open_agent: OpenAgent) -> None:
    transport = await open_agent(limits=Limits(max_message_bytes=4096))
    await transport.send({"jsonrpc": "2.0", "id": 1, "method": "big_line", "params": {"size": 3 * 1024 * 1024}})
    with pytest.raises(MessageTooLarge) as info:
        await asyncio.wait_for(transport.receive(), HANG_GUARD)
    assert info.value.limit == 4096
    # Only the oversize line was dropped: the answer after it arrives, and so does the next one.
    assert await asyncio.wait_for(transport.receive(), HANG_GUARD) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"done": True},
    }
    assert len(transport._splitter._partial) <= 4097
    assert await call(transport, 2, "echo", {"x": 1}) == {"jsonrpc": "2.0", "id": 2, "result": {"x": 1}}


async def test_stdout_back_pressure_bounds_memory(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    payload = "p" * (200 * 1024)
    count = 30  # ~6 MiB of answers, far more than the 1 MiB read-ahead

    async def sender() -> None:
        for i in range(count):
            await transport.send({"jsonrpc": "2.0", "id": i, "method": "echo", "params": {"p": payload}})

    task = asyncio.create_task(sender())
    # Nobody reads: stdout reading pauses instead of buffering everything.
    await eventually(lambda: transport._reading_paused)
    assert transport._inbox_bytes < 2 * 1024 * 1024
    for i in range(count):
        message = await asyncio.wait_for(transport.receive(), HANG_GUARD)
        assert message["id"] == i and message["result"]["p"] == payload
    await asyncio.wait_for(task, HANG_GUARD)


# --------------------------------------------------------------------------------------------
# Environment


async def test_environment_is_the_allowlist_plus_app_variables(
    open_agent: OpenAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_STDIO_TEST_SECRET", "s3cret-token")
    monkeypatch.setenv("TZ", "UTC")
    transport = await open_agent(env={"ACP_APP_VAR": "from-the-app", "TZ": "Europe/Paris"})
    env = (await call(transport, 1, "env"))["result"]
    assert "ACP_STDIO_TEST_SECRET" not in env
    assert env["ACP_APP_VAR"] == "from-the-app"
    assert env["TZ"] == "Europe/Paris"  # the app's value wins over the inherited one
    assert env["PATH"] == os.environ["PATH"]
    assert "s3cret" not in transport.info.target


async def test_inherit_env_can_be_extended_or_emptied(open_agent: OpenAgent, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_STDIO_TEST_EXTRA", "yes")
    extended = await open_agent(inherit_env=(*DEFAULT_INHERITED_ENV, "ACP_STDIO_TEST_EXTRA"))
    assert (await call(extended, 1, "env"))["result"]["ACP_STDIO_TEST_EXTRA"] == "yes"
    empty = await open_agent(inherit_env=())
    env = (await call(empty, 1, "env"))["result"]
    assert "PATH" not in env and "HOME" not in env and "ACP_STDIO_TEST_EXTRA" not in env


async def test_is_sandbox_is_not_inherited_by_default(open_agent: OpenAgent, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox flag in the editor's environment must not reach the agent: with ``IS_SANDBOX`` set,
    Zed's Claude adapters pass ``--allow-dangerously-skip-permissions`` to the Claude Code CLI, which
    refuses to start a session when run as root (tests/interop/test_claude_agent_acp.py runs them)."""
    monkeypatch.setenv("IS_SANDBOX", "yes")
    assert "IS_SANDBOX" not in DEFAULT_INHERITED_ENV
    assert "IS_SANDBOX" not in StdioConnector(["agent"]).environment()
    env = (await call(await open_agent(), 1, "env"))["result"]
    assert "IS_SANDBOX" not in env


def test_default_allowlist_is_documented_and_has_no_secrets() -> None:
    assert {"PATH", "HOME", "LANG", "SYSTEMROOT", "COMSPEC"} <= set(DEFAULT_INHERITED_ENV)
    assert len(set(DEFAULT_INHERITED_ENV)) == len(DEFAULT_INHERITED_ENV)
    for name in DEFAULT_INHERITED_ENV:
        assert not any(word in name for word in ("KEY", "TOKEN", "SECRET", "PASSWORD", "PROXY", "SSH_AUTH"))
    connector = StdioConnector(["agent"], env={"API_KEY": "hunter2"})
    assert connector.environment()["API_KEY"] == "hunter2"
    assert "hunter2" not in connector.target


# --------------------------------------------------------------------------------------------
# stderr


async def test_huge_stderr_never_blocks_and_the_tail_is_bounded(open_agent: OpenAgent) -> None:
    transport = await open_agent(limits=Limits(max_stderr_bytes=1000))
    answer = await call(transport, 1, "stderr", {"size": 8 * 1024 * 1024, "last": "the very end"})
    assert answer["result"]["written"] >= 8 * 1024 * 1024
    await eventually(lambda: transport.stderr_tail.endswith("the very end\n"))
    assert len(transport.stderr_tail.encode()) <= 1000
    assert await call(transport, 2, "echo", {}) == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_stderr_is_logged_one_bounded_record_per_line(
    open_agent: OpenAgent, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="acp_client.agent.stderr")
    transport = await open_agent()
    await call(transport, 1, "stderr", {"size": 30000, "line": 10000, "last": "final line"})

    def records() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "acp_client.agent.stderr"]

    await eventually(lambda: any("final line" in r.getMessage() for r in records()))
    long_lines = [r.getMessage() for r in records() if "final line" not in r.getMessage()]
    assert len(long_lines) >= 3
    for message in long_lines:
        assert message.endswith("[line truncated]")
        assert len(message) < 4096 + 100
        assert "\n" not in message


# --------------------------------------------------------------------------------------------
# Exits and crashes


async def test_exit_mid_request_raises_agent_exited_with_code_and_stderr(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    started = time.monotonic()
    await transport.send(
        {"jsonrpc": "2.0", "id": 1, "method": "exit", "params": {"code": 3, "stderr": "fatal: boom happened"}}
    )
    with pytest.raises(AgentExited) as info:
        await asyncio.wait_for(transport.receive(), HANG_GUARD)
    assert time.monotonic() - started < 5
    assert info.value.exit_code == 3
    assert "code 3" in info.value.reason
    assert "fatal: boom happened" in info.value.reason
    assert transport.returncode == 3
    assert "boom" in transport.stderr_tail
    # Every later call fails the same way; a send is a typed error, never BrokenPipeError.
    with pytest.raises(AgentExited):
        await transport.receive()
    with pytest.raises(TransportClosed) as sent:
        await transport.send({"jsonrpc": "2.0", "id": 2, "method": "echo"})
    assert isinstance(sent.value, AgentExited)
    assert sent.value.maybe_delivered is False


async def test_messages_written_before_exit_are_delivered_first(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    assert await call(transport, 1, "exit_after_reply", {"code": 0}) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"bye": True},
    }
    with pytest.raises(AgentExited) as info:
        await asyncio.wait_for(transport.receive(), HANG_GUARD)
    assert info.value.exit_code == 0


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
async def test_crash_by_signal_gives_a_negative_exit_code(open_agent: OpenAgent, signum: int) -> None:
    transport = await open_agent()
    await transport.send({"jsonrpc": "2.0", "id": 1, "method": "signal", "params": {"signum": int(signum)}})
    with pytest.raises(AgentExited) as info:
        await asyncio.wait_for(transport.receive(), HANG_GUARD)
    assert info.value.exit_code == -signum
    assert signal.Signals(signum).name in info.value.reason
    assert "about to die" in info.value.reason


async def test_exit_is_detected_while_a_grandchild_holds_the_pipes(open_agent: OpenAgent) -> None:
    transport = await open_agent(terminate_timeout=0.5)
    grandchild = (await call(transport, 1, "grandchild", {"quiet": False}))["result"]["pid"]
    started = time.monotonic()
    await transport.send({"jsonrpc": "2.0", "id": 2, "method": "exit", "params": {"code": 9, "stderr": "bye"}})
    with pytest.raises(AgentExited) as info:
        await asyncio.wait_for(transport.receive(), HANG_GUARD)
    assert info.value.exit_code == 9
    assert time.monotonic() - started < 3  # the pipes stay open: the exit is reported after a short grace
    assert not process_gone(grandchild)  # still alive, holding stdout/stderr
    await transport.aclose()
    await eventually(lambda: process_gone(grandchild))


async def test_stdout_closed_by_a_live_agent_ends_the_link(open_agent: OpenAgent) -> None:
    transport = await open_agent(terminate_timeout=0.3)
    assert (await call(transport, 1, "close_stdout"))["id"] == 1
    with pytest.raises(TransportClosed) as info:
        await asyncio.wait_for(transport.receive(), HANG_GUARD)
    assert not isinstance(info.value, AgentExited)
    assert "closed its stdout" in info.value.reason
    await transport.aclose()
    assert transport.returncode == -signal.SIGTERM


# --------------------------------------------------------------------------------------------
# Closing


async def test_aclose_lets_a_well_behaved_agent_exit_on_eof(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    pid = transport.info.pid
    assert pid is not None
    await call(transport, 1, "echo", {})
    started = time.monotonic()
    await transport.aclose()
    assert time.monotonic() - started < 1.5
    assert transport.returncode == 0
    assert reaped(pid)
    assert process_gone(pid)


async def test_aclose_is_idempotent_concurrent_and_fails_later_calls(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    pending = asyncio.create_task(transport.receive())
    await asyncio.sleep(0)
    await asyncio.gather(transport.aclose(), transport.aclose())
    await transport.aclose()
    with pytest.raises(TransportClosed) as info:
        await asyncio.wait_for(pending, HANG_GUARD)
    assert "closed by the client" in info.value.reason
    with pytest.raises(TransportClosed) as sent:
        await transport.send({"jsonrpc": "2.0", "id": 1, "method": "echo"})
    assert sent.value.maybe_delivered is False
    with pytest.raises(TransportClosed):
        await transport.receive()


async def test_aclose_after_the_agent_died_is_safe(open_agent: OpenAgent) -> None:
    transport = await open_agent()
    pid = transport.info.pid
    assert pid is not None
    await transport.send({"jsonrpc": "2.0", "id": 1, "method": "signal", "params": {"signum": int(signal.SIGKILL)}})
    with pytest.raises(AgentExited):
        await asyncio.wait_for(transport.receive(), HANG_GUARD)
    await transport.aclose()
    await transport.aclose()
    assert reaped(pid)


async def test_agent_ignoring_eof_gets_sigterm(open_agent: OpenAgent) -> None:
    transport = await open_agent("--linger", terminate_timeout=0.3)
    await call(transport, 1, "echo", {})
    started = time.monotonic()
    await transport.aclose()
    elapsed = time.monotonic() - started
    assert transport.returncode == -signal.SIGTERM
    assert 0.25 <= elapsed < 0.3 + 1.5


async def test_agent_ignoring_sigterm_gets_killed_within_the_timeouts(open_agent: OpenAgent) -> None:
    transport = await open_agent("--linger", "--ignore-term", terminate_timeout=0.3)
    pid = transport.info.pid
    assert pid is not None
    await call(transport, 1, "echo", {})
    started = time.monotonic()
    await transport.aclose()
    elapsed = time.monotonic() - started
    assert transport.returncode == -signal.SIGKILL
    assert 0.55 <= elapsed < 2 * 0.3 + 1.5
    assert reaped(pid)


async def test_aclose_ends_the_whole_process_tree(open_agent: OpenAgent) -> None:
    # The agent exits on EOF, but its child would outlive it without the group kill.
    transport = await open_agent(terminate_timeout=0.5)
    grandchild = (await call(transport, 1, "grandchild", {"quiet": True}))["result"]["pid"]
    assert not process_gone(grandchild)
    await transport.aclose()
    assert transport.returncode == 0
    await eventually(lambda: process_gone(grandchild))


async def test_aclose_ends_the_tree_when_the_agent_must_be_killed(open_agent: OpenAgent) -> None:
    transport = await open_agent("--linger", "--ignore-term", terminate_timeout=0.2)
    grandchild = (await call(transport, 1, "grandchild", {"quiet": True}))["result"]["pid"]
    await transport.aclose()
    assert transport.returncode == -signal.SIGKILL
    await eventually(lambda: process_gone(grandchild))


async def test_cancelled_aclose_still_kills_the_agent(open_agent: OpenAgent) -> None:
    transport = await open_agent("--linger", "--ignore-term", terminate_timeout=5.0)
    pid = transport.info.pid
    assert pid is not None
    await call(transport, 1, "echo", {})
    closing = asyncio.create_task(transport.aclose())
    await asyncio.sleep(0)  # one turn: aclose has closed stdin and waits for the agent to exit
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    await eventually(lambda: transport.returncode == -signal.SIGKILL)
    await transport.aclose()  # completes at once
    assert reaped(pid)


async def test_context_manager_closes(tmp_path: Path) -> None:
    async with await StdioConnector([sys.executable, ECHO]).connect() as transport:
        await call(transport, 1, "echo", {})
    assert transport.returncode == 0


# --------------------------------------------------------------------------------------------
# Spawning and validation


async def test_command_not_found_is_a_connect_error() -> None:
    connector = StdioConnector(["acp-no-such-agent-binary-xyz", "--acp"])
    with pytest.raises(ConnectError) as info:
        await connector.connect()
    assert "acp-no-such-agent-binary-xyz" in str(info.value)
    assert "not found" in str(info.value)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert info.value.maybe_delivered is False


async def test_missing_path_not_executable_and_bad_cwd_are_connect_errors(tmp_path: Path) -> None:
    with pytest.raises(ConnectError, match="not found"):
        await StdioConnector([str(tmp_path / "missing-agent")]).connect()
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(ConnectError, match="not executable"):
        await StdioConnector([str(script)]).connect()
    with pytest.raises(ConnectError, match="working directory"):
        await StdioConnector([sys.executable, ECHO], cwd=tmp_path / "no-such-dir").connect()


async def test_cwd_is_applied(tmp_path: Path) -> None:
    print_cwd = "import os, sys; sys.stdout.write(os.getcwd() + '\\n')"
    connector = StdioConnector([sys.executable, "-c", print_cwd], cwd=tmp_path)
    transport = await connector.connect()
    try:
        with pytest.raises(MalformedFrame) as info:
            await asyncio.wait_for(transport.receive(), HANG_GUARD)
        assert info.value.excerpt == str(tmp_path)
    finally:
        await transport.aclose()


@pytest.mark.parametrize(
    "command",
    [[], [""], "agent --acp", ["agent", "a\x00b"], [b"agent"], ("agent", 3)],
)
def test_invalid_commands_are_configuration_errors(command: Any) -> None:
    with pytest.raises(ConfigurationError):
        StdioConnector(command)


def test_invalid_env_is_a_configuration_error_without_echoing_values() -> None:
    with pytest.raises(ConfigurationError):
        StdioConnector(["agent"], env={"A=B": "x"})
    with pytest.raises(ConfigurationError):
        StdioConnector(["agent"], env={"": "x"})
    with pytest.raises(ConfigurationError) as info:
        StdioConnector(["agent"], env={"TOKEN": "sec\x00ret"})
    assert "sec" not in str(info.value)
    with pytest.raises(ConfigurationError):
        StdioConnector(["agent"], inherit_env="PATH")
    with pytest.raises(ConfigurationError):
        StdioConnector(["agent"], terminate_timeout=-1)


def test_target_is_the_quoted_command() -> None:
    connector = StdioConnector(["my agent", "--flag=a b"], env={"SECRET": "v"})
    assert isinstance(connector, Connector)
    assert connector.target == "'my agent' '--flag=a b'"


# --------------------------------------------------------------------------------------------
# An independent peer: an agent written with the official ACP Python SDK's stdio helpers


async def test_official_python_sdk_agent_over_stdio() -> None:
    import acp  # noqa: F401  - a dev dependency: fail loudly if it is missing

    connector = StdioConnector([sys.executable, SDK_AGENT])
    async with await connector.connect() as transport:
        init = await call(
            transport,
            0,
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        )
        assert init["id"] == 0
        assert init["result"]["protocolVersion"] == 1
        assert init["result"]["agentInfo"]["name"] == "tiny-sdk-agent"
        new = await call(transport, 1, "session/new", {"cwd": "/tmp", "mcpServers": []})
        assert new == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "sdk-session-1"}}
        await eventually(lambda: "new session in /tmp" in transport.stderr_tail)
    assert transport.returncode == 0


# --------------------------------------------------------------------------------------------
# The line splitter (pure)


def test_splitter_basics() -> None:
    splitter = _LineSplitter(limit=10)
    assert splitter.feed(b'{"a":1}\n\n  \r\n{"b"') == [b'{"a":1}']
    assert splitter.feed(b":2}\r\n") == [b'{"b":2}\r']
    assert splitter.feed(b"0123456789\r\n") == [b"0123456789\r"]  # exactly the cap; the CR is free
    assert splitter.feed(b"0123456789A\n") == [_TooLong(11)]
    assert splitter.feed(b"01234567") == []
    assert splitter.feed(b"89ABCDEF") == [_TooLong(16)]
    assert len(splitter._partial) == 0
    assert splitter.feed(b"GHIJ" * 100) == []  # the rest of the overlong line is skipped
    assert len(splitter._partial) == 0
    assert splitter.feed(b"KL\nok\n") == [b"ok"]
    assert splitter.feed(b"last") == []
    assert splitter.finish() == [b"last"]


_line = st.one_of(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([b"", b"   ", b"\r", b"x" * 39, b"y" * 40 + b"\r", b"z" * 41]),
)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_line, max_size=20), cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30))
def test_splitter_any_chunking_gives_the_same_lines(lines: list[bytes], cuts: list[int]) -> None:
    limit = 40
    stream = b"".join(line + b"\n" for line in lines)
    expected: list[object] = []
    for line in lines:
        if not line or line.isspace():
            continue
        size = len(line) - (1 if line.endswith(b"\r") else 0)
        expected.append("too long" if size > limit else line)

    splitter = _LineSplitter(limit)
    got: list[object] = []
    positions = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for start, end in itertools.pairwise(positions):
        for item in splitter.feed(stream[start:end]):
            got.append("too long" if isinstance(item, _TooLong) else item)
        assert len(splitter._partial) <= limit + 1
    assert splitter.finish() == []
    assert got == expected
