"""`seamwatch demo [--out DIR]`: run every lab scenario, analyze it, print a verdict per scenario.

Each scenario starts real MCP servers and a scripted client on 127.0.0.1 behind `seamwatch proxy`
(`lab.framework.run_scenario`), its capture is analyzed with the real pipeline (timeline and
every registered detector), and the findings are judged against its `expected.json`
(`lab.verdict.judge`). The captures stay in DIR (default `./demo-out`, ignored by git), so the
dashboard can be opened on them afterwards; a re-run replaces the scenario folders it made.

Exit code: 0 when every scenario's findings match its expectations, 1 when one does not, 2 when
a scenario could not run or be analyzed (a server that did not start, Node or the TypeScript SDK
missing: the message says what to run).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lab import ts
from lab.framework import LabError, Scenario, prepare_out_dir, run_scenario
from lab.scenarios import SCENARIOS
from lab.verdict import Verdict, expected_text, judge

__all__ = ["DEFAULT_OUT", "Row", "analyze", "main", "render"]

DEFAULT_OUT: Final = Path("demo-out")
EXIT_OK, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2
#: Width of the table when stdout is not a terminal (a CI log, a file).
PLAIN_WIDTH: Final = 160


@dataclass(frozen=True)
class Row:
    """One scenario's line of the table: its verdict, or why it could not be judged."""

    scenario: str
    expected: str
    verdict: Verdict | None = None
    error: str | None = None

    @property
    def found(self) -> str:
        return "-" if self.verdict is None else self.verdict.found_text()

    @property
    def text(self) -> str:
        if self.verdict is None:
            return f"ERROR: {self.error}"
        return self.verdict.text()


def analyze(capture_dir: Path) -> list[dict[str, Any]]:
    """The findings of every registered detector on one capture, as rows (dicts)."""
    from analyzer.analysis import read_timeline
    from analyzer.detectors import run_detectors

    return run_detectors(read_timeline([capture_dir])).to_dicts()


def render(rows: Sequence[Row], out: TextIO, *, terminal: bool | None = None) -> None:
    """The verdict table, one row per scenario: scenario, expected, found, verdict."""
    if terminal is None:
        terminal = out.isatty()
    console = Console(
        file=out,
        width=None if terminal else PLAIN_WIDTH,
        force_terminal=terminal,
        no_color=not terminal,
        highlight=False,
        emoji=False,
    )
    table = Table(box=box.SIMPLE_HEAD if terminal else box.ASCII, show_lines=False)
    for name in ("scenario", "expected", "found", "verdict"):
        table.add_column(name, overflow="fold")
    for row in rows:
        good = row.verdict is not None and row.verdict.ok
        style = "green" if good else "bold red"
        # Text, not markup: an error message may hold brackets ("[Errno 98]").
        table.add_row(
            Text(row.scenario), Text(row.expected), Text(row.found), Text(row.text, style)
        )
    console.print(table)


def _typescript_note(log: TextIO) -> None:
    """Install the lab's TypeScript SDK if missing, or say what to run."""
    if ts.installed():
        return
    print("installing the lab's TypeScript SDK (npm ci in lab/ts) ...", file=log, flush=True)
    try:
        ts.ensure_installed()
    except LabError as exc:
        reason = " ".join(str(exc).split())[:300]
        print(
            f"could not install it ({reason}); its scenario will fail until you run:\n"
            "    npm ci --prefix lab/ts --no-audit --no-fund",
            file=log,
            flush=True,
        )


def _run_one(scenario: Scenario, out: Path, registered: Sequence[str]) -> Row:
    expected = scenario.expected
    row = Row(scenario.name, expected_text(expected))
    try:
        directory = run_scenario(scenario, out)
    except LabError as exc:
        return Row(row.scenario, row.expected, error=" ".join(str(exc).split()))
    try:
        findings = analyze(directory / "capture")
    except Exception as exc:  # a crash of the analysis is this scenario's result, not the demo's
        return Row(
            row.scenario, row.expected, error=f"analysis failed: {type(exc).__name__}: {exc}"
        )
    verdict = judge(expected, findings, registered=registered)
    return Row(row.scenario, row.expected, verdict=verdict)


def main(
    out: Path | None = None,
    *,
    scenarios: Sequence[Scenario] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the demo into `out` (default ./demo-out); returns the exit code (module docstring)."""
    from analyzer.detectors import DETECTORS

    stdout = stdout or sys.stdout
    log = stderr or sys.stderr
    out = DEFAULT_OUT if out is None else out
    chosen = list(SCENARIOS if scenarios is None else scenarios)
    registered = [det.id for det in DETECTORS]
    try:
        prepare_out_dir(out)
    except LabError as exc:
        print(f"seamwatch demo: --out {exc}", file=log, flush=True)
        return EXIT_ERROR
    print(
        f"seamwatch demo: {len(chosen)} lab scenarios, each real MCP traffic on 127.0.0.1 through "
        f"`seamwatch proxy`, analyzed and compared with its expected.json; captures in {out}/",
        file=log,
        flush=True,
    )
    _typescript_note(log)
    rows: list[Row] = []
    for n, scenario in enumerate(chosen, start=1):
        began = time.monotonic()
        print(f"[{n}/{len(chosen)}] {scenario.name} ...", end="", file=log, flush=True)
        row = _run_one(scenario, out, registered)
        status = "error" if row.verdict is None else ("ok" if row.verdict.ok else "differs")
        print(f" {status} ({time.monotonic() - began:.1f} s)", file=log, flush=True)
        rows.append(row)
    render(rows, stdout)
    print(
        f"\nBrowse the sessions and findings:  seamwatch dashboard {out}\n"
        f"One scenario's full report:         seamwatch analyze {out}/<scenario>/capture",
        file=stdout,
        flush=True,
    )
    if any(row.verdict is None for row in rows):
        return EXIT_ERROR
    return (
        EXIT_OK
        if all(row.verdict is not None and row.verdict.ok for row in rows)
        else EXIT_MISMATCH
    )


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
