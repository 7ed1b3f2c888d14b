"""The table report for people: one row per finding, worst first, and a summary line.

On a terminal severities are coloured; anywhere else (a CI log, a file) the table is plain ASCII
at a fixed width, so it reads the same without colour and the same input gives the same bytes.
"""

from __future__ import annotations

from typing import Final, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from analyzer.findings import Severity
from analyzer.inert import inert
from analyzer.report import Report, at_or_above

__all__ = ["render", "summary_line", "write"]

#: Width of the table when the output is not a terminal.
PLAIN_WIDTH: Final = 120

_STYLE: Final = {
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}


def write(report: Report, out: TextIO, *, terminal: bool | None = None) -> None:
    """Write the table and summary line; `terminal` defaults to whether `out` is a tty."""
    if terminal is None:
        terminal = _isatty(out)
    if terminal:
        console = Console(file=out, force_terminal=True, highlight=False, emoji=False)
    else:
        console = Console(
            file=out,
            force_terminal=False,
            color_system=None,
            width=PLAIN_WIDTH,
            highlight=False,
            emoji=False,
            markup=False,
        )
    if report.findings.height:
        console.print(_table(report, terminal=terminal))
    else:
        console.print("No findings.")
    console.print(Text(summary_line(report)), soft_wrap=True)
    if report.baseline is not None and report.baseline.fixed:
        console.print(Text(f"Fixed: no longer found, prune from {report.baseline.path}:"))
        for entry in report.baseline.fixed:
            line = f"  {entry.detector} {entry.fingerprint} {inert(entry.title)}"
            console.print(Text(line), soft_wrap=True)


def render(report: Report) -> str:
    """The plain (not terminal) table as text."""
    from io import StringIO

    buffer = StringIO()
    write(report, buffer, terminal=False)
    return buffer.getvalue()


def summary_line(report: Report) -> str:
    """One line: findings per severity, what the timeline held, and the verdict."""
    by_severity = report.counts_by_severity()
    total = sum(by_severity.values())
    levels = ", ".join(f"{n} {sev.value}" for sev, n in by_severity.items())
    counts = ", ".join(
        _count(n, noun)
        for n, noun in (
            (report.sessions, "session"),
            (report.streams, "stream"),
            (report.resumptions, "resumption"),
            (report.tool_calls, "tool call"),
        )
    )
    if report.fail_on is None:
        verdict = "fail-on none: pass"
    else:
        failing = at_or_above(report.new_findings, report.fail_on).height
        verdict = f"fail-on {report.fail_on.value}: " + (
            f"FAIL ({failing} at or above)" if failing else "pass"
        )
    if report.baseline is not None:
        verdict += (
            f"; baseline: {report.baseline.baselined.height} baselined, "
            f"{len(report.baseline.fixed)} fixed"
        )
    origins = report.sessions_by_origin()
    if origins:  # session keys end with `@<origin>`: which origins, how many sessions each
        named = ", ".join(f"{inert(o)} ({_count(n, 'session')})" for o, n in origins.items())
        counts += f"; {_count(len(origins), 'origin')}: {named}"
    return f"{_count(total, 'finding')} ({levels}) in {counts}; {verdict}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _table(report: Report, *, terminal: bool) -> Table:
    table = Table(
        box=box.ROUNDED if terminal else box.ASCII,
        show_lines=False,
        header_style="bold" if terminal else "",
    )
    table.add_column("severity", no_wrap=True)
    table.add_column("detector", no_wrap=True)
    table.add_column("session", overflow="fold")
    table.add_column("title", overflow="fold", ratio=1)
    for row in report.findings.iter_rows(named=True):
        severity = Severity(row["severity"])
        # Titles and session ids carry server-chosen text (event ids, tool names).
        label = severity.value.upper()
        if report.is_baselined(row["fingerprint"]):
            label += " (baselined)"
        table.add_row(
            Text(label, style=_STYLE[severity] if terminal else ""),
            Text(inert(row["detector"])),
            Text(inert(row["session"] or "-")),
            Text(inert(row["title"])),
        )
    return table


def _isatty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # a closed or stream-like object without a tty
        return False
