"""The report for people: a table with ``rich`` when it is installed, plain lines otherwise.

Everything the agent put in it (its name and version, findings, wire excerpts) is shown through
:func:`~acp_client.display.printable`: escape sequences, C1 and bidi controls are made visible,
never sent to the terminal.
"""

from __future__ import annotations

import contextlib
import sys
from typing import IO

from ..display import printable
from ._report import CheckResult, Report

_PLAIN = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP"}
_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}


class Printer:
    """Prints each result as it comes, then the summary.

    Args:
        stream: Where to print (stdout; stderr under ``--json``).
        verbose: Wire excerpts for every check (else only for ``fail`` and ``warn``).
        color: Use ``rich`` when it is installed (``None``: when ``stream`` is a terminal).
    """

    def __init__(self, stream: IO[str] | None = None, *, verbose: bool = False, color: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.verbose = verbose
        self._console = None
        use_rich = color if color is not None else self.stream.isatty()
        if use_rich:
            with contextlib.suppress(ImportError):  # rich is optional: plain lines without it
                from rich.console import Console

                self._console = Console(file=self.stream, highlight=False, soft_wrap=True)

    def result(self, result: CheckResult) -> None:
        label = _PLAIN[result.status]
        finding = printable(result.finding, one_line=True)
        if self._console is not None:
            from rich.markup import escape

            style = _STYLE[result.status]
            self._console.print(
                f"[{style}]{label}[/{style}]  {escape(result.id):<24} {result.seconds:6.2f} s  {escape(finding)}"
            )
        else:
            self._print(f"{label}  {result.id:<24} {result.seconds:6.2f} s  {finding}")
        if self.verbose or result.status in ("fail", "warn"):
            if result.status in ("fail", "warn"):
                self._print(f"      rule ({result.source}): {result.rule}")
            for line in result.evidence.split("\n")[1:]:
                self._print(f"      {line}")

    def summary(self, report: Report) -> None:
        counts = report.summary
        text = ", ".join(f"{counts[s]} {s}" for s in ("pass", "fail", "warn", "skip"))
        self._print(f"\n{text} in {report.seconds:.1f} s")

    def _print(self, text: str) -> None:
        text = printable(text)
        if self._console is not None:
            from rich.markup import escape

            self._console.print(escape(text))
        else:
            self.stream.write(text + "\n")
            self.stream.flush()
