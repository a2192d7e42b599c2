"""Every mistake on ``chat.py``'s command line is one line on stderr and exit status 2, before
anything connects: malformed URLs, missing or unreadable script files, bad option values, a store
that cannot be opened. Never a traceback, never a usage block."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.examples._chat_support import CHAT, run_process

#: (arguments, a piece of the line that says what is wrong). ``{tmp}`` is the test's directory.
MISTAKES = [
    (["ws://127.0.0.1:99999/acp"], "the port 99999 is out of range (1-65535)"),
    (["ws://[::1:8000/acp"], "an IPv6 address goes in brackets"),
    (["ws://[zz]:8000/acp"], "'zz' is not an IPv6 address"),
    (["http://127.0.0.1:abc/acp"], "the port 'abc' is not a number"),
    (["http://:8000/acp"], "URL has no host"),
    (["ftp://127.0.0.1/acp"], "unsupported endpoint 'ftp'"),
    (["127.0.0.1:8000"], "did you mean 'ws://127.0.0.1:8000/acp'"),
    (["ws:/127.0.0.1:8000/acp"], "did you mean 'ws://127.0.0.1:8000/acp'"),
    (["stdio:"], "stdio: endpoint needs a command"),
    (["stdio:agent 'unclosed"], "cannot split the stdio: command"),
    (["ws://127.0.0.1:8000/acp", "ws://127.0.0.1:0/acp"], "the port 0 is out of range"),
    ([], "a URL is required (or --demo)"),
    (["ws://127.0.0.1:1/acp", "--script", "/nonexistent.txt"], "--script '/nonexistent.txt': no such file"),
    (["ws://127.0.0.1:1/acp", "--script", "{tmp}"], "is a directory, not a file of prompts"),
    (["ws://127.0.0.1:1/acp", "--script", "{tmp}/binary.txt"], "is not UTF-8 text"),
    (["ws://127.0.0.1:1/acp", "--max-elapsed", "-1"], "'-1' must be a finite number of seconds, zero or more"),
    (["ws://127.0.0.1:1/acp", "--max-elapsed", "soon"], "'soon' is not a number of seconds"),
    (["ws://127.0.0.1:1/acp", "--max-elapsed", "nan"], "'nan' must be a finite number of seconds"),
    (["ws://127.0.0.1:1/acp", "--max-elapsed", "inf"], "'inf' must be a finite number of seconds"),
    (["ws://127.0.0.1:1/acp", "--failover-delay", "-5"], "'-5' must be a finite number of seconds"),
    (["ws://127.0.0.1:1/acp", "--protocol-version", "3"], "invalid choice: 3"),
    (["ws://127.0.0.1:1/acp", "--protocol-version", "two"], "invalid int value: 'two'"),
    (["ws://127.0.0.1:1/acp", "--store", "/nonexistent/dir/sessions.db"], "the directory /nonexistent/dir"),
    (["ws://127.0.0.1:1/acp", "--store", "{tmp}/garbage.db"], "--store: "),
    (["ws://127.0.0.1:1/acp", "--colour"], "unrecognized arguments: --colour"),
    (["ws://127.0.0.1:1/acp", "--script"], "argument --script: expected one argument"),
]


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00prompt\x80\n")
    (tmp_path / "garbage.db").write_bytes(b"this is not a database" * 100)
    return tmp_path


async def test_every_mistake_is_one_line_and_exit_status_2(tmp: Path) -> None:
    limit = asyncio.Semaphore(4)

    async def run(argv: list[str], json_mode: bool) -> tuple[int, str, str]:
        args = [arg.replace("{tmp}", str(tmp)) for arg in argv] + (["--json"] if json_mode else [])
        async with limit:
            return await run_process(sys.executable, str(CHAT), *args)

    # --json changes nothing here (a mistake is never a JSON event): checked on every fourth case.
    cases = [
        (argv, says, json_mode)
        for index, (argv, says) in enumerate(MISTAKES)
        for json_mode in ((False, True) if index % 4 == 0 else (False,))
    ]
    results = await asyncio.gather(*(run(argv, json_mode) for argv, _, json_mode in cases))
    for (argv, says, json_mode), (status, out, err) in zip(cases, results, strict=True):
        where = f"chat.py {' '.join(argv)}{' --json' if json_mode else ''}"
        assert status == 2, f"{where}: exit status {status}\n{out}{err}"
        assert out == "", f"{where}: wrote on stdout: {out!r}"
        lines = err.splitlines()
        assert len(lines) == 1, f"{where}: {lines}"
        assert lines[0].startswith("chat.py: error: "), f"{where}: {lines[0]}"
        assert says in lines[0], f"{where}: {lines[0]!r} does not say {says!r}"
        assert "Traceback" not in err


async def test_help_is_not_a_mistake() -> None:
    status, out, err = await run_process(sys.executable, str(CHAT), "--help")
    assert status == 0 and "--script" in out and err == ""
