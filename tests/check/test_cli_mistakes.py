"""Every mistake on the checker's command line is one line on stderr and exit status 2, before
any agent is started or reached: malformed targets, bad option values, missing paths. Never a
traceback, never argparse's usage block."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_client.check._cli import check_main, main

#: An agent that cannot start: reaching it would say "could not reach", never what a row expects.
NOWHERE = "stdio:/no/such/agent"

#: (arguments after ``acp-reconnect``, a piece of the line that says what is wrong).
MISTAKES = [
    (["check", "ws://127.0.0.1:99999/acp"], "the port 99999 is out of range (1-65535)"),
    (["check", "ws://[::1:8000/acp"], "an IPv6 address goes in brackets"),
    (["check", "ws://[zz]/acp"], "'zz' is not an IPv6 address"),
    (["check", "http://127.0.0.1:abc/acp"], "the port 'abc' is not a number"),
    (["check", "http://:8000/acp"], "URL has no host"),
    (["check", "ws://exa mple:8000/acp"], "spaces or control characters"),
    (["check", "ftp://127.0.0.1/acp"], "unsupported target 'ftp://127.0.0.1/acp'"),
    (["check", "127.0.0.1:8000"], "unsupported target '127.0.0.1:8000'"),
    (["check", "stdio:"], "stdio: needs a command"),
    (["check", "stdio:agent 'unclosed"], "cannot split the stdio command"),
    (["check", ""], "unsupported target ''"),
    (["check", NOWHERE, "--timeout", "0"], "'0' must be a finite number of seconds, more than zero"),
    (["check", NOWHERE, "--timeout", "-1"], "'-1' must be a finite number of seconds"),
    (["check", NOWHERE, "--timeout", "soon"], "'soon' is not a number of seconds"),
    (["check", NOWHERE, "--timeout", "nan"], "'nan' must be a finite number of seconds"),
    (["check", NOWHERE, "--timeout", "inf"], "'inf' must be a finite number of seconds"),
    (["check", NOWHERE, "--protocol-version", "3"], "invalid choice: 3"),
    (["check", NOWHERE, "--only", "no.such-check"], "unknown check id 'no.such-check'"),
    (["check", NOWHERE, "--skip", "nope"], "unknown check id 'nope'"),
    (["check", NOWHERE, "--cwd", "/nonexistent/dir"], "--cwd '/nonexistent/dir' is not a directory"),
    (["check", NOWHERE, "--junit", "/nonexistent/dir/report.xml"], "the directory '/nonexistent/dir' does not exist"),
    (["check", NOWHERE, "--junit", "{tmp}"], "is a directory; name the report's file"),
    (["check", "ws://127.0.0.1:8000/acp", "--restart-cmd", " "], "--restart-cmd is empty"),
    (["check"], "the following arguments are required: TARGET"),
    (["check", NOWHERE, "--colour"], "unrecognized arguments: --colour"),
    (["inspect", NOWHERE], "invalid choice: 'inspect'"),
    ([], "the following arguments are required: COMMAND"),
]


def _exit_status(run: object) -> int:
    try:
        return int(run())  # type: ignore[operator]
    except SystemExit as exc:  # argparse exits; the console script's wrapper does the same
        return int(exc.code or 0)


@pytest.mark.parametrize(("argv", "says"), MISTAKES)
def test_every_mistake_is_one_line_and_exit_status_2(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    status = _exit_status(lambda: main(args))
    out, err = capsys.readouterr()
    assert status == 2, f"{args}: exit status {status}\n{out}{err}"
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("acp-reconnect"), lines[0]
    assert says in lines[0], f"{lines[0]!r} does not say {says!r}"
    assert os.listdir(tmp_path) == []  # nothing written, no report


def test_the_module_form_says_its_own_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_status(lambda: check_main([NOWHERE, "--timeout", "-1"])) == 2
    assert capsys.readouterr().err.startswith("python -m acp_client.check: argument --timeout:")


def test_as_run_from_a_shell_a_malformed_url_is_one_line() -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "acp_client.check", "ws://127.0.0.1:99999/acp"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "acp-reconnect check: cannot check malformed URL 'ws://127.0.0.1:99999/acp': "
        "the port 99999 is out of range (1-65535)"
    ]
