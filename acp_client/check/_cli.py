"""The command line: ``acp-reconnect check TARGET [options]`` and ``python -m acp_client.check TARGET``.

Exit status: 0 when no check fails, 1 when one does, 2 when the target cannot be reached or
initialized (or the command line is wrong): one clear line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import NoReturn

from ..display import printable
from ._context import Settings
from ._output import Printer
from ._registry import CHECKS
from ._runner import run_checks, select
from ._target import Target, TargetError


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line on stderr (no usage block) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        name = "acp-reconnect check" if self.prog.startswith("acp-reconnect") else self.prog
        self.exit(2, f"{name}: {message} (see --help)\n")


def _seconds(text: str) -> float:
    """``--timeout``: a finite number of seconds, more than zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds, more than zero")
    return value


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="TARGET",
        help="stdio:COMMAND ... (spawned, killed and respawned by the checker), ws(s)://HOST/PATH or http(s)://HOST/PATH",
    )
    parser.add_argument(
        "--restart-cmd",
        metavar="CMD",
        help="network targets: a shell command that restarts the agent (else restart checks skip)",
    )
    parser.add_argument(
        "--protocol-version", type=int, choices=(1, 2), default=1, help="the version to propose (default 1)"
    )
    parser.add_argument(
        "--cwd", metavar="DIR", help="the cwd of the sessions the checker creates (default: a fresh temp dir)"
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="seconds to wait for one answer or turn (default 10)",
    )
    parser.add_argument("--only", action="append", default=[], metavar="ID", help="run only this check (repeatable)")
    parser.add_argument("--skip", action="append", default=[], metavar="ID", help="do not run this check (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object on stdout")
    parser.add_argument("--junit", metavar="FILE", help="also write the report as JUnit XML to FILE")
    parser.add_argument("-v", "--verbose", action="store_true", help="wire excerpts for every check")
    parser.add_argument(
        "--prompt", default="hello", metavar="TEXT", help="the prompt of an ordinary turn (default: hello)"
    )
    parser.add_argument(
        "--cancel-prompt",
        metavar="TEXT",
        default=Settings.__attrs_attrs__.cancel_prompt.default,
        help="a prompt whose turn lasts long enough to be cancelled (cancel.honoured)",
    )
    parser.add_argument(
        "--tool-prompt",
        metavar="TEXT",
        help="a prompt that makes the agent call a tool (load.message-ids then checks tool call ids across replay)",
    )
    parser.epilog = "checks: " + ", ".join(check.id for check in CHECKS)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog, description="Check an ACP agent's side of the recovery contract (session/status, load, resume...)."
    )
    _add_check_arguments(parser)
    return parser


def _mistake(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line that argparse cannot see, before anything starts."""
    try:
        Target(args.target, restart_cmd=args.restart_cmd).validate()
    except TargetError as exc:
        return f"cannot check {exc}"
    try:
        select(args.only, args.skip)
    except TargetError as exc:
        return str(exc)
    if args.cwd is not None and not os.path.isdir(args.cwd):
        return f"--cwd {args.cwd!r} is not a directory"
    if args.junit is not None:
        folder = os.path.dirname(os.path.abspath(args.junit))
        if os.path.isdir(args.junit):
            return f"--junit {args.junit!r} is a directory; name the report's file"
        if not os.path.isdir(folder):
            return f"--junit {args.junit!r}: the directory {folder!r} does not exist"
    if args.restart_cmd is not None and not args.restart_cmd.strip():
        return "--restart-cmd is empty"
    return None


def _run(args: argparse.Namespace) -> int:
    mistake = _mistake(args)
    if mistake is not None:
        sys.stderr.write(f"acp-reconnect check: {' '.join(mistake.split())}\n")
        return 2
    own_cwd = args.cwd is None
    cwd = tempfile.mkdtemp(prefix="acp-check-") if own_cwd else os.path.abspath(args.cwd)
    settings = Settings(
        target=Target(args.target, restart_cmd=args.restart_cmd),
        protocol_version=args.protocol_version,
        cwd=cwd,
        timeout=args.timeout,
        prompt=args.prompt,
        cancel_prompt=args.cancel_prompt,
        tool_prompt=args.tool_prompt,
        verbose=args.verbose,
    )
    printer = Printer(sys.stderr if args.json else sys.stdout, verbose=args.verbose)
    try:
        checks = select(args.only, args.skip)
        report = asyncio.run(run_checks(settings, checks, on_result=None if args.json else printer.result))
    except TargetError as exc:
        sys.stderr.write(f"acp-reconnect check: cannot check {printable(str(exc))}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("acp-reconnect check: interrupted\n")
        return 130
    finally:
        if own_cwd:
            shutil.rmtree(cwd, ignore_errors=True)
    if args.junit:
        try:
            with open(args.junit, "w", encoding="utf-8") as out:
                out.write(report.junit())
        except OSError as exc:
            sys.stderr.write(f"acp-reconnect check: cannot write {args.junit}: {exc}\n")
            return 2
    if args.json:
        sys.stdout.write(report.dumps() + "\n")
    else:
        printer.summary(report)
    return report.exit_status


def check_main(argv: Sequence[str] | None = None) -> int:
    """``python -m acp_client.check TARGET [options]``; returns the exit status."""
    return _run(_parser("python -m acp_client.check").parse_args(argv))


def parser() -> argparse.ArgumentParser:
    """The ``acp-reconnect`` command line (``check`` is its one command)."""
    top = _Parser(prog="acp-reconnect", description="Tools of the acp-reconnect ACP client.")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser("check", help="check an agent's side of the recovery contract")
    _add_check_arguments(check)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """``acp-reconnect check TARGET [options]``; returns the exit status."""
    return _run(parser().parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
